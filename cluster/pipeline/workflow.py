"""A job as a Celery chord, and submission (idempotent on the job id).

    chord([ chain(synthesize_partition(job, k) -> prove_partition(<assignment ref>, job, k))
            for k in 0..N-1 ],
          aggregate(job))

Synthesis runs on the ``synthesis`` queue; each prove task is routed to a device queue when its
synthesis finishes (cluster.pipeline.routing); the body runs on ``aggregate`` and reads the partition proofs
from the first-writer-wins store (cluster.pipeline.jobs), not from the chord's results.

The work is sent by task *name* (``CeleryDispatch``): this module never imports cluster.pipeline.tasks,
which imports it, so there is no import cycle; the unit tests put a stub dispatcher in its place
(tests/unit/stub_runtime.py) and run the task bodies without a broker.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import time
from typing import Any

from celery import chain, chord

from cluster.errors import JobConflict, JobError, cli_name

from synthesis.limits import clip

from . import publics
from .jobs import CANCELLED, FAILED, OWN_DEADLINE, JobRecord, check_job_id, priority_value

SYNTHESIZE = "zkhive.synthesize_partition"
PROVE = "zkhive.prove_partition"
AGGREGATE = "zkhive.aggregate"
#: a job flag (JobStore.flag): the chord cannot be relied on to send the aggregation
OUTSIDE_CHORD = "outside-chord"
#: where each task's message carries its job id (for cancel's clean-up of queued messages)
JOB_ARG = {SYNTHESIZE: 0, PROVE: 1, AGGREGATE: 1}


def canonical_c1(doc: Any) -> bytes:
    if not isinstance(doc, dict):
        raise JobError(f"a C1 input must be a JSON object, got {type(doc).__name__}")
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def default_job_id(params: str, c1: bytes) -> str:
    """Content-derived id: resubmitting the same C1 input is the same job."""
    return "c1-" + hashlib.sha256(params.encode() + b"\0" + c1).hexdigest()[:24]


class CeleryDispatch:
    """Sends a job's work through Celery. Every follow-up message (the job's chord, one partition
    again, the aggregation) goes through here, from the client, the tasks and the watchdog."""

    def __init__(self, app):
        self.app = app

    def _sig(self, name: str, args: tuple, *, priority: int, immutable: bool = False, **kwargs):
        return self.app.signature(name, args=args, kwargs=kwargs, immutable=immutable,
                                  options={"priority": priority})

    def _one_producer(self):
        """Every message of one dispatch through one producer of the pool, taken with a timeout
        (cluster.pipeline.app.ZkhiveCelery: celery's chord would otherwise take a second one
        while holding the first, and enough threads at once deadlocked on the pool)."""
        one = getattr(self.app, "one_producer", None)
        return one() if one is not None else contextlib.nullcontext()

    def job(self, rec: JobRecord) -> None:
        p = rec.priority
        header = [chain(self._sig(SYNTHESIZE, (rec.job_id, k), priority=p, immutable=True),
                        self._sig(PROVE, (rec.job_id, k), priority=p))
                  for k in range(rec.num_partitions)]
        with self._one_producer():
            chord(header, self._sig(AGGREGATE, (rec.job_id,), priority=p)).apply_async()

    def partition(self, rec: JobRecord, k: int, assignment: dict | None, exclude: list[str]) -> None:
        """Partition k alone, outside the chord: synthesis and proof, or the proof of a stored
        assignment."""
        p = rec.priority
        with self._one_producer():
            if assignment is None:
                chain(self._sig(SYNTHESIZE, (rec.job_id, k), priority=p, immutable=True),
                      self._sig(PROVE, (rec.job_id, k), priority=p, exclude=exclude)).apply_async()
            else:
                self._sig(PROVE, ({"partition": k, "assignment": assignment}, rec.job_id, k), priority=p,
                          exclude=exclude).apply_async()

    def aggregate(self, rec: JobRecord) -> None:
        with self._one_producer():
            self._sig(AGGREGATE, (None, rec.job_id), priority=rec.priority).apply_async()

    def drop_queued(self, r, job_id: str) -> int:
        """Remove the job's messages still waiting in any queue (a cancelled job), so queue
        depth counts only live work; returns how many. A message already taken by a worker is
        not in a list any more: its task finds the job cancelled and skips."""
        from .queues import queued_messages

        dropped = 0
        for lst, raw, msg in queued_messages(r):
            name = msg.get("headers", {}).get("task")
            args = _message_args(msg)
            i = JOB_ARG.get(name)
            if i is not None and args is not None and len(args) > i and args[i] == job_id:
                dropped += int(r.lrem(lst, 1, raw))
        return dropped


    def queued_units(self, r) -> dict[tuple[str, str], list[str]]:
        """Where each unit's messages are: {(job id, unit): [queue name, or "unacked" for a
        message handed to a consumer and not acknowledged yet]} (cluster.pipeline.reconcile)."""
        from .queues import queued_messages

        where: dict[tuple[str, str], list[str]] = {}
        for lst, _raw, msg in queued_messages(r):
            name = lst.decode() if isinstance(lst, bytes) else lst
            _add_unit(where, msg, name.split("\x06\x16")[0])
        for raw in r.hvals("unacked"):  # kombu's Redis transport: tag -> [message, exchange, routing key]
            try:
                msg = json.loads(raw)[0]
            except (ValueError, TypeError, IndexError, KeyError):
                continue
            _add_unit(where, msg, "unacked")
        return where


def _add_unit(where: dict, msg: dict, place: str) -> None:
    if not isinstance(msg, dict):
        return
    name = msg.get("headers", {}).get("task")
    args = _message_args(msg)
    i = JOB_ARG.get(name)
    if i is None or args is None or len(args) <= i or not isinstance(args[i], str):
        return
    if name == AGGREGATE:
        unit = "aggregate"
    elif len(args) > i + 1 and isinstance(args[i + 1], int):
        unit = str(args[i + 1])
    else:
        return
    where.setdefault((args[i], unit), []).append(place)


def _message_args(msg: dict) -> list | None:
    import base64

    try:
        body = msg["body"]
        if msg.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        return json.loads(body)[0]
    except (KeyError, ValueError, TypeError, IndexError):
        return None


def proof_kind(circuit) -> str:
    """cuzk's name of what ``circuit`` proves (``winning-post``, ``window-post``, ...; PoRep C2
    for a circuit that names none)."""
    from .jobs import PROOF_KIND_DEFAULT

    kind = getattr(circuit, "proof_kind", None)
    return kind if isinstance(kind, str) and kind else PROOF_KIND_DEFAULT


def submit_job(rt, doc: dict, *, job_id: str | None = None, priority: str | int = "normal",
               deadline_s: float | None = None, kind: str | None = None) -> tuple[JobRecord, bool]:
    """Record and dispatch a job; returns (record, created). ``kind`` (cuzk's proof kind, one of
    cluster.settings.JOB_KINDS; default the circuit's ``proof_kind``, else porep-c2) chooses the
    deadline setting ([deadlines]) unless ``deadline_s`` is given. An existing id returns its record,
    unless that job failed or was cancelled: the same input starts a new attempt under the id
    (``record.attempt`` n+1, created True); another input under an existing id is JobConflict.
    A parameter set whose keys exist nowhere in the cluster (neither in the key cache nor
    resident on a live prover) is refused here, not failed later by every partition."""
    from synthesis.circuits import get_circuit

    from . import bounds

    bounds.check_c1(rt.settings, doc)  # [limits], before anything is stored or echoed
    c1 = canonical_c1(doc)
    bounds.check_canonical_size(rt.settings, c1, doc)  # a PoSt / SnapDeals set: its own limit
    params = doc.get("params")
    if not isinstance(params, str):
        raise JobError("field params: must name the parameter set (a string)")
    try:
        circuit = get_circuit(params)
    except KeyError as e:
        raise JobError(f"field params: {e.args[0]}") from None
    prio = priority_value(priority)
    kind = job_kind(circuit, kind)
    seconds, source = job_deadline(rt.settings, kind, deadline_s)
    job_id = check_job_id(job_id) if job_id is not None else default_job_id(params, c1)
    c1_sha = hashlib.sha256(c1).hexdigest()

    existing = rt.jobs.get(job_id)
    if existing is None:
        pubs = _checked_public_inputs(circuit, doc)
        _check_keys_exist(rt, circuit)
        check_room = getattr(rt.blobs, "check_room", None)
        if check_room is not None:  # refused now, with the free space, not failed later
            check_room(rt.settings.blobs.min_free_bytes)
        now = time.time()
        created, refusals = False, bounds.oom_refusals(rt.redis)
        try:
            ref = rt.blobs.put(c1, kind="c1")
            rec = JobRecord(job_id=job_id, params=params, circuit_digest=circuit.digest(),
                            num_partitions=circuit.num_partitions(), priority=prio, c1=ref,
                            submitted_at=now, deadline_at=now + seconds, kind=kind, deadline_from=source,
                            publics=publics.store(rt.blobs, circuit.name, pubs))
            if rt.jobs.create(rec):
                created = True
                rt.dispatch.job(rec)
                return rec, True
        except Exception as e:  # no half-written job (it would wait for its deadline)
            full = bounds.failed_submit(rt, job_id, now, created, e, refusals)
            if full is None:
                raise
            raise full from None
        existing = rt.jobs.get(job_id)  # lost a race with an identical submission
    if existing.params != params or existing.c1.sha256 != c1_sha:
        raise JobConflict(f"job {job_id} already exists with another C1 input "
                          f"(parameter set {existing.params}, c1 {existing.c1.sha256[:12]})")
    if rt.jobs.status(job_id) in (FAILED, CANCELLED):  # the same input again: a new attempt
        return _new_attempt(rt, circuit, existing, c1, _checked_public_inputs(circuit, doc), prio,
                            deadline_s, kind)
    # the same input as a live or finished job (Curio's retry of a request): its public inputs
    # were checked and stored when it was first submitted
    return existing, False


def job_kind(circuit, kind: str | None) -> str:
    """The job's kind (cuzk's name): given, else the circuit's ``proof_kind``, else porep-c2;
    JobError names an unknown one."""
    from cluster.settings import JOB_KINDS

    kind = kind if kind is not None else proof_kind(circuit)
    if kind not in JOB_KINDS:
        raise JobError(f"field kind: {clip(kind)} is not a job kind (known: {', '.join(JOB_KINDS)})")
    return kind


def job_deadline(s, kind: str, deadline_s: float | None) -> tuple[float, str]:
    """(seconds, where they came from): the job's own ``deadline_s``, else its kind's setting."""
    if deadline_s is not None:
        if not isinstance(deadline_s, (int, float)) or isinstance(deadline_s, bool) or not deadline_s > 0:
            raise JobError(f"field deadline_s: {clip(deadline_s)} must be a number of seconds above 0")
        return float(deadline_s), OWN_DEADLINE
    return s.deadlines.for_kind(kind, s.delivery)


def _new_attempt(rt, circuit, old: JobRecord, c1: bytes, pubs: list[list[int]], prio: int,
                 deadline_s: float | None, kind: str) -> tuple[JobRecord, bool]:
    """Resubmission of a failed or cancelled job with the same input: attempt n+1 under the same
    id (Curio retries with the same request_id), its history kept in the timeline (issue 39).
    Checked like a first submission (keys, room); returns the job as it stands, not created,
    when another resubmission started the attempt first."""
    from cluster.errors import BlobStoreFull

    from . import bounds

    _check_keys_exist(rt, circuit)
    check_room = getattr(rt.blobs, "check_room", None)
    if check_room is not None:
        check_room(rt.settings.blobs.min_free_bytes)
    try:  # the input and its public inputs again: `zkhive gc` may have removed them meanwhile
        ref = rt.blobs.put(c1, kind="c1")
        pubs_ref = publics.store(rt.blobs, circuit.name, pubs)
    except BlobStoreFull as e:
        raise BlobStoreFull(f"{e}: job {old.job_id} not resubmitted; free space and submit again") from None
    now = time.time()
    seconds, source = job_deadline(rt.settings, kind, deadline_s)
    rec = old.model_copy(update={"c1": ref, "publics": pubs_ref, "priority": prio, "submitted_at": now,
                                 "attempt": old.attempt + 1, "deadline_at": now + seconds, "kind": kind,
                                 "deadline_from": source})
    if not rt.jobs.new_attempt(old, rec):
        return rt.jobs.get(old.job_id) or old, False
    try:
        rt.dispatch.job(rec)
    except Exception as e:  # the attempt fails now (not at its deadline); the id stays retryable
        rt.jobs.fail(old.job_id, f"attempt {rec.attempt} was not dispatched: {type(e).__name__}: "
                                 f"{str(e).splitlines()[0] if str(e) else ''}")
        bounds.reset_publisher(getattr(rt.dispatch, "app", None))
        if bounds.is_oom(e):
            raise JobError(bounds.broker_full(rt.redis, f"job {old.job_id} not resubmitted")) from None
        raise
    return rec, True


def cancel_job(rt, job_id: str) -> bool:
    """Cancel a job (``zkhive cancel``, the client, Flower's Terminate): its queued messages are
    removed; a task already taken finds the job cancelled (a running prove finishes and is
    discarded). False when the job had already ended; KeyError when there is none."""
    if rt.jobs.get(job_id) is None:
        raise KeyError(f"no job {job_id!r}")
    if not rt.jobs.cancel(job_id):
        return False
    dropped = rt.dispatch.drop_queued(rt.redis, job_id)
    rt.jobs.event(job_id, "dequeued", messages=dropped)
    return True


def _checked_public_inputs(circuit, doc) -> list[list[int]]:
    """Each partition's public inputs, kept with the job (cluster.pipeline.publics). Everything
    the C1 schema checks (types, hex, sizes, partition and challenge counts) is checked before the
    job is accepted, and named at the job's level (``field partitions[1].challenges[0].column[0]:
    ...``), not as the failure of its partition 0 (issue 27); so is a C1 whose public inputs
    cannot be formed. What needs the vanilla proof (Merkle paths, labels) is synthesis's."""
    from synthesis.circuits import C1Error

    try:
        return publics.compute(circuit, circuit.parse_c1(doc))
    except C1Error as e:
        where = f"field {e.field}: " if e.field else ""
        raise JobError(f"bad C1 input: {where}{e.message}") from None
    except ValueError as e:  # the public inputs' own checks (a PoSt partition without sectors)
        raise JobError(f"bad C1 input: {e}") from None


