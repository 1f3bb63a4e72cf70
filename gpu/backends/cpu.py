"""The CPU backend: sparse products and the QAP step in the host library (arith/host.cpp), MSMs in
arkworks (py_arkworks_bls12381), the five MSMs on a thread pool: arkworks' MSM releases the GIL,
so on two cores two of them run at once."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from arith import native
from gpu.groth16 import curve, qap
from gpu.groth16.fixed_base import cpu_fixed_base
from gpu.groth16.points import PointArray

from .base import Backend, ProofTerms
from .forms import assignment_vector, circuit_digest, full_r1cs


class CpuBackend(Backend):
    """Keeps nothing on a device: the residency defaults of Backend (the Prover books each
    key's file size in host memory)."""

    name = "cpu"
    #: prove_terms takes a synthesis.assignment.Compact or its blob (expanded on the host)
    accepts_compact = True

    def __init__(self, threads: int | None = None):
        self.threads = threads or os.cpu_count() or 1
        self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="zkhive-msm")

    def setup_resident(self, circuit, *, seed: bytes | None = None):
        """The host setup (gpu.groth16.setup) over the circuit's full R1CS (expanded from a
        compact form: for the small circuits a CPU proves); the key stays in this process."""
        from gpu.groth16.setup import setup
        return setup(full_r1cs(circuit), backend="cpu", seed=seed)

    def prove_terms(self, pk, r1cs, z, timer) -> ProofTerms:
        """``r1cs``: an R1CS, a compact circuit or a circuit object; ``z``: an Fr vector, a
        Compact or its blob (gpu/backends/forms.py), decoded here on the host."""
        r1cs = full_r1cs(r1cs)
        if circuit_digest(r1cs) != pk.circuit_digest:
            from gpu.groth16.errors import CircuitMismatch
            raise CircuitMismatch("the proving key was made for another circuit (circuit digests "
                                  f"{pk.circuit_digest.hex()[:16]} and {r1cs.digest().hex()[:16]} differ)")
        z = r1cs.check_assignment_shape(assignment_vector(z, r1cs.num_variables))
        with timer.stage("matvec"):
            az, bz, cz = r1cs.evaluate(z)
            if np.any(native.mul(az, bz) != cz):
                r1cs.check(z)  # names the first failing constraint
        n = pk.domain_size
        # the big, dense H MSM starts as soon as H exists; the witness MSMs do not wait for it
        with timer.stage("msm_witness_submit"):
            aux = z[1 + r1cs.num_public:]
            futures = {
                "a": self._pool.submit(curve.msm, pk.a_query, z, G1Point),
                "b_g2": self._pool.submit(curve.msm, pk.b_g2_query, z, G2Point),
                "b_g1": self._pool.submit(curve.msm, pk.b_g1_query, z, G1Point),
                "l": self._pool.submit(curve.msm, pk.l_query, aux, G1Point),
            }
        with timer.stage("ntt_h"):
            a, b, c = qap.evaluations(r1cs, z, n, az, bz, cz)
            h = native.compute_h(a, b, c)[: n - 1]
        with timer.stage("msm"):
            futures["h"] = self._pool.submit(curve.msm, pk.h_query, h, G1Point)
            out = {k: f.result() for k, f in futures.items()}
        return ProofTerms(**out)

    def fixed_base(self, base, scalars: np.ndarray) -> PointArray:
        return cpu_fixed_base(base, scalars)
