"""The job watchdog: finds lost partitions, re-dispatches them, and fails jobs past their deadline.

It runs as a thread in every aggregate worker; a per-job lock makes one of them look at a given
job per interval. For each active job it checks, in order:

- past ``deadline_at``: fail the job with a report of every missing partition and its last event;
- every partition stored but the job not done (the chord body fired early, or a partition was
  re-proved outside the chord): start the aggregation;
- a partition claimed by a prover that left the registry (killed mid-prove: its message waits
  unacked for the visibility timeout, on a queue nobody serves): re-dispatch it elsewhere;
- a partition routed to a queue no live prover serves (``prove.unassigned``, or a dead device's
  queue) and not yet picked up: re-dispatch it once a prover exists.

A re-dispatch spends from the partition's one retry budget (``delivery.partition_retries``,
cluster.pipeline.retry). Everything goes through the job store (``rt.jobs``: fail, spend_retry,
clear_claim, active, deactivate) and the dispatcher (``rt.dispatch``), as the tasks do.
"""
from __future__ import annotations

import logging
import threading
import time

from . import registry, timeline
from .jobs import TERMINAL
from .retry import within_budget
from .workflow import dispatch_partition

log = logging.getLogger(__name__)


def _last_event(events: list[dict], k: int) -> str:
    mine = [e for e in events if e.get("partition") == k]
    if not mine:
        return "no event"
    e = mine[-1]
    extra = e.get("worker") or e.get("queue") or ""
    return f"{e['event']} {extra}".strip()


def inspect_job(rt, job_id: str, now: float | None = None) -> list[str]:
    """Look at one active job and act; returns what it did (for logs and tests)."""
    now = time.time() if now is None else now
    rec = rt.jobs.get(job_id)
    status = rt.jobs.status(job_id)
    if rec is None or status in TERMINAL:
        rt.jobs.deactivate(job_id)
        return ["inactive"]
    n = rec.num_partitions
    parts = rt.jobs.partitions(job_id, n)
    missing = [k for k in range(n) if k not in parts]
    if now > rec.deadline_at:
        events = timeline.load(rt.redis, job_id)
        report = "; ".join(f"partition {k}: {_last_event(events, k)}" for k in missing) or "all partitions proved"
        rt.jobs.fail(job_id, f"deadline passed ({now - rec.submitted_at:.0f} s after submission): {report}")
        return ["deadline"]
    if not missing:
        if rt.jobs.lock(job_id, "kick-aggregate", ttl_s=max(5, int(rt.settings.delivery.watchdog_interval_s * 3))):
            rt.dispatch.aggregate(rec)
            return ["aggregate"]
        return []
    live = registry.workers(rt.redis)
    live_ids = {(w.worker_id, w.incarnation) for w in live}
    live_queues = {w.queues[0] for w in live if w.role == "prove" and w.ready and w.queues}
    actions = []
    for k in missing:
        claim = rt.jobs.claim(job_id, k)
        route = rt.jobs.route(job_id, k)
        if claim is not None and (claim.get("worker"), claim.get("incarnation")) not in live_ids:
            why, exclude = f"prover {claim.get('worker')} left the registry mid-prove", [claim.get("device")]
        elif claim is None and route is not None and route.get("queue") not in live_queues \
                and live_queues and rt.jobs.assignment(job_id, k) is not None:
            why, exclude = f"queue {route.get('queue')} has no live prover", []
        else:
            continue
        budget = rt.settings.delivery.partition_retries
        count = rt.jobs.spend_retry(job_id, k)
        if not within_budget(count, budget):
            rt.jobs.fail(job_id, f"partition {k}: lost ({why}) after {count - 1} retries "
                                 f"(delivery.partition_retries={budget})", partition=k)
            return ["failed"]
        rt.jobs.clear_claim(job_id, k)
        log.warning("job %s partition %d: %s; re-dispatching", job_id, k, why)
        dispatch_partition(rt, rec, k, exclude=[d for d in exclude if d], reason=why)
        actions.append(f"redispatch {k}")
    return actions


class Watchdog:
    """The thread that runs ``inspect_job`` over the active jobs every interval."""

    def __init__(self, rt):
        self.rt = rt
        self.interval_s = rt.settings.delivery.watchdog_interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zkhive-watchdog", daemon=True)

    def start(self) -> "Watchdog":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.interval_s + 5)

    def sweep(self) -> None:
        lock_s = max(1, int(self.interval_s))
        for job_id in self.rt.jobs.active():
            if self.rt.jobs.lock(job_id, "watchdog", ttl_s=lock_s):
                try:
                    inspect_job(self.rt, job_id)
                except Exception:
                    log.exception("watchdog: job %s", job_id)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sweep()
            except Exception as e:  # Redis away for a moment
                log.warning("watchdog sweep failed: %s", e)
