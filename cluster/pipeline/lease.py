"""Leases: liveness of every claimed unit of work, renewed by its worker while the task runs.

A unit is one partition (its synthesis, then its proof) or a job's aggregation. The task body
that takes a unit holds its lease (``Leases.hold``): an entry in the job's hash
``zkhive:job:<id>:leases`` (field ``<k>`` or ``aggregate``) naming the holder (worker,
incarnation, host, pid, task id, stage) and when the lease ends, ``delivery.lease_ttl_s`` after
its last renewal. A thread of the task's process renews it every third of the TTL. A worker
that is SIGKILLed, or frozen (SIGSTOP: its threads stop too), stops renewing; within the TTL the
lease *lapses* and the reconciler (cluster.pipeline.reconcile) re-dispatches the unit. Celery's
visibility timeout (hours: it must exceed the longest proof) is no longer what finds lost work.

Times are the Redis server's (``TIME`` in the scripts), so workers on machines with skewed
clocks agree on when a lease ends.

Deliveries and crashes: an attempt that takes a lease and ends (done, failed, retried) closes
it; one whose process died leaves it open. ``hold`` reports how many earlier attempts of the unit
were left open (``crashes``): the bound ``delivery.max_redeliveries`` is on those, so the same
message queued five times is five duplicates (each finds the unit done or leased, and skips),
not five crashes. A delivery that finds the unit leased by a live holder is a duplicate and
skips; a lease whose holder is a process of this host that no longer exists (a prefork child
killed under its task, whose message Celery requeued at once) is taken over at once.

Keys (expiring with the job): ``zkhive:job:<id>:leases`` (hash: unit -> lease JSON),
``zkhive:job:<id>:opened`` (hash: ``<unit>:<stage>`` -> attempts opened and not closed: the
crashes of that stage of the unit).
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from .jobs import key

log = logging.getLogger(__name__)

AGGREGATE_UNIT = "aggregate"


def unit_name(partition: int | None) -> str:
    return AGGREGATE_UNIT if partition is None else str(partition)


def leases_key(job_id: str) -> str:
    return key(job_id, "leases")


def opened_key(job_id: str) -> str:
    return key(job_id, "opened")


@dataclass
class Lease:
    """One unit's lease as stored (``expires_at`` and ``renewed_at`` in Redis server seconds)."""

    unit: str
    stage: str
    token: str
    worker: str | None = None
    incarnation: str | None = None
    device: str | None = None
    host: str | None = None
    pid: int | None = None
    task_id: str | None = None
    taken_at: float = 0.0
    renewed_at: float = 0.0
    expires_at: float = 0.0

    @classmethod
    def from_json(cls, unit: str, raw) -> "Lease":
        doc = json.loads(raw)
        return cls(unit=unit, **{k: doc.get(k) for k in cls.__dataclass_fields__ if k != "unit" and k in doc})

    def holder(self) -> str:
        return f"{self.worker or 'pid ' + str(self.pid)} ({self.stage}, task {self.task_id})"

    def lapsed(self, now: float) -> bool:
        return self.expires_at <= now


@dataclass
class Held:
    """What ``Leases.hold`` yields: the lease when taken (else who holds it) and the crash count."""

    taken: bool
    lease: Lease | None
    #: earlier attempts of this unit whose process died holding it (never closed)
    crashes: int = 0
    #: set by the renewal thread when another holder took the unit over (a lapse, then a
    #: re-dispatch): the work may go on, its result is deduplicated (first writer wins)
    lost: threading.Event = field(default_factory=threading.Event)


def server_time(r) -> float:
    sec, usec = r.time()
    return sec + usec / 1e6


