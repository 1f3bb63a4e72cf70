"""What keeps one submission from filling the broker: the C1 bounds every submit checks before
anything is stored, the one-line "broker memory full" error, and the undo of a half-written job.

Every submission path ends in ``cluster.pipeline.workflow.submit_job`` (``zkhive submit``,
``cluster.client.submit``, the ``zkhive.submit`` task Flower's send-task runs), which calls
``check_c1`` first; Flower's own request decoding is bounded too (``bound_flower_requests``, in
the Flower process), so a body that cannot be decoded within the limits is refused with HTTP 400
and one line before any message is sent.

Redis runs with ``maxmemory`` and ``noeviction`` (``redis.maxmemory_bytes``, cluster.ops.commands,
docker-compose.yml): a full Redis refuses writes instead of evicting a queue or a job's state.
A submit that meets it fails with ``broker memory full (maxmemory X): ...`` and leaves nothing
behind: ``undo_submit`` removes what the submission had written (deletions are allowed at the
bound).
"""
from __future__ import annotations

import logging

from synthesis.limits import InputError, Limits, check, clip, loads

from cluster.errors import JobError

log = logging.getLogger(__name__)


def limits_of(settings) -> Limits:
    return settings.limits.limits()


# --- the kinds' own bounds (issue 37) ---------------------------------------------------------------
#
# A PoSt or SnapDeals job document is bounded by its circuit's own maximum, not by
# ``limits.c1_max_bytes`` (a PoRep C1's): the largest honest document of the parameter set
# (``circuit.max_document_bytes()``: every sector or partition, each vanilla proof at its fixed
# length, every number at its widest) plus 1% and 4 KiB. A full 32 GiB WindowPoSt partition is
# 79.7 MB of JSON, over the default 64 MiB of a C1; a 2 KiB one is 15.9 KB, and 20 KB is refused.

#: the margin over a circuit's largest honest document: a part in MARGIN_DIV, plus MARGIN_BYTES
MARGIN_DIV, MARGIN_BYTES = 100, 4096


def document_limit(circuit) -> int | None:
    """The largest job document ``circuit`` takes (its own maximum with the margin), or None for
    circuits bounded by ``limits.c1_max_bytes`` (PoRep: their C1s)."""
    most = getattr(circuit, "max_document_bytes", None)
    if most is None:
        return None
    n = int(most())
    return n + n // MARGIN_DIV + MARGIN_BYTES


def kind_limit(doc) -> tuple[int, str] | None:
    """(limit, "<kind> <parameter set>") of a document naming a PoSt / SnapDeals set; else None."""
    from synthesis.circuits import get_circuit

    params = doc.get("params") if isinstance(doc, dict) else None
    if not isinstance(params, str) or len(params) > 64:
        return None
    try:
        circuit = get_circuit(params)
    except KeyError:
        return None
    most = document_limit(circuit)
    return None if most is None else (most, f"{getattr(circuit, 'proof_kind', 'job')} {params}")


def largest_kind_document() -> int:
    """The largest document any registered PoSt / SnapDeals set takes (window-post-64g's)."""
    from synthesis.circuits import get_circuit, known

    return max((document_limit(get_circuit(n)) or 0 for n in known()), default=0)


def read_limits(settings) -> Limits:
    """What a submission path may read before it knows the document's kind (``zkhive submit``'s
    file, Flower's body): ``[limits]`` with the size of the largest document of any kind, the
    C1's or a PoSt/SnapDeals set's; ``submit_job`` then holds the document to its own kind's."""
    import dataclasses

    lim = limits_of(settings)
    return dataclasses.replace(lim, document_bytes=max(lim.document_bytes, largest_kind_document()))


def check_c1(settings, doc) -> None:
    """JobError (one line, the field and its size) unless ``doc`` is a JSON object within
    ``[limits]``; nothing of it is echoed beyond a few dozen characters. A PoSt / SnapDeals
    document's walk is bounded by twice its kind's limit (its exact size, canonical JSON, is
    ``check_canonical_size``'s)."""
    import dataclasses

    if not isinstance(doc, dict):
        raise JobError(f"a C1 document is a JSON object, not {type(doc).__name__}")
    lim, setting, kl = limits_of(settings), "limits.c1_max_bytes", kind_limit(doc)
    if kl is not None:
        lim, setting = dataclasses.replace(lim, document_bytes=2 * kl[0]), f"twice the {kl[1]} limit"
    try:
        check(doc, lim, setting=setting)
    except InputError as e:
        raise JobError(str(e)) from None