def _check_keys_exist(rt, circuit) -> None:
    from . import registry

    if rt.keys.has(circuit):
        return
    provers = registry.workers(rt.redis, role="prove")
    if any(circuit.name in w.resident_keys or circuit.name in w.makes_keys for w in provers):
        return  # resident, or made in a prover's own process ([srs] in_process)
    raise JobError(f"field params: no keys for parameter set {circuit.name!r} anywhere in the cluster "
                   f"(not in the key cache: looked in {rt.keys.places(circuit)}; not resident on any prover, no prover "
                   f"makes it in process): run `{cli_name()} keys setup --params {circuit.name}`, or "
                   f"name it in a prover's srs.in_process")


def dispatch_partition(rt, rec: JobRecord, k: int, *, exclude: list[str] | tuple = (), reason: str = "retry",
                       **fields) -> None:
    """Send partition k alone (outside the chord): re-prove a bad or lost partition. The proof
    joins the others in the first-writer-wins store; the aggregation is then started by the prove
    task that completes the set (or the watchdog)."""
    ref = rt.jobs.assignment(rec.job_id, k)
    rt.jobs.flag(rec.job_id, OUTSIDE_CHORD)  # the chord may never count k: the last proof aggregates
    rt.jobs.event(rec.job_id, "redispatched", partition=k, reason=reason, exclude=list(exclude),
                  resynthesize=ref is None, **fields)
    rt.dispatch.partition(rec, k, ref, list(exclude))
