"""Leases and reconciliation over the stub runtime (cluster.pipeline.lease, cluster.pipeline.reconcile): a lapsed
lease re-dispatched, a live one left alone, a message lost in the hand-over found after the
grace, duplicates that are not crashes, crashes that are bounded, the aggregation's lease, and a
corrupt verifying key that fails the job at once. The same against real workers:
tests/integration/test_faults_cluster.py."""
from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from circuits_for_tests import SQUARES_A, make_c1  # noqa: E402
from cluster.pipeline.keys import KeyCache  # noqa: E402
from cluster.pipeline.lease import Leases  # noqa: E402

from .stub_runtime import StubCluster  # noqa: E402
from .test_task_bodies import key_dir, submit, verify_job  # noqa: E402,F401


@pytest.fixture
def stub(key_dir):  # noqa: F811
    s = StubCluster(key_dir, reconcile_grace_s=0.2)
    s.add_prover("cpu:0")
    return s


def lapse(stub, job_id, k, stage, **holder):
    """A lease taken by a worker that then died: it lapses at once."""
    held = Leases(stub.redis, 0.02, 3600).acquire(job_id, k, stage, **holder)
    assert held.taken
    time.sleep(0.05)
    return held


def inspect(stub, job_id):
    from cluster.pipeline.watchdog import inspect_job
    return inspect_job(stub.aggregator, job_id)


# -- the lease itself --------------------------------------------------------------------------------

def test_a_live_lease_keeps_others_off_and_a_lapsed_one_is_taken(stub):
    leases = stub.leases
    a = leases.acquire("j", 0, "prove", worker="a")
    assert a.taken and a.crashes == 0
    b = leases.acquire("j", 0, "prove", worker="b")
    assert not b.taken and b.lease.worker == "a"          # live: b is a duplicate
    assert leases.renew("j", a.lease) and not leases.renew("j", replace(a.lease, token="another"))
    assert leases.release("j", a.lease)
    c = leases.acquire("j", 0, "prove", worker="c")
    assert c.taken and c.crashes == 0                      # a's attempt was closed
    short = Leases(stub.redis, 0.02, 3600)
    leases.release("j", c.lease)
    dead = short.acquire("j", 0, "prove", worker="dead")
    time.sleep(0.05)
    d = leases.acquire("j", 0, "prove", worker="d")
    assert d.taken and d.crashes == 1                      # dead never closed its attempt
    assert not leases.renew("j", dead.lease)               # the dead holder cannot come back


def test_the_renewal_thread_keeps_a_long_task_leased(stub):
    leases = Leases(stub.redis, 0.3, 3600)
    with leases.hold("j", 1, "synthesis", worker="w") as held:
        assert held.taken
        time.sleep(1.0)                                    # > 3 TTLs
        assert leases.get("j", 1).expires_at > time.time() and not held.lost.is_set()
    assert leases.get("j", 1) is None                      # released at the end


# -- reconciliation ---------------------------------------------------------------------------------

def test_a_unit_with_a_live_lease_is_left_alone(stub):
    submit(stub, make_c1(SQUARES_A, seed=40), "busy")
    assert stub.step(1) == 1
    msg = next(m for m in stub.queue if m.name == "synthesize")
    stub.queue.remove(msg)  # taken by a worker that is alive and renewing
    stub.leases.acquire("busy", msg.partition(), "synthesis", worker="synthesis.stub.2")
    assert inspect(stub, "busy") == []
    time.sleep(0.3)
    assert inspect(stub, "busy") == []
    assert not stub.events("busy", "redispatched")


def test_a_lapsed_synthesis_lease_is_resynthesized(stub):
    doc = make_c1(SQUARES_A, seed=41)
    submit(stub, doc, "syn-lost")
    msg = next(m for m in stub.queue if m.name == "synthesize" and m.partition() == 1)
    stub.queue.remove(msg)  # the synthesis worker took it and was killed mid-task
    lapse(stub, "syn-lost", 1, "synthesis", worker="synthesis.stub.9", task_id=msg.task_id)
    assert inspect(stub, "syn-lost") == ["redispatch 1"]
    [ev] = stub.events("syn-lost", "redispatched")
    assert ev["resynthesize"] is True and ev["exclude"] == [] and "synthesis.stub.9 (synthesis" in ev["reason"]
    stub.drain()
    verify_job(stub, SQUARES_A, doc, "syn-lost")


