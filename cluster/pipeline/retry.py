"""One retry policy for the task layer, decided once from the error hierarchy.

As dramatiq's ``Retries`` middleware splits errors with ``throws`` (never retried) and
``retry_when`` (a predicate), ``classify`` sorts every exception a task body catches into one of
three outcomes, by the classes the lower layers raise (gpu/errors.py, gpu/groth16/errors.py,
synthesis, cluster/errors.py)::

    wait: back-pressure, the unit waits and resumes (spends no budget; bounded by the job's deadline)
        BlobStoreFull                                no room in the blob store (bytes or inodes):
                                                     retried after ``wait_delay(n)``, 0.5 s
                                                     doubling to 8 s, until room returns
    transient: retried, on another device when one exists, within the partition's budget
        GpuUnavailable, GpuOutOfMemory (and the ledger's DeviceMemoryExhausted),
        GpuLaunchError                               the device failed or is full: another may not
        SoftTimeLimitExceeded                        this device took too long
        HolderGone                                   the device's key holder did not come back in
                                                     [gpu] key_holder_timeout_s
        redis ConnectionError / TimeoutError,
        kombu OperationalError                       the broker blinked
    permanent: the job fails at once, with the whole message
        C1Error, UnsatisfiedConstraint, GpuInputError    the input is wrong: no device does better
        KeyMissing                                   no key: it must be made (`zkhive keys setup`)
        HolderError                                  the key holder refused the key (its one line:
                                                     no such key file, a key that never fits, ...)
        CircuitMismatch, KeyFormatError              a key made for another circuit, or corrupt
        GpuCompileError                              a kernel does not compile: a bug
        BlobError, AssignmentError                   data corrupt or gone
        anything else                                an unexpected error is a bug: retrying hides it

The budget is one per partition (``delivery.partition_retries``, counted by
``JobStore.spend_retry``): a transient error, an unverifiable proof (cluster.pipeline.tasks) and a lost
partition (cluster.pipeline.watchdog) all spend from it. Deliveries of one message past
``delivery.max_redeliveries`` (a message whose workers keep dying) are a separate bound: that
counts crashes, not errors.
"""
from __future__ import annotations

from dataclasses import dataclass

from celery.exceptions import SoftTimeLimitExceeded

from gpu.errors import GpuCompileError, GpuInputError, GpuLaunchError, GpuOutOfMemory, GpuUnavailable
from gpu.groth16.errors import CircuitMismatch, KeyFormatError
from synthesis.assignment import AssignmentError
from synthesis.circuits import C1Error
from synthesis.r1cs import UnsatisfiedConstraint

from cluster.errors import BlobError, BlobStoreFull, HolderError, HolderGone, KeyMissing


def _broker_errors() -> tuple[type[BaseException], ...]:
    import redis
    from kombu.exceptions import OperationalError

    return (redis.ConnectionError, redis.TimeoutError, OperationalError)


#: (class, what it means), checked in order: the first match decides
PERMANENT: tuple[tuple[type[BaseException], str], ...] = (
    (C1Error, "bad C1 input"),
    (UnsatisfiedConstraint, "the assignment does not satisfy the circuit"),
    (GpuInputError, "bad input to the device"),
    (KeyMissing, "missing key"),
    (HolderError, "key holder"),  # HolderGone is transient: classify checks it first
    (CircuitMismatch, "key/circuit mismatch"),
    (KeyFormatError, "unreadable key"),
    (GpuCompileError, "a kernel does not compile"),
    (BlobError, "data unreadable"),
    (AssignmentError, "assignment unreadable"),
)
#: back-pressure: a resource that frees up by itself; the unit waits (issue 39)
WAIT: tuple[tuple[type[BaseException], str], ...] = (
    (BlobStoreFull, "blob store full"),
)
#: the first wait's delay, doubled per wait up to the cap (seconds)
WAIT_FIRST_S, WAIT_MAX_S = 0.5, 8.0
TRANSIENT: tuple[tuple[type[BaseException], str], ...] = (
    (GpuOutOfMemory, "device out of memory"),
    (GpuLaunchError, "device error"),
    (GpuUnavailable, "device unavailable"),
    (SoftTimeLimitExceeded, "time limit"),
)


@dataclass(frozen=True)
class Verdict:
    transient: bool
    #: what the error means, for the job's message ("bad C1 input", "device error", ...)
    kind: str
    #: the exception's own text, whole
    detail: str
    #: back-pressure: wait for the resource, spending nothing of the retry budget
    wait: bool = False

    def message(self, partition: int | None = None) -> str:
        """``partition 3: missing key: no proving key for ...`` (never shortened)."""
        text = f"{self.kind}: {self.detail}"
        if partition is not None and not self.detail.startswith(f"partition {partition}"):
            text = f"partition {partition}: {text}"
        return text


def classify(exc: BaseException) -> Verdict:
    """Whether ``exc`` is worth another attempt, and what it means."""
    if isinstance(exc, HolderGone):
        return Verdict(True, "key holder gone", f"{type(exc).__name__}: {exc}")
    for cls, kind in PERMANENT:
        if isinstance(exc, cls):
            return Verdict(False, kind, str(exc))
    for cls, kind in WAIT:
        if isinstance(exc, cls):
            return Verdict(True, kind, f"{type(exc).__name__}: {exc}", wait=True)
    for cls, kind in TRANSIENT:
        if isinstance(exc, cls):
            return Verdict(True, kind, f"{type(exc).__name__}: {exc}")
    if isinstance(exc, _broker_errors()):
        return Verdict(True, "broker error", f"{type(exc).__name__}: {exc}")
    return Verdict(False, "unexpected error", f"{type(exc).__name__}: {exc}")


def wait_delay(waits: int) -> float:
    """Seconds before the ``waits``-th retry of a unit waiting for a resource (1: the first)."""
    return min(WAIT_MAX_S, WAIT_FIRST_S * 2 ** max(0, min(waits - 1, 16)))


def within_budget(attempts: int, budget: int) -> bool:
    """``attempts`` retries spent (this one included) are allowed by a budget of ``budget``."""
    return attempts <= budget
