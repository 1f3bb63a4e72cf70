"""Many callers at once (issue 39): dispatch never waits on the broker pool for good.

Before the fix, 16 threads calling ``cluster.client.submit`` deadlocked: celery's chord took a
producer from the pool (10) and each chain in its header took a second while the first was held,
so with more threads than the pool every one held one and waited for another. Here many more
threads than the pool submit at once against a real Redis and real workers: every call returns
(a job, or a one-line refusal), no thread is left waiting, every job created is proved and
verified; a dispatch that cannot get a producer within its wait is refused, never hung."""
from __future__ import annotations

import threading
import time

import pytest

from circuits_for_tests import SQUARES_A, make_c1

pytestmark = [pytest.mark.integration]

THREADS = 32


def _submit_all(n: int, seed0: int, timeout_s: float = 90.0) -> tuple[list, list[threading.Thread]]:
    from cluster.client import submit

    out: list = [None] * n
    go = threading.Event()

    def one(i):
        go.wait()
        try:
            out[i] = submit(make_c1(SQUARES_A, seed=seed0 + i), job_id=f"many-{seed0 + i}")
        except Exception as e:  # noqa: BLE001 - every outcome is recorded and checked below
            out[i] = e

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    go.set()
    end = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    return out, [t for t in threads if t.is_alive()]


def test_more_client_threads_than_the_pool_all_return_and_their_jobs_verify(cluster, workers):
    from cluster.errors import JobError
    from cluster.pipeline.app import app

    cluster.setup_keys(SQUARES_A)
    assert THREADS > 2 * app.conf.broker_pool_limit  # enough to deadlock the nested acquire
    out, stuck = _submit_all(THREADS, 1000)
    assert stuck == [], f"{len(stuck)} of {THREADS} submit threads still waiting"
    jobs = [j for j in out if not isinstance(j, Exception)]
    refused = [e for e in out if isinstance(e, Exception)]
    assert all(isinstance(e, JobError) and len(str(e).splitlines()) == 1 for e in refused), refused
    assert len(jobs) >= THREADS // 2, refused  # refusals are for a pool taken too long, rare
    workers("synthesis")
    workers("prove", "cpu:0")
    workers("aggregate")
    for j in jobs:
        res = j.result(timeout=240)
        assert len(res.proof) == 192 * SQUARES_A.num_partitions()
    _verify(cluster, [j.job_id for j in jobs])


def test_a_dispatch_that_cannot_get_a_producer_is_refused_in_one_line_and_leaves_nothing(cluster):
    """Every producer of the pool held elsewhere: the submission waits its bounded time, then
    is refused as busy (the gateway's RESOURCE_EXHAUSTED), and no half-written job remains."""
    from cluster.client import submit
    from cluster.errors import DispatchBusy
    from cluster.pipeline import app as app_mod

    cluster.flush()
    cluster.configure_here()
    cluster.setup_keys(SQUARES_A)
    app = app_mod.app
    held = [app.producer_pool.acquire(block=True, timeout=5) for _ in range(app.conf.broker_pool_limit)]
    try:
        old, app_mod.DISPATCH_WAIT_S = app_mod.DISPATCH_WAIT_S, 0.5
        t0 = time.monotonic()
        with pytest.raises(DispatchBusy) as e:
            submit(make_c1(SQUARES_A, seed=5), job_id="busy-1")
        assert time.monotonic() - t0 < 5
    finally:
        app_mod.DISPATCH_WAIT_S = old
        for p in held:
            p.release()
    msg = str(e.value)
    assert "dispatch busy" in msg and "busy-1 not submitted" in msg and len(msg.splitlines()) == 1
    assert cluster.redis.get("zkhive:job:busy-1") is None
    # the pool given back, the same submission goes through
    assert submit(make_c1(SQUARES_A, seed=5), job_id="busy-1").created


