"""The compact (replicated) matrices, the device setup and the compact assignment on the device.

- A z, B z, C z from the replicated form on the device == the full-CSR host product (filecoin-test-256b,
  random z: every element written, nothing left from a poisoned output);
- a compact blob expanded on the device == synthesis.assignment.decode;
- the key made on the device with a seed == the host setup's key with that seed: the same
  verifying key bytes, and with r, s fixed the same proof as the CPU backend's from the host key;
  proofs verify, from the vector, the Compact and the blob alike; another seed, another key;
- an unsatisfied witness names its constraint; a blob of the wrong length and a circuit whose
  compact matrices do not match the key are refused; a key made on the device, once unloaded,
  is refused rather than re-uploaded from nothing.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpu import prove, verify
from synthesis import assignment, field as F
from synthesis.r1cs import UnsatisfiedConstraint
from tests.compact_circuits import random_z, toy, witness

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend(cuda_ctx):
    from gpu.backends import get_backend
    return get_backend("cuda:0")


def test_device_product_equals_full_csr(backend):
    from arith import native
    from gpu.cuda.compact import DeviceCompactR1CS
    from gpu.cuda.memory import DeviceBuffer
    from synthesis.circuits import get_circuit

    cr = get_circuit("filecoin-test-256b").compact_r1cs()
    rng = np.random.default_rng()
    z = random_z(cr.num_variables, rng)
    mats = DeviceCompactR1CS(cr)
    try:
        with DeviceBuffer(z.nbytes) as zb, DeviceBuffer(32 * cr.num_constraints) as out:
            zb.upload(z)
            for name in "abc":
                got = np.full((cr.num_constraints, 4), 0xAB, np.uint64)
                out.upload(got)  # poisoned: every row must be written
                mats.spmv(name, zb, out)
                out.download(got)
                full = getattr(cr, name).to_sparse()
                assert np.array_equal(got, native.spmv(full.indptr, full.indices, full.coeffs, z)), name
    finally:
        mats.free()


def test_device_product_from_the_assignment_planes_equals_full_csr(backend):
    """rep_spmv_planes and rep_spmv_long_planes (z read from the planes expand_assignment kept)
    == the full-CSR host product == the product over the expanded z, for a witness of 0s, 1s
    and field elements and one of field elements alone; every row written (a poisoned output)."""
    from arith import native
    from gpu.cuda.compact import DeviceCompactR1CS, expand_assignment, planes_bytes
    from gpu.cuda.memory import DeviceBuffer
    from synthesis.circuits import get_circuit

    cr = get_circuit("filecoin-test-256b").compact_r1cs()
    rng = np.random.default_rng()
    nv = cr.num_variables
    dense = F.vec_from_ints([int(x) for x in rng.integers(2, 2**62, nv)])
    dense[0] = [1, 0, 0, 0]
    mats = DeviceCompactR1CS(cr)
    try:
        for z in (random_z(nv, rng), dense):
            blob = assignment.encode(z)
            with DeviceBuffer(z.nbytes) as zb, DeviceBuffer(32 * cr.num_constraints) as out, \
                    DeviceBuffer(planes_bytes(blob, nv)) as keep:
                planes = expand_assignment(blob, nv, zb, keep=keep)["planes"]
                for name in "abc":
                    full = getattr(cr, name).to_sparse()
                    want = native.spmv(full.indptr, full.indices, full.coeffs, z)
                    for pl in (planes, None):
                        got = np.full((cr.num_constraints, 4), 0xAB, np.uint64)
                        out.upload(got)
                        mats.spmv(name, zb, out, planes=pl)
                        out.download(got)
                        assert np.array_equal(got, want), (name, pl is None)
        # a buffer too small for the planes is refused before anything is written to it
        from gpu.errors import GpuError
        with DeviceBuffer(32 * nv) as zb, DeviceBuffer(8) as small, \
                pytest.raises(GpuError, match="the planes need"):
            expand_assignment(blob, nv, zb, keep=small)
    finally:
        mats.free()


@pytest.mark.parametrize("mode", ["1", "auto"])
def test_proofs_with_the_matvec_on_the_planes_verify(backend, mode, monkeypatch):
    """ZKHIVE_MATVEC_PLANES=1: the prover's matvec reads z from the blob's planes (the path taken,
    last_matvec_planes), the proof equals the one over the expanded z with r, s fixed and
    verifies; an unsatisfied witness is still named by its constraint. auto: the toy witness is
    mostly field elements (21 of 30), so the expanded z (the same proof)."""
    cr, z = toy(9), witness(9)
    pub = F.vec_to_ints(z[1:2])
    pk, vk = backend.setup_resident(cr, seed=b"seed-planes")
    r, s = F.random_element(), F.random_element()
    try:
        monkeypatch.setenv("ZKHIVE_MATVEC_PLANES", "0")
        want = prove(pk, cr, assignment.encode(z), backend=backend, r=r, s=s)
        assert backend.last_matvec_planes is False
        monkeypatch.setenv("ZKHIVE_MATVEC_PLANES", mode)
        got = prove(pk, cr, assignment.encode(z), backend=backend, r=r, s=s)
        assert backend.last_matvec_planes is (mode == "1")
        assert got.to_bytes() == want.to_bytes()
        assert verify(vk, pub, got) and not verify(vk, [pub[0] ^ 1], got)
        bad = z.copy()
        bad[1 + 1 + 1 + 3 * 4 + 1] = F.vec_from_ints([12345])[0]
        with pytest.raises(UnsatisfiedConstraint) as e:
            backend.prove_terms(pk, cr, assignment.encode(bad), _timer())
        assert e.value.index == 1 + 3 * 4
    finally:
        backend.unload(pk.circuit_digest)


def test_blob_expands_on_the_device(backend):
    from gpu.cuda.compact import expand_assignment
    from gpu.cuda.memory import DeviceBuffer

    rng = np.random.default_rng()
    # growing, then smaller again: the page-locked staging buffer is reused and regrown
    for n in (1, 31, 32, 33, 1000, 70_001, 999):
        z = random_z(n, rng)
        blob = assignment.encode(z)
        with DeviceBuffer(32 * n) as zb:
            zb.upload(np.full((n, 4), 0xCD, np.uint64))
            expand_assignment(blob, n, zb)
            got = np.zeros((n, 4), np.uint64)
            zb.download(got)
        assert np.array_equal(got, z), n
    # a field element >= r is refused before anything reaches the device, by its index
    bad = bytearray(blob)
    _, m, plane = assignment.read_header(blob, n)
    off = assignment._HEADER.size + 2 * plane + 32 * (m - 1)
    bad[off:off + 32] = F.MODULUS.to_bytes(32, "little")
    with DeviceBuffer(32 * n) as zb, pytest.raises(F.FieldError, match=f"element {m - 1} is not"):
        expand_assignment(bytes(bad), n, zb)


@pytest.mark.parametrize("planes", ["0", "1"])
def test_a_blob_staged_ahead_proves_as_the_blob(backend, planes, monkeypatch):
    """CudaBackend.stage (the prove-ahead fetcher's step): the planes laid out in a pooled
    page-locked buffer ahead; the proof from it equals the proof from the blob with r, s fixed
    (the matvec on z or on the planes), verifies, and the buffer goes back to the pool; a staged
    assignment used once is refused a second time by name; a bad blob is refused at staging, by
    the element's index; a full pool declines (the blob itself comes back) and
    ZKHIVE_STAGE_AHEAD=0 stages nothing."""
    from gpu.cuda import compact as C
    from gpu.cuda.memory import DeviceBuffer
    from gpu.errors import GpuError

    monkeypatch.setenv("ZKHIVE_MATVEC_PLANES", planes)
    cr, z = toy(9), witness(9)
    pub = F.vec_to_ints(z[1:2])
    pk, vk = backend.setup_resident(cr, seed=b"seed-staged")
    r, s = F.random_element(), F.random_element()
    blob = assignment.encode(z)
    try:
        want = prove(pk, cr, blob, backend=backend, r=r, s=s)
        staged = backend.stage(blob, cr.num_variables)
        assert getattr(staged, "is_staged_assignment", False) and staged.blob == blob
        free = len(C._pool.free)
        got = prove(pk, cr, staged, backend=backend, r=r, s=s)
        assert backend.last_matvec_planes is (planes == "1")
        assert got.to_bytes() == want.to_bytes()
        assert verify(vk, pub, got) and not verify(vk, [pub[0] ^ 1], got)
        assert staged.host is None and len(C._pool.free) == free + 1  # back in the pool
        with DeviceBuffer(32 * cr.num_variables) as zb, \
                pytest.raises(GpuError, match="staged assignment of .* \\(released\\)"):
            C.expand_assignment(staged, cr.num_variables, zb)
        # an unsatisfied witness staged ahead is still named by its constraint
        bad = z.copy()
        bad[1 + 1 + 1 + 3 * 4 + 1] = F.vec_from_ints([12345])[0]
        with pytest.raises(UnsatisfiedConstraint) as e:
            backend.prove_terms(pk, cr, backend.stage(assignment.encode(bad), cr.num_variables),
                                _timer())
        assert e.value.index == 1 + 3 * 4
    finally:
        backend.unload(pk.circuit_digest)
    # a value >= r: refused while staging (before any device work), by its index
    n = 1000
    zr = random_z(n, np.random.default_rng())
    good = assignment.encode(zr)
    _, m, plane = assignment.read_header(good, n)
    broken = bytearray(good)
    off = assignment._HEADER.size + 2 * plane + 32 * (m - 1)
    broken[off:off + 32] = F.MODULUS.to_bytes(32, "little")
    with pytest.raises(F.FieldError, match=f"element {m - 1} is not"):
        backend.stage(bytes(broken), n)
    # the pool at its limit declines: the blob comes back as it is, the proof stages it itself
    held = [C.stage_assignment(good, n) for _ in range(C._pool.MAX)]
    held = [h for h in held if h is not None]
    assert C._pool.count == C._pool.MAX and not C._pool.free
    assert backend.stage(good, n) is good
    for h in held:
        h.release()
    monkeypatch.setenv("ZKHIVE_STAGE_AHEAD", "0")
    assert backend.stage(good, n) is good


def test_device_setup_is_the_host_setup(backend):
    from gpu.backends import get_backend
    from gpu.groth16.setup import setup as host_setup

    cr = toy(9)
    z = witness(9)
    pub = F.vec_to_ints(z[1:2])
    pk, vk = backend.setup_resident(cr, seed=b"seed-1")
    assert pk.on_device and pk.a_query is None
    pk_h, vk_h = host_setup(cr.to_r1cs(), seed=b"seed-1")
    assert vk.to_bytes() == vk_h.to_bytes()
    r, s = F.random_element(), F.random_element()
    on_gpu = prove(pk, cr, assignment.encode(z), backend=backend, r=r, s=s)
    on_cpu = prove(pk_h, cr.to_r1cs(), z, backend=get_backend("cpu"), r=r, s=s)
    assert on_gpu.to_bytes() == on_cpu.to_bytes()
    for form in (z, assignment.from_vec(z), assignment.encode(z)):
        proof = prove(pk, cr, form, backend=backend)
        assert verify(vk, pub, proof)
        assert not verify(vk, [pub[0] ^ 1], proof)
    pk2, vk2 = backend.setup_resident(cr, seed=b"seed-2")
    assert vk2.to_bytes() != vk.to_bytes()
    backend.unload(pk2.circuit_digest)


def test_rejects(backend):
    from gpu.groth16.errors import BackendError, CircuitMismatch

    cr, other = toy(9), toy(8)
    pk, vk = backend.setup_resident(cr, seed=b"seed-3")
    z = witness(9)
    bad = z.copy()
    i = 1 + 1 + 1 + 3 * 4 + 1  # y of copy 4: row hrows + 3 * 4 (x^2 = y) fails
    bad[i] = F.vec_from_ints([12345])[0]
    with pytest.raises(UnsatisfiedConstraint) as e:
        backend.prove_terms(pk, cr, assignment.encode(bad), _timer())
    assert e.value.index == 1 + 3 * 4
    with pytest.raises(assignment.AssignmentError, match="values, the circuit has"):
        backend.prove_terms(pk, cr, assignment.encode(z[:-1]), _timer())
    with pytest.raises(CircuitMismatch):
        backend.prove_terms(pk, other, assignment.encode(witness(8)), _timer())
    backend.unload(pk.circuit_digest)
    with pytest.raises(BackendError, match="no longer resident"):
        backend.prove_terms(pk, cr, assignment.encode(z), _timer())


def _timer():
    from gpu.timing import StageTimer
    return StageTimer()
