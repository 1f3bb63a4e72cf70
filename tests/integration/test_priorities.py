"""Priorities that mean what cuzk's do (issue 37 item 4), on a real Redis with real workers and
PoRep-family jobs (porep-lite-4k, 2 partitions each).

- a CRITICAL job submitted while NORMAL partitions wait on the synthesis queue and on its device
  queue is served next at every stage: its synthesis before the queued normal synthesis, its
  proofs before the normal proofs queued on the device (behind at most the one in progress,
  never behind one the prover's prove-ahead thread took for itself), its aggregation first;
- with every stage held back, the order served is critical, high, normal, bulk at each stage.
"""
from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.integration

PARAMS = "porep-lite-4k"


@pytest.fixture(scope="module")
def docs():
    """Two sectors' C1 inputs: the backlog's (every normal job proves the same input under its own
    id) and the critical job's own (its assignments differ from the backlog's: prove-ahead keys
    its work by the assignment's hash)."""
    from synthesis.porep import SETS, TINY, c1_document, generate

    return [c1_document(generate(SETS[TINY], s), s) for s in (b"\x37" * 32, b"\x38" * 32)]


def _events(r, job_ids):
    from cluster.pipeline import timeline

    return {j: timeline.load(r, j) for j in job_ids}


def _times(events, name):
    return [e["t"] for e in events if e["event"] == name]


def _wait(pred, timeout_s: float, what: str):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {timeout_s} s")


