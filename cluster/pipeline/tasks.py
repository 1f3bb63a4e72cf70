"""The tasks: submit, synthesize_partition, prove_partition, aggregate.

Each Celery task is a thin wrapper around a body (``synthesize``, ``prove``, ``aggregate_job``)
that takes the process's runtime and a ``Delivery`` (what the body needs of the message), so the
same bodies run in the workers and, without a broker, in the unit tests
(tests/unit/test_task_bodies.py, over a stub runtime: dramatiq's StubBroker idea).

What Celery and Flower record for a task:

- SUCCESS: the work was done, or skipped because the job no longer wants it (failed, cancelled,
  done) or the partition is already stored;
- RETRY: a transient error (cluster.pipeline.retry): the partition goes again, to another device when
  there is one, within the partition's retry budget; or back-pressure (the blob store full, of
  bytes or inodes): the unit waits, retried with a growing delay (0.5 s to 8 s) until there is
  room, without spending the budget, until the job's deadline (``waiting_for_space`` and
  ``space_returned`` events, the job's ``waiting`` hash that ``zkhive status`` shows);
- FAILURE: the task failed its job (bad C1, unsatisfied witness, missing key, key/circuit
  mismatch, budget spent): the job store records the failure, then the task raises ``JobFailed``
  with the whole message from the task boundary (``from None``: no traceback into the code that
  found the bad input). ``throws`` makes the worker log it as expected, and keep serving; the
  chord's body is marked failed instead of running.

Each body first checks that its job still wants the work.
"""
from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, NoReturn

from synthesis import assignment

from cluster.errors import BlobError, BlobStoreFull, JobError, JobFailed

from . import retry as policy
from .app import app, runtime
from .blobs import parse_ref
from .jobs import FAILED, TERMINAL, priority_value
from .lease import durable
from .prefetch import COMPLETED
from .workflow import OUTSIDE_CHORD, dispatch_partition, submit_job

log = logging.getLogger(__name__)
#: the time limits are fixed when the tasks are defined; the bodies read rt.settings
S = app.zkhive_settings.delivery

_c1_cache: "OrderedDict[str, object]" = OrderedDict()


@dataclass
class Delivery:
    """What a body needs of the message that carried it: Celery's ``task.request`` in a worker,
    the stub broker's message in the unit tests."""

    task_id: str
    retries: int = 0
    #: whether the message is part of the job's chord (the chord's body aggregates) or was sent
    #: alone (a re-dispatch: the task that completes the set starts the aggregation)
    in_chord: bool = True
    #: ``retry(args, kwargs, queue, exc=None, countdown=0.2)`` sends the message again (after
    #: ``countdown`` seconds) and raises (Celery's Retry)
    retry: Callable[..., NoReturn] = field(default=None, repr=False)


def _delivery(task) -> Delivery:
    def again(args, kwargs, queue, exc=None, countdown=0.2):
        raise task.retry(args=args, kwargs=kwargs, queue=queue, countdown=countdown, exc=exc, max_retries=None)

    req = task.request
    return Delivery(task_id=req.id, retries=req.retries or 0, in_chord=req.chord is not None, retry=again)


# -- shared steps ---------------------------------------------------------------------------------

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


def _job_publics(rt, rec, circuit) -> list[list[int]]:
    """Each partition's public inputs: stored at submission (cluster.pipeline.publics: no C1 to
    read and parse, seconds for 32 GiB), else from the C1, after a ``publics_from_c1`` event
    that says why (a record written before, the blob gone or not this job's)."""
    from . import publics

    if rec.publics is None:
        why = "the job's record names no stored public inputs (written before they were stored)"
    else:
        try:
            return publics.read(rt.blobs, rec.publics, rec.params, rec.num_partitions)
        except BlobError as e:
            why = str(e)
    log.warning("job %s: %s; its public inputs from its C1", rec.job_id, why)
    rt.jobs.event(rec.job_id, "publics_from_c1", reason=why)
    return publics.compute(circuit, _parsed_c1(rt, rec))


def _fail(rt, job_id: str, message: str, partition: int | None = None) -> NoReturn:
    """Fail the job (once, in the job store) and end this task as FAILURE with the message."""
    rt.jobs.fail(job_id, message, partition=partition, **_worker_fields(rt))
    # from None: the message says what was wrong; the error's own traceback (into the circuit,
    # the prover) would only show where our code noticed it
    raise JobFailed(job_id, FAILED, message) from None


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


