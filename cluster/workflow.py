"""A job as a Celery chord, and submission (idempotent on the job id).

    chord([ chain(synthesize_partition(job, k) -> prove_partition(<assignment ref>, job, k))
            for k in 0..N-1 ],
          aggregate(job))

Synthesis runs on the ``synthesis`` queue; each prove task is routed to a device queue when its
synthesis finishes (cluster.routing); the body runs on ``aggregate`` and reads the partition proofs
from the first-writer-wins store (cluster.jobs), not from the chord's results.
"""
from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from celery import chain, chord

from . import timeline
from .errors import JobConflict, JobError
from .jobs import JobRecord, check_job_id, priority_value

ACTIVE = "zkhive:active"


def canonical_c1(doc: Any) -> bytes:
    if not isinstance(doc, dict):
        raise JobError(f"a C1 input must be a JSON object, got {type(doc).__name__}")
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def default_job_id(params: str, c1: bytes) -> str:
    """Content-derived id: resubmitting the same C1 input is the same job."""
    return "c1-" + hashlib.sha256(params.encode() + b"\0" + c1).hexdigest()[:24]


def build_chord(rec: JobRecord):
    from .tasks import aggregate, prove_partition, synthesize_partition

    p = rec.priority
    header = [chain(synthesize_partition.si(rec.job_id, k).set(priority=p),
                    prove_partition.s(rec.job_id, k).set(priority=p))
              for k in range(rec.num_partitions)]
    return chord(header, aggregate.s(rec.job_id).set(priority=p))


def submit_job(rt, doc: dict, *, job_id: str | None = None, priority: str | int = "normal",
               deadline_s: float | None = None) -> tuple[JobRecord, bool]:
    """Record and dispatch a job; returns (record, created). An existing id returns its record."""
    from synthesis.circuits import get_circuit

    c1 = canonical_c1(doc)
    params = doc.get("params")
    if not isinstance(params, str):
        raise JobError("field params: must name the parameter set (a string)")
    try:
        circuit = get_circuit(params)
    except KeyError as e:
        raise JobError(f"field params: {e.args[0]}") from None
    prio = priority_value(priority)
    job_id = check_job_id(job_id) if job_id is not None else default_job_id(params, c1)
    c1_sha = hashlib.sha256(c1).hexdigest()

    existing = rt.jobs.get(job_id)
    if existing is None:
        now = time.time()
        ref = rt.blobs.put(c1, kind="c1")
        rec = JobRecord(job_id=job_id, params=params, circuit_digest=circuit.digest(),
                        num_partitions=circuit.num_partitions(), priority=prio, c1=ref,
                        submitted_at=now,
                        deadline_at=now + (deadline_s or rt.settings.delivery.job_deadline_s))
        if rt.jobs.create(rec):
            for k in range(rec.num_partitions):
                timeline.emit(rt.redis, job_id, "queued", partition=k, priority=prio, ttl_s=rt.ttl())
            rt.redis.sadd(ACTIVE, job_id)
            build_chord(rec).apply_async()
            return rec, True
        existing = rt.jobs.get(job_id)  # lost a race with an identical submission
    if existing.params != params or existing.c1.sha256 != c1_sha:
        raise JobConflict(f"job {job_id} already exists with another C1 input "
                          f"(parameter set {existing.params}, c1 {existing.c1.sha256[:12]})")
    return existing, False


def dispatch_partition(rt, rec: JobRecord, k: int, *, exclude: list[str] | tuple = (), reason: str = "retry") -> None:
    """Send partition k alone (outside the chord): re-prove a bad or lost partition. The proof
    joins the others in the first-writer-wins store; the aggregation is then started by the prove
    task that completes the set (or the watchdog)."""
    from .tasks import prove_partition, synthesize_partition

    ref = rt.jobs.assignment(rec.job_id, k)
    timeline.emit(rt.redis, rec.job_id, "redispatched", partition=k, reason=reason,
                  exclude=list(exclude), resynthesize=ref is None, ttl_s=rt.ttl())
    if ref is None:
        chain(synthesize_partition.si(rec.job_id, k).set(priority=rec.priority),
              prove_partition.s(rec.job_id, k, exclude=list(exclude)).set(priority=rec.priority)).apply_async()
    else:
        prove_partition.apply_async(args=({"partition": k, "assignment": ref}, rec.job_id, k),
                                    kwargs={"exclude": list(exclude)}, priority=rec.priority)
