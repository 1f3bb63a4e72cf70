"""Delivery faults on a real Redis with real worker processes: a prove message delivered twice,
a prover killed (SIGKILL) or stopped (SIGTERM) mid-prove, a second worker on a locked device,
proofs that do not verify, a prover that fails, priorities, and the job deadline."""
from __future__ import annotations

import base64
import json
import re
import signal
import time
import uuid

import pytest

from circuits_for_tests import SQUARES_A, SQUARES_B, SQUARES_SLOW, make_c1

pytestmark = pytest.mark.integration


def preload(circuit) -> dict:
    return {"ZKHIVE_SRS__PRELOAD": json.dumps([circuit.name])}


def wait_for(predicate, timeout_s: float = 30.0, what: str = "condition", poll_s: float = 0.005):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def events(cluster, job_id, kind=None, partition=None):
    from cluster.pipeline import timeline

    return [e for e in timeline.load(cluster.redis, job_id)
            if (kind is None or e["event"] == kind) and (partition is None or e.get("partition") == partition)]


def check_proof(cluster, circuit, doc, res):
    from gpu.groth16 import Proof, verify

    vk = cluster.runtime().keys.load_vk(circuit)
    c1 = circuit.parse_c1(doc)
    assert len(res.proof) == 192 * circuit.num_partitions()
    for k, raw in enumerate(res.partition_proofs()):
        assert verify(vk, circuit.public_inputs(c1, k), Proof.from_bytes(raw)), f"partition {k}"


def control(cluster, action: str, queue: str, node: str) -> None:
    from cluster.pipeline.app import app

    fn = app.control.cancel_consumer if action == "pause" else app.control.add_consumer
    replies = fn(queue, destination=[node], reply=True, timeout=5)
    assert replies, f"{node} did not answer {action} of {queue}"


def test_duplicate_delivery_keeps_the_first_proof_and_the_early_body_waits(cluster, workers, ready):
    """Item 5: a prove message for partition 0 delivered three times (as a visibility-timeout
    redelivery does, and once under a new task id, which Celery's chord counter counts as another
    header result) before partition 1: the body fires with partition 1 missing and must wait."""
    from cluster.pipeline.queues import queue_depth

    cluster.setup_keys(SQUARES_A)
    _, _, prover = ready(workers("synthesis", wait=False), workers("aggregate", wait=False),
                         workers("prove", "cpu:0", wait=False, **preload(SQUARES_A)))
    queue = prover.queues[0]
    control(cluster, "pause", queue, prover.nodename)
    doc = make_c1(SQUARES_A, seed=11)
    job = cluster_submit(doc, "dup-exec")
    wait_for(lambda: queue_depth(cluster.redis, queue) == 2, what="both prove messages queued")
    lists = [k for k in cluster.redis.scan_iter(match=f"{queue}*") if cluster.redis.type(k) == b"list"]
    assert len(lists) == 1, lists
    raw = cluster.redis.lrange(lists[0], 0, -1)
    # data travels out of band: a prove message is a reference, not an assignment
    assert all(len(m) < 4096 for m in raw), [len(m) for m in raw]
    by_part = {}
    for m in raw:
        msg = json.loads(m)
        args = json.loads(base64.b64decode(msg["body"]))[0]
        by_part[args[2]] = msg
    assert sorted(by_part) == [0, 1]
    again = json.loads(json.dumps(by_part[0]))  # the same message, as Redis restores it
    renamed = json.loads(json.dumps(by_part[0]))
    new_id = str(uuid.uuid4())
    renamed["headers"]["id"] = renamed["headers"]["root_id"] = new_id
    renamed["properties"]["correlation_id"] = new_id
    renamed["properties"]["delivery_tag"] = str(uuid.uuid4())
    again["properties"]["delivery_tag"] = str(uuid.uuid4())
    # kombu pops from the right: partition 0, then its two copies; partition 1 is held back
    pipe = cluster.redis.pipeline()
    pipe.delete(lists[0])
    pipe.rpush(lists[0], *[json.dumps(m) for m in (renamed, again, by_part[0])])
    pipe.execute()
    control(cluster, "resume", queue, prover.nodename)
    # the chord counted partition 0 twice (two task ids) and fired its body with 1 missing:
    # the body must not assemble a proof from what the chord handed it
    waiting = wait_for(lambda: events(cluster, "dup-exec", "aggregate_waiting"), what="the early body")
    assert waiting[0]["missing"] == [1]
    assert job.status()["status"] == "running"
    cluster.redis.rpush(lists[0], json.dumps(by_part[1]))  # partition 1's message arrives late

    res = job.result(timeout=60)
    check_proof(cluster, SQUARES_A, doc, res)
    ends = events(cluster, "dup-exec", "prove_end", 0)
    dups = events(cluster, "dup-exec", "duplicate", 0)
    assert len(ends) == 1 and len(dups) == 2, (ends, dups)
    # the stored proof of partition 0 is the one the first run made
    assert res.partition_proofs()[0].hex().startswith(ends[0]["proof_sha"])
    assert events(cluster, "dup-exec", "prove_end", 1)
    assert len(events(cluster, "dup-exec", "aggregated")) == 1


