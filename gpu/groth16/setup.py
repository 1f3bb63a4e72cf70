"""Groth16 key generation (Groth 2016, section 3.2) from fresh secure randomness.

For each variable k, with u_k, v_k, w_k the QAP polynomials of A, B, C at tau:
  a_query[k]      = u_k(tau) G1
  b_g1_query[k]   = v_k(tau) G1,    b_g2_query[k] = v_k(tau) G2
  gamma_abc_g1[k] = (beta u_k + alpha v_k + w_k)(tau) / gamma G1    (public k = 0..P)
  l_query[k]      = (beta u_k + alpha v_k + w_k)(tau) / delta G1    (auxiliary k)
  h_query[i]      = tau^i Z(tau) / delta G1,  i < n - 1,  Z(X) = X^n - 1
u_k(tau) = sum_i A[i, k] L_i(tau) over the Lagrange basis of H, i.e. A^T L (one transposed
sparse product per matrix).
"""
from __future__ import annotations

import hashlib

from arith import native
from synthesis import field
from synthesis.r1cs import R1CS

from . import curve
from .fixed_base import cpu_fixed_base
from .keys import ProvingKey, VerifyingKey
from .qap import domain_size


def _nonzero_random() -> int:
    while True:
        x = field.random_element()
        if x:
            return x


def seeded_draw(seed: bytes, circuit_digest: bytes):
    """A deterministic stream of nonzero field elements for a development ceremony: every
    prover given the same seed makes the same key for the same circuit (so the one published
    verifying key checks every prover's proofs). SHA-256 in counter mode, rejection-sampled below
    r. Anyone who knows the seed knows the trapdoor: never for a public deployment."""
    if not isinstance(seed, (bytes, bytearray)) or not seed:
        raise ValueError("setup seed must be non-empty bytes")
    counter = 0

    def draw() -> int:
        nonlocal counter
        while True:
            h = hashlib.sha256(b"zkhive-dev-setup\0" + bytes(seed) + b"\0" + circuit_digest
                               + counter.to_bytes(8, "little")).digest()
            counter += 1
            x = int.from_bytes(h, "little") & ((1 << 255) - 1)
            if 0 < x < field.MODULUS:
                return x
    return draw


def setup(r1cs: R1CS, *, backend="cpu", seed: bytes | None = None) -> tuple[ProvingKey, VerifyingKey]:
    """Fresh (pk, vk) for ``r1cs``. The trapdoor (tau, alpha, beta, gamma, delta) lives only in
    this call's locals: this is a single-party setup, fit for tests, benchmarks and private
    deployments; a public one needs an MPC ceremony. With ``seed`` the trapdoor comes from it
    (``seeded_draw``): the same seed and circuit give the same key, byte for byte."""
    r1cs.validate()
    n = domain_size(r1cs)
    m, nv, npub = r1cs.num_constraints, r1cs.num_variables, r1cs.num_public
    draw = _nonzero_random if seed is None else seeded_draw(seed, r1cs.digest())
    while True:
        tau = draw()
        lag = native.lagrange_at(n, tau)
        if lag is not None:  # tau in H would make Z(tau) = 0
            break
    alpha, beta, gamma, delta = (draw() for _ in range(4))

    u = native.spmv_t(r1cs.a.indptr, r1cs.a.indices, r1cs.a.coeffs, lag[:m], nv)
    u[:npub + 1] = native.add(u[:npub + 1], lag[m:m + npub + 1])  # the input rows (qap.py)
    v = native.spmv_t(r1cs.b.indptr, r1cs.b.indices, r1cs.b.coeffs, lag[:m], nv)
    w = native.spmv_t(r1cs.c.indptr, r1cs.c.indices, r1cs.c.coeffs, lag[:m], nv)
    k = native.add(native.add(native.scale(u, beta), native.scale(v, alpha)), w)
    gamma_abc = native.scale(k[:npub + 1], field.inv(gamma))
    l_vals = native.scale(k[npub + 1:], field.inv(delta))
    z_tau = (pow(tau, n, field.MODULUS) - 1) % field.MODULUS
    h_vals = native.powers(n - 1, z_tau * field.inv(delta) % field.MODULUS, tau)

    fb = _fixed_base(backend)
    g1, g2 = curve.g1(), curve.g2()
    vk = VerifyingKey(
        alpha_g1=g1 * curve.scalar(alpha), beta_g2=g2 * curve.scalar(beta),
        gamma_g2=g2 * curve.scalar(gamma), delta_g2=g2 * curve.scalar(delta),
        gamma_abc_g1=fb(g1, gamma_abc), circuit_digest=r1cs.digest(),
        num_aux=r1cs.num_aux, num_constraints=m, domain_size=n)
    pk = ProvingKey(
        vk=vk, beta_g1=g1 * curve.scalar(beta), delta_g1=g1 * curve.scalar(delta),
        a_query=fb(g1, u), b_g1_query=fb(g1, v), b_g2_query=fb(g2, v),
        h_query=fb(g1, h_vals), l_query=fb(g1, l_vals), circuit_digest=vk.circuit_digest,
        num_public=npub, num_aux=r1cs.num_aux, num_constraints=m, domain_size=n)
    del tau, alpha, beta, gamma, delta, lag, u, v, w, k  # drop the trapdoor as soon as possible
    return pk, vk


def _fixed_base(backend):
    """The batched fixed-base multiplication to use: a backend object's own (the CUDA backend's
    runs on the device, issue 8), or for "cpu" the host one. A backend given by any other name is
    resolved by the caller (``gpu.backends.get_backend(name)``): this module sits below the
    backends, which call ``setup`` themselves, so it must not import them. The host one is
    gpu/native/fixed_base_cpu.cpp on every core (arkworks point by point, ``curve.fixed_base``,
    is its reference in the tests: ~5-10x slower, hours for a 2^22 circuit)."""
    if not isinstance(backend, str):
        return backend.fixed_base
    if backend == "cpu":
        return cpu_fixed_base
    raise ValueError(f"setup: backend {backend!r} given by name; pass the object "
                     f"gpu.backends.get_backend({backend!r}) (only 'cpu' is taken by name)")