def test_a_message_lost_in_the_hand_over_is_found_after_the_grace(stub):
    doc = make_c1(SQUARES_A, seed=42)
    submit(stub, doc, "handover")
    assert stub.step(2) == 2
    msg = next(m for m in stub.queue if m.name == "prove" and m.partition() == 0)
    stub.queue.remove(msg)  # popped by a prover that died before recording it: nowhere now
    assert inspect(stub, "handover") == []                 # first seen unaccounted
    time.sleep(0.25)
    assert inspect(stub, "handover") == ["redispatch 0"]
    [un] = stub.events("handover", "unaccounted")
    assert un["partition"] == 0 and "lost in the hand-over" in un["detail"]
    [ev] = stub.events("handover", "redispatched")
    assert ev["resynthesize"] is False and ev["waited_s"] >= 0.2
    stub.drain()
    verify_job(stub, SQUARES_A, doc, "handover")
    assert len(stub.events("handover", "prove_end", 0)) == 1


def test_a_unit_seen_queued_again_within_the_grace_is_not_redispatched(stub):
    submit(stub, make_c1(SQUARES_A, seed=43), "blink")
    assert stub.step(2) == 2
    msg = next(m for m in stub.queue if m.name == "prove" and m.partition() == 0)
    stub.queue.remove(msg)
    assert inspect(stub, "blink") == []                    # unaccounted for a moment...
    stub.queue.append(msg)                                 # ...then queued (the chain's next message)
    assert inspect(stub, "blink") == []
    time.sleep(0.25)
    assert inspect(stub, "blink") == []                    # the clock started again
    assert not stub.events("blink", "redispatched")


def test_every_partition_proved_but_the_aggregation_lost_or_lapsed(stub):
    doc = make_c1(SQUARES_A, seed=44)
    submit(stub, doc, "agg")
    stub.drain()
    assert stub.jobs.status("agg") == "done"
    # again, with the chord body lost and then an aggregation killed mid-way
    doc2 = make_c1(SQUARES_A, seed=45)
    submit(stub, doc2, "agg2")
    stub.step(4)
    [body] = [m for m in stub.queue if m.name == "aggregate"]
    stub.queue.remove(body)
    lapse(stub, "agg2", None, "aggregate", worker="aggregate.stub.9")
    assert inspect(stub, "agg2") == ["aggregate"]
    [lapsed] = stub.events("agg2", "lease_lapsed")
    assert lapsed["stage"] == "aggregate" and lapsed["partition"] is None
    stub.drain()
    verify_job(stub, SQUARES_A, doc2, "agg2")


# -- duplicates and crashes ----------------------------------------------------------------------------

def test_one_message_queued_five_times_is_not_a_failure(stub):
    """The issue's case: delivery.max_redeliveries=3 and one synthesis message five times."""
    doc = make_c1(SQUARES_A, seed=46)
    submit(stub, doc, "five")
    first = next(m for m in stub.queue if m.name == "synthesize" and m.partition() == 0)
    for _ in range(4):
        stub.send(type(first)(first.name, first.args, dict(first.kwargs), first.queue, task_id=first.task_id,
                              chord=first.chord, then=type(first)("prove", ("five", 0), {}, "", chord="five")))
    stub.drain()
    assert not stub.failures()
    verify_job(stub, SQUARES_A, doc, "five")
    dups = stub.events("five", "duplicate", 0)
    assert len(dups) >= 4 and len(stub.events("five", "prove_end", 0)) == 1
    assert not stub.events("five", "redelivered")


