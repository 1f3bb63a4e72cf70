"""What Celery (and so Flower) records about our tasks, on real workers: a running prove is
STARTED, a partition whose C1 is bad is FAILURE with the job's whole message and no traceback
into our code, and the prove and synthesis workers' task events reach an event receiver over
the broker and a real Flower, whose task API shows the same states."""
from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from circuits_for_tests import SQUARES_A, SQUARES_SLOW, make_c1

pytestmark = pytest.mark.integration


def wait_for(predicate, timeout_s=30.0, what="condition", poll_s=0.01):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


class Events:
    """Task events from the broker, received as Flower receives them (celery.events.Receiver)."""

    def __init__(self, app):
        self.app, self.seen, self._recv = app, [], None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        with self.app.connection_for_read() as conn:
            self._recv = self.app.events.Receiver(conn, handlers={"*": self.seen.append})
            self._recv.capture(limit=None, timeout=None, wakeup=True)

    def __enter__(self):
        self._thread.start()
        wait_for(lambda: self._recv is not None, what="the event receiver")
        time.sleep(0.5)  # the receiver's queue is bound
        return self

    def __exit__(self, *exc):
        self._recv.should_stop = True
        self._thread.join(5)

    def of(self, uuid, kind=None):
        return [e for e in self.seen if e.get("uuid") == uuid and (kind is None or e["type"] == kind)]