def test_one_message_queued_five_times_does_not_fail_a_healthy_job(cluster, workers, ready):
    """Issue 15: delivery.max_redeliveries=3 and one synthesis message queued five times (as
    visibility-timeout restores and re-dispatches would): duplicates find their unit done or
    leased and skip; only attempts whose worker died count against the bound."""
    from cluster.pipeline.queues import SYNTHESIS_QUEUE
    from cluster.pipeline.queues import queue_depth

    cluster.setup_keys(SQUARES_A)
    syn, _, _ = ready(workers("synthesis", wait=False), workers("aggregate", wait=False),
                      workers("prove", "cpu:0", wait=False, **preload(SQUARES_A)))
    control(cluster, "pause", SYNTHESIS_QUEUE, syn.nodename)
    doc = make_c1(SQUARES_A, seed=17)
    job = cluster_submit(doc, "five-copies")
    wait_for(lambda: queue_depth(cluster.redis, SYNTHESIS_QUEUE) == 2, what="synthesis messages")
    [key] = [k for k in cluster.redis.scan_iter(match=f"{SYNTHESIS_QUEUE}*") if cluster.redis.type(k) == b"list"]
    msgs = [json.loads(m) for m in cluster.redis.lrange(key, 0, -1)]
    first = next(m for m in msgs if json.loads(base64.b64decode(m["body"]))[0][1] == 0)
    copies = []
    for _ in range(4):
        c = json.loads(json.dumps(first))
        c["properties"]["delivery_tag"] = str(uuid.uuid4())
        copies.append(json.dumps(c))
    cluster.redis.rpush(key, *copies)
    control(cluster, "resume", SYNTHESIS_QUEUE, syn.nodename)
    check_proof(cluster, SQUARES_A, doc, job.result(timeout=60))
    assert len(events(cluster, "five-copies", "synthesis_end", 0)) == 1
    assert len(events(cluster, "five-copies", "duplicate", 0)) >= 4
    assert len(events(cluster, "five-copies", "prove_end", 0)) == 1
    assert not events(cluster, "five-copies", "redelivered")


def cluster_submit(doc, job_id, **kw):
    from cluster.client import submit
    return submit(doc, job_id=job_id, **kw)


