"""The job watchdog: reconciles lost work, re-dispatches it, and fails jobs past their deadline.

It runs as a thread in every worker (any role: a cluster whose aggregate worker died or froze
still finds lost work); one process per interval sweeps, under the lock ``zkhive:watchdog``.
For each active job it checks, in order:

- past ``deadline_at``: fail the job with a report of every missing partition and its last event
  (the last resort: lost work is found within seconds by the next step);
- every unit's state (cluster.pipeline.reconcile): a lapsed lease, a message lost in the hand-over, a
  partition waiting on a queue no live prover serves, or every partition proved and the
  aggregation neither running nor queued: re-dispatched.

Everything goes through the job store (``rt.jobs``: fail, clear_claim, event, active, deactivate),
the leases (``rt.leases``) and the dispatcher (``rt.dispatch``), as the tasks do.
"""
from __future__ import annotations

import logging
import threading
import time

from . import reconcile, timeline
from .jobs import TERMINAL

log = logging.getLogger(__name__)
LOCK = "zkhive:watchdog"


def _last_event(events: list[dict], k: int) -> str:
    mine = [e for e in events if e.get("partition") == k]
    if not mine:
        return "no event"
    e = mine[-1]
    extra = e.get("worker") or e.get("queue") or ""
    return f"{e['event']} {extra}".strip()


def inspect_job(rt, job_id: str, now: float | None = None, seen=None) -> list[str]:
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
    return reconcile.reconcile_job(rt, rec, parts, seen if seen is not None else reconcile.look(rt))


class Watchdog:
    """The thread that runs ``inspect_job`` over the active jobs every interval."""

    def __init__(self, rt):
        self.rt = rt
        self.interval_s = rt.settings.delivery.watchdog_interval_s
        self.who = rt.worker.worker_id if rt.worker is not None else "client"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zkhive-watchdog", daemon=True)

    def start(self) -> "Watchdog":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.interval_s + 5)

    def sweep(self) -> bool:
        """One pass over the active jobs, unless another process swept within the interval."""
        if not self.rt.redis.set(LOCK, self.who, nx=True, px=max(100, int(self.interval_s * 900))):
            return False
        seen = reconcile.look(self.rt)
        for job_id in self.rt.jobs.active():
            try:
                inspect_job(self.rt, job_id, seen=seen)
            except Exception:
                log.exception("watchdog: job %s", job_id)
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sweep()
            except Exception as e:  # Redis away for a moment
                log.warning("watchdog sweep failed: %s", e)