def _verify(cluster, job_ids) -> None:
    from cluster.client import get_job
    from gpu.groth16 import Proof
    from gpu.groth16 import verify as groth16_verify

    rt = cluster.runtime()
    vk = rt.keys.load_vk(SQUARES_A)
    for job_id in job_ids:
        res = get_job(job_id).result(timeout=5)
        doc = make_c1(SQUARES_A, seed=int(job_id.rsplit("-", 1)[1]))
        c1 = SQUARES_A.parse_c1(doc)
        for k, proof in enumerate(res.partition_proofs()):
            assert groth16_verify(vk, SQUARES_A.public_inputs(c1, k), Proof.from_bytes(proof)), (job_id, k)


def test_a_full_gateway_refuses_with_resource_exhausted_and_still_answers_getstatus(cluster):
    """The gateway's lanes, on a real server over the test Redis (no workers: a job stays
    queued, so AwaitProof calls hold their threads as long as asked): ``threads - reserve``
    calls run, ``queue`` wait, the next is RESOURCE_EXHAUSTED at once in one line; GetStatus is
    answered all along; once the calls end, a submission goes through."""
    import json

    import grpc

    from cluster.gateway.pb import proving_pb2 as pb
    from cluster.gateway.pb import proving_pb2_grpc as pb_grpc
    from cluster.gateway.server import build
    from cluster.ops.supervisor import free_port

    cluster.flush()
    cluster.configure_here()
    cluster.setup_keys(SQUARES_A)
    rt = cluster.runtime()
    g = rt.settings.gateway.model_copy(update={"threads": 6, "queue": 2, "address": "127.0.0.1", "port": free_port(), "token": None,
                                               "token_file": None})
    server, port = build(rt.settings.model_copy(update={"gateway": g}), rt)
    server.start()
    lanes = server.zkhive_lanes
    assert (lanes.cap, lanes.queue) == (5, 2)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.ProvingEngineStub(channel)

    def sub(i):
        return pb.SubmitProofRequest(request_id=f"lane-{i}", proof_kind=pb.POREP_SEAL_COMMIT,
                                     vanilla_proof=json.dumps(make_c1(SQUARES_A, seed=300 + i)).encode())
    try:
        job = stub.SubmitProof(sub(0), timeout=30).job_id  # nobody proves it: it stays queued
        holding = [stub.AwaitProof.future(pb.AwaitProofRequest(job_id=job, timeout_ms=6000), timeout=30)
                   for _ in range(lanes.cap + lanes.queue)]
        assert _until(lambda: lanes.in_progress == lanes.cap + lanes.queue, 10), lanes.in_progress
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as e:
            stub.SubmitProof(sub(1), timeout=10)
        assert time.monotonic() - t0 < 2  # refused at once, not queued
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert e.value.details() == ("gateway busy: 5 calls in progress and 2 waiting "
                                     "(gateway.threads, gateway.queue); retry")
        assert cluster.redis.get("zkhive:job:lane-1") is None
        t0 = time.monotonic()
        st = stub.GetStatus(pb.GetStatusRequest(), timeout=5)  # the reserve answers
        assert st.queues[0].pending == 1 and time.monotonic() - t0 < 2
        assert all(f.result().status == pb.AwaitProofResponse.TIMEOUT for f in holding)
        assert _until(lambda: lanes.in_progress == 0, 10)
        assert stub.SubmitProof(sub(1), timeout=30).job_id == "lane-1"  # room again
        assert lanes.refused == 1
    finally:
        channel.close()
        server.stop(0).wait()
        server.zkhive_servicer._board.close()


def _until(cond, timeout_s, every=0.05):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(every)
    return False


