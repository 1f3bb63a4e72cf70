"""The CUDA prover backend against the CPU backend, on the device.

With r and s fixed the two backends must produce the same 192 bytes; proofs from the device
verify; an unsatisfied witness names its constraint; the device-memory budget refuses a key that
does not fit and a proof whose working set cannot be had, without losing the worker; key
generation on the device gives the same points as the host.
"""
from __future__ import annotations

import pytest

from gpu import prove, setup, verify
from synthesis import field as F
from synthesis.circuits import get_circuit
from synthesis.porep import c1_document, generate

pytestmark = pytest.mark.gpu

SETS = ["porep-lite-4k", "porep-lite-64k"]


@pytest.fixture(scope="module")
def backend(cuda_ctx):
    from gpu.backends import get_backend
    be = get_backend("cuda:0")
    yield be
    be.release()


@pytest.fixture(scope="module")
def keyed(backend):
    out = {}
    for name in SETS:
        circuit = get_circuit(name)
        r1cs = circuit.r1cs()
        pk, vk = setup(r1cs, backend="cuda")  # the device's fixed-base multiplication
        c1 = circuit.parse_c1(c1_document(generate(circuit.prm, b"\x07" * 32), b"\x08" * 32))
        out[name] = (circuit, r1cs, pk, vk, c1)
    return out


@pytest.mark.parametrize("name", SETS)
def test_backends_agree_and_proofs_verify(keyed, backend, name):
    circuit, r1cs, pk, vk, c1 = keyed[name]
    for k in range(min(2, circuit.num_partitions())):
        z = circuit.synthesize(c1, k)
        r, s = F.random_element(), F.random_element()
        on_gpu = prove(pk, r1cs, z, backend=backend, r=r, s=s)
        on_cpu = prove(pk, r1cs, z, backend="cpu", r=r, s=s)
        assert on_gpu.to_bytes() == on_cpu.to_bytes()
        pub = circuit.public_inputs(c1, k)
        assert verify(vk, pub, on_gpu)
        assert not verify(vk, [pub[0] ^ 1, *pub[1:]], on_gpu)


def test_device_stages_are_timed(keyed, backend):
    from gpu.timing import StageTimer

    circuit, r1cs, pk, vk, c1 = keyed["porep-lite-64k"]
    timer = StageTimer()
    prove(pk, r1cs, circuit.synthesize(c1, 0), backend=backend, timer=timer)
    stages = timer.totals()
    for name in ("upload", "matvec", "ntt_h", "msm_a", "msm_b_g2", "msm_h", "combine"):
        assert name in stages and stages[name] >= 0
    assert all(r.get("device") for r in timer.records if r["stage"].startswith("msm"))


@pytest.mark.parametrize("early", ["1", "0"])
def test_unsatisfied_witness_names_the_constraint_on_the_device(keyed, backend, early,
                                                                monkeypatch):
    """Either schedule (ZKHIVE_SIDE_EARLY: the witness MSMs beside the NTTs, the check read
    after them; or the check read before the NTTs) names the first failing constraint, and
    the backend proves the next, satisfied witness to the CPU's bytes."""
    from synthesis.r1cs import UnsatisfiedConstraint

    monkeypatch.setenv("ZKHIVE_SIDE_EARLY", early)
    circuit, r1cs, pk, vk, c1 = keyed["porep-lite-4k"]
    z = circuit.synthesize(c1, 0)
    victim = r1cs.num_variables - 5
    z[victim] = F.vec_from_ints([(F.vec_to_ints(z[victim:victim + 1])[0] + 1) % F.MODULUS])[0]
    want = r1cs.first_unsatisfied(z)
    with pytest.raises(UnsatisfiedConstraint) as e:
        prove(pk, r1cs, z, backend=backend)
    assert e.value.index == want
    good = circuit.synthesize(c1, 0)
    r, s = F.random_element(), F.random_element()
    got = prove(pk, r1cs, good, backend=backend, r=r, s=s)
    assert got.to_bytes() == prove(pk, r1cs, good, backend="cpu", r=r, s=s).to_bytes()
    assert verify(vk, circuit.public_inputs(c1, 0), got)


