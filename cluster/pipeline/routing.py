"""Routing prove tasks by key residency and load.

A partition's prove task is routed when it is *sent*: in a chain that is the moment its
synthesis finished, in the synthesis worker, so the choice uses the registry as it is then, not
as it was at submission. Order of preference (``choose_queue``):

1. a device that holds the circuit's proving key resident, least loaded first;
1b. else one whose prover makes that key in its own process (``[srs] in_process``);
2. else a device with room (free memory >= the key's size) to load it, least loaded first;
3. else any prover (it evicts old keys), least loaded first;
4. no prover registered at all: ``prove.unassigned``, where the watchdog picks it up later.

Load = messages waiting in the device queue that are served before this partition (its job's
priority level and the more urgent ones: a critical partition overtakes the normal backlog, so
that backlog is no load for it) + tasks in flight there, divided by the provers sharing the queue. Devices in ``exclude`` (a partition being re-proved
after a failure there) are used only when nothing else is left.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from .queues import AGGREGATE_QUEUE, SYNTHESIS_QUEUE, UNASSIGNED_QUEUE, URGENT_SYNTHESIS_QUEUE, queue_depth
from .registry import WorkerInfo

log = logging.getLogger(__name__)

PROVE_TASK = "zkhive.prove_partition"  # cluster.pipeline.workflow.PROVE


@dataclass(frozen=True)
class Choice:
    queue: str
    reason: str          # "resident" | "room" | "evict" | "excluded-only" | "no-prover"
    workers: tuple[str, ...] = ()


def choose_queue(provers: list[WorkerInfo], params: str, key_size: int, depths: dict[str, int],
                 exclude_devices: tuple[str, ...] = ()) -> Choice:
    by_queue: dict[str, list[WorkerInfo]] = {}
    for w in provers:
        if w.role == "prove" and w.ready and w.queues:
            by_queue.setdefault(w.queues[0], []).append(w)
    if not by_queue:
        return Choice(UNASSIGNED_QUEUE, "no-prover")

    def load(q: str) -> float:
        ws = by_queue[q]
        return (depths.get(q, 0) + sum(len(w.inflight) for w in ws)) / len(ws)

    def holds(q: str) -> bool:
        return any(params in w.resident_keys for w in by_queue[q])

    def makes(q: str) -> bool:  # makes the key in its own process ([srs] in_process)
        return any(params in w.makes_keys for w in by_queue[q])

    def room(q: str) -> bool:
        return any(w.free_memory is None or w.free_memory >= key_size for w in by_queue[q])

    allowed = [q for q in by_queue if not any(w.device in exclude_devices for w in by_queue[q])]
    pool = allowed or list(by_queue)
    for reason, test in (("resident", holds), ("makes", makes), ("room", room), ("evict", lambda q: True)):
        cands = [q for q in pool if test(q)]
        if cands:
            q = min(cands, key=lambda q: (load(q), q))
            return Choice(q, reason if allowed else "excluded-only",
                          tuple(w.worker_id for w in by_queue[q]))
    raise AssertionError("unreachable: the last test accepts every queue")


def route_partition(rt, job_id: str, partition: int, exclude_devices: tuple[str, ...] = ()) -> Choice:
    """Choose a device queue for one partition from the live registry, and record the choice."""
    from . import registry
    from synthesis.circuits import get_circuit

    rec = rt.jobs.get(job_id)
    if rec is None:
        return Choice(UNASSIGNED_QUEUE, "unknown-job")
    circuit = get_circuit(rec.params)
    provers = registry.workers(rt.redis, role="prove", ready_only=True)
    depths = {q: queue_depth(rt.redis, q, up_to=rec.priority) for q in {w.queues[0] for w in provers if w.queues}}
    choice = choose_queue(provers, rec.params, rt.keys.size(circuit), depths, exclude_devices)
    rt.jobs.set_route(job_id, partition, queue=choice.queue, reason=choice.reason)
    rt.jobs.event(job_id, "prove_routed", partition=partition, queue=choice.queue, reason=choice.reason)
    return choice


def route_task(name, args, kwargs, options, task=None, **kw):
    """Celery router (``task_routes``): prove tasks by residency; the rest by fixed queues."""
    from .app import runtime

    if name == "zkhive.synthesize_partition":
        # a CRITICAL job's (priority 0: cuzk's WinningPoSt) to the queue that an urgent worker
        # keeps a process for: eight PoRep partitions in synthesis hold every process of the
        # others for ~7.5 s (the H200's host), and a Redis priority only orders the waiting
        return {"queue": URGENT_SYNTHESIS_QUEUE if options.get("priority") == 0 else SYNTHESIS_QUEUE}
    if name != PROVE_TASK:
        return {"queue": AGGREGATE_QUEUE}
    if options.get("queue"):  # an explicit choice (a retry on another device) stands
        return None
    # a chain sends prove_partition(synthesis_result, job_id, partition, exclude=...)
    try:
        _, job_id, partition = args[:3]
    except ValueError:
        log.error("prove task with unexpected arguments %r: default routing", args)
        return None
    exclude = tuple((kwargs or {}).get("exclude") or ())
    return {"queue": route_partition(runtime(), job_id, int(partition), exclude).queue}