def _device_s(ev) -> float:
    """The median device time (matvec start to msm end) of the jobs' partitions."""
    spans = []
    for e in ev.values():
        for k in (0, 1):
            st = [x for x in e if x["event"] == "stage" and x.get("partition") == k]
            a = [x["start"] for x in st if x["stage"] == "matvec"]
            b = [x["end"] for x in st if x["stage"] == "msm"]
            if a and b:
                spans.append(max(b) - min(a))
    return sorted(spans)[len(spans) // 2]


def _prover_queue(cluster) -> str:
    from cluster.pipeline import registry

    return [w for w in registry.workers(cluster.redis, role="prove")][0].queues[0]


def test_critical_job_jumps_the_synthesis_and_device_queues(cluster, workers, docs):
    from cluster.client import submit
    from cluster.pipeline.queues import SYNTHESIS_QUEUE, queue_depth

    cluster.setup_keys(__import__("synthesis.circuits", fromlist=["get_circuit"]).get_circuit(PARAMS))
    workers("synthesis", wait=False, ZKHIVE_WORKER__PARTITION_WORKERS="1")
    workers("aggregate", wait=False)
    prover = workers("prove", "cpu:0", wait=False, ZKHIVE_SRS__PRELOAD=f'["{PARAMS}"]')
    for w in workers.started:
        w.wait_ready(cluster.redis, timeout_s=120)
    dev_q = _prover_queue(cluster)
    normal = [submit(docs[0], job_id=f"normal-{j}") for j in range(14)]
    # the backlog: normal partitions waiting on the synthesis queue and on the device's queue
    _wait(lambda: queue_depth(cluster.redis, dev_q) >= 3 and queue_depth(cluster.redis, SYNTHESIS_QUEUE) >= 3,
          60, "a backlog on both queues")
    backlog = (queue_depth(cluster.redis, SYNTHESIS_QUEUE), queue_depth(cluster.redis, dev_q))
    t_sub = time.time()
    crit = submit(docs[1], job_id="critical-0", priority="critical")
    t_queued = time.time()  # its messages are on the queues from here (the submission took a while)
    crit.result(timeout=120)
    t_done = time.time()
    for job in normal:
        job.result(timeout=180)
    ev = _events(cluster.redis, [j.job_id for j in normal] + [crit.job_id])
    c = ev.pop(crit.job_id)
    # synthesis: at most the one running (one process) began after the critical's messages were
    # queued and before the critical's last partition began (while submit() ran, ~0.1 s under
    # load, normal ones went on: 5 once)
    c_synth = max(_times(c, "synthesis_start"))
    synth_before = sorted(t for e in ev.values() for t in _times(e, "synthesis_start") if t_queued < t < c_synth)
    # the device: for each critical partition, the normal proofs whose device work (the last
    # stage, "msm") ended after it was routed to the device and before its own device work began
    c_proved = max(_times(c, "prove_end"))
    stages = lambda e, name: [x for x in e if x["event"] == "stage" and x["stage"] == name]
    ahead_of, waits = [], []
    for k in range(2):
        routed = min(x["t"] for x in c if x["event"] == "prove_routed" and x["partition"] == k)
        began = min(x["start"] for x in stages(c, "matvec") if x["partition"] == k)
        waits.append(round(began - routed, 3))
        ahead_of.append(sorted(round(x["end"] - routed, 3) for e in ev.values() for x in stages(e, "msm")
                               if routed < x["end"] < began))
    proved_after = [t for e in ev.values() for t in _times(e, "prove_end") if t > c_proved]
    # once its device work is done, its proof is stored at once: not after the normal task the
    # worker's one consumer holds (proving from scratch what the critical one preempted) ends,
    # which is when the consumer could deliver the critical task (prefetch.py, 5)
    stored_late = []
    for k in range(2):
        dev_end = max(x["end"] for x in stages(c, "msm") if x["partition"] == k)
        stored = min(x["t"] for x in c if x["event"] == "prove_end" and x["partition"] == k)
        stored_late.append(sorted(round(x["end"] - dev_end, 3) for e in ev.values() for x in stages(e, "msm")
                                  if dev_end < x["end"] < stored))
    print(f"backlog synthesis {backlog[0]} device {backlog[1]}; critical: {t_done - t_sub:.2f} s submit to "
          f"proof, normal synthesis started before it {len(synth_before)}, normal proofs finished "
          f"ahead of its partitions on the device {ahead_of} (waits {waits} s, one normal proof's device "
          f"work {_device_s(ev):.3f} s; {prover.log_text().count(' preempted: ')} proved-ahead units "
          f"preempted), after it {len(proved_after)}; the backlog's last proof "
          f"{max(t for e in ev.values() for t in _times(e, 'prove_end')) - t_sub:.1f} s after its submission")
    if not all(len(a) <= 1 for a in ahead_of):  # what the device did meanwhile, for the failure
        t0 = min(_times(c, "prove_routed"))
        rows = sorted((x["t"] - t0, j, x.get("partition"), x["event"], x.get("stage", ""), round(x.get("end", 0) - t0, 3))
                      for j, e in [*ev.items(), (crit.job_id, c)] for x in e
                      if x["event"] in ("prove_routed", "prove_pickup", "prove_end") or
                      x.get("stage") in ("matvec", "msm", "fetch_ahead"))
        print("\n".join(f"{r[0]:8.3f} {r[1]:<12} {r[2]} {r[3]} {r[4]} {r[5]}" for r in rows if -3 < r[0] < 12))
        print("\n".join(line for line in prover.log_text().splitlines() if "prove-ahead" in line)[-3000:])
    assert len(synth_before) <= 1, synth_before
    assert all(len(a) <= 1 for a in ahead_of), ahead_of
    assert stored_late == [[], []], f"normal device work ended between a critical partition's and its store: {stored_late}"
    assert "prove-ahead: " not in prover.log_text()  # the thread never failed
    assert len(proved_after) >= 3  # the backlog really was there, and waited for the critical
    # its aggregation before every normal one still to come
    c_agg = min(_times(c, "aggregate_start"))
    assert sum(1 for e in ev.values() for t in _times(e, "aggregate_start") if t > c_agg) >= 2


def test_a_critical_unit_proved_ahead_is_stored_without_waiting_for_its_task(cluster, workers, ready, docs):
    """The prover's consumer paused (as when it is held by a normal task: a solo pool delivers
    nothing else meanwhile): a critical job's partitions, proved ahead, are combined and stored by
    the prove-ahead thread; a normal job's beside them stay unproved (their points wait for their
    tasks). The critical tasks, delivered once the consumer resumes (the aggregation held back,
    so the job is still running), find their proofs stored under their own ids: no duplicate, no
    second proof. Measured before (2026-12-05, CPU prover under a porep-lite-256k backlog): a
    WinningPoSt proved ahead in 48 s waited 51 s more for its task."""
    from cluster.client import submit
    from cluster.pipeline.queues import AGGREGATE_QUEUE, queue_depth

    cluster.setup_keys(__import__("synthesis.circuits", fromlist=["get_circuit"]).get_circuit(PARAMS))
    proc = workers("prove", "cpu:0", wait=False, ZKHIVE_SRS__PRELOAD=f'["{PARAMS}"]')
    _, agg, prover = ready(workers("synthesis", wait=False, ZKHIVE_WORKER__PARTITION_WORKERS="1"),
                           workers("aggregate", wait=False), proc)
    dev_q = prover.queues[0]
    submit(docs[0], job_id="warm-0").result(timeout=120)  # the prove-ahead thread starts with a task
    rt = cluster.runtime()
    _control(cluster, "pause", AGGREGATE_QUEUE, agg.nodename)
    _control(cluster, "pause", dev_q, prover.nodename)
    try:
        normal = submit(docs[0], job_id="held-normal-0")
        crit = submit(docs[1], job_id="held-critical-0", priority="critical")
        # before: never, while the consumer delivers nothing
        _wait(lambda: len(_times(_events(cluster.redis, [crit.job_id])[crit.job_id], "prove_end")) == 2,
              120, "the critical proofs stored")
        assert len(rt.jobs.partitions(crit.job_id, 2)) == 2
        c = _events(cluster.redis, [crit.job_id])[crit.job_id]
        ends = [x for x in c if x["event"] == "prove_end"]
        assert sorted(x["partition"] for x in ends) == [0, 1] and all(x.get("ahead") for x in ends), ends
        assert not _times(c, "prove_pickup")  # no task of it was delivered
        _wait(lambda: queue_depth(cluster.redis, dev_q) == 4, 60, "every prove message still queued")
        time.sleep(1.0)  # time for the thread to prove the normal units ahead too
        assert rt.jobs.partitions(normal.job_id, 2) == {}  # normal work is left to its tasks
    finally:
        _control(cluster, "resume", dev_q, prover.nodename)
    _wait(lambda: queue_depth(cluster.redis, dev_q) == 0 and len(rt.jobs.partitions(normal.job_id, 2)) == 2,
          120, "every prove task delivered")
    c = _events(cluster.redis, [crit.job_id])[crit.job_id]
    assert rt.jobs.status(crit.job_id) == "running"  # its tasks came while it was still running
    assert not [x for x in c if x["event"] in ("duplicate", "prove_pickup")], c
    assert len([x for x in c if x["event"] == "prove_end"]) == 2
    _control(cluster, "resume", AGGREGATE_QUEUE, agg.nodename)
    assert len(crit.result(timeout=120).partition_proofs()) == 2
    normal.result(timeout=120)
    assert "prove-ahead: " not in proc.log_text()  # the thread never failed


def _control(cluster, action: str, queue: str, node: str) -> None:
    from cluster.pipeline.app import app

    fn = app.control.cancel_consumer if action == "pause" else app.control.add_consumer
    assert fn(queue, destination=[node], reply=True, timeout=5), f"{node} did not answer {action} of {queue}"


LEVELS = ("critical", "high", "normal", "bulk")


def test_every_stage_serves_critical_then_high_then_normal_then_bulk(cluster, workers, ready, docs):
    """Each stage held back (its consumer paused) while jobs of the four levels, submitted least
    urgent first, queue up in front of it; released, it serves them most urgent first."""
    from cluster.client import submit
    from cluster.pipeline.queues import (AGGREGATE_QUEUE, SYNTHESIS_QUEUE, URGENT_SYNTHESIS_QUEUE, queue_depth,
                                         queue_depths)
    from cluster.user.commands import status_text
    from synthesis.circuits import get_circuit

    cluster.setup_keys(get_circuit(PARAMS))
    syn, agg, prover = ready(workers("synthesis", wait=False, ZKHIVE_WORKER__PARTITION_WORKERS="1"),
                             workers("aggregate", wait=False),
                             workers("prove", "cpu:0", wait=False, ZKHIVE_SRS__PRELOAD=f'["{PARAMS}"]'))
    dev_q = prover.queues[0]
    # the synthesis worker serves both synthesis queues: a critical job's goes to the urgent one
    for q, w in ((URGENT_SYNTHESIS_QUEUE, syn), (SYNTHESIS_QUEUE, syn), (dev_q, prover), (AGGREGATE_QUEUE, agg)):
        _control(cluster, "pause", q, w.nodename)
    jobs = [submit(docs[0], job_id=f"{level}-0", priority=level) for level in reversed(LEVELS)]
    n = 2 * len(jobs)
    _wait(lambda: queue_depth(cluster.redis, SYNTHESIS_QUEUE) + queue_depth(cluster.redis, URGENT_SYNTHESIS_QUEUE) == n,
          30, "every partition on the synthesis queues")
    assert queue_depths(cluster.redis, SYNTHESIS_QUEUE) == {"critical": 0, "high": 2, "normal": 2, "bulk": 2}
    assert queue_depths(cluster.redis, URGENT_SYNTHESIS_QUEUE) == {"critical": 2, "high": 0, "normal": 0, "bulk": 0}
    text = status_text(cluster.runtime())
    assert f"{SYNTHESIS_QUEUE:<28} {n - 2}  (high 2, normal 2, bulk 2)" in text, text
    assert f"{URGENT_SYNTHESIS_QUEUE:<28} 2  (critical 2)" in text, text
    # the urgent queue first: the worker then polls both, level by level (critical first)
    _control(cluster, "resume", URGENT_SYNTHESIS_QUEUE, syn.nodename)
    _control(cluster, "resume", SYNTHESIS_QUEUE, syn.nodename)
    _wait(lambda: queue_depth(cluster.redis, dev_q) == n, 60, "every partition on the device queue")
    _control(cluster, "resume", dev_q, prover.nodename)
    _wait(lambda: queue_depth(cluster.redis, AGGREGATE_QUEUE) == len(jobs), 120, "every aggregation queued")
    _control(cluster, "resume", AGGREGATE_QUEUE, agg.nodename)
    for job in jobs:
        job.result(timeout=60)
    ev = _events(cluster.redis, [j.job_id for j in jobs])

    def order(name):
        return [job.split("-")[0] for t, job in sorted((t, j) for j, e in ev.items() for t in _times(e, name))]

    want = [level for level in LEVELS for _ in range(2)]
    assert order("synthesis_start") == want
    # the proofs stored in that order; a critical or high partition may be finished by the
    # prove-ahead thread without a task pickup of its own (prefetch.py, 5): the pickups there
    # are, in order, a subsequence of it
    assert order("prove_end") == want
    picked = order("prove_pickup")
    assert picked == sorted(picked, key=LEVELS.index) and picked.count("normal") == picked.count("bulk") == 2, picked
    assert order("aggregate_start") == list(LEVELS)
    # the aggregations queued least urgent first (each job proved before the next is submitted:
    # a FIFO queue would serve bulk first) are served most urgent first
    _control(cluster, "pause", AGGREGATE_QUEUE, agg.nodename)
    late = []
    for i, level in enumerate(reversed(LEVELS)):
        late.append(submit(docs[1], job_id=f"{level}-agg", priority=level))
        _wait(lambda: queue_depth(cluster.redis, AGGREGATE_QUEUE) == i + 1, 60, f"the aggregation of {level}-agg queued")
    _control(cluster, "resume", AGGREGATE_QUEUE, agg.nodename)
    for job in late:
        job.result(timeout=60)
    ev = _events(cluster.redis, [j.job_id for j in late])
    assert order("aggregate_start") == list(LEVELS)


def test_a_critical_job_past_its_kinds_deadline_fails_at_it_naming_the_setting(cluster, workers, ready, docs):
    """[deadlines] winning_post_s = 2 and no prover: the critical WinningPoSt-kind job fails at
    2 s (the watchdog wakes for it: its sweep interval here is 5 s), with one line naming the
    setting, a deadline_missed event and the exporter's counter; a porep job submitted beside it
    (delivery.job_deadline_s) lives on; an unknown kind is refused at submission."""
    from prometheus_client import generate_latest

    from cluster.client import JobFailed, cancel, submit
    from cluster.errors import JobError
    from cluster.ops.metrics import make_registry
    from cluster.pipeline import timeline
    from cluster.user.commands import status_text
    from synthesis.circuits import get_circuit

    cluster.setup_keys(get_circuit(PARAMS))
    slow = {"ZKHIVE_DELIVERY__WATCHDOG_INTERVAL_S": "5"}
    ready(workers("synthesis", wait=False, **slow), workers("aggregate", wait=False, **slow))  # no prover
    cluster.configure_here(ZKHIVE_DEADLINES__WINNING_POST_S="2")
    try:
        with pytest.raises(JobError, match=r"^field kind: 'winning_post' is not a job kind \(known: porep-c2, "
                                           r"snap-update, window-post, winning-post\)$"):
            submit(docs[1], job_id="bad-kind", priority="critical", kind="winning_post")
        porep = submit(docs[0], job_id="porep-beside")
        job = submit(docs[1], job_id="winning", priority="critical", kind="winning-post")
        with pytest.raises(JobFailed) as got:
            job.result(timeout=30)
    finally:
        cluster.configure_here()
    rt = cluster.runtime()
    st, rec = rt.jobs.state("winning"), rt.jobs.get("winning")
    late = float(st["finished_at"]) - rec.deadline_at
    assert rec.kind == "winning-post" and rec.deadline_at - rec.submitted_at == 2.0
    assert 0 <= late < 1.0, late  # at the deadline, not at the next 5 s sweep
    msg = str(got.value)
    assert "\n" not in msg
    assert "deadline passed (" in msg and ("s after submission): a winning-post job, priority critical, must be done "
                                           "within 2 s (deadlines.winning_post_s): partition 0: ") in msg, msg
    assert "prove.unassigned" in msg  # where its partitions wait: no prover
    missed = [e for e in timeline.load(cluster.redis, "winning") if e["event"] == "deadline_missed"]
    assert len(missed) == 1 and missed[0]["setting"] == "deadlines.winning_post_s" and missed[0]["missing"] == [0, 1]
    assert "deadlines.winning_post_s" in status_text(rt)
    # the porep job's deadline is its own kind's (delivery.job_deadline_s, 240 s here): still waiting
    assert porep.status()["status"] in ("queued", "running")
    assert rt.jobs.get("porep-beside").deadline_from == "delivery.job_deadline_s"
    assert cancel("porep-beside") is True
    reg, _ = make_registry(cluster.redis)
    body = generate_latest(reg).decode()
    assert ('zkhive_deadline_missed_total{kind="winning-post",params="porep-lite-4k",priority="critical",'
            'setting="deadlines.winning_post_s"} 1.0') in body, body


def test_routing_counts_only_the_work_served_before_the_partition(cluster):
    """Two provers holding the key: one with five normal proofs queued, one with a critical one.
    A critical partition goes to the first (nothing there is served before it), a normal one to
    the second (one message before it, against five)."""
    from cluster.client import submit
    from cluster.pipeline import registry
    from cluster.pipeline.app import app
    from cluster.pipeline.queues import queue_depth
    from cluster.pipeline.routing import route_partition

    from circuits_for_tests import SQUARES_A, make_c1

    cluster.flush()
    cluster.configure_here()
    cluster.setup_keys(SQUARES_A)
    for i in range(2):
        registry.publish(cluster.redis, registry.WorkerInfo(
            worker_id=f"prove.rt.cpu{i}.0", role="prove", host="rt", pid=1, queues=[f"prove.rt.cpu{i}"],
            device=f"cpu:{i}", resident_keys=[SQUARES_A.name], free_memory=1 << 30, ready=True), 60)
    ref = {"store": "dir", "sha256": "0" * 64, "size": 32, "kind": "assignment"}
    for n in range(5):
        app.send_task("zkhive.prove_partition", args=({"assignment": ref}, "backlog", n), queue="prove.rt.cpu0",
                      priority=6)
    app.send_task("zkhive.prove_partition", args=({"assignment": ref}, "urgent", 0), queue="prove.rt.cpu1",
                  priority=0)
    assert queue_depth(cluster.redis, "prove.rt.cpu0") == 5 and queue_depth(cluster.redis, "prove.rt.cpu0", 0) == 0
    assert queue_depth(cluster.redis, "prove.rt.cpu1", 9) == 1 and queue_depth(cluster.redis, "prove.rt.cpu1", 0) == 1
    rt = cluster.runtime()
    crit = submit(make_c1(SQUARES_A, seed=70), job_id="route-critical", priority="critical")
    norm = submit(make_c1(SQUARES_A, seed=71), job_id="route-normal", priority="normal")
    assert route_partition(rt, crit.job_id, 0).queue == "prove.rt.cpu0"
    assert route_partition(rt, norm.job_id, 0).queue == "prove.rt.cpu1"
    cluster.flush()


def _slow_beside_critical(cluster, workers, slow_circuit, **synthesis_env):
    """A cluster of one synthesis worker, a CPU prover holding SQUARES_A's and ``slow_circuit``'s
    keys, one aggregate worker; returns (the synthesis worker, ``round_(tag, seed, started)``),
    which submits a ``slow_circuit`` job, waits for its first ``started`` event, submits a
    critical SQUARES_A job, waits for both to be done and returns their events (slow, critical)."""
    from cluster.client import submit
    from cluster.pipeline.app import runtime

    from circuits_for_tests import SQUARES_A, make_c1

    cluster.configure_here()
    cluster.setup_keys(SQUARES_A, slow_circuit)
    synth = workers("synthesis", wait=False, **synthesis_env)
    workers("prove", "cpu:0", wait=False,
            ZKHIVE_SRS__PRELOAD=f'["{SQUARES_A.name}", "{slow_circuit.name}"]')
    workers("aggregate", wait=False)
    for w in workers.started:
        w.wait_ready(cluster.redis, timeout_s=120)
    r = cluster.redis

    def round_(tag: str, seed: int, started: str, then=None) -> tuple[list, list]:
        slow = submit(make_c1(slow_circuit, seed=seed), job_id=f"slow-{tag}")
        if then is not None:
            then(slow.job_id)
        _wait(lambda: _times(_events(r, [slow.job_id])[slow.job_id], started), 120,
              f"the slow job {slow.job_id}'s {started}")
        crit = submit(make_c1(SQUARES_A, seed=seed), job_id=f"urgent-{tag}", priority="critical")
        jobs = runtime().jobs
        _wait(lambda: all(jobs.status(j) == "done" for j in (slow.job_id, crit.job_id)), 120,
              f"jobs of round {tag} done")
        ev = _events(r, [slow.job_id, crit.job_id])
        return ev[slow.job_id], ev[crit.job_id]
    return synth, round_


def test_an_urgent_aggregation_does_not_wait_behind_a_slow_one(cluster, workers):
    """A slow aggregation (3 s: its public inputs from the C1 again, the ones stored at
    submission gone, as a 32 GiB PoRep job's took before they were stored) in hand: with one
    aggregate worker a critical job's aggregation waits for it; with a second one (`zkhive up`'s
    default, [worker] aggregate_workers = 2) the critical job is aggregated meanwhile."""
    from cluster.pipeline.app import runtime

    from circuits_for_tests import SLOW_AGGREGATION

    def without_stored_publics(job_id):  # while its partitions are synthesized (0.5 s each)
        rt = runtime()
        rt.blobs.delete(rt.jobs.get(job_id).publics)

    _, round_ = _slow_beside_critical(cluster, workers, SLOW_AGGREGATION)
    slow, crit = round_("agg-one", 90, "aggregate_start", then=without_stored_publics)
    assert [e["event"] for e in slow].count("publics_from_c1") == 1  # the slow path it means
    # one aggregate worker: the critical job's aggregation starts only after the slow one ends
    assert min(_times(crit, "aggregate_start")) >= max(_times(slow, "aggregated")), (slow, crit)

    workers("aggregate")
    slow, crit = round_("agg-two", 91, "aggregate_start", then=without_stored_publics)
    # two: it is aggregated while the slow one is still in hand, by the other worker
    assert max(_times(crit, "aggregated")) < max(_times(slow, "aggregated")), (slow, crit)
    w_slow = {e.get("worker") for e in slow if e["event"] == "aggregated"}
    w_crit = {e.get("worker") for e in crit if e["event"] == "aggregated"}
    assert w_slow and w_crit and not (w_slow & w_crit), (w_slow, w_crit)


def test_an_urgent_synthesis_does_not_wait_behind_slow_ones(cluster, workers):
    """A synthesis worker of one process holding a slow partition (3 s; a 32 GiB PoRep
    partition's is ~7.5 s on the H200's host, where a WinningPoSt waited 4.76 s for one,
    2026-12-05): without an urgent synthesis worker a critical job's synthesis waits for it to
    end; with one (`zkhive up`'s default, [worker] urgent_synthesis_workers = 1) it is done
    meanwhile, by that worker."""
    from cluster.pipeline import registry
    from cluster.pipeline.queues import URGENT_SYNTHESIS_QUEUE

    from circuits_for_tests import SLOW_SYNTHESIS

    normal, round_ = _slow_beside_critical(cluster, workers, SLOW_SYNTHESIS,
                                           ZKHIVE_WORKER__PARTITION_WORKERS="1")
    slow, crit = round_("synth-one", 80, "synthesis_start")
    # the normal worker's one process: the critical synthesis waits for the slow partition's
    assert min(_times(crit, "synthesis_start")) >= min(_times(slow, "synthesis_end")), (slow, crit)

    urgent = workers("synthesis", options=("--urgent",))
    entries = {w.pid: w for w in registry.workers(cluster.redis)}
    assert entries[urgent.pid].queues == [URGENT_SYNTHESIS_QUEUE], entries[urgent.pid].queues
    assert entries[normal.pid].queues[0] == URGENT_SYNTHESIS_QUEUE, entries[normal.pid].queues
    slow, crit = round_("synth-two", 81, "synthesis_start")
    # the urgent worker: done while the slow partition is still in synthesis, and by that worker
    assert max(_times(crit, "synthesis_end")) < min(_times(slow, "synthesis_end")), (slow, crit)
    by = {e.get("worker") for e in crit if e["event"] == "synthesis_start"}
    assert by == {entries[urgent.pid].worker_id}, (by, entries[urgent.pid].worker_id)
