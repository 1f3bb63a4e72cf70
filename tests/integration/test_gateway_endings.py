"""AwaitProof woken by its job's ending (cluster/gateway/endings.py, issue 37), on the session's
real Redis with real workers: with the poll set to a minute, a call still returns as soon as the
aggregate worker (another process) finishes the job, and a failure ends a waiting call too; an
ending wakes only the calls waiting for that job."""
from __future__ import annotations

import threading
import time

import pytest

from circuits_for_tests import SQUARES_A, make_c1

pytestmark = pytest.mark.integration

#: a call that relied on its poll would wait this long
POLL = 60.0


def _await_in_thread(engine, job_id):
    got: list = []
    t = threading.Thread(target=lambda: got.append(engine._await(job_id, 0, None)), daemon=True)
    t.start()
    return t, got


def test_await_proof_returns_when_the_job_ends_not_at_its_poll(cluster, workers, monkeypatch):
    from cluster.client import submit
    from cluster.gateway import service
    from cluster.gateway.pb import proving_pb2 as pb
    from gpu.groth16 import Proof, verify

    monkeypatch.setattr(service, "POLL_S", POLL)
    monkeypatch.setattr(service, "POLL_CRITICAL_S", POLL)
    cluster.setup_keys(SQUARES_A)
    rt = cluster.runtime()
    engine = service.ProvingEngine(rt)
    try:
        # no worker yet: the job stays queued and the call waits, then a failure ends it
        submit(make_c1(SQUARES_A, seed=71), job_id="endings-failed")
        t, got = _await_in_thread(engine, "endings-failed")
        assert engine._endings.subscribed.wait(10)
        time.sleep(0.5)
        assert t.is_alive() and not got
        assert rt.jobs.fail("endings-failed", "partition 0: ended by the test")
        t.join(POLL / 3)
        assert not t.is_alive(), "AwaitProof was not woken by the job's failure"
        assert got[0].status == pb.AwaitProofResponse.FAILED and "ended by the test" in got[0].error_message

        # proved by the workers: the aggregate worker's process publishes the ending
        workers("aggregate"), workers("synthesis"), workers("prove", "cpu:0")
        doc = make_c1(SQUARES_A, seed=72)
        submit(doc, job_id="endings-done")
        t, got = _await_in_thread(engine, "endings-done")
        t.join(POLL * 0.75)
        assert not t.is_alive(), "AwaitProof was not woken by the job's completion"
        res = got[0]
        assert res.status == pb.AwaitProofResponse.COMPLETED, res.error_message
        c1 = SQUARES_A.parse_c1(doc)
        vk = rt.keys.load_vk(SQUARES_A)
        proofs = [Proof.from_bytes(res.proof[192 * k:192 * (k + 1)]) for k in range(SQUARES_A.num_partitions())]
        assert all(verify(vk, SQUARES_A.public_inputs(c1, k), p) for k, p in enumerate(proofs))
    finally:
        engine._endings.close()
        engine._board.close()


def test_an_ending_wakes_only_the_calls_waiting_for_that_job(cluster):
    from cluster.gateway.endings import Endings
    from cluster.pipeline.jobs import ENDED

    cluster.flush()
    endings = Endings(cluster.redis)
    try:
        with endings.watch("job-a") as a, endings.watch("job-b") as b, endings.watch("job-a") as a2:
            assert endings.subscribed.wait(10)
            cluster.redis.publish(ENDED, "job-a")
            assert a.wait(10) and a2.wait(10)
            assert not b.wait(0.3)
        assert endings._waiters == {}  # every watch left
    finally:
        endings.close()


def test_the_subscription_comes_back_after_a_redis_restart(cluster, tmp_path):
    """Redis stopped under the subscription and started again on its port: the thread subscribes
    again and an ending published after that wakes the call (meanwhile the calls poll)."""
    from cluster.gateway.endings import Endings
    from cluster.ops.redis_server import RedisServer
    from cluster.pipeline.jobs import ENDED

    srv = RedisServer(password=cluster.password, data_dir=tmp_path / "redis").start()
    endings = Endings(srv.client())
    try:
        with endings.watch("job-r") as ended:
            assert endings.subscribed.wait(10)
            srv.stop()
            end = time.monotonic() + 10
            while endings.subscribed.is_set() and time.monotonic() < end:
                time.sleep(0.05)
            assert not endings.subscribed.is_set()  # it saw the loss
            srv = RedisServer(port=srv.port, password=cluster.password, data_dir=tmp_path / "redis").start()
            assert endings.subscribed.wait(20), "the subscription did not come back"
            srv.client().publish(ENDED, "job-r")
            assert ended.wait(10)
    finally:
        endings.close()
        srv.stop()
