"""The tasks: submit, synthesize_partition, prove_partition, aggregate.

Every header task returns a small JSON dict and never raises for a job-level failure (bad C1,
unsatisfied witness, retries exhausted): it marks the job failed and returns, so workers keep
serving and the chord still completes. Only ``self.retry`` (re-prove elsewhere) raises.
Each task first checks that its job still wants the work (not failed, cancelled or done).
"""
from __future__ import annotations

import logging
import time
from collections import OrderedDict

from celery.exceptions import SoftTimeLimitExceeded
from synthesis import assignment
from synthesis.assignment import AssignmentError

from . import timeline
from .app import app, runtime
from .blobs import BlobError, parse_ref
from .jobs import DONE, QUEUED, RUNNING, TERMINAL
from .workflow import ACTIVE

log = logging.getLogger(__name__)
S = app.zkhive_settings.delivery

_c1_cache: "OrderedDict[str, object]" = OrderedDict()


def _parsed_c1(rt, rec):
    """The job's parsed C1 (parsing a real C1 costs seconds; a worker keeps the last few)."""
    hit = _c1_cache.get(rec.job_id)
    if hit is not None:
        return hit
    from synthesis.circuits import get_circuit

    doc = rt.blobs.get_json(rec.c1)
    c1 = get_circuit(rec.params).parse_c1(doc)
    _c1_cache[rec.job_id] = c1
    while len(_c1_cache) > 4:
        _c1_cache.popitem(last=False)
    return c1


def _fail(rt, job_id: str, message: str, partition: int | None = None) -> dict:
    if rt.jobs.fail(job_id, message):
        rt.redis.srem(ACTIVE, job_id)
        timeline.emit(rt.redis, job_id, "failed", partition=partition, error=message, ttl_s=rt.ttl())
        log.error("job %s failed: %s", job_id, message)
    return {"failed": message, "partition": partition}


def _skip(rt, job_id: str) -> dict | None:
    """A reason to skip work for this job, or None."""
    status = rt.jobs.status(job_id)
    if status is None:
        return {"skipped": f"job {job_id} is unknown (expired?)"}
    if status in TERMINAL:
        return {"skipped": f"job {job_id} is {status}"}
    return None


def _check_partition(rec, partition) -> int:
    if not isinstance(partition, int) or isinstance(partition, bool) or not 0 <= partition < rec.num_partitions:
        raise ValueError(f"partition {partition!r} is out of range 0..{rec.num_partitions - 1} for job {rec.job_id}")
    return partition


def _worker_fields(rt) -> dict:
    w = rt.worker
    return {"worker": w.worker_id if w else None, "device": w.device if w else None}


def _over_redelivered(rt, task, job_id: str, k: int | None) -> dict | None:
    n = rt.jobs.count_delivery(task.request.id, task.request.retries)
    if n > 1 + S.max_redeliveries:
        return _fail(rt, job_id, f"partition {k}: task {task.request.id} was delivered {n} times "
                                 f"(delivery.max_redeliveries={S.max_redeliveries}); its workers keep dying", k)
    if n > 1:
        timeline.emit(rt.redis, job_id, "redelivered", partition=k, delivery=n, ttl_s=rt.ttl(), **_worker_fields(rt))
    return None


# -- submit (for Flower's send-task and other non-Python clients) ---------------------------------

@app.task(name="zkhive.submit", bind=True, acks_late=True)
def submit(self, c1: dict, job_id: str | None = None, priority: str | int = "normal") -> dict:
    """Submit a job: ``POST /api/task/send-task/zkhive.submit {"args": [C1], "kwargs": {...}}``.
    Returns {"job_id", "created", "num_partitions"}; a bad C1 header raises with the field named."""
    from .workflow import submit_job

    rec, created = submit_job(runtime(), c1, job_id=job_id, priority=priority)
    return {"job_id": rec.job_id, "created": created, "num_partitions": rec.num_partitions}


# -- synthesis --------------------------------------------------------------------------------------

@app.task(name="zkhive.synthesize_partition", bind=True, acks_late=True,
          time_limit=S.synthesis_time_limit_s)