def test_a_submission_subscribes_to_nothing_and_a_dropped_chord_never_blocks_a_thread(cluster, tmp_path):
    """zkhive never waits on a Celery result, so a sending thread subscribes to no result channel
    (cluster.pipeline.app.ResultStore). Before, the chord's results dropped after their Redis
    was gone made the garbage collector's unsubscribe retry that Redis for 20 s under the result
    consumer's lock, in whichever thread it ran: a submitting thread hung 80 s in CI. Here the
    collection runs after the job's Redis is stopped and must be immediate."""
    import gc

    from cluster.client import submit
    from cluster.ops.redis_server import RedisServer
    from cluster.pipeline.app import app

    cluster.setup_keys(SQUARES_A)
    srv = RedisServer(password=cluster.password, data_dir=tmp_path / "redis").start()
    gc.disable()  # the chord's results form cycles: kept for the collection below
    try:
        cluster.configure_here(ZKHIVE_REDIS__URL=srv.url, ZKHIVE_BLOBS__BACKEND="redis")
        seen = {}

        def one():
            job = submit(make_c1(SQUARES_A, seed=77), job_id="no-subscribe-1")
            consumer = app.backend.result_consumer
            seen.update(created=job.created, subscribed=set(consumer.subscribed_to),
                        pubsub=consumer._pubsub)

        t = threading.Thread(target=one, daemon=True)
        t.start()
        t.join(60)
        assert seen["created"] and seen["subscribed"] == set() and seen["pubsub"] is None, seen
    finally:
        srv.stop()
        cluster.configure_here()
        gc.enable()
    collector = threading.Thread(target=gc.collect, daemon=True)
    t0 = time.monotonic()
    collector.start()
    collector.join(15)
    assert not collector.is_alive() and time.monotonic() - t0 < 5, "dropping a chord's results waited on its Redis"


def test_an_explicit_wait_on_a_task_result_still_gets_it(cluster, workers):
    """What ResultStore keeps: a caller that does wait on a Celery result (Flower's task/result
    API, ``AsyncResult.get``) subscribes then and gets it, whether the task ended before the wait
    or during it."""
    from cluster.pipeline.app import app

    cluster.setup_keys(SQUARES_A)
    early = app.send_task("zkhive.submit", args=[make_c1(SQUARES_A, seed=91)], kwargs={"job_id": "wait-1"})
    workers("aggregate")  # runs zkhive.submit; the first task has ended before its wait below
    assert _until(lambda: early.state == "SUCCESS", 60), early.state
    assert early.get(timeout=30)["job_id"] == "wait-1"
    late = app.send_task("zkhive.submit", args=[make_c1(SQUARES_A, seed=92)], kwargs={"job_id": "wait-2"})
    assert late.get(timeout=60) == {"job_id": "wait-2", "created": True, "num_partitions": SQUARES_A.num_partitions()}


def test_queue_position_and_getstatus_come_from_the_status_board(cluster):
    """A real gateway over the test Redis, no workers (jobs stay queued): each SubmitProof's
    queue_position counts the queued jobs served before it (priority, then submission time), as
    the status board last read them; GetStatus answers from that board's thread, not per call."""
    import json

    import grpc

    from cluster.gateway.pb import proving_pb2 as pb
    from cluster.gateway.pb import proving_pb2_grpc as pb_grpc
    from cluster.gateway.server import build
    from cluster.gateway.status import EVERY_S
    from cluster.ops.supervisor import free_port

    cluster.flush()
    cluster.configure_here()
    cluster.setup_keys(SQUARES_A)
    rt = cluster.runtime()
    g = rt.settings.gateway.model_copy(update={"address": "127.0.0.1", "port": free_port(), "token": None,
                                               "token_file": None})
    server, port = build(rt.settings.model_copy(update={"gateway": g}), rt)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.ProvingEngineStub(channel)
    try:
        positions = {}
        for i, prio in enumerate([pb.NORMAL, pb.NORMAL, pb.CRITICAL, pb.LOW, pb.HIGH]):
            req = pb.SubmitProofRequest(request_id=f"pos-{i}", proof_kind=pb.POREP_SEAL_COMMIT, priority=prio,
                                        vanilla_proof=json.dumps(make_c1(SQUARES_A, seed=400 + i)).encode())
            positions[i] = stub.SubmitProof(req, timeout=30).queue_position
            time.sleep(3 * EVERY_S)  # the board has read it before the next one
        # normal, normal (after the first), critical (first of all), low (last), high (after critical)
        assert positions == {0: 0, 1: 1, 2: 0, 3: 3, 4: 1}, positions
        board = server.zkhive_servicer._board
        made = board.made
        sts = [stub.GetStatus(pb.GetStatusRequest(), timeout=5) for _ in range(40)]
        assert all(st.queues[0].pending == 5 for st in sts)
        assert board.made - made < 40 and board.computed_by_caller == 0
    finally:
        channel.close()
        server.stop(0).wait()
        server.zkhive_servicer._board.close()