def _hold(rt, d: Delivery, job_id: str, k: int | None, stage: str):
    """The unit's lease (cluster.pipeline.lease) for the body's work, renewed while it runs."""
    w = rt.worker
    return rt.leases.hold(job_id, k, stage, task_id=d.task_id, worker=w.worker_id if w else None,
                          incarnation=w.incarnation if w else None, device=w.device if w else None,
                          host=w.host if w else None)


def _leased_elsewhere(rt, job_id: str, k: int | None, held) -> dict:
    """A duplicate delivery of a unit a live worker holds: skip (if that worker dies, its lease
    lapses and the unit is re-dispatched)."""
    rt.jobs.event(job_id, "duplicate", partition=k, reason=f"leased by {held.lease.holder()}", **_worker_fields(rt))
    return {"partition": k, "duplicate": True, "skipped": f"leased by {held.lease.worker}"}


def _check_crashes(rt, d: Delivery, job_id: str, k: int | None, crashes: int) -> None:
    """Bound the attempts of one unit whose workers died holding it (a message that kills every
    worker it reaches): past ``delivery.max_redeliveries`` the job fails naming the unit.
    Duplicates of a message are not counted: they find the unit done or leased."""
    if crashes <= 0:
        return
    bound = rt.settings.delivery.max_redeliveries
    what = "the aggregation" if k is None else f"partition {k}"
    if crashes > bound:
        _fail(rt, job_id, f"{what}: {crashes} attempts ended with their worker dead (task {d.task_id}, "
                          f"delivery.max_redeliveries={bound}); its workers keep dying", k)
    rt.jobs.event(job_id, "redelivered", partition=k, delivery=crashes + 1, **_worker_fields(rt))


def _retry_or_fail(rt, d: Delivery, job_id: str, k: int, exc: BaseException, stage: str,
                   again: Callable[..., NoReturn]) -> NoReturn:
    """The retry policy, applied once: a permanent error fails the job now with its whole
    message; a transient one spends the partition's budget and goes ``again``; back-pressure
    (no room in the blob store) waits: ``again(countdown)``, spending nothing."""
    verdict = policy.classify(exc)
    if verdict.wait:
        again(_wait_for_room(rt, job_id, k, stage, verdict))
    if not verdict.transient:
        _fail(rt, job_id, verdict.message(k), k)
    budget = rt.settings.delivery.partition_retries
    attempts = rt.jobs.spend_retry(job_id, k)
    rt.jobs.event(job_id, f"{stage}_error", partition=k, error=verdict.message(), attempt=attempts,
                  **_worker_fields(rt))
    if not policy.within_budget(attempts, budget):
        _fail(rt, job_id, f"partition {k}: {stage} failed {attempts} times (delivery.partition_retries="
                          f"{budget}); last: {verdict.message()}", k)
    again()


def _wait_for_room(rt, job_id: str, k: int | None, stage: str, verdict) -> float:
    """Back-pressure (issue 39): the unit waits for room rather than fail its job. Records the
    wait (the job's ``waiting`` hash: ``zkhive status``; a ``waiting_for_space`` event at the 1st,
    2nd, 4th, 8th ... wait: the timeline and ``zkhive_blob_store_waits_total``) and returns the
    delay before the next try; past the job's deadline the job fails, naming the wait."""
    from .lease import unit_name

    unit = unit_name(k)
    waits, since = rt.jobs.note_wait(job_id, unit, verdict.message())
    delay = policy.wait_delay(waits)
    rec = rt.jobs.get(job_id)
    now = time.time()
    what = "the aggregation" if k is None else f"partition {k}"
    if rec is not None and now + delay > rec.deadline_at:
        _fail(rt, job_id, f"{what}: waited {now - since:.0f} s ({waits} tries) for room in the blob store "
                          f"until the job's deadline; last: {verdict.message()}", k)
    if waits & (waits - 1) == 0:  # a power of two: the timeline shows the wait, not every try
        rt.jobs.event(job_id, "waiting_for_space", partition=k, stage=stage, wait=waits,
                      waited_s=round(now - since, 1), retry_in_s=delay, error=verdict.message(),
                      **_worker_fields(rt))
    log.warning("job %s %s: %s; waiting (try %d, again in %.1f s)", job_id, what, verdict.message(), waits, delay)
    return delay


