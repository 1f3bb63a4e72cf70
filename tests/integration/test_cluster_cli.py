"""The CLI (``python -m cluster`` == ``zkhive``), the submit task Flower's send-task calls, and
the Redis-side stores, against a real Redis and real workers. This module runs the embedded
setup: blobs in Redis (``blobs.backend = "redis"``) instead of a shared directory."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from circuits_for_tests import SQUARES_A, SQUARES_B, make_c1

pytestmark = pytest.mark.integration

REDIS_BLOBS = {"ZKHIVE_BLOBS__BACKEND": "redis"}


@pytest.fixture(scope="module")
def embedded(cluster, worker_set, tmp_path_factory):
    cluster.flush()
    cluster.configure_here(**REDIS_BLOBS)
    cluster.setup_keys(SQUARES_A, SQUARES_B)
    ws = worker_set(tmp_path_factory.mktemp("embedded"))
    procs = [ws("synthesis", wait=False, **REDIS_BLOBS), ws("aggregate", wait=False, **REDIS_BLOBS),
             ws("prove", "cpu:0", wait=False, ZKHIVE_SRS__PRELOAD=f'["{SQUARES_A.name}"]', **REDIS_BLOBS)]
    for p in procs:
        p.wait_ready(cluster.redis)
    yield ws
    ws.stop_all()
    cluster.configure_here()


@pytest.fixture
def here(cluster, embedded):
    cluster.configure_here(**REDIS_BLOBS)
    return cluster


def zkhive(cluster, *args, timeout=60, **env):
    from tests.conftest import ROOT

    return subprocess.run([sys.executable, "-m", "cluster", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**cluster.env, **REDIS_BLOBS, **env})


def test_cli_submit_wait_result_status_timeline(here, tmp_path):
    from gpu.groth16 import Proof, verify

    doc = make_c1(SQUARES_A, seed=40)
    (tmp_path / "c1.json").write_text(json.dumps(doc))
    out = tmp_path / "proof.bin"
    p = zkhive(here, "submit", str(tmp_path / "c1.json"), "--job-id", "cli-1", "--wait", "--timeout", "60",
               "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "cli-1 submitted (test-squares-8x2, 2 partitions)" in p.stdout
    proof = out.read_bytes()
    assert len(proof) == 384
    vk = here.runtime().keys.load_vk(SQUARES_A)
    c1 = SQUARES_A.parse_c1(doc)
    assert all(verify(vk, SQUARES_A.public_inputs(c1, k), Proof.from_bytes(proof[192 * k:192 * (k + 1)]))
               for k in range(2))
    # resubmitting is a no-op that says so
    again = zkhive(here, "submit", str(tmp_path / "c1.json"), "--job-id", "cli-1")
    assert again.returncode == 0 and "cli-1 already submitted" in again.stdout
    res = zkhive(here, "result", "cli-1")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["proof"] == proof.hex()

    st = zkhive(here, "status")
    assert st.returncode == 0, st.stderr
    assert "prove" in st.stdout and "cpu:0" in st.stdout and SQUARES_A.name in st.stdout
    assert "cli-1" in st.stdout and "done" in st.stdout and "synthesis" in st.stdout
    png = tmp_path / "t.png"
    tl = zkhive(here, "timeline", "cli-1", "--png", str(png))
    assert tl.returncode == 0, tl.stderr
    for ev in ("queued", "synthesis_start", "prove_routed", "prove_pickup", "stage", "prove_end", "aggregated"):
        assert ev in tl.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_rejects_bad_input_with_one_line(here, tmp_path, capsys, monkeypatch):
    """The same commands in this process (cluster.cli.main), for speed: exit 2, one line, no traceback."""
    from cluster.cli import main
    from cluster.ops.redis_server import free_port

    for k, v in {**here.env, **REDIS_BLOBS}.items():  # the settings a `zkhive` process would see
        if k.startswith("ZKHIVE_"):
            monkeypatch.setenv(k, v)

    def run(*argv):
        code = main(list(argv))
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return code, err

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, err = run("submit", str(bad))
    assert code == 2 and "bad.json: not JSON (line 1" in err
    bad.write_text(json.dumps({"params": "nope"}))
    code, err = run("submit", str(bad))
    assert code == 2 and "field params: unknown parameter set 'nope'" in err
    code, err = run("result", "no-such-job")
    assert code == 2 and "no job 'no-such-job'" in err
    code, err = run("timeline", "no-such-job")
    assert code == 2 and "no timeline" in err
    code, err = run("worker", "prove")
    assert code == 2 and "needs --device" in err
    code, err = run("worker", "prove", "--device", "gpu0")
    assert code == 2 and "not cpu, cpu:N or cuda:N" in err
    from gpu.backends import cuda_available
    if not cuda_available():
        code, err = run("worker", "prove", "--device", "cuda:0")
        assert code == 2 and "cuda backend is not available" in err, err
        assert not list(here.redis.scan_iter(match="zkhive:devlock:*:cuda:0:*"))  # released
    monkeypatch.setenv("ZKHIVE_REDIS__PASSWORD", "wrong")
    code, err = run("status")
    assert code == 2 and "refused the password" in err and "wrong" not in err
    monkeypatch.setenv("ZKHIVE_REDIS__URL", f"redis://127.0.0.1:{free_port()}/0")
    code, err = run("status")
    assert code == 2 and "cannot reach Redis at redis://127.0.0.1:" in err
    monkeypatch.setenv("ZKHIVE_WORKER__HEARTBEATS", "1")
    code, err = run("status")
    assert code == 2 and "ZKHIVE_WORKER__HEARTBEATS: unknown key worker.heartbeats" in err


def test_status_flags_a_worker_running_other_code(here):
    from cluster.pipeline import registry
    from cluster.user.commands import status_text

    stale = registry.WorkerInfo(worker_id="prove.old.cpu0.0", role="prove", host="old", pid=1,
                                queues=["prove.old.cpu0"], device="cpu:0", ready=True,
                                version="0.0.9", code_digest="0123456789ab")
    registry.publish(here.redis, stale, ttl_s=5)
    text = status_text(here.runtime())
    line = next(l for l in text.splitlines() if "prove.old.cpu0.0" in l)
    assert "0.0.9+0123456789ab *" in line and "runs other code than this checkout" in text
    registry.leave(here.redis, stale.worker_id)
    assert "prove.old.cpu0.0" not in status_text(here.runtime())


def test_status_says_why_a_provers_mirror_was_not_written(here):
    """A prover whose .params mirror failed (mirror_progress -1) publishes the reason
    (key_mirror_errors: the H200's 64 GiB disk, 2026-12-05); `zkhive status` says it on the
    key's line; without a reason it points to the prover's log."""
    from cluster.pipeline import registry
    from cluster.user.commands import status_text

    why = ("/keys: the mirror of v28-porep.params needs 23.70 GB and 1.07 GB to spare "
           "(ZKHIVE_PARAMS_MIRROR_SPARE), the filesystem has 15.20 GB free: no mirror written")
    load = {"seconds": 41.1, "bytes": 47.4e9, "gbps": 1.15, "from_mirror": 0.0,
            "mirror_progress": -1.0}
    w = registry.WorkerInfo(worker_id="prove.disk.cuda0.0", role="prove", host="disk", pid=1,
                            queues=["prove.disk.0"], device="cuda:0", ready=True,
                            resident_keys=["filecoin-32g"], key_loads={"filecoin-32g": load},
                            key_mirror_errors={"filecoin-32g": why})
    registry.publish(here.redis, w, ttl_s=5)
    try:
        line = next(l for l in status_text(here.runtime()).splitlines()
                    if "prove.disk.cuda0.0 loaded the proving key of filecoin-32g" in l)
        assert line.endswith(f"; its mirror: writing failed: {why}"), line
        w.key_mirror_errors = {}
        registry.publish(here.redis, w, ttl_s=5)
        line = next(l for l in status_text(here.runtime()).splitlines()
                    if "prove.disk.cuda0.0 loaded the proving key of filecoin-32g" in l)
        assert line.endswith("; its mirror: writing failed (see the prover's log)"), line
        # a partial mirror (the disk had room for h, l and a): read through it, and written
        w.key_loads = {"filecoin-32g": dict(load, from_mirror=0.8, mirror_progress=1.0,
                                            mirror_share=0.8)}
        registry.publish(here.redis, w, ttl_s=5)
        line = next(l for l in status_text(here.runtime()).splitlines()
                    if "prove.disk.cuda0.0 loaded the proving key of filecoin-32g" in l)
        assert ("through its compressed mirror (80% of the points; the rest from the .params); "
                "its mirror written (80% of the points: the disk had room for no more)") in line, line
        w.key_loads = {"filecoin-32g": dict(load, from_mirror=1.0, mirror_progress=1.0,
                                            mirror_share=1.0)}
        registry.publish(here.redis, w, ttl_s=5)
        line = next(l for l in status_text(here.runtime()).splitlines()
                    if "prove.disk.cuda0.0 loaded the proving key of filecoin-32g" in l)
        assert line.endswith(" through its compressed mirror; its mirror written"), line
    finally:
        registry.leave(here.redis, w.worker_id)


def test_submit_task_for_flower_send_task(here):
    """Flower's POST /api/task/send-task/zkhive.submit does app.send_task with the JSON args."""
    from cluster.pipeline.app import app
    from cluster.client import Job

    doc = make_c1(SQUARES_A, seed=41)
    reply = app.send_task("zkhive.submit", args=[doc], kwargs={"job_id": "via-flower", "priority": "high"})
    assert reply.get(timeout=30) == {"job_id": "via-flower", "created": True, "num_partitions": 2}
    assert len(Job("via-flower").result(timeout=60).proof) == 384
    bad = app.send_task("zkhive.submit", args=[{"params": "nope"}])
    with pytest.raises(Exception, match="field params"):
        bad.get(timeout=30)
    # the message carried the C1 inline; the job's copy lives in the blob store, in Redis here
    rec = here.runtime().jobs.get("via-flower")
    assert rec.c1.store == "redis"


def test_partition_store_is_first_writer_wins(here):
    from cluster.pipeline.jobs import DONE, FAILED, RUNNING, JobStore

    js = JobStore(here.redis, ttl_s=60)
    won, doc = js.store_partition("fw", 0, b"\x01" * 192, worker="a")
    assert won and doc["worker"] == "a"
    won2, doc2 = js.store_partition("fw", 0, b"\x02" * 192, worker="b")
    assert not won2 and doc2["worker"] == "a" and doc2["proof"] == "01" * 192
    assert not js.discard_partition("fw", 0, {"proof": "02" * 192})  # not the stored one
    assert js.partition("fw", 0)["worker"] == "a"
    assert js.discard_partition("fw", 0, doc2) and js.partition("fw", 0) is None
    # job state moves once: a failure after completion changes nothing
    here.redis.hset("zkhive:job:fw:state", "status", RUNNING)
    assert js.transition("fw", DONE, (RUNNING,), finished_at=1)
    assert not js.fail("fw", "late failure")
    assert js.status("fw") == DONE and js.status("fw") != FAILED


def test_registry_entries_expire_and_device_locks_refuse_a_second_owner(here):
    from cluster.pipeline import registry

    info = registry.WorkerInfo(worker_id="synthesis.t.1", role="synthesis", host="t", pid=os.getpid(),
                               queues=["synthesis"])
    registry.publish(here.redis, info, ttl_s=0.3)
    assert [w.worker_id for w in registry.workers(here.redis, role="synthesis")].count("synthesis.t.1") == 1
    time.sleep(0.5)
    assert "synthesis.t.1" not in {w.worker_id for w in registry.workers(here.redis)}

    a = registry.DeviceLock(here.redis, "t", "cuda:7", 1, ttl_s=5, owner="A")
    b = registry.DeviceLock(here.redis, "t", "cuda:7", 1, ttl_s=5, owner="B")
    assert a.acquire() == 0 and a.refresh()
    with pytest.raises(registry.DeviceBusy, match=r"device cuda:7 on t is in use by A \(pid"):
        b.acquire()
    a.release()
    assert b.acquire() == 0
    assert not a.refresh()  # a released lock is not refreshed back into existence
    b.release()
    two = [registry.DeviceLock(here.redis, "t", "cuda:8", 2, ttl_s=5, owner=f"o{i}") for i in range(3)]
    assert [two[0].acquire(), two[1].acquire()] == [0, 1]
    with pytest.raises(registry.DeviceBusy, match="allows 2 prover"):
        two[2].acquire()


def test_flower_rest_send_task_submits_a_job(here, tmp_path):
    """A non-Python pipeline: POST /api/task/send-task/zkhive.submit on a real Flower."""
    import base64
    import urllib.error
    import urllib.request

    from cluster.client import Job
    from cluster.ops.redis_server import free_port
    from tests.conftest import ROOT

    port = free_port()
    log = open(tmp_path / "flower.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "cluster.pipeline.app", "flower", f"--port={port}",
                             "--address=127.0.0.1", "--basic-auth=pipeline:s3cret"],
                            cwd=ROOT, env={**here.env, **REDIS_BLOBS}, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": "Basic " + base64.b64encode(b"pipeline:s3cret").decode()}

    def call(path, body=None, headers=auth):
        req = urllib.request.Request(base + path, method="POST" if body is not None else "GET",
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **headers})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    try:
        end = time.monotonic() + 40
        while True:
            try:
                with urllib.request.urlopen(base + "/healthcheck", timeout=1) as resp:
                    if resp.read().strip() == b"OK":
                        break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < end, (tmp_path / "flower.log").read_text()[-2000:]
            time.sleep(0.2)
        doc = make_c1(SQUARES_B, seed=42)
        reply = call("/api/task/send-task/zkhive.submit", {"args": [doc], "kwargs": {"job_id": "flower-1"}})
        end = time.monotonic() + 60
        while here.runtime().jobs.get("flower-1") is None:  # send-task is asynchronous
            assert time.monotonic() < end, call(f"/api/task/result/{reply['task-id']}")
            time.sleep(0.1)
        res = Job("flower-1").result(timeout=60)
        assert len(res.proof) == 192 * SQUARES_B.num_partitions()
        got = call(f"/api/task/result/{reply['task-id']}")
        assert got["result"] == {"job_id": "flower-1", "created": True, "num_partitions": 2}
        with pytest.raises(urllib.error.HTTPError, match="401"):
            call("/api/task/send-task/zkhive.submit", {"args": [doc]}, headers={})
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()