def test_sigkill_mid_prove_job_completes_without_a_partition_proved_twice(cluster, workers, ready):
    cluster.setup_keys(SQUARES_SLOW)
    procs = [workers("synthesis", wait=False), workers("aggregate", wait=False),
             workers("prove", "cpu:0", wait=False, **preload(SQUARES_SLOW)),
             workers("prove", "cpu:1", wait=False, **preload(SQUARES_SLOW))]
    infos = ready(*procs)
    by_id = {i.worker_id: p for i, p in zip(infos, procs)}
    doc = make_c1(SQUARES_SLOW, seed=12)
    job = cluster_submit(doc, "sigkill")
    pickup = wait_for(lambda: events(cluster, "sigkill", "prove_pickup"), what="a prove pickup")[0]
    victim = by_id[pickup["worker"]]
    victim.signal(signal.SIGSTOP)  # freeze it mid-prove, then make sure it had not finished
    k = pickup["partition"]
    assert cluster.runtime().jobs.partition("sigkill", k) is None, "the prove finished before the stop"
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    # a new worker on the dead one's device takes its stale lock over at once (pid gone)
    again = workers("prove", pickup["device"], wait=False)

    res = job.result(timeout=90)
    check_proof(cluster, SQUARES_SLOW, doc, res)
    assert res.provers[k]["device"] != pickup["device"]
    [redispatch] = events(cluster, "sigkill", "redispatched", k)
    # its PID gone from this host: re-dispatched at the next sweep, before its lease lapsed
    assert redispatch["exclude"] == [pickup["device"]]
    assert redispatch["reason"].startswith(f"{pickup['worker']} (prove") and \
        f"is gone (pid {victim.pid} no longer runs on " in redispatch["reason"], redispatch
    [gone] = events(cluster, "sigkill", "holder_gone", k)
    assert gone["worker"] == pickup["worker"] and gone["pid"] == victim.pid
    assert gone["t"] <= redispatch["t"] and gone["left_s"] > 0
    assert events(cluster, "sigkill", "lease_lapsed", k) == []
    # a dead worker is not the partition's error: no retry spent; the re-proof saw one crash
    assert cluster.redis.get(f"zkhive:job:sigkill:attempts:{k}") is None
    assert [e["delivery"] for e in events(cluster, "sigkill", "redelivered", k)] == [2]
    for p in range(SQUARES_SLOW.num_partitions()):
        assert len(events(cluster, "sigkill", "prove_end", p)) == 1
    assert res.provers[k]["worker"] != pickup["worker"]
    ready(again)
    assert "took over the stale lock" in again.log_text()
    assert f"pid {victim.pid} is gone" in again.log_text()


def test_second_worker_on_a_device_is_refused(cluster, workers):
    first = workers("prove", "cpu:0")
    second = workers("prove", "cpu:0", wait=False)
    assert second.wait(30) == 2
    text = second.log_text()
    assert "device cpu:0" in text and "in use by" in text and str(first.pid) in text
    assert first.proc.poll() is None


def test_prover_without_its_preload_key_refuses_to_start(cluster, workers, tmp_path):
    w = workers("prove", "cpu:3", wait=False, ZKHIVE_SRS__PARAM_CACHE=tmp_path / "empty",
                ZKHIVE_SRS__PRELOAD=json.dumps([SQUARES_A.name]))
    assert w.wait(30) == 2
    text = w.log_text()
    assert f"no proving key for parameter set '{SQUARES_A.name}'" in text
    assert f"zkhive keys setup --params {SQUARES_A.name}" in text
    # it left nothing behind: no registry entry, no device lock
    from cluster.pipeline import registry
    assert not [x for x in registry.workers(cluster.redis) if x.pid == w.pid]
    assert not list(cluster.redis.scan_iter(match="zkhive:devlock:*:cpu:3:*"))