def _room_returned(rt, job_id: str, k: int | None) -> None:
    """The unit's write went through: end its wait, if it waited (``space_returned`` event)."""
    from .lease import unit_name

    was = rt.jobs.end_wait(job_id, unit_name(k))
    if was is not None:
        rt.jobs.event(job_id, "space_returned", partition=k, waits=was["waits"],
                      waited_s=round(time.time() - was["since"], 1), **_worker_fields(rt))


# -- submit (for Flower's send-task and other non-Python clients) ---------------------------------

@app.task(name="zkhive.submit", bind=True, acks_late=True, throws=(JobError,))
def submit(self, c1: dict, job_id: str | None = None, priority: str | int = "normal",
           kind: str | None = None) -> dict:
    """Submit a job: ``POST /api/task/send-task/zkhive.submit {"args": [C1], "kwargs": {...}}``.
    Returns {"job_id", "created", "num_partitions"} (the task's whole result: the C1 is kept
    only in the blob store, never in the result backend); a C1 outside ``[limits]`` or a bad
    header is FAILURE with one line naming the field (JobError, logged as expected)."""
    rec, created = submit_job(runtime(), c1, job_id=job_id, priority=priority, kind=kind)
    return {"job_id": rec.job_id, "created": created, "num_partitions": rec.num_partitions}


# -- synthesis --------------------------------------------------------------------------------------

@app.task(name="zkhive.synthesize_partition", bind=True, acks_late=True, throws=(JobFailed,),
          time_limit=S.synthesis_time_limit_s)
def synthesize_partition(self, job_id: str, partition: int) -> dict:
    return synthesize(runtime(), _delivery(self), job_id, partition)


def synthesize(rt, d: Delivery, job_id: str, partition: int) -> dict:
    """Partition k's assignment z from the job's C1 input, into the blob store."""
    from synthesis.circuits import get_circuit

    if (skip := _skip(rt, job_id)) is not None:
        return skip
    rec = rt.jobs.get(job_id)
    k = _check_partition(rec, partition)
    if (done := _synthesized(rt, job_id, k)) is not None:
        return done
    with _hold(rt, d, job_id, k, "synthesis") as held:
        if not held.taken:
            return _leased_elsewhere(rt, job_id, k, held)
        if (done := _synthesized(rt, job_id, k)) is not None:  # finished just before we took it
            return done
        _check_crashes(rt, d, job_id, k, held.crashes)
        rt.jobs.start(job_id)
        rt.jobs.event(job_id, "synthesis_start", partition=k, task_id=d.task_id, **_worker_fields(rt))
        try:
            circuit = get_circuit(rec.params)
            # straight to the compact form where the family makes it (fleet: sdr at 2^27)
            make = getattr(circuit, "synthesize_compact", None) or circuit.synthesize
            z = make(_parsed_c1(rt, rec), k)
            # bits as bits (synthesis.assignment); a Redis store retries while Redis restarts
            blob = assignment.encode(z)
            ref = durable(lambda: rt.blobs.put(blob, kind="assignment"), f"job {job_id} partition {k}: store the assignment")
        except Exception as e:
            # a broker blip retries here (same queue); bad input fails the job
            _retry_or_fail(rt, d, job_id, k, e, "synthesis",
                           lambda countdown=0.2: d.retry((job_id, k), {}, None, e, countdown=countdown))
        durable(lambda: (rt.jobs.set_assignment(job_id, k, ref), _room_returned(rt, job_id, k),
                         rt.jobs.event(job_id, "synthesis_end", partition=k, assignment=ref.short(),
                                       **_worker_fields(rt))),
                f"job {job_id} partition {k}: record the assignment")
    return {"partition": k, "assignment": ref.model_dump()}


def _synthesized(rt, job_id: str, k: int) -> dict | None:
    """A delivery of a synthesis already done (a duplicate message, or a redelivery after the
    write): the chain goes on with the stored assignment (its prove deduplicates), or skips
    when the partition is proved."""
    if rt.jobs.partition(job_id, k) is not None:
        rt.jobs.event(job_id, "duplicate", partition=k, reason="already proved", **_worker_fields(rt))
        return {"skipped": f"partition {k} is already proved"}
    ref = rt.jobs.assignment(job_id, k)
    if ref is None:
        return None
    rt.jobs.event(job_id, "duplicate", partition=k, reason="already synthesized", **_worker_fields(rt))
    return {"partition": k, "assignment": ref}


