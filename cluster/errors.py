"""Errors of the cluster, as a tree. The CLI turns each into one line; tasks turn job-level ones
into a failed job with the message, never a worker crash.

    ClusterError
    ├── SettingsError       a settings file or ZKHIVE_*__* variable: unknown key, bad value (names it)
    ├── RedisServerError    the Redis we start ourselves: no binary, port taken, no PING
    ├── BlobError           a blob reference is malformed, its blob missing, size or sha256 wrong
    ├── BlobStoreFull       the blob store's disk has no room (back-pressure: retried, or refused at submit)
    ├── JobError            a submission: bad job id, priority, parameter set (names the field)
    │   ├── JobConflict     a job id already names a job with another C1 input
    │   └── DispatchBusy    the broker pool stayed taken too long: the submission is refused, retry
    ├── JobFailed           the job failed or was cancelled; carries the reason (the client
    │                       raises it, and so does a task that failed its job: Celery's FAILURE)
    ├── JobTimeout          (client) the job did not finish in time
    ├── KeyMissing          no proving/verifying key in the key cache (says how to make it)
    ├── DeviceSpecError     a device name that is not cpu, cpu:N or cuda:N
    ├── DeviceBusy          every slot of a device is locked by a live worker (names the holder)
    ├── WorkerStartError    a worker cannot start (busy device, missing key, no backend)
    └── HolderError         a device's key holder refused a request (its one line) or is not there
        └── HolderGone      no key holder answers on its socket (not started, or died)
"""
from __future__ import annotations


def cli_name() -> str:
    """How the user runs zkhive, for the hints our messages print (here, so that the task layer's
    messages, which a command shows, say it too): ``./run`` sets $ZKHIVE_CLI_NAME to
    the path it was called by (zkhive is then not on the PATH); else ``zkhive`` when the PATH has
    it; else the interpreter and module."""
    import os
    import shutil
    import sys

    named = os.environ.get("ZKHIVE_CLI_NAME")
    if named:
        return named
    return "zkhive" if shutil.which("zkhive") else f"{sys.executable} -m cluster"


class ClusterError(Exception):
    pass


class SettingsError(ClusterError, ValueError):
    pass


class RedisServerError(ClusterError, RuntimeError):
    pass


class BlobError(ClusterError, ValueError):
    pass


class BlobStoreFull(ClusterError, OSError):
    """No room in the blob store (ENOSPC, EDQUOT, or under ``blobs.min_free_bytes`` at submit): a
    condition that passes, never a reason to fail accepted work."""


class JobError(ClusterError, ValueError):
    pass


class JobConflict(JobError):
    pass


class DispatchBusy(JobError):
    """Every producer of this process's broker pool stayed taken for the dispatch's wait
    (cluster.pipeline.app): the submission is refused in one line (the gateway answers
    RESOURCE_EXHAUSTED), never left waiting."""


class JobFailed(ClusterError, RuntimeError):
    def __init__(self, job_id: str, status: str, error: str):
        self.job_id, self.status, self.error = job_id, status, error
        # the three fields are the args: Celery's JSON result backend rebuilds the exception
        # as JobFailed(*args) on the client side
        super().__init__(job_id, status, error)

    def __str__(self) -> str:
        return f"job {self.job_id} {self.status}: {self.error}"


class JobTimeout(ClusterError, TimeoutError):
    pass


class KeyMissing(ClusterError, FileNotFoundError):
    pass


class DeviceSpecError(ClusterError, ValueError):
    pass


class DeviceBusy(ClusterError, RuntimeError):
    pass


class WorkerStartError(ClusterError, RuntimeError):
    pass


class HolderError(ClusterError, RuntimeError):
    """The key holder (cluster.pipeline.keyholder) refused a request, or cannot be reached."""


class HolderGone(HolderError):
    """No key holder answers on the socket (not started, or died)."""
