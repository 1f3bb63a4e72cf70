"""First writer wins for a partition proof (issue 35): two processes, each with its own Redis
connections, finish a proof of the same partition and are released together by a barrier into
the task's final step (``cluster.pipeline.tasks.store_proof``, the proof store's SET NX), outside
the chord, so the winner's proof completes the set and sends the aggregation. Exactly one proof
is stored (the winner's, never replaced), the loser records a ``duplicate`` event and says so in
one log line naming the job, the partition and both tasks, and exactly one aggregation message
is sent per job (none where partition 1 is still missing, none where the chord sends it). Without the NX both "win": two ``prove_end`` events, the last writer's proof
stored, two aggregations."""
from __future__ import annotations

import logging
import multiprocessing as mp
import time

import pytest

pytestmark = pytest.mark.integration

ROUNDS = 12
WRITERS = ("lapsed", "redispatched")


def _writer(name: str, env: dict, jobs: list, barrier, out) -> None:
    """One writer process: its own settings, Celery app and Redis connections."""
    from cluster import settings
    from cluster.pipeline.app import configure, runtime
    from cluster.pipeline.tasks import Delivery, store_proof

    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())
    logging.getLogger("cluster.pipeline.tasks").addHandler(Keep(logging.WARNING))
    configure(settings.load(env=env))
    rt = runtime()
    rt.redis.ping()
    results = []
    for job_id, in_chord in jobs:
        rec = rt.jobs.get(job_id)
        proof = f"{name}:{job_id}".encode().ljust(192, b"\0")
        barrier.wait(timeout=60)
        res = store_proof(rt, Delivery(task_id=f"{name}-{job_id}", in_chord=in_chord), rec, 0, proof,
                          {"worker": name, "device": None})
        results.append((job_id, res["duplicate"]))
    out.put((name, results, lines))


def _job(jobs, job_id: str, partitions: int = 1):
    from cluster.pipeline.blobs import BlobRef
    from cluster.pipeline.jobs import JobRecord

    now = time.time()
    rec = JobRecord(job_id=job_id, params="squares-a", circuit_digest="0" * 16, num_partitions=partitions, priority=5,
                    c1=BlobRef(store="redis", sha256="0" * 64, size=0, kind="c1"),
                    submitted_at=now, deadline_at=now + 600)
    assert jobs.create(rec)
    return rec


def _aggregations(r) -> dict[str, int]:
    from cluster.pipeline.queues import queued_messages
    from cluster.pipeline.workflow import AGGREGATE, _message_args

    sent: dict[str, int] = {}
    for _lst, _raw, msg in queued_messages(r):
        args = _message_args(msg)
        if msg.get("headers", {}).get("task") == AGGREGATE and args:
            sent[args[1]] = sent.get(args[1], 0) + 1
    return sent


def test_two_writers_racing_for_one_partition_store_one_proof_and_send_once(cluster):
    from cluster.pipeline import timeline
    from cluster.pipeline.app import runtime

    cluster.flush()
    cluster.configure_here()
    rt = runtime()
    # a third each: re-proved alone and completing the set (the winner aggregates), re-proved
    # alone with partition 1 missing, and in the chord (whose body aggregates)
    kinds = {f"race-{i}": ("alone", "incomplete", "chord")[i % 3] for i in range(ROUNDS)}
    job_ids = list(kinds)
    for j in job_ids:
        _job(rt.jobs, j, partitions=2 if kinds[j] == "incomplete" else 1)
    jobs = [(j, kinds[j] == "chord") for j in job_ids]
    env = {k: v for k, v in cluster.env.items() if k.startswith("ZKHIVE_")}
    ctx = mp.get_context("spawn")  # each writer makes its own connections, nothing inherited
    barrier, out = ctx.Barrier(len(WRITERS)), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(n, env, jobs, barrier, out)) for n in WRITERS]
    for p in procs:
        p.start()
    got = {}
    for _ in procs:
        name, results, lines = out.get(timeout=120)
        got[name] = (dict(results), lines)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    sent = _aggregations(rt.redis)
    winners = {}
    for j in job_ids:
        won = [n for n in WRITERS if not got[n][0][j]]
        assert len(won) == 1, f"{j}: winners {won}"
        [winner], [loser] = won, [n for n in WRITERS if n != won[0]]
        winners[j] = winner
        stored = rt.jobs.partition(j, 0)
        assert bytes.fromhex(stored["proof"]).startswith(f"{winner}:{j}".encode())
        assert stored["task_id"] == f"{winner}-{j}"
        events = [e for e in timeline.load(rt.redis, j) if e["event"] in ("prove_end", "duplicate")]
        assert sorted(e["event"] for e in events) == ["duplicate", "prove_end"], events
        [dup] = [e for e in events if e["event"] == "duplicate"]
        assert dup["task_id"] == f"{loser}-{j}" and dup["reason"] == "another run stored first"
        assert [e["proof_sha"] for e in events] == [stored["proof"][:16]] * 2  # the winner's, both
        said = [line for line in got[loser][1] if line.startswith(f"job {j} partition 0: ")]
        assert said == [f"job {j} partition 0: another run stored its proof first (task {winner}-{j}); "
                        f"this proof (task {loser}-{j}) is dropped and nothing is sent"], got[loser][1]
        assert not [line for line in got[winner][1] if line.startswith(f"job {j} ")]
        assert sent.get(j, 0) == (kinds[j] == "alone"), f"{j} ({kinds[j]}): {sent.get(j, 0)} aggregations sent"
    print("winners:", {n: sum(w == n for w in winners.values()) for n in WRITERS})