def test_sigterm_finishes_the_task_in_hand_and_leaves_the_registry(cluster, workers, ready):
    from cluster.pipeline import registry

    cluster.setup_keys(SQUARES_SLOW)
    _, _, info = ready(workers("synthesis", wait=False), workers("aggregate", wait=False),
                       prover := workers("prove", "cpu:0", wait=False, **preload(SQUARES_SLOW)))
    doc = make_c1(SQUARES_SLOW, seed=13)
    job = cluster_submit(doc, "sigterm")
    pickup = wait_for(lambda: events(cluster, "sigterm", "prove_pickup"), what="a prove pickup")[0]
    prover.signal(signal.SIGTERM)
    assert prover.wait(30) == 0
    # the partition in hand was finished and stored by the stopping worker
    stored = cluster.runtime().jobs.partition("sigterm", pickup["partition"])
    assert stored is not None and stored["worker"] == info.worker_id
    # it left the registry and released its device lock at once, not after the TTL
    assert info.worker_id not in {w.worker_id for w in registry.workers(cluster.redis)}
    assert not list(cluster.redis.scan_iter(match="zkhive:devlock:*:cpu:0:*"))
    assert "left the registry" in prover.log_text()
    # the other partition waits on the stopped device's queue; a new prover gets it
    workers("prove", "cpu:1", **preload(SQUARES_SLOW))
    res = job.result(timeout=60)
    check_proof(cluster, SQUARES_SLOW, doc, res)
    assert res.provers[pickup["partition"]]["device"] == "cpu:0"
    assert {p["device"] for p in res.provers} == {"cpu:0", "cpu:1"}


def test_unverifiable_partition_is_reproved_alone_on_another_device(cluster, workers, ready, tmp_path):
    """cpu:0 holds a key from another setup (a stale key cache): its proofs do not verify."""
    from cluster.pipeline.keys import KeyCache

    cluster.setup_keys(SQUARES_A)
    KeyCache(tmp_path / "other-keys").setup(SQUARES_A)
    ready(workers("synthesis", wait=False), workers("aggregate", wait=False),
          workers("prove", "cpu:0", wait=False, ZKHIVE_SRS__PARAM_CACHE=tmp_path / "other-keys", **preload(SQUARES_A)),
          workers("prove", "cpu:1", wait=False, **preload(SQUARES_A)))
    doc = make_c1(SQUARES_A, seed=14)
    res = cluster_submit(doc, "reprove").result(timeout=60)
    check_proof(cluster, SQUARES_A, doc, res)
    bad = events(cluster, "reprove", "verify_failed")
    assert bad and {e["device"] for e in bad} == {"cpu:0"}
    assert {p["device"] for p in res.provers} == {"cpu:1"}
    for e in bad:
        assert events(cluster, "reprove", "redispatched", e["partition"])


def test_missing_key_fails_the_job_in_one_attempt_with_the_whole_message(cluster, workers, ready, tmp_path):
    """cpu:0's key cache lacks the key (the cluster's has it, so the submit is accepted): the job
    fails at its first prove, with the message that says how to make the key; no retry."""
    from cluster.client import JobFailed

    cluster.setup_keys(SQUARES_A)
    empty = tmp_path / "empty"
    ready(workers("synthesis", wait=False), workers("aggregate", wait=False),
          workers("prove", "cpu:0", wait=False, ZKHIVE_SRS__PARAM_CACHE=empty))
    with pytest.raises(JobFailed) as e:
        cluster_submit(make_c1(SQUARES_A, seed=15), "nokey").result(timeout=60)
    want = (f"missing key: no proving key for parameter set '{SQUARES_A.name}' at {empty}/"
            f"{SQUARES_A.name}.{SQUARES_A.digest()[:16]}.params (looked in {empty} ([srs] param_cache); "
            f"[srs] from the defaults and ZKHIVE_* variables): run `zkhive keys setup --params {SQUARES_A.name}`")
    assert e.value.error.startswith("partition ") and e.value.error.endswith(want), e.value.error
    assert len(events(cluster, "nokey", "prove_pickup")) == 1  # one attempt
    assert not events(cluster, "nokey", "prove_error")        # no retry was spent
    assert [ev["error"] for ev in events(cluster, "nokey", "failed")] == [e.value.error]