# -- proving -----------------------------------------------------------------------------------------

@app.task(name="zkhive.prove_partition", bind=True, acks_late=True, max_retries=None, throws=(JobFailed,),
          soft_time_limit=S.prove_soft_time_limit_s, time_limit=S.prove_time_limit_s)
def prove_partition(self, synthesized: dict, job_id: str, partition: int, exclude: list | None = None) -> dict:
    return prove(runtime(), _delivery(self), synthesized, job_id, partition, exclude)


def prove(rt, d: Delivery, synthesized: dict, job_id: str, partition: int, exclude: list | None = None) -> dict:
    """Prove partition k on this worker's device and store the proof (first writer wins)."""
    if not isinstance(synthesized, dict) or "assignment" not in synthesized:
        return synthesized if isinstance(synthesized, dict) else {"skipped": "no assignment"}
    if (skip := _skip(rt, job_id)) is not None:
        return skip
    rec = rt.jobs.get(job_id)
    k = _check_partition(rec, partition)
    prover = rt.prover
    if prover is None:
        raise RuntimeError(f"prove_partition for job {job_id} reached a worker without a device "
                           f"({rt.worker.worker_id if rt.worker else 'no registry entry'})")
    who = _worker_fields(rt)
    if (done := rt.jobs.partition(job_id, k)) is not None:
        if done.get("task_id") == d.task_id and done.get("ahead"):
            # this message's own proof, finished by the prove-ahead thread before the consumer
            # could deliver the message (an urgent unit: cluster/pipeline/prefetch.py, 5)
            return _completed_ahead(k, who)
        # a redelivery of work that already finished
        rt.jobs.event(job_id, "duplicate", partition=k, reason="already proved", **who)
        return {"partition": k, "duplicate": True}
    with _hold(rt, d, job_id, k, "prove") as held:
        if not held.taken:
            return _leased_elsewhere(rt, job_id, k, held)
        if rt.jobs.partition(job_id, k) is not None:  # stored just before we took the lease
            rt.jobs.event(job_id, "duplicate", partition=k, reason="already proved", **who)
            return {"partition": k, "duplicate": True}
        _check_crashes(rt, d, job_id, k, held.crashes)
        return _prove_leased(rt, d, rec, synthesized, k, exclude, prover, who)


def _prove_leased(rt, d: Delivery, rec, synthesized, k, exclude, prover, who) -> dict:
    from gpu.timing import StageTimer
    from synthesis.circuits import get_circuit

    job_id = rec.job_id
    rt.jobs.set_claim(job_id, k, task_id=d.task_id, incarnation=rt.worker.incarnation if rt.worker else None,
                      **who)
    rt.jobs.event(job_id, "prove_pickup", partition=k, task_id=d.task_id, retries=d.retries, **who)
    circuit = get_circuit(rec.params)
    try:
        ref = parse_ref(synthesized["assignment"])
        ahead = _prove_ahead(rt, prover)
        got = (ahead.take(circuit, ref.sha256, S.prove_soft_time_limit_s, rec.priority, job_id, k)
               if ahead else None)
        if got == COMPLETED:  # finished and stored while this task was on its way
            return _completed_ahead(k, who)
        evicted = lambda name: rt.jobs.event(job_id, "key_evicted", partition=k, key=name, **who)
        if got is None:
            _load_key(rt, prover, circuit, job_id, k, who, evicted)
            with timeline_stage(rt, "fetch_assignment", job_id, k, who["device"]):
                z = _fetch_assignment(rt, circuit, ref)
            timer = StageTimer(job=job_id, partition=k, device=who["device"])
            terms = None
        else:  # proved ahead while the previous task finished: only the combination is left
            terms, timer = got
        try:
            if terms is None:  # proved here: work proved ahead that is less urgent gives way
                with ahead.urgent(rec.priority) if ahead else contextlib.nullcontext():
                    terms = prover.prove_terms(circuit, z, timer, on_evict=evicted, priority=rec.priority)
            proof = prover.finish(circuit, terms, timer)
        finally:
            # a proof finished while Redis restarts keeps its stage events (and goes on below)
            durable(lambda: _stage_events(rt, job_id, k, who["device"], timer.records),
                    f"job {job_id} partition {k}: stage events")
    except Exception as e:  # the policy decides: fail the job now, or go to another device
        _retry_or_fail(rt, d, job_id, k, e, "prove",
                       lambda countdown=0.2: _retry_elsewhere(rt, d, synthesized, job_id, k, exclude, e, countdown))
    return store_proof(rt, d, rec, k, proof, who)