class Flower:
    """A real Flower (``celery -A cluster.pipeline.app flower``) and its task API."""

    def __init__(self, cluster, log_path):
        from cluster.ops.redis_server import free_port
        from tests.conftest import ROOT

        self.base = f"http://127.0.0.1:{free_port()}"
        self._log = open(log_path, "wb")
        self.log_path = log_path
        # `zkhive flower`, as `up` runs it (its request bounds and its Terminate handling)
        self.proc = subprocess.Popen([sys.executable, "-m", "cluster", "flower"], cwd=ROOT,
                                     env={**cluster.env, "ZKHIVE_FLOWER__PORT": self.base.rsplit(":", 1)[1],
                                          "ZKHIVE_FLOWER__ADDRESS": "127.0.0.1", "ZKHIVE_FLOWER__USER": "ops",
                                          "ZKHIVE_FLOWER__PASSWORD": "pw"},
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self.auth = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}

    def get(self, path):
        req = urllib.request.Request(self.base + path, headers=self.auth)
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    def post(self, path):
        req = urllib.request.Request(self.base + path, headers=self.auth, data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def wait_up(self):
        def up():
            assert self.proc.poll() is None, self.log_path.read_text()[-2000:]
            try:
                with urllib.request.urlopen(self.base + "/healthcheck", timeout=1) as resp:
                    return resp.read().strip() == b"OK"
            except OSError:
                return False
        wait_for(up, 40, "Flower", poll_s=0.2)
        time.sleep(1.0)  # its event receiver is bound

    def task(self, uuid):
        try:
            return self.get(f"/api/task/info/{uuid}")
        except urllib.error.HTTPError:
            return None

    def stop(self):
        self.proc.terminate()
        self.proc.wait(20)
        self._log.close()


def timeline_events(cluster, job_id, kind):
    from cluster.pipeline import timeline
    return [e for e in timeline.load(cluster.redis, job_id) if e["event"] == kind]


def test_celery_states_started_during_a_prove_and_failure_for_a_bad_c1(cluster, workers, ready, tmp_path):
    from cluster.pipeline.app import app
    from cluster.client import JobFailed, submit
    from cluster.errors import JobFailed as TaskJobFailed

    cluster.setup_keys(SQUARES_A, SQUARES_SLOW)
    procs = [workers("synthesis", wait=False), workers("aggregate", wait=False),
             workers("prove", "cpu:0", wait=False,
                     ZKHIVE_SRS__PRELOAD=json.dumps([SQUARES_A.name, SQUARES_SLOW.name]))]
    syn, _, prover_info = ready(*procs)
    prover = procs[2]
    flower = Flower(cluster, tmp_path / "flower.log")
    try:
        flower.wait_up()
        _states(cluster, app, flower, syn, prover, prover_info, JobFailed, submit, TaskJobFailed)
        # Flower's Terminate on a running prove cancels its job, as `zkhive cancel` would, and says so
        since = time.time()
        job = submit(make_c1(SQUARES_SLOW, seed=61), job_id="states-terminate")
        pickup = wait_for(lambda: next((e for e in timeline_events(cluster, "states-terminate", "prove_pickup")
                                        if e["t"] >= since), None), what="a prove picked up")
        prover.signal(signal.SIGSTOP)  # hold the prove (0.2 s) in hand: its lease stays live ~5 s
        try:
            answer = flower.post(f"/api/task/revoke/{pickup['task_id']}?terminate=true")
        finally:
            prover.signal(signal.SIGCONT)
        assert answer["message"].startswith(f"Cancelled job states-terminate (task '{pickup['task_id']}' was "
                                            f"running its unit {pickup['partition']}): as `zkhive cancel "
                                            f"states-terminate`"), answer
        assert wait_for(lambda: job.status()["status"] == "cancelled", what="the job cancelled")
        # a task that holds no unit is revoked as before
        other = flower.post("/api/task/revoke/00000000-0000-0000-0000-000000000000?terminate=true")
        assert other["message"] == "Revoked '00000000-0000-0000-0000-000000000000'"
    finally:
        flower.stop()
    # the bad job's chord failure is one WARNING line in a worker's log, not an ERROR traceback
    logs = "\n".join(p.log_text() for p in procs)
    assert not [line for line in logs.splitlines() if "ERROR" in line and "Chord" in line], logs[-3000:]
    assert "ChordError" not in "\n".join(line for line in logs.splitlines() if "Traceback" in line)
    assert any("WARNING" in line and "not run: its job failed" in line for line in logs.splitlines()), logs[-3000:]


def _states(cluster, app, flower, syn, prover, prover_info, JobFailed, submit, TaskJobFailed):
    with Events(app) as ev:
        # a prove in progress: frozen right after its pickup, Celery says STARTED
        job = submit(make_c1(SQUARES_SLOW, seed=50), job_id="states-good")
        pickup = wait_for(lambda: timeline_events(cluster, "states-good", "prove_pickup"), what="a pickup",
                          poll_s=0.002)[0]
        prover.signal(signal.SIGSTOP)
        try:
            task = app.AsyncResult(pickup["task_id"])
            assert task.state == "STARTED"
            started = wait_for(lambda: ev.of(pickup["task_id"], "task-started"), what="task-started")
            assert started[0]["hostname"] == prover_info.nodename
            # and Flower, from the same events, shows it running on the prover
            seen = wait_for(lambda: (t := flower.task(pickup["task_id"])) and t["state"] == "STARTED" and t,
                            what="Flower showing the prove STARTED")
            assert seen["worker"] == prover_info.nodename
        finally:
            prover.signal(signal.SIGCONT)
        job.result(timeout=60)
        assert app.AsyncResult(pickup["task_id"]).state == "SUCCESS"

        # a bad C1: the partition's synthesis is FAILURE, with the whole message
        with pytest.raises(JobFailed) as failed:
            submit(make_c1(SQUARES_A, seed=51, bad_y_partition=1), job_id="states-bad").result(timeout=60)
        [start] = [e for e in timeline_events(cluster, "states-bad", "synthesis_start") if e["partition"] == 1]
        bad = app.AsyncResult(start["task_id"])
        wait_for(lambda: bad.state == "FAILURE", what="FAILURE of the bad partition")
        assert isinstance(bad.result, TaskJobFailed) and bad.result.error == failed.value.error
        assert failed.value.error == "bad C1 input: partition 1; field partitions[1].y: is not x^(2^8)"
        # the traceback ends at the task boundary: nothing of the code that found the bad input
        assert "circuits_for_tests" not in bad.traceback and "synthesis/" not in bad.traceback
        event = wait_for(lambda: ev.of(start["task_id"], "task-failed"), what="task-failed")[0]
        assert event["hostname"] == syn.nodename and failed.value.error in event["exception"]
        shown = wait_for(lambda: (t := flower.task(start["task_id"])) and t["state"] == "FAILURE" and t,
                         what="Flower showing the bad partition FAILURE")
        assert shown["worker"] == syn.nodename and failed.value.error in shown["exception"]
        # the job's chord body (the aggregation) never ran: Celery marks it FAILURE with a
        # ChordError that carries the partition's JobFailed
        def body_failure():
            for key in cluster.redis.scan_iter(match="celery-task-meta-*"):
                meta = json.loads(cluster.redis.get(key))
                res = meta.get("result") or {}
                if meta.get("status") == "FAILURE" and isinstance(res, dict) and \
                        res.get("exc_type") == "ChordError" and failed.value.error in str(res.get("exc_message")):
                    return meta
        assert wait_for(body_failure, what="the chord body's FAILURE")
        # the good partition of the same job is a success, not a failure
        [ok] = [e for e in timeline_events(cluster, "states-bad", "synthesis_start") if e["partition"] == 0]
        assert app.AsyncResult(ok["task_id"]).state == "SUCCESS"
    hosts = {e.get("hostname") for e in ev.seen if e["type"].startswith("task-")}
    assert {syn.nodename, prover_info.nodename} <= hosts, hosts
    failures = flower.get("/api/tasks?state=FAILURE")
    assert start["task_id"] in failures and pickup["task_id"] not in failures