def test_transient_device_error_is_retried_on_another_device(cluster, workers, ready):
    """cpu:0 may hold 1 KiB of keys (worker.device_memory_bytes): loading the key there is a
    device out of memory, a transient error: the partition moves to cpu:1, which has room."""
    cluster.setup_keys(SQUARES_A)
    _, _, small = ready(workers("synthesis", wait=False), workers("aggregate", wait=False),
                        workers("prove", "cpu:0", wait=False, ZKHIVE_WORKER__DEVICE_MEMORY_BYTES=1024))
    queue = small.queues[0]
    control(cluster, "pause", queue, small.nodename)  # both partitions routed to cpu:0, the only one
    doc = make_c1(SQUARES_A, seed=18)
    job = cluster_submit(doc, "transient")
    from cluster.pipeline.queues import queue_depth
    wait_for(lambda: queue_depth(cluster.redis, queue) == 2, what="both prove messages on cpu:0")
    workers("prove", "cpu:1")
    control(cluster, "resume", queue, small.nodename)
    res = job.result(timeout=60)
    check_proof(cluster, SQUARES_A, doc, res)
    errors = events(cluster, "transient", "prove_error")
    assert {e["device"] for e in errors} == {"cpu:0"} and {e["attempt"] for e in errors} == {1}
    assert all(e["error"].startswith("device out of memory: DeviceMemoryExhausted: the proving key of "
                                     f"{SQUARES_A.name} needs ") for e in errors), errors
    assert {p["device"] for p in res.provers} == {"cpu:1"}
    assert {e["queue"] for e in events(cluster, "transient", "prove_routed") if e["t"] > errors[0]["t"]} \
        == {"prove.vm.cpu1" if "vm" in queue else queue.replace("cpu0", "cpu1")}


def test_two_keys_that_do_not_fit_together_swap_by_eviction(cluster, workers, ready):
    """One prover whose memory holds one of two keys, not both: each job evicts the other's key
    before loading its own, and both prove and verify."""
    from cluster.pipeline import registry
    from cluster.pipeline.keys import KeyCache

    cluster.setup_keys(SQUARES_A, SQUARES_B)
    keys = KeyCache(cluster.runtime().keys.root)
    a, b = keys.size(SQUARES_A), keys.size(SQUARES_B)
    room = max(a, b) + min(a, b) // 2  # one fits, the two do not
    _, _, info = ready(workers("synthesis", wait=False), workers("aggregate", wait=False),
                       workers("prove", "cpu:0", wait=False, ZKHIVE_WORKER__DEVICE_MEMORY_BYTES=room,
                               **preload(SQUARES_A)))
    assert info.resident_keys == [SQUARES_A.name]
    for circuit, job_id, gone in ((SQUARES_B, "swap-b", SQUARES_A), (SQUARES_A, "swap-a", SQUARES_B)):
        doc = make_c1(circuit, seed=19)
        check_proof(cluster, circuit, doc, cluster_submit(doc, job_id).result(timeout=60))
        assert [e["key"] for e in events(cluster, job_id, "key_evicted")] == [gone.name]
        entry = wait_for(lambda: [w for w in registry.workers(cluster.redis, role="prove")
                                  if w.resident_keys == [circuit.name]], what=f"{circuit.name} resident alone")
        assert entry[0].free_memory == room - keys.size(circuit)
        # what left the device, when and why: the registry, `zkhive status`, the metrics
        ev = wait_for(lambda: [e for w in registry.workers(cluster.redis, role="prove") for e in w.evictions
                               if e["key"] == gone.name and e["reason"].startswith(f"room for {circuit.name}")],
                      what=f"the eviction of {gone.name} in the registry")
        assert ev[-1]["reason"] == f"room for {circuit.name} ({keys.size(circuit)} bytes)", ev
        assert ev[-1]["bytes"] == keys.size(gone)
    from prometheus_client import generate_latest

    from cluster.ops.metrics import make_registry
    from cluster.user.commands import status_text

    text = status_text(cluster.runtime())
    assert re.search(rf"evicted the proving key of {SQUARES_B.name} at \d\d:\d\d:\d\d UTC \(\d+Mi\): "
                     rf"room for {SQUARES_A.name} \(\d+ bytes\)", text), text
    reg, _ = make_registry(cluster.redis)
    body = generate_latest(reg).decode()
    for name in (SQUARES_A.name, SQUARES_B.name):
        got = re.findall(rf'^zkhive_key_evictions_total\{{[^}}]*params="{name}",reason="room"[^}}]*\}} (\S+)$',
                         body, re.M)
        assert [float(x) for x in got] == [1.0], (name, body[-2000:])