def check_canonical_size(settings, c1: bytes, doc=None) -> None:
    """The document's size as canonical JSON against its kind's limit (``kind_limit``: a PoSt /
    SnapDeals set's own), else ``limits.c1_max_bytes``; JobError naming the kind, size and limit."""
    kl = kind_limit(doc) if doc is not None else None
    if kl is not None:
        most, label = kl
        if len(c1) > most:
            raise JobError(f"{label}: the job document is {len(c1)} bytes as JSON, over its limit of {most} "
                           f"(the largest honest {label.split()[-1]} document + 1% + 4 KiB)")
        return
    bound = settings.limits.c1_max_bytes
    if len(c1) > bound:
        raise JobError(f"the C1 input is {len(c1)} bytes as JSON, over the limit of {bound} (limits.c1_max_bytes)")


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps: kombu's OperationalError) is Redis refusing a write at
    its maxmemory."""
    import redis

    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, redis.exceptions.OutOfMemoryError) or "used memory > 'maxmemory'" in str(exc):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def oom_refusals(r) -> int | None:
    """How many commands Redis has refused at its maxmemory so far (INFO errorstats, Redis 6.2+);
    None when it cannot say. A publish refused mid-chord may surface as another error (kombu
    collects the connection and retries on a closed channel: AttributeError), so a submission
    compares this count before and after instead of trusting the exception."""
    try:
        stat = r.info("errorstats").get("errorstat_OOM", {})
        return int(stat.get("count", 0)) if isinstance(stat, dict) else 0
    except Exception:  # noqa: BLE001 - unreachable or too old: fall back to the exception
        return None


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def broker_full(r, what: str) -> str:
    """``broker memory full (maxmemory X, used Y): WHAT``, read from the Redis that refused."""
    try:
        info = r.info("memory")
        used, bound = int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
        where = f"maxmemory {_mib(bound)}, used {_mib(used)}"
    except Exception:  # the Redis may be unreachable by now: the message still says what failed
        where = "maxmemory reached"
    return (f"broker memory full ({where}): {what}; wait for finished jobs to expire "
            f"(delivery.result_ttl_s), remove old ones, or raise redis.maxmemory_bytes")


def failed_submit(rt, job_id: str, submitted_at: float, dispatched: bool, exc: BaseException,
                  refusals: int | None) -> JobError | None:
    """After a submission failed between storing its C1 and sending its last message: remove
    what it wrote (``undo_submit``), reset the publisher when a send failed, and return the
    broker-full JobError when Redis refused a write at its maxmemory meanwhile (``refusals``:
    ``oom_refusals`` before the submission's writes); None: re-raise ``exc``."""
    from cluster.errors import DispatchBusy

    if isinstance(exc, DispatchBusy):  # nothing was sent and the pools are sound: undo only
        undo_submit(rt, job_id)
        return DispatchBusy(f"job {job_id} not submitted: {exc}")
    now = oom_refusals(rt.redis) if refusals is not None else None
    full = is_oom(exc) or (now is not None and now > refusals)
    message = broker_full(rt.redis, f"job {job_id} not submitted") if full else None
    if dispatched or recorded_by(rt, job_id, submitted_at):
        undo_submit(rt, job_id)
    if dispatched:
        reset_publisher(getattr(rt.dispatch, "app", None))
    return JobError(message) if full else None


def reset_publisher(app) -> None:
    """Drop the app's connection and producer pools after a publish Redis refused: kombu (5.7)
    collects the connection on the error and may leave a producer with a closed channel in its
    pool; the next publish from this process then fails with ``AttributeError: 'NoneType' object
    has no attribute 'client'`` (found by tests/integration/test_bounds.py). Fresh pools connect
    again on the next send."""
    from kombu import pools

    if app is None:
        return
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None
    pools.reset()  # kombu's registry would hand the same (broken) producer pool back


def recorded_by(rt, job_id: str, submitted_at: float) -> bool:
    """Whether the job's record is the one this submission (stamped ``submitted_at``) wrote: a
    write that failed after the record's SET NX (the state, the events) leaves it behind."""
    try:
        rec = rt.jobs.get(job_id)
    except Exception:  # noqa: BLE001 - unreadable: nothing to undo that we could undo
        return False
    return rec is not None and rec.submitted_at == submitted_at


def undo_submit(rt, job_id: str) -> None:
    """Remove what a failed submission wrote (record, state, index, active set, events, queued
    messages), so no half-written job waits for its deadline. Best effort: each step alone."""
    from .jobs import ACTIVE, INDEX, key

    steps = [lambda: rt.dispatch.drop_queued(rt.redis, job_id),
             lambda: rt.redis.delete(key(job_id), key(job_id, "state"), key(job_id, "events")),
             lambda: rt.redis.zrem(INDEX, job_id),
             lambda: rt.redis.srem(ACTIVE, job_id)]
    for step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - a failed undo step must not hide the submit's error
            log.warning("undo of job %s: %s", job_id, str(e).splitlines()[0] if str(e) else type(e).__name__)
    log.info("job %s: submission failed after it was recorded; removed what it had written", job_id)


# -- Flower ------------------------------------------------------------------------------------

def bound_flower_requests(settings) -> None:
    """Flower (2.2) decodes a send-task/apply body with tornado's ``json_decode``: a body nested
    a few thousand levels deep is an HTTP 500 with a traceback in its log (RecursionError), one
    with a 5,000-digit integer a 400 quoting Python's int limit, and any size up to tornado's
    100 MB is decoded and sent on into Redis. Decode it with ``synthesis.limits`` instead: over a
    bound, HTTP 400 with the one-line reason, and no message is sent. (The task checks its
    arguments again: a message can come from elsewhere.)"""
    from flower.api.tasks import BaseTaskHandler
    from tornado.web import HTTPError

    if getattr(BaseTaskHandler.get_task_args, "_zkhive_bounded", False):
        return
    c1 = limits_of(settings)
    # the body is {"args": [C1], "kwargs": {...}, options}: two levels above the document, and
    # the document's own size bound plus room for the options
    body_limits = Limits(document_bytes=c1.document_bytes + (64 << 10), depth=c1.depth + 2,
                         string_bytes=c1.string_bytes, key_bytes=c1.key_bytes,
                         array_items=c1.array_items, object_keys=c1.object_keys,
                         int_digits=c1.int_digits)

    def get_task_args(self):
        body = self.request.body
        try:
            options = loads(body, body_limits) if body else {}
        except InputError as e:
            line = _reason(f"request body: {e}")
            raise HTTPError(400, "%s", line, reason=line) from None  # the body is the line
        if not isinstance(options, dict):
            raise HTTPError(400, reason="invalid options")
        args = options.pop("args", [])
        kwargs = options.pop("kwargs", {})
        if not isinstance(args, (list, tuple)):
            raise HTTPError(400, reason="args must be an array")
        return args, kwargs, options

    get_task_args._zkhive_bounded = True
    BaseTaskHandler.get_task_args = get_task_args
    _broker_full_in_flower(settings)


def _broker_full_in_flower(settings) -> None:
    """Flower answers a publish that Redis refused at its maxmemory with 503 "Broker or result
    backend unavailable"; say what it is: 507 and the broker-full line."""
    import redis
    from flower.utils.blocking import BlockingOperationRunner
    from tornado.web import HTTPError

    run = BlockingOperationRunner.run
    client: list = []

    async def bounded_run(self, operation, target, func, *args, **kwargs):
        try:
            return await run(self, operation, target, func, *args, **kwargs)
        except HTTPError as e:
            if e.__cause__ is None or not is_oom(e.__cause__):
                raise
            if not client:
                client.append(redis.Redis.from_url(settings.redis.url_with_password(), socket_timeout=2))
            line = _reason(broker_full(client[0], f"{operation} {target} refused"))
            raise HTTPError(507, "%s", line, reason=line) from None

    BlockingOperationRunner.run = bounded_run


def _reason(text: str) -> str:
    # an HTTP reason phrase is one line of printable ASCII
    line = text.splitlines()[0] if text else "bad request"
    return "".join(c if 32 <= ord(c) < 127 else "?" for c in line)[:300]


__all__ = ["check_c1", "check_canonical_size", "is_oom", "broker_full", "undo_submit",
           "bound_flower_requests", "clip"]