def test_a_duplicate_prove_while_another_worker_holds_the_lease_skips(stub):
    submit(stub, make_c1(SQUARES_A, seed=47), "held")
    assert stub.step(2) == 2
    stub.leases.acquire("held", 0, "prove", worker="prove.stub.cpu7.0", device="cpu:7")
    msg = next(m for m in stub.queue if m.name == "prove" and m.partition() == 0)
    stub.queue.remove(msg)
    out = stub.deliver(msg)
    assert out["duplicate"] and "prove.stub.cpu7.0" in out["skipped"]
    assert stub.jobs.partition("held", 0) is None
    [dup] = stub.events("held", "duplicate", 0)
    assert dup["reason"].startswith("leased by prove.stub.cpu7.0")


@pytest.mark.parametrize("crashes, fails", [(3, False), (4, True)])
def test_attempts_whose_workers_died_are_bounded(key_dir, crashes, fails):  # noqa: F811
    from cluster.errors import JobFailed

    stub = StubCluster(key_dir, max_redeliveries=3)
    stub.add_prover("cpu:0")
    doc = make_c1(SQUARES_A, seed=48)
    submit(stub, doc, "poison")
    for i in range(crashes):  # a message that killed every worker it reached
        lapse(stub, "poison", 0, "synthesis", worker=f"synthesis.stub.{i}")
    stub.drain()
    if fails:
        [err] = stub.failures()
        assert isinstance(err, JobFailed)
        assert err.error == ("partition 0: 4 attempts ended with their worker dead (task "
                             f"{stub.log[0][0].task_id}, delivery.max_redeliveries=3); its workers keep dying")
    else:
        assert not stub.failures()
        verify_job(stub, SQUARES_A, doc, "poison")
        assert [e["delivery"] for e in stub.events("poison", "redelivered", 0)] == [4]


# -- the verifying key ----------------------------------------------------------------------------------

def test_a_corrupt_verifying_key_on_the_aggregate_worker_fails_the_job_at_once(stub, key_dir, tmp_path):  # noqa: F811
    import shutil

    bad = tmp_path / "bad-keys"
    shutil.copytree(key_dir, bad)
    vk = KeyCache(bad).path(SQUARES_A, "vk")
    raw = bytearray(vk.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    vk.write_bytes(bytes(raw))
    stub.aggregator.keys = KeyCache(bad)
    submit(stub, make_c1(SQUARES_A, seed=49), "badvk")
    stub.drain()
    [err] = stub.failures()
    assert err.error.startswith("cannot verify: unreadable key: ") and str(vk) in err.error, err.error
    assert stub.jobs.status("badvk") == "failed"
    assert not stub.events("badvk", "verify_failed")       # no partition was blamed or re-proved


def test_a_job_whose_submitter_died_before_sending_its_chord_is_dispatched(stub):
    """The record written, the chord never sent (the client died in between): every partition
    is unaccounted, so the reconciler sends them; the deadline is not needed."""
    import time as _time

    from cluster.pipeline.jobs import JobRecord
    from cluster.pipeline.workflow import canonical_c1

    doc = make_c1(SQUARES_A, seed=50)
    now = _time.time()
    ref = stub.blobs.put(canonical_c1(doc), kind="c1")
    rec = JobRecord(job_id="orphan", params=SQUARES_A.name, circuit_digest=SQUARES_A.digest(),
                    num_partitions=2, priority=6, c1=ref, submitted_at=now, deadline_at=now + 3600)
    assert stub.jobs.create(rec) and not stub.queue
    assert inspect(stub, "orphan") == []
    time.sleep(0.25)
    assert inspect(stub, "orphan") == ["redispatch 0", "redispatch 1"]
    stub.drain()
    verify_job(stub, SQUARES_A, doc, "orphan")


def test_final_writes_wait_for_redis_within_a_bound():
    import redis

    from cluster.pipeline.lease import durable

    calls = []

    def flaky():
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise redis.BusyLoadingError("Redis is loading the dataset in memory")
        return "stored"

    assert durable(flaky, "store", budget_s=5, first_delay_s=0.01) == "stored" and len(calls) == 3

    def down():
        raise redis.ConnectionError("Connection refused")

    t = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        durable(down, "store", budget_s=0.3, first_delay_s=0.05)
    assert time.monotonic() - t < 1.0

    def bug():
        raise ValueError("not a Redis error")

    with pytest.raises(ValueError):  # only Redis being away is waited for
        durable(bug, "store", budget_s=5)
