"""Job records in Redis, and the first-writer-wins store of partition proofs.

Keys (all expire after ``delivery.result_ttl_s``)::

    zkhive:job:<id>                the JobRecord, written once with SET NX (idempotent submit)
    zkhive:job:<id>:state          hash: status, error, result (BlobRef JSON), finished_at
    zkhive:job:<id>:part:<k>       partition k's proof, SET NX: the first proof stored wins
    zkhive:job:<id>:assign:<k>     partition k's assignment BlobRef (written by synthesis)
    zkhive:job:<id>:claim:<k>      the prover that picked partition k up (worker, device, task)
    zkhive:job:<id>:route:<k>      the queue routing chose for partition k, and why
    zkhive:job:<id>:attempts:<k>   partition k's retry budget spent (cluster.pipeline.retry: one budget for
                                   a transient error, an unverifiable proof and a lost partition)
    zkhive:job:<id>:events         the timeline (see cluster.pipeline.timeline); kept across attempts
    zkhive:job:<id>:waiting        hash: unit -> {since, waits, reason} while the unit waits for room
                                   in the blob store (back-pressure, ``note_wait``)
    zkhive:job:<id>:leases         the lease of each unit in hand, and ``:opened`` the attempts that
                                   never closed (cluster.pipeline.lease); ``:unaccounted`` (cluster.pipeline.reconcile)
    zkhive:job:<id>:flag:outside-chord   set when the chord cannot bring the aggregation (a partition
                                   re-dispatched alone, or the body fired early): the prove that
                                   completes the set sends it
    zkhive:jobs                    sorted set of job ids by submission time
    zkhive:active                  the jobs not yet finished, failed or cancelled (the watchdog's)
    zkhive:deadlines               sorted set of the active jobs by deadline (the watchdog wakes for
                                   the next one: a 25 s WinningPoSt deadline is met to the interval)

The lifecycle is this store's: ``create`` (queued, active), ``start`` (running), and exactly one
of ``finish``, ``fail``, ``cancel``, each setting the final status, leaving the active set and
emitting its timeline event once, however many tasks, clients and watchdogs race for it. A failed
or cancelled job resubmitted with the same input starts a new attempt (``new_attempt``: queued
again, attempt n+1, everything of the previous attempt removed but its timeline). The
tasks, the client and the watchdog call these; nothing else writes a job's status.

Why first-writer-wins: with late acks a prove message can be delivered twice (visibility timeout,
lost worker) and both runs finish with *different* valid proofs (fresh r, s). Whichever is stored
first is the partition's proof; the second run sees the key taken and reports a duplicate. The
aggregation reads partitions only from here, never from the chord's result list, so a chord body
fired early (one partition counted twice, another missing) cannot assemble a wrong proof.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any

from pydantic import BaseModel, Field

from cluster.errors import JobError
from synthesis.limits import clip

from . import timeline
from .blobs import BlobRef
from .jobkeys import JOB_ID, PREFIX, check_job_id, key  # noqa: F401  (the job's keys, in one place)

log = logging.getLogger(__name__)

INDEX = "zkhive:jobs"
#: jobs ended done and failed, counted as each ends (once: the final transition happens once):
#: GetStatus's totals without reading every job the store still holds, 4 times a second
TOTALS = "zkhive:totals"
#: pub/sub channel: a job's id, published once when the job ends (done, failed or cancelled); the
#: gateway's AwaitProof wakes on it instead of waiting for its next poll (cluster/gateway/endings.py)
ENDED = "zkhive:job-ended"
ACTIVE = "zkhive:active"
DEADLINES = "zkhive:deadlines"


QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
TERMINAL = (DONE, FAILED, CANCELLED)

#: client priority names -> Redis transport priorities (kombu serves 0 first, 9 last)
PRIORITIES = {"critical": 0, "high": 3, "normal": 6, "bulk": 9}
#: where a job's own deadline (submit --deadline, deadline_s) came from, in its record
OWN_DEADLINE = "the job's own deadline_s (submit --deadline)"


def priority_name(p: int) -> str:
    """The level a priority number is served at (kombu rounds down to a step: 4 is high)."""
    return max((v, n) for n, v in PRIORITIES.items() if v <= p)[1]


#: the kind of a job whose circuit names none (porep-lite, sdr, filecoin: PoRep C2)
PROOF_KIND_DEFAULT = "porep-c2"


class JobRecord(BaseModel):
    job_id: str
    params: str
    circuit_digest: str
    num_partitions: int = Field(ge=1, le=4096)
    priority: int = Field(ge=0, le=9)
    c1: BlobRef
    submitted_at: float
    deadline_at: float
    #: 1, then n+1 for each resubmission of a failed or cancelled job (JobStore.new_attempt)
    attempt: int = Field(1, ge=1)
    #: cuzk's proof kind (QueueStatus.proof_kind; cluster.settings.JOB_KINDS): the circuit's
    #: ``proof_kind``, PoRep C2 when it names none (and for records written before kinds); it
    #: chooses the deadline setting
    kind: str = Field(PROOF_KIND_DEFAULT, max_length=32)
    #: the setting ``deadline_at`` came from (``deadlines.winning_post_s``...), named when it passes
    deadline_from: str = "delivery.job_deadline_s"
    #: each partition's public inputs, computed from the C1 at submission (cluster.pipeline.publics):
    #: the aggregation verifies against them without parsing the C1; None in records written before
    publics: BlobRef | None = None


def priority_value(priority: str | int) -> int:
    if isinstance(priority, str):
        if priority not in PRIORITIES:
            raise JobError(f"priority {clip(priority)} is unknown: use one of {', '.join(PRIORITIES)} or 0-9")
        return PRIORITIES[priority]
    if not isinstance(priority, int) or not 0 <= priority <= 9:
        raise JobError(f"priority {clip(priority)} must be 0 (first) to 9 (last)")
    return priority


def _loads(raw) -> Any:
    return None if raw is None else json.loads(raw)


class JobStore:
    """Job state over one Redis client (``decode_responses=False``)."""

    def __init__(self, r, ttl_s: int):
        self.r, self.ttl_s = r, ttl_s
        self._transition = r.register_script(_TRANSITION)
        self._discard = r.register_script(_DISCARD)
        self._new_attempt = r.register_script(_NEW_ATTEMPT)

    # -- the record -----------------------------------------------------------------------------
    def create(self, rec: JobRecord) -> bool:
        """Write a new job, queued and active, with a ``queued`` event per partition; False when
        the id exists (the caller returns the existing job)."""
        if not self.r.set(key(rec.job_id), rec.model_dump_json(), nx=True, ex=self.ttl_s):
            return False
        pipe = self.r.pipeline()
        pipe.hset(key(rec.job_id, "state"), mapping={"status": QUEUED, "updated_at": time.time()})
        pipe.expire(key(rec.job_id, "state"), self.ttl_s)
        pipe.zadd(INDEX, {rec.job_id: rec.submitted_at})
        pipe.sadd(ACTIVE, rec.job_id)
        pipe.zadd(DEADLINES, {rec.job_id: rec.deadline_at})
        pipe.execute()
        for k in range(rec.num_partitions):
            self.event(rec.job_id, "queued", partition=k, priority=rec.priority)
        return True

    def new_attempt(self, old: JobRecord, rec: JobRecord) -> bool:
        """Start attempt ``rec`` (``old.attempt + 1``) of a failed or cancelled job, atomically:
        only if the stored record is still ``old`` and its status failed or cancelled (two
        resubmissions at once start one attempt). The previous attempt's keys (partition proofs,
        assignments, claims, routes, retry budgets, leases, flags) are removed; its timeline is
        kept, with an ``attempt`` event. False when another resubmission won, or the job is not
        failed or cancelled any more."""
        raw = self.r.get(key(old.job_id))
        if raw is None or JobRecord.model_validate_json(raw) != old:
            return False
        keep = {key(old.job_id).encode(), key(old.job_id, "state").encode(), key(old.job_id, "events").encode()}
        stale = [k for k in self.r.scan_iter(match=key(old.job_id, "*"), count=1000) if k not in keep]
        st = self.state(old.job_id)
        if not self._new_attempt(keys=[key(old.job_id), key(old.job_id, "state"), INDEX, ACTIVE, *stale],
                                 args=[raw, rec.model_dump_json(), self.ttl_s, old.job_id, rec.submitted_at,
                                       rec.attempt]):
            return False
        self.r.zadd(DEADLINES, {rec.job_id: rec.deadline_at})
        self.event(old.job_id, "attempt", attempt=rec.attempt, previous=st.get("status"),
                   previous_error=st.get("error"))
        for k in range(rec.num_partitions):
            self.event(rec.job_id, "queued", partition=k, priority=rec.priority, attempt=rec.attempt)
        return True

    def get(self, job_id: str) -> JobRecord | None:
        raw = self.r.get(key(job_id))
        return None if raw is None else JobRecord.model_validate_json(raw)

    def state(self, job_id: str) -> dict[str, Any]:
        raw = self.r.hgetall(key(job_id, "state"))
        out = {k.decode(): v.decode() for k, v in raw.items()}
        if "result" in out:
            out["result"] = json.loads(out["result"])
        return out

    def status(self, job_id: str) -> str | None:
        v = self.r.hget(key(job_id, "state"), "status")
        return None if v is None else v.decode()

    def transition(self, job_id: str, to: str, allowed_from: tuple[str, ...], **fields) -> bool:
        """Set status ``to`` (and fields) only if the current status is in ``allowed_from``;
        atomic, so a failure and a completion racing each other leave one final state."""
        fields = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in fields.items()}
        fields["updated_at"] = str(time.time())
        return bool(self._transition(keys=[key(job_id, "state")],
                                     args=[to, json.dumps(fields), *allowed_from]))

    # -- the lifecycle: each final transition happens once ----------------------------------------
    def event(self, job_id: str, event: str, *, partition: int | None = None, **fields) -> None:
        """One timeline event of the job (cluster.pipeline.timeline), expiring with the job."""
        timeline.emit(self.r, job_id, event, partition=partition, ttl_s=self.ttl_s, **fields)

    def start(self, job_id: str) -> bool:
        """queued -> running (the first synthesis started); False when it was not queued."""
        return self.transition(job_id, RUNNING, (QUEUED,))

    def finish(self, job_id: str, result: BlobRef, **event_fields) -> bool:
        """The job is done with ``result``: status, active set, ``aggregated`` event, once.
        False when it had already ended (failed, cancelled, or finished by another run)."""
        return self._end(job_id, DONE, "aggregated", None, {"result": result.model_dump_json()},
                         event_fields)

    def fail(self, job_id: str, error: str, *, partition: int | None = None, **event_fields) -> bool:
        """The job failed because of ``error`` (kept whole: status, timeline and the client's
        JobFailed carry the full message). False when it had already ended."""
        if self._end(job_id, FAILED, "failed", partition, {"error": error},
                     {"error": error, **event_fields}):
            log.error("job %s failed: %s", job_id, error)
            return True
        return False

    def cancel(self, job_id: str, reason: str = "cancelled by the user") -> bool:
        """The user gave up on the job; its queued tasks become no-ops (cluster.pipeline.tasks checks the
        status first). False when it had already ended."""
        return self._end(job_id, CANCELLED, "cancelled", None, {"error": reason}, {})

    def _end(self, job_id, status, event, partition, fields, event_fields) -> bool:
        if not self.transition(job_id, status, (QUEUED, RUNNING), finished_at=time.time(), **fields):
            return False
        if status in (DONE, FAILED):
            self.r.hincrby(TOTALS, status, 1)
        self.r.srem(ACTIVE, job_id)
        self.r.zrem(DEADLINES, job_id)
        self.event(job_id, event, partition=partition, **event_fields)
        self.r.publish(ENDED, job_id)  # after the event: a woken waiter reads the whole timeline
        return True

    def active(self) -> list[str]:
        """Jobs not yet ended, for the watchdog and ``zkhive status``."""
        return sorted(j.decode() for j in self.r.smembers(ACTIVE))

    def deactivate(self, job_id: str) -> None:
        """Drop an ended or expired job from the active set (the watchdog's clean-up)."""
        self.r.srem(ACTIVE, job_id)
        self.r.zrem(DEADLINES, job_id)

    def overdue(self, now: float) -> list[str]:
        """Active jobs whose deadline is at or before ``now``."""
        return [j.decode() for j in self.r.zrangebyscore(DEADLINES, "-inf", now)]

    def next_deadline(self) -> float | None:
        """The soonest deadline of an active job, or None."""
        got = self.r.zrange(DEADLINES, 0, 0, withscores=True)
        return float(got[0][1]) if got else None

    def totals(self) -> tuple[int, int]:
        """(done, failed): the jobs that ended so since this Redis' data began (every attempt
        counted as it ended; kept with its AOF, not with the jobs' expiry)."""
        done, failed = self.r.hmget(TOTALS, DONE, FAILED)
        return int(done or 0), int(failed or 0)

    def recent(self, limit: int = 20) -> list[str]:
        return [j.decode() for j in self.r.zrevrange(INDEX, 0, limit - 1)]

    # -- partitions -----------------------------------------------------------------------------
    def store_partition(self, job_id: str, k: int, proof: bytes, **meta) -> tuple[bool, dict]:
        """Store partition k's proof unless one is there; returns (won, the stored record)."""
        doc = {"partition": k, "proof": proof.hex(), "at": time.time(), **meta}
        pkey = key(job_id, "part", k)
        if self.r.set(pkey, json.dumps(doc), nx=True, ex=self.ttl_s):
            return True, doc
        return False, _loads(self.r.get(pkey)) or doc

    def partition(self, job_id: str, k: int) -> dict | None:
        return _loads(self.r.get(key(job_id, "part", k)))

    def partitions(self, job_id: str, n: int) -> dict[int, dict]:
        raws = self.r.mget([key(job_id, "part", k) for k in range(n)])
        return {k: json.loads(v) for k, v in enumerate(raws) if v is not None}

    def discard_partition(self, job_id: str, k: int, doc: dict) -> bool:
        """Remove partition k's proof if it is still ``doc`` (an unverifiable proof, re-proved)."""
        return bool(self._discard(keys=[key(job_id, "part", k)], args=[doc["proof"]]))

    def set_assignment(self, job_id: str, k: int, ref: BlobRef) -> None:
        self.r.set(key(job_id, "assign", k), ref.model_dump_json(), ex=self.ttl_s)

    def assignment(self, job_id: str, k: int) -> dict | None:
        return _loads(self.r.get(key(job_id, "assign", k)))

    def set_claim(self, job_id: str, k: int, **claim) -> None:
        self.r.set(key(job_id, "claim", k), json.dumps({"at": time.time(), **claim}), ex=self.ttl_s)

    def claim(self, job_id: str, k: int) -> dict | None:
        return _loads(self.r.get(key(job_id, "claim", k)))

    def clear_claim(self, job_id: str, k: int) -> None:
        """Forget who held partition k (it was lost and is being re-dispatched)."""
        self.r.delete(key(job_id, "claim", k))

    def set_route(self, job_id: str, k: int, **route) -> None:
        self.r.set(key(job_id, "route", k), json.dumps({"at": time.time(), **route}), ex=self.ttl_s)

    def route(self, job_id: str, k: int) -> dict | None:
        return _loads(self.r.get(key(job_id, "route", k)))

    # -- back-pressure: units waiting for room in the blob store -----------------------------------
    def note_wait(self, job_id: str, unit: str, reason: str) -> tuple[int, float]:
        """One more wait of ``unit`` (a partition number, or ``aggregate``) for room; returns
        (waits so far, when the first of them began)."""
        wkey = key(job_id, "waiting")
        raw = self.r.hget(wkey, unit)
        doc = json.loads(raw) if raw else {"since": time.time(), "waits": 0}
        doc.update(waits=doc["waits"] + 1, reason=reason, at=time.time())
        pipe = self.r.pipeline()
        pipe.hset(wkey, unit, json.dumps(doc))
        pipe.expire(wkey, self.ttl_s)
        pipe.execute()
        return doc["waits"], doc["since"]

    def end_wait(self, job_id: str, unit: str) -> dict | None:
        """The unit got its room: forget its wait; returns what it was (None: it never waited)."""
        wkey = key(job_id, "waiting")
        raw = self.r.hget(wkey, unit)
        if raw is None:
            return None
        self.r.hdel(wkey, unit)
        return json.loads(raw)

    def waiting(self, job_id: str) -> dict[str, dict]:
        """The job's units waiting for room now: {unit: {since, waits, reason, at}}."""
        return {u.decode(): json.loads(v) for u, v in self.r.hgetall(key(job_id, "waiting")).items()}

    def spend_retry(self, job_id: str, k: int) -> int:
        """Spend one unit of partition k's retry budget; returns the units spent so far."""
        pipe = self.r.pipeline()
        pipe.incr(key(job_id, "attempts", k))
        pipe.expire(key(job_id, "attempts", k), self.ttl_s)
        return int(pipe.execute()[0])

    def count_delivery(self, task_id: str, retries: int) -> int:
        """Deliveries of one task message (same id, same retry number) so far, this one included."""
        k = f"zkhive:deliveries:{task_id}:{retries}"
        pipe = self.r.pipeline()
        pipe.incr(k)
        pipe.expire(k, self.ttl_s)
        return int(pipe.execute()[0])

    def flag(self, job_id: str, what: str) -> None:
        self.r.set(key(job_id, "flag", what), "1", ex=self.ttl_s)

    def flagged(self, job_id: str, what: str) -> bool:
        return bool(self.r.exists(key(job_id, "flag", what)))

    def lock(self, job_id: str, what: str, ttl_s: int) -> bool:
        return bool(self.r.set(key(job_id, "lock", what), "1", nx=True, ex=ttl_s))

    def unlock(self, job_id: str, what: str) -> None:
        self.r.delete(key(job_id, "lock", what))


_TRANSITION = """
local cur = redis.call('HGET', KEYS[1], 'status')
for i = 3, #ARGV do
  if cur == ARGV[i] then
    redis.call('HSET', KEYS[1], 'status', ARGV[1])
    for k, v in pairs(cjson.decode(ARGV[2])) do redis.call('HSET', KEYS[1], k, v) end
    return 1
  end
end
return 0
"""

# KEYS: record, state, index, active, the previous attempt's keys. ARGV: the record as read, the
# new record, ttl s, job id, submitted_at, attempt
_NEW_ATTEMPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local st = redis.call('HGET', KEYS[2], 'status')
if st ~= 'failed' and st ~= 'cancelled' then return 0 end
for i = 5, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'status', 'queued', 'updated_at', ARGV[5], 'attempt', ARGV[6])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[4])
redis.call('SADD', KEYS[4], ARGV[4])
return 1
"""

_DISCARD = """
local raw = redis.call('GET', KEYS[1])
if raw and cjson.decode(raw)['proof'] == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