def store_proof(rt, d: Delivery, rec, k: int, proof: bytes, who: dict) -> dict:
    """Store partition k's finished proof, first writer wins (``JobStore.store_partition``'s SET
    NX): the winner records ``prove_end`` and, when its proof completes the set outside the
    chord, sends the aggregation; a loser (a lapsed holder finishing after its re-dispatch did,
    a duplicate delivery) changes nothing: a ``duplicate`` event, one warning line naming the job,
    the partition and both tasks, and nothing sent. The writes wait for Redis (bounded) rather
    than drop a finished proof."""
    job_id = rec.job_id
    won, doc = durable(lambda: rt.jobs.store_partition(job_id, k, proof, task_id=d.task_id, **who),
                       f"job {job_id} partition {k}: store the proof")
    durable(lambda: rt.jobs.event(job_id, "prove_end" if won else "duplicate", partition=k, task_id=d.task_id,
                                  proof_sha=doc["proof"][:16],
                                  **({} if won else {"reason": "another run stored first"}), **who),
            f"job {job_id} partition {k}: prove_end event")
    if not won:
        log.warning("job %s partition %d: another run stored its proof first (task %s); this proof "
                    "(task %s) is dropped and nothing is sent", job_id, k, doc.get("task_id"), d.task_id)
    elif (not d.in_chord or rt.jobs.flagged(job_id, OUTSIDE_CHORD)) \
            and len(rt.jobs.partitions(job_id, rec.num_partitions)) == rec.num_partitions:
        # the set is complete and the chord will not send the aggregation (this partition was
        # re-proved alone, or one was, or the body already fired early): send it now
        rt.dispatch.aggregate(rec)
    return {"partition": k, "duplicate": not won, **who}


def _load_key(rt, prover, circuit, job_id, k, who, evicted) -> None:
    """A key that is not resident is loaded as a stage of its own (``key_load``: a timeline bar,
    ``zkhive_stage_seconds{stage="key_load"}``), after a ``key_load_wait`` event that says why the
    partition waits, with the prover's registry entry saying ``loading`` meanwhile (issue 27: the
    first job after `up` without preload stalled ~75 s with no sign of it anywhere)."""
    from . import registry

    import redis

    if prover.is_resident(circuit):
        return
    try:  # what is said about the load is best-effort: Redis away must not cost the proof
        rt.jobs.event(job_id, "key_load_wait", partition=k, key=circuit.name,
                      note=f"the proving key of {circuit.name} is not resident on {who['device']} "
                           f"(not in [srs] preload): loading it first", **who)
    except redis.RedisError as e:
        log.warning("could not record key_load_wait of job %s partition %s: %s", job_id, k, e)
    info = rt.worker
    if info is not None:
        info.loading = [circuit.name]
        _publish(rt, registry, info)
    t0 = time.time()
    try:
        prover.load(circuit, on_evict=evicted)
    finally:
        if info is not None:
            info.loading = []
            info.resident_keys = prover.resident_names()
            _publish(rt, registry, info)
    end = time.time()
    durable(lambda: rt.jobs.event(job_id, "stage", partition=k, t=t0, stage="key_load", start=t0, end=end,
                                  seconds=end - t0, device=who["device"]),
            f"job {job_id} partition {k}: key_load stage event")


def _publish(rt, registry, info) -> None:
    try:
        registry.publish(rt.redis, info, rt.settings.worker.registry_ttl_s)
    except Exception as e:  # the heartbeat publishes it again within heartbeat_s
        log.warning("could not update the registry entry: %s", e)


def _num_variables(circuit) -> int:
    # the compact form's count where the circuit has one: sdr-32g's full R1CS is ~32 GB
    compact = getattr(circuit, "compact_r1cs", None)
    return compact().num_variables if compact else circuit.r1cs().num_variables


def _fetch_assignment(rt, circuit, ref):
    """The assignment's encoded blob, checked without expanding it (cluster/pipeline/assignments.py: the
    count against the circuit's variables, both bit planes, every value below r); the Prover
    hands it to a backend that expands it where it proves (the CUDA one: on the device), or
    decodes it on the host for one that cannot (the 32-byte vector of a 2^27 partition is 4.2 GB
    and ~39 s of host decoding on the dev box)."""
    from .assignments import check_encoded

    return check_encoded(rt.blobs.get(ref), _num_variables(circuit))


