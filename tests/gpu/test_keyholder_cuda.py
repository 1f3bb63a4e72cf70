"""Keys that outlive their prover (issue 40 item 2): a key held by one process and proved from
in another through CUDA IPC (gpu/backends/cuda.py export/adopt, cluster/pipeline/keyholder.py).

- export/attach round trip: a key made on the device (compact matrices) and a host key uploaded
  (full CSR) are held by a holder-mode backend in this process, adopted by another process
  (tests/gpu/holder_attach.py: CUDA opens no process's own handles), whose proofs verify; the
  ledger books the key once (the holder: ``key_bytes``) and each prover its own parts
  (``process_bytes``); a manifest for another circuit, a bad handle and another version are
  refused in one line;
- the holder's memory survives its prover's SIGKILL: two more processes attach at once and prove;
- the real holder process (``zkhive keyholder``) SIGKILLed under a prover of this process: the
  prover drops the attached key (evictions say "key holder gone"), and once a new holder answers
  it proves again from the key the new holder made.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

HERE = Path(__file__).parent
ATTACH = HERE / "holder_attach.py"


@pytest.fixture(scope="module")
def holder_backend(cuda_ctx):
    from gpu.backends.cuda import CudaBackend
    be = CudaBackend(0, holder=True)
    yield be
    _free(be)


def _free(be) -> None:
    """Free what ``be`` holds without ``release`` (its ``budget.leave`` would drop every booking
    of this process, the other test modules' keys on the shared backend included)."""
    for digest in list(be._on_device):
        be.unload(digest)
    if be._split is not None:
        be._split.close()
    if be._ntt is not None:  # (the property would make one only to close it)
        be._ntt.close()
    be._ntt = None  # made again at its next use


def _attach(tmp_path, manifest, spec, *, kill=False, name="out", together=1):
    """Run ``together`` importing processes at once on ``manifest``; their reports (one: the
    report itself)."""
    mpath = tmp_path / f"{name}-manifest.json"
    mpath.write_text(json.dumps(manifest))
    outs = [tmp_path / f"{name}-{i}.json" for i in range(together)]
    procs = [subprocess.Popen([sys.executable, str(ATTACH), str(mpath), spec, str(out)]
                              + (["--kill"] if kill else []), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=os.environ.copy())
             for out in outs]
    reports = []
    for p, out in zip(procs, outs):
        _, err = p.communicate(timeout=300)
        assert p.returncode == (-signal.SIGKILL if kill else 0), err[-3000:]
        reports.append(json.loads(out.read_text()))
    return reports[0] if together == 1 else reports


def _verified(vk, report) -> int:
    from gpu.groth16 import Proof, verify
    n = 0
    for raw, pub in report["proofs"]:
        proof = Proof.from_bytes(bytes.fromhex(raw))
        assert verify(vk, pub, proof)
        assert not verify(vk, [pub[0] ^ 1, *pub[1:]], proof)
        n += 1
    return n


def _check_refusals(report) -> None:
    r = report["refusals"]
    assert r["other circuit"].startswith("CircuitMismatch: the held key was made for another circuit")
    assert r["bad handle"] is not None and "ipc handle" in r["bad handle"]
    assert r["version"].startswith("BackendError: key manifest: version 99")
    assert all("\n" not in v for v in r.values())


def test_device_made_key_exported_and_proved_from_another_process(holder_backend, tmp_path):
    from tests.compact_circuits import toy

    cr = toy(9)
    pk, vk = holder_backend.setup_resident(cr, seed=b"holder-1")
    try:
        res = holder_backend._on_device[pk.circuit_digest][0]
        # the holder booked the key itself only: matrices and bases, no engines
        assert holder_backend.held_bytes(pk.circuit_digest) == res.shape.key_bytes()
        assert holder_backend._split is None
        manifest = holder_backend.export(pk)
        json.dumps(manifest)  # JSON-able as it travels
        assert manifest["compact"] is not None and len(manifest["bases"]) == 5
        report = _attach(tmp_path, manifest, "toy9")
        assert report["attached"] is True
        assert report["booked"] == report["process_bytes"] > 0
        assert _verified(vk, report) == 1
        _check_refusals(report)
    finally:
        holder_backend.unload(pk.circuit_digest)


def test_holder_memory_survives_a_provers_sigkill(holder_backend, tmp_path):
    """A prover SIGKILLed with the key mapped; two more attach at once and prove, from the same
    allocations (the holder never made or loaded the key again)."""
    from gpu import setup
    from synthesis.circuits import get_circuit

    circuit = get_circuit("porep-lite-4k")
    r1cs = circuit.r1cs()
    pk, vk = setup(r1cs, backend="cpu", seed=b"holder-2")
    holder_backend.load(pk, r1cs)  # a host key uploaded: full CSR
    try:
        manifest = holder_backend.export(pk)
        held, booked = holder_backend._on_device[pk.circuit_digest]
        assert manifest["compact"] is None and set(manifest["matrices"]) == {"a", "b", "c"}
        first = _attach(tmp_path, manifest, "porep-lite-4k", kill=True, name="first")
        assert _verified(vk, first) >= 1
        _check_refusals(first)
        # the holder's key untouched by its prover's death: the same object, the same booking
        assert holder_backend._on_device[pk.circuit_digest][0] is held
        assert holder_backend.held_bytes(pk.circuit_digest) == booked
        # two provers attached to the one key at once (issue 40: two provers, one key)
        second, third = _attach(tmp_path, manifest, "porep-lite-4k", name="second", together=2)
        assert len({first["pid"], second["pid"], third["pid"]}) == 3
        assert _verified(vk, second) >= 1 and _verified(vk, third) >= 1
        # the dead prover's bookings are gone from the ledger; the holder's stays
        usage = holder_backend.budget.usage()["processes"]
        assert not any(k.startswith(f"{first['pid']}:") for k in usage)
    finally:
        holder_backend.unload(pk.circuit_digest)


def _start_holder(run_dir: Path, env: dict) -> subprocess.Popen:
    from cluster.pipeline.keyholder import HolderClient, socket_path
    log = open(run_dir / f"holder-{time.time_ns()}.log", "wb")
    p = subprocess.Popen([sys.executable, "-m", "cluster", "keyholder", "--device", "cuda:0",
                          "--run-dir", str(run_dir)], stdout=log, stderr=subprocess.STDOUT, env=env,
                         cwd=HERE.parents[1])
    client = HolderClient(socket_path(run_dir, "cuda:0"))
    deadline = time.time() + 120
    while time.time() < deadline:
        assert p.poll() is None, (run_dir / log.name).read_text()[-3000:]
        try:
            if client.listing()["pid"] == p.pid:
                return p
        except Exception:
            time.sleep(0.1)
    raise AssertionError("the key holder did not answer in 120 s")


def test_holder_killed_prover_reports_and_recovers(cuda_ctx, tmp_path):
    from cluster.pipeline.keyholder import HolderClient, socket_path
    from cluster.pipeline.keys import KeyCache
    from cluster.pipeline.prover import Device, Prover
    from gpu.groth16 import Proof, verify
    from synthesis.circuits import get_circuit
    from synthesis.porep import c1_document, generate

    name = "porep-lite-4k"
    run_dir, keys = tmp_path / "run", tmp_path / "keys"
    run_dir.mkdir()
    root = str(HERE.parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
           "ZKHIVE_SRS__PARAM_CACHE": str(keys),
           "ZKHIVE_SRS__IN_PROCESS": json.dumps([name]), "ZKHIVE_SRS__PRELOAD": json.dumps([name]),
           "ZKHIVE_SRS__SETUP_SEED": "holder-test-ceremony", "ZKHIVE_RUN_DIR": str(run_dir)}
    h1 = _start_holder(run_dir, env)
    h2 = None
    client = HolderClient(socket_path(run_dir, "cuda:0"), timeout_s=300)
    from gpu.backends.cuda import CudaBackend
    prover = Prover(Device("cuda", 0), KeyCache(keys), holder=client, backend=CudaBackend(0))
    lost = threading.Event()
    client.watch(lambda why: (prover.holder_lost(why), lost.set()))
    try:
        circuit = get_circuit(name)
        c1 = circuit.parse_c1(c1_document(generate(circuit.prm, b"\x05" * 32), b"\x06" * 32))
        z, pub = circuit.synthesize(c1, 0), circuit.public_inputs(c1, 0)
        proof = Proof.from_bytes(prover.prove(circuit, z))
        vk = KeyCache(keys).load_vk(circuit)  # published by the holder that made the key
        assert verify(vk, pub, proof)
        assert prover.resident_names() == [name]
        assert client.listing()["keys"][name]["provers"] == [os.getpid()]

        os.kill(h1.pid, signal.SIGKILL)
        h1.wait(30)
        assert lost.wait(30), "the prover did not see its key holder die"
        assert prover.resident_names() == []
        gone = prover.evictions()[-1]
        assert gone["key"] == name and gone["reason"].startswith(f"key holder gone (key holder pid {h1.pid} gone")
        assert prover.evicted_counts() == {f"{name}/holder": 1} and prover.holder_losses == 1

        h2 = _start_holder(run_dir, env)  # the keeper's restart; it makes the key again
        proof = Proof.from_bytes(prover.prove(circuit, z))
        assert verify(vk, pub, proof) and not verify(vk, [pub[0] ^ 1, *pub[1:]], proof)
        assert prover.resident_names() == [name]
    finally:
        client.close()
        _free(prover.backend)
        for h in (h1, h2):
            if h is not None and h.poll() is None:
                h.terminate()
                h.wait(60)