def test_budget_refuses_a_key_that_does_not_fit(keyed, tmp_path, monkeypatch):
    from gpu.backends.cuda import CudaBackend
    from gpu.budget import DeviceMemoryExhausted

    circuit, r1cs, pk, _, _ = keyed["porep-lite-64k"]
    monkeypatch.setenv("ZKHIVE_CACHE_DIR", str(tmp_path))
    small = CudaBackend(0, capacity=64 << 20)
    try:
        with pytest.raises(DeviceMemoryExhausted, match="needs .* GiB|cannot run on device .* GiB"):
            small.load(pk, r1cs)
        assert small.budget.usage()["used"] == 0
    finally:
        small.release()


@pytest.mark.parametrize("at_load", [True, False], ids=["default", "ntt-at-load-0"])
def test_a_loaded_key_brings_its_domains_ntt_tables(keyed, tmp_path, monkeypatch, at_load):
    """The key's load makes its domain's NTT tables (the first proof, a standby's first among
    them, does not); a backend that has loaded nothing has none. With ZKHIVE_NTT_AT_LOAD=0 the
    load leaves them to the first proof, which makes them and still verifies."""
    from gpu.backends.cuda import CudaBackend

    circuit, r1cs, pk, vk, c1 = keyed["porep-lite-64k"]
    monkeypatch.setenv("ZKHIVE_CACHE_DIR", str(tmp_path))
    if at_load:
        monkeypatch.delenv("ZKHIVE_NTT_AT_LOAD", raising=False)  # the default makes them
    else:
        monkeypatch.setenv("ZKHIVE_NTT_AT_LOAD", "0")
    fresh = CudaBackend(0)
    try:
        log_n = pk.domain_size.bit_length() - 1
        assert log_n not in fresh.ntt.domains

        def tables_made() -> bool:  # twiddles both ways, Z^-1, compute_h's scales
            d = fresh.ntt.domains.get(log_n)
            return (d is not None and set(d.tw) == {False, True} and d.z_r2 is not None
                    and "h_pre" in d.scales)

        fresh.load(pk, r1cs)
        if at_load:
            assert tables_made()
        else:  # only the load's _warm_ntt and a proof make a domain's tables
            assert log_n not in fresh.ntt.domains
        z = circuit.synthesize(c1, 0)
        assert verify(vk, circuit.public_inputs(c1, 0), prove(pk, r1cs, z, backend=fresh))
        assert tables_made()  # the proof needed them all
    finally:
        fresh.release()


def test_an_out_of_memory_proof_frees_everything_and_the_next_one_succeeds(keyed, backend):
    from gpu.cuda.memory import DeviceBuffer
    from gpu.errors import GpuOutOfMemory

    circuit, r1cs, pk, vk, c1 = keyed["porep-lite-64k"]
    z = circuit.synthesize(c1, 0)
    prove(pk, r1cs, z, backend=backend)  # warm: the key is resident
    cuda = backend.cuda
    free_before, _ = cuda.mem_get_info()
    # take nearly all free memory behind zkhive's back: the proof's admission must give up
    hog = DeviceBuffer(free_before - (4 << 20), what="test hog")
    backend.admission_timeout = 1.0
    try:
        with pytest.raises(GpuOutOfMemory):
            prove(pk, r1cs, z, backend=backend)
    finally:
        hog.free()
        backend.admission_timeout = 600.0
    free_after, _ = cuda.mem_get_info()
    assert abs(free_after - free_before) < (64 << 20)  # nothing of the failed attempt is left
    proof = prove(pk, r1cs, z, backend=backend)
    assert verify(vk, circuit.public_inputs(c1, 0), proof)