def _prove_ahead(rt, prover):
    """The worker's prove-ahead thread (cluster/pipeline/prefetch.py), started by its first prove task."""
    from . import prefetch

    if prover.ahead is None and rt.worker is not None and rt.worker.queues and prefetch.depth_setting():
        from synthesis.circuits import get_circuit

        queue, depth = rt.worker.queues[0], prefetch.depth_setting()

        def circuit_of(job_id):
            rec = rt.jobs.get(job_id)
            return get_circuit(rec.params) if rec is not None else None
        prover.ahead = prefetch.ProveAhead(
            prover, peek=lambda k: prefetch.peek_prove_tasks(rt.redis, queue, k),
            circuit_of=circuit_of, fetch=lambda c, ref: _fetch_assignment(rt, c, parse_ref(ref)),
            depth=depth, complete=lambda task, circuit, terms, timer: _complete_ahead(
                rt, prover, task, circuit, terms, timer),
            complete_below=priority_value("normal"))
    return prover.ahead


def _completed_ahead(k: int, who: dict) -> dict:
    """A task's result for its partition's proof stored by the prove-ahead thread."""
    return {"partition": k, "duplicate": False, "completed_ahead": True, **who}


def _complete_ahead(rt, prover, task: dict, circuit, terms, timer) -> None:
    """The rest of an urgent unit's proof, on the prove-ahead thread (prefetch.py, 5): combined
    with fresh r, s, its stage events written, stored under its message's task id (first writer
    wins, ``ahead`` marked) and, when that completes the job's set, its aggregation sent (a
    message outside the chord: the chord's own aggregation later finds the job done). Nothing is
    done for a job that ended meanwhile or a partition already stored (the proof there serves).
    The job is flagged outside its chord, so the task that stores the set's last proof sends
    the aggregation, not the chord after this partition's own task is delivered."""
    job_id, k = task["job_id"], task["partition"]
    if _skip(rt, job_id) is not None or rt.jobs.partition(job_id, k) is not None:
        return
    rec = rt.jobs.get(job_id)
    if rec is None:
        return
    k = _check_partition(rec, k)
    who = _worker_fields(rt)
    try:
        proof = prover.finish(circuit, terms, timer)
    finally:
        durable(lambda: _stage_events(rt, job_id, k, who["device"], timer.records),
                f"job {job_id} partition {k}: stage events")
    # the chord counts this partition only when its task is delivered, maybe after the other
    # partitions' tasks: whichever store completes the set sends the aggregation instead
    rt.jobs.flag(job_id, OUTSIDE_CHORD)
    d = Delivery(task_id=task.get("task_id") or f"prove-ahead-{job_id}-{k}", in_chord=False)
    store_proof(rt, d, rec, k, proof, {**who, "ahead": True})


def timeline_stage(rt, name, job_id, k, device):
    from . import timeline

    return timeline.stage(rt.redis, name, job=job_id, partition=k, device=device)


def _stage_events(rt, job_id, k, device, records) -> None:
    from . import timeline

    timeline.stage_records_to_events(rt.redis, job_id, k, device, records, rt.ttl())


def _retry_elsewhere(rt, d: Delivery, synthesized, job_id, k, exclude, exc, countdown: float = 0.2) -> NoReturn:
    from .routing import route_partition

    device = rt.worker.device if rt.worker else None
    excluded = sorted(set(exclude or ()) | ({device} if device else set()))
    choice = route_partition(rt, job_id, k, tuple(excluded))
    d.retry((synthesized, job_id, k), {"exclude": excluded}, choice.queue, exc, countdown=countdown)


# -- aggregation ---------------------------------------------------------------------------------------

@app.task(name="zkhive.aggregate", bind=True, acks_late=True, throws=(JobFailed,))
def aggregate(self, header_results, job_id: str) -> dict:
    out = aggregate_job(runtime(), job_id, self.request.id)
    if "waiting_for_space" in out:  # the result found no room: the same message, later
        raise self.retry(countdown=out["waiting_for_space"], max_retries=None)
    return out


