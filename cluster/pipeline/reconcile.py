"""Reconciliation: what the job store expects of each unit against what is queued, leased and done.

A unit is a partition not yet proved (its synthesis, or its proof once the assignment is
stored) or, once every partition is proved, the job's aggregation. Each sweep (cluster.pipeline.watchdog,
every ``delivery.watchdog_interval_s``, one process at a time) looks at every active job's units:

- done (the proof stored; the job finished): nothing to do;
- leased, the lease live: a worker is on it;
- leased, the lease lapsed (the holder was killed or frozen: nobody renewed it for
  ``delivery.lease_ttl_s``): break the lease, ``lease_lapsed`` event, re-dispatch (a proof to
  another device than the holder's);
- leased, the holder a process of this machine that is gone (its PID no longer runs): the same
  at once, before the lapse, with a ``holder_gone`` event (the keeper, which sees a process die
  within its poll, asks every worker's watchdog for a sweep then: cluster.pipeline.watchdog);
- a message for it waits in a queue: fine, unless the queue is a prove queue no live prover
  serves (a dead device, ``prove.unassigned``) while others exist: re-routed;
- none of these (*unaccounted*): its message was lost in the hand-over (Redis handed it to a
  worker that died before kombu recorded it unacknowledged, or before its task took the lease),
  or sits unacknowledged with a frozen or dead consumer, or a final write was lost while Redis
  restarted. A unit unaccounted in every sweep for ``delivery.reconcile_grace_s`` is re-dispatched
  (the grace covers the milliseconds between a task ending and its chain's next message).

Re-dispatch never makes a partition count twice: the proof store is first-writer-wins, a copy
that finds its unit done or leased by a live holder skips, and the aggregation reads only the
store. A lapse is a crash of the unit; the crashes are bounded where the next attempt takes the
lease (``delivery.max_redeliveries``, cluster.pipeline.lease); a re-route or a lost hand-over spends
nothing: the work never started.

After a Redis restart the workers need a moment to reconnect and renew (every third of a TTL):
leases and unaccounted units are judged only once Redis has been up for a lease TTL.

Each re-dispatch's ``redispatched`` event carries ``waited_s``: how long the unit had shown no
sign of life (since its lease's last renewal, or since it was first found unaccounted).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from . import registry
from .lease import AGGREGATE_UNIT, server_time, unit_name
from .workflow import dispatch_partition

log = logging.getLogger(__name__)

UNACKED = "unacked"


def unaccounted_key(job_id: str) -> str:
    from .jobs import key
    return key(job_id, "unaccounted")


@dataclass
class Seen:
    """One sweep's picture of the broker: where each unit's messages are (queue names, or
    ``unacked`` for a message handed to a consumer and not yet acknowledged); the Redis server's
    time; whether Redis has been up long enough to judge leases."""

    where: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    now: float = 0.0
    settled: bool = True
    live_prove_queues: set[str] = field(default_factory=set)

    def of(self, job_id: str, unit: str) -> list[str]:
        return self.where.get((job_id, unit), [])


def look(rt) -> Seen:
    """The broker's state once per sweep."""
    s = rt.settings.delivery
    seen = Seen(where=rt.dispatch.queued_units(rt.redis), now=server_time(rt.redis))
    try:
        uptime = float(rt.redis.info("server").get("uptime_in_seconds", 1e9))
    except Exception:  # a server without INFO (the unit tests' fakeredis)
        uptime = 1e9
    seen.settled = uptime >= s.lease_ttl_s
    seen.live_prove_queues = {w.queues[0] for w in registry.workers(rt.redis)
                              if w.role == "prove" and w.ready and w.queues}
    return seen