class Leases:
    """Lease operations over one Redis client; ``ttl_s`` is ``delivery.lease_ttl_s``."""

    def __init__(self, r, ttl_s: float, job_ttl_s: int):
        self.r, self.ttl_s, self.job_ttl_s = r, ttl_s, job_ttl_s
        self._acquire = r.register_script(_ACQUIRE)
        self._renew = r.register_script(_RENEW)
        self._release = r.register_script(_RELEASE)
        self._break = r.register_script(_BREAK)

    # -- reading ------------------------------------------------------------------------------------
    def all(self, job_id: str) -> dict[str, Lease]:
        return {u.decode(): Lease.from_json(u.decode(), v) for u, v in self.r.hgetall(leases_key(job_id)).items()}

    def get(self, job_id: str, partition: int | None) -> Lease | None:
        raw = self.r.hget(leases_key(job_id), unit_name(partition))
        return None if raw is None else Lease.from_json(unit_name(partition), raw)

    # -- taking, renewing, giving back ------------------------------------------------------------
    def acquire(self, job_id: str, partition: int | None, stage: str, *, takeover: str | None = None,
                **holder) -> Held:
        """Take the unit's lease unless a live holder has it (``takeover``: the token of a dead
        holder's lease to replace even though it has not lapsed)."""
        unit = unit_name(partition)
        token = uuid.uuid4().hex
        doc = {"stage": stage, "token": token, "pid": os.getpid(), **holder}
        ok, crashes, raw = self._acquire(keys=[leases_key(job_id), opened_key(job_id)],
                                         args=[unit, json.dumps(doc), int(self.ttl_s * 1000), takeover or "",
                                               self.job_ttl_s])
        lease = Lease.from_json(unit, raw)
        return Held(bool(ok), lease, int(crashes))

    def renew(self, job_id: str, lease: Lease) -> bool:
        """Extend our lease by the TTL; False when it is no longer ours (broken after a lapse)."""
        return bool(self._renew(keys=[leases_key(job_id)],
                                args=[lease.unit, lease.token, int(self.ttl_s * 1000)]))

    def release(self, job_id: str, lease: Lease) -> bool:
        """The attempt ended (however): drop the lease and close the attempt, if still ours."""
        return bool(self._release(keys=[leases_key(job_id), opened_key(job_id)], args=[lease.unit, lease.token]))

    def break_lapsed(self, job_id: str, lease: Lease) -> bool:
        """Remove a lease that lapsed (the reconciler, before it re-dispatches the unit); False
        when it was renewed or replaced meanwhile."""
        return bool(self._break(keys=[leases_key(job_id)], args=[lease.unit, lease.token, 0]))

    def break_dead(self, job_id: str, lease: Lease) -> bool:
        """Remove the lease of a holder known to be gone (``holder_gone``) before it lapses;
        False when it was replaced meanwhile (the token is the holder's own, so a live holder's
        renewal cannot have kept it)."""
        return bool(self._break(keys=[leases_key(job_id)], args=[lease.unit, lease.token, 1]))

    def forget(self, job_id: str) -> None:
        self.r.delete(leases_key(job_id), opened_key(job_id))

    def hold(self, job_id: str, partition: int | None, stage: str, *, on_lost: Callable[[Lease], Any] | None = None,
             **holder) -> "Holding":
        """``with leases.hold(job, k, "prove", worker=..., ...) as held:`` takes the lease (see
        ``acquire``), renews it from a thread while the block runs, and releases it at the end.
        ``held.taken`` False: a live holder has the unit (``held.lease`` names it)."""
        return Holding(self, job_id, partition, stage, on_lost, holder)

    @staticmethod
    def holder_gone(lease: Lease, host: str | None) -> bool:
        """The lease's holder was a process of ``host`` (this machine) that no longer exists: a
        SIGKILLed or crashed worker, whose lease would otherwise stand until it lapses (up to
        the TTL after its last renewal). A PID taken again by another process reads as alive:
        the lease then lapses as before."""
        from .registry import _pid_alive

        return bool(host) and lease.host == host and bool(lease.pid) \
            and lease.pid != os.getpid() and not _pid_alive(lease.pid)

    def dead_holder_token(self, job_id: str, partition: int | None, host: str | None) -> str | None:
        """The token of the unit's lease when its holder is a process of ``host`` that is gone
        (a killed prefork child): taken over at once instead of after the TTL."""
        cur = self.get(job_id, partition)
        return cur.token if cur is not None and self.holder_gone(cur, host) else None


