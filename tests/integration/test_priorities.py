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
    crit.result(timeout=120)
    t_done = time.time()
    for job in normal:
        job.result(timeout=180)
    ev = _events(cluster.redis, [j.job_id for j in normal] + [crit.job_id])
    c = ev.pop(crit.job_id)
    # synthesis: at most the one running (one process) began after the critical was submitted
    # and before the critical's last partition began
    c_synth = max(_times(c, "synthesis_start"))
    synth_before = sorted(t for e in ev.values() for t in _times(e, "synthesis_start") if t_sub < t < c_synth)
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
    print(f"backlog synthesis {backlog[0]} device {backlog[1]}; critical: {t_done - t_sub:.2f} s submit to "
          f"proof, normal synthesis started before it {len(synth_before)}, normal proofs finished "
          f"ahead of its partitions on the device {ahead_of} (waits {waits} s, one normal proof's device "
          f"work {_device_s(ev):.3f} s; {prover.log_text().count(' preempted: ')} proved-ahead units "
          f"preempted), after it {len(proved_after)}")
    assert len(synth_before) <= 1, synth_before
    assert all(len(a) <= 1 for a in ahead_of), ahead_of
    assert "prove-ahead: " not in prover.log_text()  # the thread never failed
    assert len(proved_after) >= 3  # the backlog really was there, and waited for the critical
    # its aggregation before every normal one still to come
    c_agg = min(_times(c, "aggregate_start"))
    assert sum(1 for e in ev.values() for t in _times(e, "aggregate_start") if t > c_agg) >= 2
