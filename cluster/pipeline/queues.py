"""The queues and the broker's lists behind them: their names, the priority levels, how deep a
queue is and what waits in it (read straight from Redis: kombu keeps one list per priority level).

Queues::

    synthesis           CPU workers: C1 input -> one partition's assignment
    synthesis.urgent    a CRITICAL job's synthesis: the urgent synthesis worker's one queue, which
                        the other synthesis workers also serve when free (so that a WinningPoSt
                        never waits for a PoRep partition's synthesis to end: docs/performance.md)
    prove.<host>.<n>    one per GPU (prove.<host>.cpu<n> for a CPU prover), routed by residency
    aggregate           the chord body (verify, assemble), submissions, the job watchdog
    prove.unassigned    prove tasks sent while no prover was registered

Imports nothing of ours: the app (cluster.pipeline.app), routing and the workflow read it.
"""
from __future__ import annotations

SYNTHESIS_QUEUE = "synthesis"
URGENT_SYNTHESIS_QUEUE = "synthesis.urgent"
AGGREGATE_QUEUE = "aggregate"
#: where a prove task waits when no prover is registered; the watchdog moves it on
UNASSIGNED_QUEUE = "prove.unassigned"
#: Redis transport priority levels (0 is served first): critical, high, normal, bulk
PRIORITY_STEPS = [0, 3, 6, 9]
#: the levels' names (cluster.pipeline.jobs.PRIORITIES; cuzk's CRITICAL, HIGH, NORMAL, LOW)
LEVEL_NAMES = ("critical", "high", "normal", "bulk")


def priority_lists(queue: str) -> list[str]:
    """The Redis lists kombu keeps for ``queue``, one per priority level (queue\\x06\\x16N)."""
    return [queue] + [f"{queue}\x06\x16{p}" for p in PRIORITY_STEPS if p]


def queue_depth(r, queue: str, up_to: int | None = None) -> int:
    """Messages waiting in ``queue`` over all priority lists; with ``up_to`` (a priority, 0-9)
    only those served before or with a message of that priority (its level and the more urgent)."""
    lists = priority_lists(queue)
    if up_to is not None:
        lists = [n for n, step in zip(lists, PRIORITY_STEPS) if step <= up_to]
    pipe = r.pipeline()
    for n in lists:
        pipe.llen(n)
    return sum(pipe.execute())


def queue_depths(r, queue: str) -> dict[str, int]:
    """Messages waiting in ``queue`` per priority level: {"critical": n, "high": .., ...}."""
    pipe = r.pipeline()
    for n in priority_lists(queue):
        pipe.llen(n)
    return dict(zip(LEVEL_NAMES, pipe.execute()))


def queued_messages(r):
    """(list, raw, message) for every message waiting in one of our queues: synthesis,
    aggregate and every ``prove.*`` queue, a dead device's included."""
    import json

    lists = set(priority_lists(SYNTHESIS_QUEUE) + priority_lists(URGENT_SYNTHESIS_QUEUE)
                + priority_lists(AGGREGATE_QUEUE))
    lists |= {k for k in r.scan_iter(match="prove.*", count=500)}
    for lst in sorted(lists, key=lambda k: k if isinstance(k, bytes) else k.encode()):
        if r.type(lst) != b"list":
            continue
        for raw in r.lrange(lst, 0, -1):
            try:
                yield lst, raw, json.loads(raw)
            except ValueError:
                continue