class Holding:
    def __init__(self, leases: Leases, job_id, partition, stage, on_lost, holder):
        self.leases, self.job_id, self.partition, self.stage = leases, job_id, partition, stage
        self.on_lost, self.holder = on_lost, holder
        self.held: Held | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Held:
        takeover = self.leases.dead_holder_token(self.job_id, self.partition, self.holder.get("host"))
        self.held = self.leases.acquire(self.job_id, self.partition, self.stage, takeover=takeover, **self.holder)
        if self.held.taken:
            self._thread = threading.Thread(target=self._renew_loop, daemon=True,
                                            name=f"zkhive-lease-{self.job_id}-{self.held.lease.unit}")
            self._thread.start()
        return self.held

    def __exit__(self, *exc) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(5)
        if not self.held.lost.is_set():
            try:
                self.leases.release(self.job_id, self.held.lease)
            except Exception as e:  # Redis away: the lease lapses by itself; counted as a crash
                log.warning("could not release the lease of %s/%s: %s", self.job_id, self.held.lease.unit, e)

    def _renew_loop(self) -> None:
        every = self.leases.ttl_s / 3
        while not self._stop.wait(every):
            try:
                if not self.leases.renew(self.job_id, self.held.lease):
                    self.held.lost.set()
                    log.warning("job %s unit %s: lease lost (it lapsed and the unit was re-dispatched)",
                                self.job_id, self.held.lease.unit)
                    if self.on_lost is not None:
                        self.on_lost(self.held.lease)
                    return
            except Exception as e:  # Redis away: keep trying; the lease may lapse meanwhile
                log.warning("could not renew the lease of %s/%s: %s", self.job_id, self.held.lease.unit, e)


def durable(fn: Callable[[], Any], what: str, *, budget_s: float = 60.0, first_delay_s: float = 0.2) -> Any:
    """Run a task's final write ``fn`` again while Redis is away (connection refused, loading its
    AOF after a restart), for up to ``budget_s``: a proof finished while Redis restarts is stored
    once Redis is back instead of being dropped with its message left unacknowledged."""
    import redis

    end = time.monotonic() + budget_s
    delay = first_delay_s
    while True:
        try:
            return fn()
        except (redis.ConnectionError, redis.TimeoutError) as e:  # BusyLoadingError is one
            if time.monotonic() + delay > end:
                raise
            log.warning("%s: Redis unavailable (%s); again in %.1f s", what, e, delay)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


# KEYS: leases, opened. ARGV: unit, lease JSON, ttl ms, takeover token, job ttl s
# returns {taken 0/1, crashes (earlier attempts never closed), the lease now stored}
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local attempt = ARGV[1] .. ':' .. cjson.decode(ARGV[2])['stage']
local opened = tonumber(redis.call('HGET', KEYS[2], attempt) or '0')
if cur then
  local c = cjson.decode(cur)
  if c['expires_at'] > now and c['token'] ~= ARGV[4] then return {0, opened, cur} end
end
local doc = cjson.decode(ARGV[2])
doc['taken_at'] = now
doc['renewed_at'] = now
doc['expires_at'] = now + tonumber(ARGV[3]) / 1000
local raw = cjson.encode(doc)
redis.call('HSET', KEYS[1], ARGV[1], raw)
redis.call('HINCRBY', KEYS[2], attempt, 1)
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return {1, opened, raw}
"""

# KEYS: leases. ARGV: unit, token, ttl ms. Ours (even lapsed, while nobody broke it): extend.
_RENEW = """
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
local c = cjson.decode(cur)
if c['token'] ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
c['renewed_at'] = now
c['expires_at'] = now + tonumber(ARGV[3]) / 1000
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(c))
return 1
"""

# KEYS: leases, opened. ARGV: unit, token. Ours: drop it and close the attempt.
_RELEASE = """
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
local c = cjson.decode(cur)
if c['token'] ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
local attempt = ARGV[1] .. ':' .. c['stage']
if tonumber(redis.call('HINCRBY', KEYS[2], attempt, -1)) < 0 then redis.call('HSET', KEYS[2], attempt, 0) end
return 1
"""

# KEYS: leases. ARGV: unit, token, gone. Still that lease and lapsed (or its holder known gone:
# gone = '1'): remove it.
_BREAK = """
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
local c = cjson.decode(cur)
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
if c['token'] ~= ARGV[2] then return 0 end
if c['expires_at'] > now and ARGV[3] ~= '1' then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
"""
