"""Issue 39: a full blob store is back-pressure, not failure; a failed job's id retries.

The blob store is a real small filesystem (a tmpfs mounted for this module: as root, as CI runs),
filled to its last byte, then separately to its last inode, with filler files while porep-lite-4k
jobs are accepted: each job's units wait (status, timeline, metric), none fails, and every job
verifies once the filler is removed. ``ZKHIVE_BACKPRESSURE_JOBS`` sets the number of jobs per
fill (default 3, to keep CI short; the issue's closing run used 10).

Then a job failed by a bad key (its verifying key cut short on disk), the key fixed, and the same
id resubmitted with ``zkhive submit``: a new attempt, verified, its history kept in the timeline.
Real Redis, real workers; nothing mocked.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

JOBS = int(os.environ.get("ZKHIVE_BACKPRESSURE_JOBS", "3"))
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A tmpfs of 64 MiB and 4096 inodes mounted as the blob store; skipped (with the reason)
    only where nothing can be mounted."""
    d = tmp_path_factory.mktemp("small-store")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,nr_inodes=4096,mode=0755", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem for the blob store (needs root): "
                    f"{(r.stderr or r.stdout).strip()}")
    yield d
    subprocess.run(["umount", str(d)], capture_output=True)
    if os.path.ismount(d):
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


@pytest.fixture(scope="module")
def docs():
    from synthesis.porep import SETS, TINY, c1_document, generate

    out = []
    for seed in range(2 * JOBS + 1):
        s = (1000 + seed).to_bytes(32, "little")
        out.append(c1_document(generate(SETS[TINY], s), s))
    return out


def _env(store: Path) -> dict:
    return {"ZKHIVE_BLOBS__DIR": str(store), "ZKHIVE_BLOBS__MIN_FREE_BYTES": "0"}


def _start(cluster, workers, store: Path):
    from synthesis.porep import TINY

    env = _env(store)
    pre = {**env, "ZKHIVE_SRS__PRELOAD": json.dumps([TINY])}
    procs = [workers("synthesis", wait=False, **env), workers("aggregate", wait=False, **env),
             workers("prove", "cpu:0", wait=False, **pre)]
    for p in procs:
        p.wait_ready(cluster.redis, timeout_s=120)
    return procs


def _fill_bytes(store: Path) -> Path:
    """One filler file written until the filesystem has not one byte left."""
    filler = store / "filler"
    with open(filler, "wb", buffering=0) as f:  # unbuffered: nothing left over to flush at close
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\xff" * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC
    assert os.statvfs(store).f_bavail == 0 and shutil.disk_usage(store).free == 0
    return filler


def _fill_inodes(store: Path) -> Path:
    """Empty files until the filesystem has no inode left (bytes to spare)."""
    filler = store / "filler"
    filler.mkdir()
    n = 0
    try:
        while True:
            (filler / str(n)).touch()
            n += 1
    except OSError as e:
        assert e.errno == errno.ENOSPC
    assert os.statvfs(store).f_favail == 0 and shutil.disk_usage(store).free > (1 << 20)
    return filler


