"""The job watchdog: reconciles lost work, re-dispatches it, and fails jobs past their deadline.

It runs as a thread in every worker (any role: a cluster whose aggregate worker died or froze
still finds lost work); one process per interval sweeps, under the lock ``zkhive:watchdog``.
For each active job it checks, in order:

- past ``deadline_at`` (its kind's ``[deadlines]`` setting, or its own ``deadline_s``): fail the
  job with one line naming the setting, the kind and the priority, and a report of every missing
  partition and its last event, a ``deadline_missed`` timeline event beside ``failed``
  (``zkhive_deadline_missed_total``). Every worker's watchdog thread also wakes at the soonest
  deadline of the active jobs (``zkhive:deadlines``, looked at every ``DEADLINE_POLL_S``), not
  only every interval, and fails the overdue ones without the sweep's lock (failing is atomic
  and happens once): a 25 s WinningPoSt deadline is not seen up to an interval late;
- every unit's state (cluster.pipeline.reconcile): a lapsed lease, a message lost in the hand-over, a
  partition waiting on a queue no live prover serves, or every partition proved and the
  aggregation neither running nor queued: re-dispatched.

A sweep asked for (``request_sweep``: the keeper, when it finds a worker of its machine gone; a
standby prover when it takes a dead prover's device over; a prover when it becomes ready, for
units that wait in ``prove.unassigned``) runs at the next deadline poll, whatever the interval
and the lock: the gone process's units are re-dispatched then (reconcile: ``holder_gone``), not
at their leases' lapse, and a unit on a queue no live prover served is re-routed.

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
#: set by ``request_sweep`` (see above): the first watchdog thread to see it (within
#: DEADLINE_POLL_S) sweeps at once, a gone holder's units re-dispatched then
#: (cluster.pipeline.reconcile: ``holder_gone``) instead of at the lapse
WAKE = "zkhive:watchdog:now"
#: how long a request stands when no worker is there to see it (all of them gone)
WAKE_TTL_MS = 30_000
#: seconds between looks at the soonest deadline (one ZRANGE): how late a deadline is seen at most
DEADLINE_POLL_S = 0.25


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
    if now >= rec.deadline_at:
        fail_overdue(rt, rec, missing, now)
        return ["deadline"]
    return reconcile.reconcile_job(rt, rec, parts, seen if seen is not None else reconcile.look(rt))


def fail_overdue(rt, rec, missing: list[int], now: float) -> bool:
    """Fail a job past its deadline, naming the deadline's setting; False when it had ended."""
    from .jobs import priority_name

    events = timeline.load(rt.redis, rec.job_id)
    report = "; ".join(f"partition {k}: {_last_event(events, k)}" for k in missing) or "all partitions proved"
    seconds = rec.deadline_at - rec.submitted_at
    prio = priority_name(rec.priority)
    msg = (f"deadline passed ({now - rec.submitted_at:.1f} s after submission): a {rec.kind} job, priority {prio}, "
           f"must be done within {seconds:g} s ({rec.deadline_from}): {report}")
    if not rt.jobs.fail(rec.job_id, msg, reason="deadline", kind=rec.kind, priority=prio,
                        setting=rec.deadline_from, seconds=seconds):
        return False
    rt.jobs.event(rec.job_id, "deadline_missed", kind=rec.kind, priority=prio, setting=rec.deadline_from,
                  seconds=seconds, late_s=round(now - rec.deadline_at, 3), missing=missing)
    return True


def expire_overdue(rt, now: float | None = None) -> list[str]:
    """Fail every active job whose deadline has passed (from ``zkhive:deadlines``, no lock);
    returns the ids failed here. Ended or expired jobs found there are dropped from it."""
    now = time.time() if now is None else now
    failed = []
    for job_id in rt.jobs.overdue(now):
        rec = rt.jobs.get(job_id)
        if rec is None or rt.jobs.status(job_id) in TERMINAL:
            rt.jobs.deactivate(job_id)
            continue
        parts = rt.jobs.partitions(job_id, rec.num_partitions)
        if fail_overdue(rt, rec, [k for k in range(rec.num_partitions) if k not in parts], now):
            failed.append(job_id)
    return failed


def request_sweep(r) -> None:
    """Ask for a sweep now (see WAKE)."""
    r.set(WAKE, "1", px=WAKE_TTL_MS)


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

    def sweep(self, now: bool = False) -> bool:
        """One pass over the active jobs, unless another process swept within the interval
        (now: asked for, ``request_sweep``; at once whatever the lock says)."""
        if not self.rt.redis.set(LOCK, self.who, nx=not now, px=max(100, int(self.interval_s * 900))):
            return False
        seen = reconcile.look(self.rt)
        for job_id in self.rt.jobs.active():
            try:
                inspect_job(self.rt, job_id, seen=seen)
            except Exception:
                log.exception("watchdog: job %s", job_id)
        return True

    def _wait_s(self) -> float:
        """Until the soonest deadline, at least 20 ms, at most DEADLINE_POLL_S (a job submitted
        meanwhile may have a sooner one) and the sweep interval."""
        try:
            soonest = self.rt.jobs.next_deadline()
        except Exception:  # Redis away: the sweep says so
            soonest = None
        cap = min(self.interval_s, DEADLINE_POLL_S)
        return cap if soonest is None else min(cap, max(0.02, soonest - time.time() + 0.005))

    def _run(self) -> None:
        next_sweep = time.monotonic() + self.interval_s
        while not self._stop.wait(self._wait_s()):
            try:
                expire_overdue(self.rt)  # JobStore.fail logs each
                asked = bool(self.rt.redis.delete(WAKE))
                if asked or time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + self.interval_s
                    self.sweep(now=asked)
            except Exception as e:  # Redis away for a moment
                log.warning("watchdog sweep failed: %s", e)