def synthesize_partition(self, job_id: str, partition: int) -> dict:
    from synthesis.circuits import C1Error, get_circuit

    rt = runtime()
    if (skip := _skip(rt, job_id)) is not None:
        return skip
    rec = rt.jobs.get(job_id)
    k = _check_partition(rec, partition)
    if (over := _over_redelivered(rt, self, job_id, k)) is not None:
        return over
    rt.jobs.transition(job_id, RUNNING, (QUEUED,))
    timeline.emit(rt.redis, job_id, "synthesis_start", partition=k, ttl_s=rt.ttl(), **_worker_fields(rt))
    try:
        circuit = get_circuit(rec.params)
        c1 = _parsed_c1(rt, rec)
        z = circuit.synthesize(c1, k)
    except C1Error as e:
        return _fail(rt, job_id, f"bad C1 input: {e}", k)
    except BlobError as e:
        return _fail(rt, job_id, f"C1 input unreadable: {e}", k)
    ref = rt.blobs.put(assignment.encode(z), kind="assignment")  # bits as bits (synthesis.assignment)
    rt.jobs.set_assignment(job_id, k, ref)
    timeline.emit(rt.redis, job_id, "synthesis_end", partition=k, assignment=ref.short(), ttl_s=rt.ttl(),
                  **_worker_fields(rt))
    return {"partition": k, "assignment": ref.model_dump()}


# -- proving -----------------------------------------------------------------------------------------

@app.task(name="zkhive.prove_partition", bind=True, acks_late=True, max_retries=None,
          soft_time_limit=S.prove_soft_time_limit_s, time_limit=S.prove_time_limit_s)
def prove_partition(self, synthesized: dict, job_id: str, partition: int, exclude: list | None = None) -> dict:
    from gpu.timing import StageTimer
    from synthesis.circuits import get_circuit
    from synthesis.r1cs import UnsatisfiedConstraint

    rt = runtime()
    if not isinstance(synthesized, dict) or "assignment" not in synthesized:
        return synthesized if isinstance(synthesized, dict) else {"failed": "no assignment"}
    if (skip := _skip(rt, job_id)) is not None:
        return skip
    rec = rt.jobs.get(job_id)
    k = _check_partition(rec, partition)
    prover = rt.prover
    if prover is None:
        raise RuntimeError(f"prove_partition for job {job_id} reached a worker without a device "
                           f"({rt.worker.worker_id if rt.worker else 'no registry entry'})")
    who = _worker_fields(rt)
    stored = rt.jobs.partition(job_id, k)
    if stored is not None:  # a redelivery of work that already finished
        timeline.emit(rt.redis, job_id, "duplicate", partition=k, reason="already proved",
                      ttl_s=rt.ttl(), **who)
        return {"partition": k, "duplicate": True}
    if (over := _over_redelivered(rt, self, job_id, k)) is not None:
        return over
    rt.jobs.set_claim(job_id, k, task_id=self.request.id, incarnation=rt.worker.incarnation if rt.worker else None,
                      **who)
    timeline.emit(rt.redis, job_id, "prove_pickup", partition=k, task_id=self.request.id,
                  retries=self.request.retries, ttl_s=rt.ttl(), **who)
    circuit = get_circuit(rec.params)
    try:
        with timeline.stage(rt.redis, "fetch_assignment", job=job_id, partition=k, device=who["device"]):
            r1cs = circuit.r1cs()
            z = assignment.decode(rt.blobs.get(parse_ref(synthesized["assignment"])), n=r1cs.num_variables)
        timer = StageTimer(job=job_id, partition=k, device=who["device"])
        try:
            proof = prover.prove(circuit, z, timer)
        finally:
            timeline.stage_records_to_events(rt.redis, job_id, k, who["device"], timer.records, rt.ttl())
    except UnsatisfiedConstraint as e:  # the witness is wrong: no device will do better
        return _fail(rt, job_id, f"partition {k}: the assignment does not satisfy the circuit: {e}", k)
    except (BlobError, AssignmentError) as e:
        return _fail(rt, job_id, f"partition {k}: assignment unreadable: {e}", k)
    except (SoftTimeLimitExceeded, Exception) as e:  # device error, time limit: try another device
        return _retry_elsewhere(self, rt, synthesized, job_id, k, exclude, e)
    won, doc = rt.jobs.store_partition(job_id, k, proof, task_id=self.request.id, **who)
    timeline.emit(rt.redis, job_id, "prove_end" if won else "duplicate", partition=k,
                  task_id=self.request.id, proof_sha=doc["proof"][:16],
                  **({} if won else {"reason": "another run stored first"}), ttl_s=rt.ttl(), **who)
    if won and self.request.chord is None and \
            len(rt.jobs.partitions(job_id, rec.num_partitions)) == rec.num_partitions:
        # a partition re-proved outside the chord completed the set: no chord body will fire
        aggregate.apply_async(args=(None, job_id), priority=rec.priority)
    return {"partition": k, "duplicate": not won, **who}