def _cli(cluster, store: Path, *argv, timeout: float = 240):
    env = {**cluster.env, **_env(store)}
    return subprocess.run([sys.executable, "-m", "cluster", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _wait(cond, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.25)
    raise AssertionError(f"not within {timeout} s: {what}")


def _verify(cluster, doc, res) -> None:
    from gpu.groth16 import Proof, verify
    from synthesis.circuits import get_circuit

    circuit = get_circuit(doc["params"])
    vk = cluster.runtime().keys.load_vk(circuit)
    parsed = circuit.parse_c1(doc)
    assert len(res.proof) == 192 * circuit.num_partitions()
    for k, raw in enumerate(res.partition_proofs()):
        assert res.public_inputs[k] == circuit.public_inputs(parsed, k)
        assert verify(vk, res.public_inputs[k], Proof.from_bytes(raw)), f"{res.job_id} partition {k}"


@pytest.mark.parametrize("fill", ["bytes", "inodes"])
def test_a_full_blob_store_waits_and_every_job_resumes(cluster, workers, store, docs, fill, tmp_path):
    from prometheus_client import generate_latest

    from cluster.client import Job, submit
    from cluster.ops.metrics import make_registry
    from cluster.pipeline import timeline
    from cluster.user.commands import status_text
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    cluster.configure_here(**_env(store))
    cluster.setup_keys(get_circuit(TINY))
    for p in store.iterdir():  # what an earlier case left
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    mine = docs[:JOBS] if fill == "bytes" else docs[JOBS:2 * JOBS]
    # accepted while there is room (no worker yet: every unit meets the full store)
    jobs = [submit(doc, job_id=f"full-{fill}-{i}") for i, doc in enumerate(mine)]
    assert all(j.created for j in jobs)
    filler = _fill_bytes(store) if fill == "bytes" else _fill_inodes(store)

    # a submission now is refused in one line, nothing stored (before: a traceback, OSError 28)
    refused = tmp_path / "refused.json"
    refused.write_text(json.dumps(docs[-1]))
    out = _cli(cluster, store, "submit", str(refused), "--job-id", f"refused-{fill}", timeout=120)
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "blob store" in out.stderr and ("no room" in out.stderr or "inodes free" in out.stderr), out.stderr
    assert cluster.runtime().jobs.get(f"refused-{fill}") is None
    print(f"\n[{fill}] refused at submit: {out.stderr.strip()}")

    _start(cluster, workers, store)
    rt = cluster.runtime()
    # every job waits: no failure, the wait shown by status, the timeline and the exporter
    _wait(lambda: all(Job(j.job_id, rt).status()["waiting"] for j in jobs), 120, "every job waiting for space")
    # a unit's 4th try is 3.5 s after its first (0.5 + 1 + 2): past the old budget (2 retries within 3 s)
    _wait(lambda: max(w["waits"] for j in jobs for w in Job(j.job_id, rt).status()["waiting"].values()) >= 4,
          60, "a unit's fourth try")
    states = [Job(j.job_id, rt).status() for j in jobs]
    assert [s["status"] for s in states if s["status"] in ("failed", "cancelled")] == []
    text = status_text(rt, jobs=2 * JOBS)
    assert f"full-{fill}-0" in text and "waiting for space" in text, text
    assert all(f"full-{fill}-{i}".ljust(28) + " waiting" in text for i in range(len(jobs))), text
    events = timeline.load(rt.redis, jobs[0].job_id)
    waits = [e for e in events if e["event"] == "waiting_for_space"]
    assert waits and waits[0]["wait"] == 1 and "blob store full" in waits[0]["error"], waits
    assert any(e["wait"] >= 2 and e["retry_in_s"] > waits[0]["retry_in_s"] for e in waits), waits  # backoff
    reg, _ = make_registry(rt.redis)
    metrics = generate_latest(reg).decode()
    waiting_now = _metric(metrics, "zkhive_units_waiting_for_space")
    began = _metric(metrics, 'zkhive_blob_store_waits_total{params="porep-lite-4k",stage="synthesis"}')
    assert waiting_now >= len(jobs) and began >= len(jobs), metrics
    print(f"\n[{fill}] {len(jobs)} jobs waiting; status line: "
          f"{[ln for ln in text.splitlines() if 'waiting for space' in ln][0].strip()}; "
          f"zkhive_units_waiting_for_space {waiting_now:g}, zkhive_blob_store_waits_total {began:g}")

    shutil.rmtree(filler) if filler.is_dir() else filler.unlink()  # room returns
    t0 = time.monotonic()
    for j, doc in zip(jobs, mine):
        _verify(cluster, doc, j.result(timeout=300))
    took = time.monotonic() - t0
    states = [Job(j.job_id, rt).status() for j in jobs]
    assert [s["status"] for s in states] == ["done"] * len(jobs) and not any(s["waiting"] for s in states)
    for j in jobs:
        evs = timeline.load(rt.redis, j.job_id)
        assert any(e["event"] == "space_returned" for e in evs) and not any(e["event"] == "failed" for e in evs)
    metrics = generate_latest(reg).decode()
    assert _metric(metrics, "zkhive_units_waiting_for_space") == 0
    print(f"[{fill}] {len(jobs)} jobs done and verified {took:.1f} s after the filler was removed; 0 failed")


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.split(" ")[0] == name:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} in the exporter's text")


def test_a_job_failed_by_a_bad_key_is_retried_under_its_id_once_fixed(cluster, workers, store, docs, tmp_path):
    from cluster.client import Job, JobFailed, submit
    from cluster.errors import JobConflict
    from cluster.pipeline import timeline
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    cluster.configure_here(**_env(store))
    circuit = get_circuit(TINY)
    cluster.setup_keys(circuit)
    for p in store.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    rt = cluster.runtime()
    vk_path = rt.keys.find(circuit, "vk")
    good_vk = vk_path.read_bytes()
    _start(cluster, workers, store)
    doc = docs[-1]
    c1_file = tmp_path / "c1.json"
    c1_file.write_text(json.dumps(doc))
    try:
        vk_path.write_bytes(good_vk[: len(good_vk) // 2])  # the bad key: cut short
        with pytest.raises(JobFailed, match="cannot verify"):
            submit(doc, job_id="bad-key-1").result(timeout=240)
    finally:
        vk_path.write_bytes(good_vk)  # the key fixed
    # another input under the failed id stays a conflict
    with pytest.raises(JobConflict, match="bad-key-1 already exists with another C1 input"):
        submit(docs[0], job_id="bad-key-1")
    out = _cli(cluster, store, "submit", str(c1_file), "--job-id", "bad-key-1", "--wait",
               "--out", str(tmp_path / "proof.bin"))
    assert out.returncode == 0, out
    assert out.stdout.splitlines()[0] == "bad-key-1 resubmitted (attempt 2) (porep-lite-4k, 2 partitions)", out.stdout
    job = Job("bad-key-1", rt)
    res = job.result(timeout=30)
    _verify(cluster, doc, res)
    assert (tmp_path / "proof.bin").read_bytes() == res.proof
    st = job.status()
    assert (st["status"], st["attempt"], st["error"]) == ("done", 2, None)
    events = [e["event"] for e in timeline.load(rt.redis, "bad-key-1")]
    # the history: attempt 1 failed, attempt 2 aggregated, in that order
    assert events.index("failed") < events.index("attempt") < events.index("aggregated"), events
    assert events.count("queued") == 4
    # a done job submitted again is the same job (no third attempt)
    again = _cli(cluster, store, "submit", str(c1_file), "--job-id", "bad-key-1", timeout=120)
    assert again.returncode == 0 and again.stdout.startswith("bad-key-1 already submitted"), again
    assert Job("bad-key-1", rt).status()["attempt"] == 2
    print(f"\n[bad key] {out.stdout.splitlines()[0]}; {out.stdout.splitlines()[-1]}; timeline: "
          f"{[e for e in events if e in ('failed', 'attempt', 'aggregated')]}")
    from prometheus_client import generate_latest

    from cluster.ops.metrics import make_registry

    reg, _ = make_registry(rt.redis)
    metrics = generate_latest(reg).decode()
    assert _metric(metrics, 'zkhive_job_attempts_total{params="porep-lite-4k"}') == 1
    assert _metric(metrics, 'zkhive_jobs_total{outcome="done",params="porep-lite-4k"}') == 1


def test_a_cancelled_job_resubmitted_twice_at_once_starts_one_attempt(cluster, workers, store, docs):
    """No workers: the job stays queued, is cancelled, then two resubmissions race; one new
    attempt, the other gets the same job (not created). Also the gateway's path: cuzk's
    request_id semantics through ProvingEngine.SubmitProof."""
    import threading

    from cluster.client import Job, cancel, submit
    from cluster.pipeline import timeline
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    cluster.configure_here(**_env(store))
    cluster.setup_keys(get_circuit(TINY))
    rt = cluster.runtime()
    doc = docs[0]
    submit(doc, job_id="cancelled-1")
    assert submit(doc, job_id="cancelled-1").created is False  # queued: the same job
    assert cancel("cancelled-1")
    got = []
    ts = [threading.Thread(target=lambda: got.append(submit(doc, job_id="cancelled-1"))) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert sorted(j.created for j in got) == [False, True]
    st = Job("cancelled-1", rt).status()
    assert (st["status"], st["attempt"]) == ("queued", 2)
    assert rt.jobs.active() == ["cancelled-1"]
    events = timeline.load(rt.redis, "cancelled-1")
    assert [e["attempt"] for e in events if e["event"] == "attempt"] == [2]
    assert [e["event"] for e in events].count("cancelled") == 1


def test_gateway_request_id_of_a_failed_job_is_a_new_attempt(cluster, workers, store, docs):
    """SubmitProof with the request_id of a FAILED job and the same input: a new attempt (cuzk);
    another input under it: ALREADY_EXISTS. In-process ProvingEngine, no workers needed."""
    import grpc

    from cluster.gateway.pb import proving_pb2 as pb
    from cluster.gateway.service import Abort, ProvingEngine
    from cluster.client import submit
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    cluster.configure_here(**_env(store))
    cluster.setup_keys(get_circuit(TINY))
    rt = cluster.runtime()
    engine = ProvingEngine(rt)
    doc = docs[1]
    submit(doc, job_id="gw-1")
    assert rt.jobs.fail("gw-1", "partition 0: missing key: for the test")
    req = pb.SubmitProofRequest(request_id="gw-1", proof_kind=pb.POREP_SEAL_COMMIT,
                                vanilla_proof=json.dumps(doc).encode())
    resp, created = engine._submit(req)
    assert (resp.job_id, created) == ("gw-1", True)
    assert rt.jobs.get("gw-1").attempt == 2 and rt.jobs.status("gw-1") == "queued"
    resp, created = engine._submit(req)  # queued now: the same job
    assert created is False
    other = pb.SubmitProofRequest(request_id="gw-1", proof_kind=pb.POREP_SEAL_COMMIT,
                                  vanilla_proof=json.dumps(docs[2]).encode())
    with pytest.raises(Abort) as e:
        engine._submit(other)
    assert e.value.code == grpc.StatusCode.ALREADY_EXISTS


def test_an_aggregation_that_finds_the_store_full_waits(cluster, workers, store, docs):
    """The result's write is a unit too: every partition proved, then the store filled before the
    aggregate worker starts; the aggregation waits (stage aggregate) and finishes after."""
    from cluster.client import Job, submit
    from cluster.pipeline import timeline
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    cluster.configure_here(**_env(store))
    cluster.setup_keys(get_circuit(TINY))
    for p in store.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    rt = cluster.runtime()
    env = _env(store)
    synth = workers("synthesis", wait=False, **env)
    prover = workers("prove", "cpu:0", wait=False, **env, ZKHIVE_SRS__PRELOAD=json.dumps([TINY]))
    for p in (synth, prover):
        p.wait_ready(cluster.redis, timeout_s=120)
    doc = docs[2]
    job = submit(doc, job_id="full-at-aggregate")
    _wait(lambda: job.status()["partitions_done"] == 2, 180, "both partitions proved")
    filler = _fill_bytes(store)
    workers("aggregate", **env)
    _wait(lambda: "aggregate" in job.status()["waiting"], 60, "the aggregation waiting for space")
    _wait(lambda: job.status()["waiting"]["aggregate"]["waits"] >= 3, 30, "the aggregation's third try")
    assert job.status()["status"] == "running"
    filler.unlink()
    _verify(cluster, doc, job.result(timeout=120))
    evs = timeline.load(rt.redis, "full-at-aggregate")
    assert [e["stage"] for e in evs if e["event"] == "waiting_for_space"][:1] == ["aggregate"]
    assert any(e["event"] == "space_returned" and e["partition"] is None for e in evs)


def test_a_wait_for_space_ends_at_the_jobs_deadline(cluster, workers, store, docs):
    """The wait is bounded: a job whose store stays full fails at its deadline, naming the wait
    (and no other job's unit is touched)."""
    from cluster.client import Job, JobFailed, submit
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    cluster.configure_here(**_env(store))
    cluster.setup_keys(get_circuit(TINY))
    for p in store.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    job = submit(docs[3], job_id="full-until-deadline", deadline_s=6)
    filler = _fill_inodes(store)
    try:
        workers("synthesis", **_env(store))
        with pytest.raises(JobFailed, match=r"waited \d+ s \(\d+ tries\) for room in the blob store until the "
                                            r"job's deadline; last: blob store full"):
            job.result(timeout=60)
        assert Job(job.job_id).status()["status"] == "failed"
    finally:
        shutil.rmtree(filler)