def reconcile_job(rt, rec, parts: dict, seen: Seen) -> list[str]:
    """Act on one active job's units; returns what it did (``redispatch 1``, ``reroute 0``,
    ``aggregate``) for logs and tests."""
    job_id, n = rec.job_id, rec.num_partitions
    missing = [k for k in range(n) if k not in parts]
    units = missing or [None]  # None: the aggregation
    leases = rt.leases.all(job_id)
    pending = {u.decode(): float(v) for u, v in rt.redis.hgetall(unaccounted_key(job_id)).items()}
    grace = rt.settings.delivery.reconcile_grace_s
    host = rt.settings.worker.host
    actions = []
    for k in units:
        unit = unit_name(k)
        lease = leases.get(unit)
        # a holder of this machine that is gone (SIGKILL, a crash) is known dead now: its unit is
        # re-dispatched at this sweep, not up to the TTL later (Redis's restart is no matter)
        gone = lease is not None and not lease.lapsed(seen.now) and rt.leases.holder_gone(lease, host)
        if lease is not None and not lease.lapsed(seen.now) and not gone:
            _accounted(rt, job_id, unit, pending)
            continue
        if not seen.settled and not gone:
            continue
        if lease is not None:
            if not (rt.leases.break_dead(job_id, lease) if gone
                    else rt.leases.break_lapsed(job_id, lease)):
                continue  # renewed or taken meanwhile
            _accounted(rt, job_id, unit, pending)
            if gone:
                rt.jobs.event(job_id, "holder_gone", partition=k, stage=lease.stage,
                              worker=lease.worker, device=lease.device, task_id=lease.task_id,
                              pid=lease.pid, left_s=round(lease.expires_at - seen.now, 3))
                why = f"{lease.holder()} is gone (pid {lease.pid} no longer runs on {host})"
                exclude = [lease.device] if lease.stage == "prove" and lease.device else []
                actions.append(_redispatch(rt, rec, k, why, exclude, seen.now - lease.renewed_at))
                continue
            lapsed_s = round(seen.now - lease.expires_at, 3)
            rt.jobs.event(job_id, "lease_lapsed", partition=k, stage=lease.stage, worker=lease.worker,
                          device=lease.device, task_id=lease.task_id, lapsed_s=lapsed_s)
            why = f"lease of {lease.holder()} lapsed {lapsed_s:.1f} s ago"
            exclude = [lease.device] if lease.stage == "prove" and lease.device else []
            actions.append(_redispatch(rt, rec, k, why, exclude, seen.now - lease.renewed_at))
            continue
        queues = [q for q in seen.of(job_id, unit) if q != UNACKED]
        if queues:
            _accounted(rt, job_id, unit, pending)
            dead = [q for q in queues if q.startswith("prove.") and q not in seen.live_prove_queues]
            if k is not None and dead and len(dead) == len(queues) and seen.live_prove_queues \
                    and rt.jobs.assignment(job_id, k) is not None:
                actions.append(_redispatch(rt, rec, k, f"queue {dead[0]} has no live prover", [], None,
                                           verb="reroute"))
            continue
        first = _first_unaccounted(rt, job_id, unit, seen.now)
        if seen.now - first < grace:
            continue
        _accounted(rt, job_id, unit, pending)
        where = "delivered (unacknowledged) but never started" if seen.of(job_id, unit) else \
            "not queued, leased or done (lost in the hand-over)"
        rt.jobs.event(job_id, "unaccounted", partition=k, detail=where, for_s=round(seen.now - first, 3))
        actions.append(_redispatch(rt, rec, k, f"{'aggregation' if k is None else 'partition'} {where}", [],
                                   seen.now - first))
    return actions


def _redispatch(rt, rec, k, why: str, exclude: list, waited_s: float | None, verb: str = "redispatch") -> str:
    log.warning("job %s %s: %s; re-dispatching", rec.job_id, AGGREGATE_UNIT if k is None else f"partition {k}", why)
    extra = {} if waited_s is None else {"waited_s": round(waited_s, 3)}
    if k is None:
        rt.jobs.event(rec.job_id, "redispatched", reason=why, unit=AGGREGATE_UNIT, **extra)
        rt.dispatch.aggregate(rec)
        return "aggregate"
    rt.jobs.clear_claim(rec.job_id, k)
    dispatch_partition(rt, rec, k, exclude=exclude, reason=why, **extra)
    return f"{verb} {k}"


def _first_unaccounted(rt, job_id: str, unit: str, now: float) -> float:
    key = unaccounted_key(job_id)
    pipe = rt.redis.pipeline()
    pipe.hsetnx(key, unit, repr(now))
    pipe.hget(key, unit)
    pipe.expire(key, rt.settings.delivery.result_ttl_s)
    return float(pipe.execute()[1])


def _accounted(rt, job_id: str, unit: str, pending: dict) -> None:
    if unit in pending:
        rt.redis.hdel(unaccounted_key(job_id), unit)
