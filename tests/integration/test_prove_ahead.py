"""Prove-ahead (cluster/pipeline/prefetch.py) on a real Redis with real worker processes.

- ``peek_prove_tasks`` reads real Celery messages in the order a worker receives them (every
  priority list, critical first) and pops nothing;
- a prover with prove-ahead on proves partitions while earlier tasks finish (their device
  stages come from the prove-ahead thread: a ``fetch_ahead`` stage in the timeline), and every
  proof still verifies and is bound to its inputs;
- with prove-ahead off no partition shows that stage (the comparison the benchmark makes).
"""
from __future__ import annotations

import pytest

from circuits_for_tests import SQUARES_SLOW, make_c1

pytestmark = pytest.mark.integration


def test_peek_reads_waiting_prove_tasks_in_delivery_order_and_pops_nothing(cluster):
    from cluster.pipeline.app import app
    from cluster.pipeline.prefetch import peek_prove_tasks
    from cluster.pipeline.queues import queue_depth

    cluster.flush()
    cluster.configure_here()
    q = "prove.peektest.0"
    ref = lambda n: {"store": "dir", "sha256": f"{n:064x}", "size": 32, "kind": "assignment"}
    # bulk first, then normal, then critical: delivery order is critical, normal, bulk
    for n, prio in ((1, 9), (2, 6), (3, 0), (4, 0)):
        app.send_task("zkhive.prove_partition", args=({"assignment": ref(n)}, f"job-{n}", n),
                      queue=q, priority=prio)
    cluster.redis.lpush(q, b"not a kombu message")  # skipped, never touched
    app.send_task("zkhive.aggregate", args=(None, "job-x"), queue=q)  # not a prove task
    got = peek_prove_tasks(cluster.redis, q, 8)
    assert [(t["job_id"], t["partition"]) for t in got] == [("job-3", 3), ("job-4", 4),
                                                            ("job-2", 2), ("job-1", 1)]
    assert got[0]["sha256"] == f"{3:064x}" and got[0]["ref"] == ref(3)
    assert [t["job_id"] for t in peek_prove_tasks(cluster.redis, q, 2)] == ["job-3", "job-4"]
    assert queue_depth(cluster.redis, q) == 6  # nothing popped
    assert peek_prove_tasks(cluster.redis, "prove.empty.0", 2) == []


def _run_jobs(cluster, workers, ahead: str, n_jobs: int = 3):
    from cluster.pipeline import timeline
    from cluster.client import submit
    from gpu.groth16 import Proof, verify

    cluster.setup_keys(SQUARES_SLOW)
    workers("synthesis", wait=False, ZKHIVE_WORKER__PARTITION_WORKERS="2")
    workers("aggregate", wait=False)
    prover = workers("prove", "cpu:0", wait=False, ZKHIVE_SRS__PRELOAD=f'["{SQUARES_SLOW.name}"]',
                     ZKHIVE_PROVE_AHEAD=ahead)
    for w in workers.started:
        w.wait_ready(cluster.redis)
    docs = [make_c1(SQUARES_SLOW, seed=40 + j) for j in range(n_jobs)]
    jobs = [submit(d, job_id=f"ahead{ahead}-{j}") for j, d in enumerate(docs)]
    vk = cluster.runtime().keys.load_vk(SQUARES_SLOW)
    stages = []
    for job, doc in zip(jobs, docs):
        res = job.result(timeout=180)
        c1 = SQUARES_SLOW.parse_c1(doc)
        proofs = [Proof.from_bytes(p) for p in res.partition_proofs()]
        assert len(proofs) == SQUARES_SLOW.num_partitions()
        for k, p in enumerate(proofs):
            assert verify(vk, SQUARES_SLOW.public_inputs(c1, k), p), (job.job_id, k)
        assert not verify(vk, SQUARES_SLOW.public_inputs(c1, 1), proofs[0])
        stages += [(e["partition"], e["stage"]) for e in timeline.load(cluster.redis, job.job_id)
                   if e["event"] == "stage"]
    return prover, stages


def test_prover_proves_ahead_and_every_proof_verifies(cluster, workers):
    prover, stages = _run_jobs(cluster, workers, ahead="1")
    ahead = [k for k, s in stages if s == "fetch_ahead"]
    # 6 partitions queue up behind a ~0.2 s proof each: the thread finds some of them waiting
    assert len(ahead) >= 1, stages
    # each one staged by the backend after its fetch (Prover.stage: the CPU backend's is z)
    assert sorted(k for k, s in stages if s == "stage_ahead") == sorted(ahead), stages
    assert "prove-ahead: " not in prover.log_text()  # the thread never failed


def test_without_prove_ahead_no_partition_is_proved_ahead(cluster, workers):
    prover, stages = _run_jobs(cluster, workers, ahead="0")
    assert not [s for _, s in stages if s in ("fetch_ahead", "stage_ahead")]
    assert any(s == "combine" for _, s in stages)