def aggregate_job(rt, job_id: str, task_id: str | None = None) -> dict:
    """Verify every partition proof and store the job's proof (N x 192 bytes in partition order).

    Runs as the chord body and, as a backstop, from the watchdog. The chord's results are
    ignored: the chord can fire with one partition counted twice and another missing (see
    cluster.pipeline.jobs), so the partitions come from the first-writer-wins store, and the set must be
    exactly 0..N-1.
    """
    if (skip := _skip(rt, job_id)) is not None:
        return skip
    d = Delivery(task_id=task_id or "aggregate")
    with _hold(rt, d, job_id, None, "aggregate") as held:
        if not held.taken:
            return {"skipped": f"another aggregation of this job is running ({held.lease.holder()})"}
        _check_crashes(rt, d, job_id, None, held.crashes)
        return _aggregate(rt, job_id)


def _aggregate(rt, job_id: str) -> dict:
    from gpu.groth16 import Proof, ProofFormatError, verify
    from synthesis.circuits import get_circuit

    rec = rt.jobs.get(job_id)
    n = rec.num_partitions
    parts = rt.jobs.partitions(job_id, n)
    missing = [k for k in range(n) if k not in parts]
    if missing:
        # fired early (a doubled partition) or called before the last one finished: the
        # watchdog calls again once every partition is stored
        rt.jobs.event(job_id, "aggregate_waiting", missing=missing)
        rt.jobs.flag(job_id, OUTSIDE_CHORD)
        return {"waiting": missing}
    rt.jobs.event(job_id, "aggregate_start", **_worker_fields(rt))
    circuit = get_circuit(rec.params)
    try:
        vk = rt.keys.load_vk(circuit)
    except Exception as e:
        # missing, unreadable or corrupt on this aggregate worker: no proof can be checked, so
        # the job fails now, naming the key, instead of waiting for its deadline
        verdict = policy.classify(e)
        if verdict.transient:
            raise
        _fail(rt, job_id, f"cannot verify: {verdict.message()}")
    publics = _job_publics(rt, rec, circuit)
    bad = []
    for k in range(n):
        try:
            ok = verify(vk, publics[k], Proof.from_bytes(bytes.fromhex(parts[k]["proof"])))
        except (ProofFormatError, ValueError):
            ok = False
        if not ok:
            bad.append(k)
    for k in bad:
        # re-prove this partition alone, elsewhere; the partition's retry budget bounds the loop
        rt.jobs.event(job_id, "verify_failed", partition=k, worker=parts[k].get("worker"),
                      device=parts[k].get("device"))
        budget = rt.settings.delivery.partition_retries
        attempts = rt.jobs.spend_retry(job_id, k)
        if not policy.within_budget(attempts, budget):
            # every prover's proof refused: most likely the key (its .params not the .vk's, or a
            # point off the subgroup), so the message names it
            _fail(rt, job_id, f"partition {k}: proof does not verify after {attempts} attempts "
                              f"(delivery.partition_retries={budget}) with the key "
                              f"{rt.keys.find(circuit, 'params')} and {rt.keys.find(circuit, 'vk')}: "
                              f"`zkhive keys check --params {rec.params}` checks it", k)
        rt.jobs.discard_partition(job_id, k, parts[k])
        dispatch_partition(rt, rec, k, exclude=[parts[k].get("device")] if parts[k].get("device") else [])
    if bad:
        return {"reproving": bad}
    proof = b"".join(bytes.fromhex(parts[k]["proof"]) for k in range(n))
    result = {"job_id": job_id, "params": rec.params, "num_partitions": n, "proof": proof.hex(),
              "public_inputs": [[hex(x) for x in pub] for pub in publics],
              "provers": [{"partition": k, "worker": parts[k].get("worker"), "device": parts[k].get("device")}
                          for k in range(n)]}
    try:
        ref = durable(lambda: rt.blobs.put_json(result, kind="result"), f"job {job_id}: store the result")
    except BlobStoreFull as e:  # back-pressure: the aggregation is sent again after the delay
        return {"waiting_for_space": _wait_for_room(rt, job_id, None, "aggregate", policy.classify(e))}
    durable(lambda: _room_returned(rt, job_id, None), f"job {job_id}: end the wait for room")
    durable(lambda: rt.jobs.finish(job_id, ref, proof_bytes=len(proof), **_worker_fields(rt)),
            f"job {job_id}: finish")
    return {"done": True, "result": ref.model_dump()}