def _retry_elsewhere(task, rt, synthesized, job_id, k, exclude, exc) -> dict:
    from .routing import route_partition

    device = rt.worker.device if rt.worker else None
    excluded = sorted(set(exclude or ()) | ({device} if device else set()))
    attempts = rt.jobs.bump_attempts(job_id, k)
    timeline.emit(rt.redis, job_id, "prove_error", partition=k, error=f"{type(exc).__name__}: {exc}",
                  attempt=attempts, ttl_s=rt.ttl(), **_worker_fields(rt))
    if attempts > S.partition_retries:
        return _fail(rt, job_id, f"partition {k}: proving failed {attempts} times "
                                 f"(delivery.partition_retries={S.partition_retries}); last: "
                                 f"{type(exc).__name__}: {exc}", k)
    choice = route_partition(rt, job_id, k, tuple(excluded))
    raise task.retry(args=(synthesized, job_id, k), kwargs={"exclude": excluded}, queue=choice.queue,
                     countdown=0.2, exc=exc, max_retries=None)


# -- aggregation ---------------------------------------------------------------------------------------

@app.task(name="zkhive.aggregate", bind=True, acks_late=True)
def aggregate(self, header_results, job_id: str) -> dict:
    """Verify every partition proof and store the job's proof (N x 192 bytes in partition order).

    Runs as the chord body and, as a backstop, from the watchdog. ``header_results`` is ignored:
    the chord can fire with one partition counted twice and another missing (see cluster.jobs),
    so the partitions come from the first-writer-wins store, and the set must be exactly 0..N-1.
    """
    rt = runtime()
    if (skip := _skip(rt, job_id)) is not None:
        return skip
    if not rt.jobs.lock(job_id, "aggregate", ttl_s=120):
        return {"skipped": "another aggregation of this job is running"}
    try:
        return _aggregate(rt, job_id)
    finally:
        rt.jobs.unlock(job_id, "aggregate")


def _aggregate(rt, job_id: str) -> dict:
    from gpu.groth16 import Proof, ProofFormatError, verify
    from synthesis.circuits import get_circuit

    from .workflow import dispatch_partition

    rec = rt.jobs.get(job_id)
    n = rec.num_partitions
    parts = rt.jobs.partitions(job_id, n)
    missing = [k for k in range(n) if k not in parts]
    if missing:
        # fired early (a doubled partition) or called before the last one finished: the
        # watchdog calls again once every partition is stored
        timeline.emit(rt.redis, job_id, "aggregate_waiting", missing=missing, ttl_s=rt.ttl())
        return {"waiting": missing}
    timeline.emit(rt.redis, job_id, "aggregate_start", ttl_s=rt.ttl(), **_worker_fields(rt))
    from .keys import KeyMissing

    circuit = get_circuit(rec.params)
    try:
        vk = rt.keys.load_vk(circuit)
    except KeyMissing as e:  # this aggregate worker's key cache lacks it: nobody can finish the job
        return _fail(rt, job_id, f"cannot verify: {e}")
    c1 = _parsed_c1(rt, rec)
    publics, bad = [], []
    for k in range(n):
        pub = circuit.public_inputs(c1, k)
        publics.append(pub)
        try:
            ok = verify(vk, pub, Proof.from_bytes(bytes.fromhex(parts[k]["proof"])))
        except (ProofFormatError, ValueError):
            ok = False
        if not ok:
            bad.append(k)
    for k in bad:
        # re-prove this partition alone, elsewhere; the retry budget bounds the loop
        timeline.emit(rt.redis, job_id, "verify_failed", partition=k, worker=parts[k].get("worker"),
                      device=parts[k].get("device"), ttl_s=rt.ttl())
        attempts = rt.jobs.bump_attempts(job_id, k)
        if attempts > S.partition_retries:
            return _fail(rt, job_id, f"partition {k}: proof does not verify after {attempts} attempts", k)
        rt.jobs.discard_partition(job_id, k, parts[k])
        dispatch_partition(rt, rec, k, exclude=[parts[k].get("device")] if parts[k].get("device") else [])
    if bad:
        return {"reproving": bad}
    proof = b"".join(bytes.fromhex(parts[k]["proof"]) for k in range(n))
    result = {"job_id": job_id, "params": rec.params, "num_partitions": n, "proof": proof.hex(),
              "public_inputs": [[hex(x) for x in pub] for pub in publics],
              "provers": [{"partition": k, "worker": parts[k].get("worker"), "device": parts[k].get("device")}
                          for k in range(n)]}
    ref = rt.blobs.put_json(result, kind="result")
    if rt.jobs.transition(job_id, DONE, (QUEUED, RUNNING), result=ref.model_dump_json(),
                          finished_at=time.time()):
        rt.redis.srem(ACTIVE, job_id)
        timeline.emit(rt.redis, job_id, "aggregated", proof_bytes=len(proof), ttl_s=rt.ttl(),
                      **_worker_fields(rt))
    return {"done": True, "result": ref.model_dump()}