def test_critical_job_overtakes_queued_bulk_work(cluster, workers, ready):
    from cluster.pipeline.queues import queue_depth

    cluster.setup_keys(SQUARES_A)
    _, _, prover = ready(workers("synthesis", wait=False), workers("aggregate", wait=False),
                         workers("prove", "cpu:0", wait=False, **preload(SQUARES_A)))
    queue = prover.queues[0]
    control(cluster, "pause", queue, prover.nodename)
    bulk = [cluster_submit(make_c1(SQUARES_A, seed=20 + i), f"bulk-{i}", priority="bulk") for i in range(2)]
    wait_for(lambda: queue_depth(cluster.redis, queue) == 4, what="bulk work queued")
    critical = cluster_submit(make_c1(SQUARES_A, seed=30), "critical", priority="critical")
    wait_for(lambda: queue_depth(cluster.redis, queue) == 6, what="critical work queued")
    control(cluster, "resume", queue, prover.nodename)
    for j in [critical, *bulk]:
        j.result(timeout=60)
    # the first two proofs stored are the critical job's (its second partition may be finished
    # by the prove-ahead thread, with no task pickup of its own: cluster/pipeline/prefetch.py, 5)
    stored = sorted((e["t"], job) for job in ("critical", "bulk-0", "bulk-1")
                    for e in events(cluster, job, "prove_end"))
    assert [job for _, job in stored[:2]] == ["critical", "critical"]
    pickups = [job for _, job in sorted((e["t"], job) for job in ("critical", "bulk-0", "bulk-1")
                                        for e in events(cluster, job, "prove_pickup"))]
    assert pickups[0] == "critical" and "critical" not in pickups[pickups.index("bulk-0"):], pickups


def test_deadline_fails_a_job_whose_partitions_are_lost_and_reports_them(cluster, workers, ready):
    from cluster.client import JobFailed

    cluster.setup_keys(SQUARES_A)
    ready(workers("synthesis", wait=False), workers("aggregate", wait=False))  # no prover at all
    job = cluster_submit(make_c1(SQUARES_A, seed=16), "deadline", deadline_s=2)
    with pytest.raises(JobFailed, match=r"deadline passed.*partition 0: prove_routed prove.unassigned"):
        job.result(timeout=30)


def test_cancel_removes_the_jobs_queued_messages(cluster, workers, ready):
    """Queue depth counts live work only: a cancelled job's waiting messages leave the queue,
    another job's stay and are proved."""
    from cluster.pipeline.queues import SYNTHESIS_QUEUE
    from cluster.client import JobFailed, cancel
    from cluster.pipeline.queues import queue_depth

    cluster.setup_keys(SQUARES_A)
    syn, _, _ = ready(workers("synthesis", wait=False), workers("aggregate", wait=False),
                      workers("prove", "cpu:0", wait=False, **preload(SQUARES_A)))
    control(cluster, "pause", SYNTHESIS_QUEUE, syn.nodename)
    gone = cluster_submit(make_c1(SQUARES_A, seed=60), "cancel-me", priority="bulk")
    kept = cluster_submit(make_c1(SQUARES_A, seed=61), "keep-me")
    wait_for(lambda: queue_depth(cluster.redis, SYNTHESIS_QUEUE) == 4, what="both jobs queued")
    assert cancel("cancel-me") is True
    assert queue_depth(cluster.redis, SYNTHESIS_QUEUE) == 2
    assert [e["messages"] for e in events(cluster, "cancel-me", "dequeued")] == [2]
    control(cluster, "resume", SYNTHESIS_QUEUE, syn.nodename)
    kept.result(timeout=60)
    with pytest.raises(JobFailed, match="cancelled by the user"):
        gone.result(timeout=1)
    assert not events(cluster, "cancel-me", "synthesis_start")
    assert queue_depth(cluster.redis, SYNTHESIS_QUEUE) == 0