def _wait_for_room(device_id, capacity, ledger_dir, nbytes, out):
    """Another prover's proof on the same device: its working set waits for room."""
    import time

    from gpu.budget import DeviceBudget
    b = DeviceBudget(device_id, capacity, ledger_dir=ledger_dir)
    t = time.monotonic()
    with b.working_set(nbytes, "the other prover's proof", timeout=30):
        out.put(time.monotonic() - t)


def test_a_proofs_buffers_serve_the_next_proof_until_another_process_needs_the_room(keyed, backend,
                                                                                  monkeypatch):
    """The buffers of a proof (z, a, b, c, the lists) are kept, booked as pooled, and the next
    proof of the key takes the same allocations (nothing allocated); a failed proof, a proof
    with ZKHIVE_PROOF_POOL=0 and another process waiting for room each leave nothing kept
    (the pool is on by default)."""
    import multiprocessing as mp

    from gpu.cuda.memory import DeviceBuffer
    from synthesis.r1cs import UnsatisfiedConstraint

    monkeypatch.delenv("ZKHIVE_PROOF_POOL", raising=False)
    circuit, r1cs, pk, vk, c1 = keyed["porep-lite-64k"]
    z = circuit.synthesize(c1, 0)
    pub = circuit.public_inputs(c1, 0)
    prove(pk, r1cs, z, backend=backend)
    kept = backend._pool.nbytes
    assert kept >= 32 * (3 * pk.domain_size) and backend.budget.pooled() == kept == backend.pooled_bytes
    ptrs, live = sorted(b.ptr for b in backend._pool._bufs), DeviceBuffer.live
    proof = prove(pk, r1cs, z, backend=backend)
    assert verify(vk, pub, proof) and not verify(vk, [pub[0] ^ 1, *pub[1:]], proof)
    assert sorted(b.ptr for b in backend._pool._bufs) == ptrs and DeviceBuffer.live == live

    bad = z.copy()
    bad[r1cs.num_variables - 5] = F.vec_from_ints([12345])[0]
    with pytest.raises(UnsatisfiedConstraint):
        prove(pk, r1cs, bad, backend=backend)
    assert backend._pool.nbytes == 0 and backend.budget.pooled() == 0
    assert DeviceBuffer.live <= live - kept  # freed, not only unbooked

    monkeypatch.setenv("ZKHIVE_PROOF_POOL", "0")
    assert verify(vk, pub, prove(pk, r1cs, z, backend=backend))
    assert backend._pool.nbytes == 0 and backend.budget.pooled() == 0
    monkeypatch.setenv("ZKHIVE_PROOF_POOL", "1")

    prove(pk, r1cs, z, backend=backend)
    assert backend.budget.pooled() == kept
    usage = backend.budget.usage()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    # fits only once the pool is given up (the ledger alone: no free-memory reading there)
    other = ctx.Process(target=_wait_for_room, args=(backend.budget.device_id, usage["capacity"],
                                                      backend.budget.path.parent,
                                                      usage["capacity"] - usage["used"] + kept // 2, out))
    other.start()
    try:
        waited = out.get(timeout=30)
    finally:
        other.join(30)
    assert other.exitcode == 0 and waited < 5
    assert backend._pool.nbytes == 0 and backend.budget.pooled() == 0
    assert verify(vk, pub, prove(pk, r1cs, z, backend=backend))  # and it proves on


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_device_fixed_base_matches_the_host(backend, group):
    from gpu.groth16 import curve
    from gpu.groth16.fixed_base import host_fixed_base

    base = (curve.g1() if group == "g1" else curve.g2()) * curve.scalar(F.random_element())
    s = F.vec_random(3000)
    s[0] = 0
    s[1:3] = F.vec_from_ints([1, F.MODULUS - 1])
    dev = backend.fixed_base(base, s)
    assert dev == host_fixed_base(base, s)
    assert dev[1] == base and dev[2] == -base and dev[0] == type(base).identity()


@pytest.mark.parametrize("dense_witness", ["1", "0"])
def test_a_dense_witness_takes_the_dense_engine_behind_h(keyed, tmp_path, monkeypatch,
                                                         dense_witness):
    """porep-lite's witness is ~99% full-size scalars (like WindowPoSt's): with chunks of 2^10
    (smaller than its 3,778 variables) its G1 witness queries go through the dense engine,
    queued on the main stream behind H, and G2's through the split MSM on the side stream;
    ZKHIVE_MSM_DENSE_WITNESS=0 keeps them on the side stream's tail engine. Either way the
    proof is the CPU backend's to the byte, verifies, and fails with a wrong public input."""
    from gpu.backends.cuda import CudaBackend

    circuit, r1cs, pk, vk, c1 = keyed["porep-lite-4k"]
    monkeypatch.setenv("ZKHIVE_SPLIT_CHUNK_LOG", "10")
    monkeypatch.setenv("ZKHIVE_DENSE_CHUNK_LOG", "10")
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_WITNESS", dense_witness)
    small = CudaBackend(0)
    try:
        z = circuit.synthesize(c1, 0)
        for _ in range(2):  # twice: the engine's host buffers go back to its pool and serve again
            r, s = F.random_element(), F.random_element()
            got = prove(pk, r1cs, z, backend=small, r=r, s=s)
            assert got.to_bytes() == prove(pk, r1cs, z, backend="cpu", r=r, s=s).to_bytes()
            paths = {k: v["path"] for k, v in small.last_msm.items()}
            if dense_witness == "1":
                assert paths == {"h": "dense", "a": "dense", "b_g1": "dense", "l": "dense",
                                 "b_g2": "split"}, paths
                assert all(small.last_msm[k]["stream"] == "main" for k in ("a", "b_g1", "l"))
                assert small.last_msm["a"]["chunks"] == -(-r1cs.num_variables // 1024)
            else:
                assert paths["h"] == "dense" and paths["a"] == paths["b_g1"] == "split", paths
            pub = circuit.public_inputs(c1, 0)
            assert verify(vk, pub, got)
            assert not verify(vk, [pub[0] ^ 1, *pub[1:]], got)
    finally:
        small.release()


def test_the_shared_backend_proves_again_after_release(backend):
    """release() (a worker's shutdown) leaves the process-wide instance usable: the next proof
    makes the NTT's constants again, where it met "roots: used after free" (a module after this
    one gets the same instance from get_backend). Last in the module: it unloads the keys."""
    from gpu.backends import get_backend
    from synthesis import assignment
    from tests.compact_circuits import toy, witness

    assert get_backend("cuda:0") is backend
    cr, z = toy(9), witness(9)
    pub = F.vec_to_ints(z[1:2])
    for _ in range(2):
        pk, vk = backend.setup_resident(cr, seed=b"seed-release")
        proof = prove(pk, cr, assignment.encode(z), backend=backend)
        assert verify(vk, pub, proof) and not verify(vk, [pub[0] ^ 1], proof)
        backend.release()
    backend.release()  # twice: nothing left to free, no error


def test_a_backend_builds_its_host_libraries_at_start():
    """The host libraries a proof calls (gpu/native for_prover: the planes of a compact
    assignment in the upload, the MSMs' host combine) are loaded by the backend's start, in a
    phase of their own, not by the first proof (17 s of g++ in a fresh H100's first partition,
    2026-12-07). A fresh process, as a prover's start is."""
    import json
    import os
    import subprocess
    import sys
    code = (
        "import json, time\n"
        "from gpu import phases\n"
        "from gpu.native import compact, curve\n"
        "rec = phases.Phases(origin=time.time())\n"
        "assert compact._lib is None and curve._lib is None\n"
        "with phases.collect(rec):\n"
        "    from gpu.backends.cuda import CudaBackend\n"
        "    be = CudaBackend(0)\n"
        "print(json.dumps({'phases': rec.as_dict(), 'compact': compact._lib is not None,\n"
        "                  'curve': curve._lib is not None}))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ))
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert "host libraries" in got["phases"], got
    assert got["compact"] and got["curve"], got
