"""The user's side of the cluster.

    from cluster.client import submit, cancel
    job = submit(c1_doc, job_id="sector-42", priority="critical")   # same id again: same job
    job.status()            # {"status": "running", "partitions_done": 3, "num_partitions": 10, ...}
    res = job.result(timeout=600)   # JobResult: proof (N x 192 bytes), public inputs per partition
    cancel("sector-42")

``submit`` needs only Redis (and the shared blob store): it records the job and sends its chord.
Non-Python pipelines submit through Flower's REST API instead (task ``zkhive.submit``, see
docs/cluster.md).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from cluster.pipeline.jobs import CANCELLED, DONE, FAILED, QUEUED, TERMINAL

from .errors import JobFailed, JobTimeout


@dataclass
class JobResult:
    job_id: str
    params: str
    #: the N partition proofs concatenated in partition order, 192 bytes each
    proof: bytes
    #: public inputs of each partition, in partition order
    public_inputs: list[list[int]]
    provers: list[dict]

    def partition_proofs(self) -> list[bytes]:
        return [self.proof[i:i + 192] for i in range(0, len(self.proof), 192)]


class Job:
    def __init__(self, job_id: str, rt=None, created: bool | None = None):
        from cluster.pipeline.app import runtime

        self.job_id = job_id
        self.rt = rt or runtime()
        #: whether this handle's submit created the job (False: it already existed)
        self.created = created

    def __repr__(self) -> str:
        return f"Job({self.job_id!r})"

    def record(self):
        rec = self.rt.jobs.get(self.job_id)
        if rec is None:
            raise KeyError(f"no job {self.job_id!r} (never submitted, or expired)")
        return rec

    def status(self) -> dict:
        rec = self.record()
        st = self.rt.jobs.state(self.job_id)
        done = len(self.rt.jobs.partitions(self.job_id, rec.num_partitions))
        return {"job_id": self.job_id, "status": st.get("status", QUEUED), "params": rec.params, "kind": rec.kind,
                "num_partitions": rec.num_partitions, "partitions_done": done,
                "priority": rec.priority, "kind": rec.kind, "submitted_at": rec.submitted_at,
                "deadline_at": rec.deadline_at, "error": st.get("error"), "attempt": rec.attempt,
                # units waiting for room in the blob store: {unit: {since, waits, reason, at}}
                "waiting": self.rt.jobs.waiting(self.job_id)}

    def result(self, timeout: float | None = None, poll_s: float = 0.2) -> JobResult:
        """Wait for the job; JobFailed when it failed or was cancelled, JobTimeout after ``timeout``."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            st = self.rt.jobs.state(self.job_id)
            status = st.get("status")
            if status is None and self.rt.jobs.get(self.job_id) is None:
                raise KeyError(f"no job {self.job_id!r} (never submitted, or expired)")
            if status == DONE:
                doc = self.rt.blobs.get_json(st["result"])
                return JobResult(job_id=doc["job_id"], params=doc["params"], proof=bytes.fromhex(doc["proof"]),
                                 public_inputs=[[int(x, 16) for x in pub] for pub in doc["public_inputs"]],
                                 provers=doc["provers"])
            if status in (FAILED, CANCELLED):
                raise JobFailed(self.job_id, status, st.get("error", ""))
            if end is not None and time.monotonic() >= end:
                raise JobTimeout(f"job {self.job_id} is still {status} after {timeout} s")
            time.sleep(poll_s)


def submit(c1_input: dict, job_id: str | None = None, priority: str | int = "normal",
           deadline_s: float | None = None, kind: str | None = None) -> Job:
    """Submit a C1 input (a dict with ``params``). Idempotent on ``job_id`` (default: derived
    from the C1 content), except that a failed or cancelled job submitted again with the same
    input is retried (a new attempt, ``Job.created`` True). Raises cluster.pipeline.jobs.JobError
    for a bad id, priority or parameter set (JobConflict: the id holds another input), and
    BlobStoreFull when the blob store has no room. ``kind`` (porep-c2, snap-update, window-post,
    winning-post: cuzk's names; default the circuit's) chooses the deadline setting ([deadlines]) unless
    ``deadline_s`` is given: a job not done by then fails, naming the setting."""
    from cluster.pipeline.app import runtime
    from cluster.pipeline.workflow import submit_job

    rt = runtime()
    rec, created = submit_job(rt, c1_input, job_id=job_id, priority=priority, deadline_s=deadline_s, kind=kind)
    return Job(rec.job_id, rt, created)


def cancel(job_id: str) -> bool:
    """Cancel a job: its messages still queued are removed (queue depth counts live work only);
    a task already taken by a worker finds the job cancelled and does nothing (a prove already
    running finishes and is discarded). False when the job had already ended."""
    from cluster.pipeline.app import runtime
    from cluster.pipeline.workflow import cancel_job

    return cancel_job(runtime(), job_id)


def get_job(job_id: str) -> Job:
    job = Job(job_id)
    job.record()
    return job


__all__ = ["submit", "cancel", "get_job", "Job", "JobResult", "JobFailed", "JobTimeout", "TERMINAL"]
