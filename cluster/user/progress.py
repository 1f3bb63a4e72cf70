"""Progress for the CLI's long waits (rich): a job's partitions on a bar (``demo``, ``submit
--wait``, ``result --wait``), a spinner with the elapsed time for work that reports no steps
(``keys setup``: 91 s at 2^16 on the CPU).

Bars go to stderr by default, so ``zkhive result JOB --wait > result.json`` keeps a clean stdout;
on a terminal rich redraws them in place, elsewhere (a log, CI) it prints the final state once.
"""
from __future__ import annotations

import contextlib
import time

from cluster.cli import CommandError


def _console(stderr: bool):
    from rich.console import Console

    return Console(stderr=stderr)


def follow_job(job, timeout_s: float | None, *, stderr: bool = True, poll_s: float = 0.2):
    """Wait for ``job`` (a cluster.client.Job) with its partitions on a progress bar; returns its
    JobResult. A failed, cancelled or late job is a CommandError naming it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cluster.client import JobFailed
    from cluster.pipeline.jobs import TERMINAL

    end = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        with Progress(TextColumn("  {task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("partitions"), TimeElapsedColumn(), console=_console(stderr)) as bar:
            st = job.status()
            task = bar.add_task(f"job {job.job_id} {st['status']}", total=st["num_partitions"])
            while True:
                st = job.status()
                said = "waiting for space" if st.get("waiting") and st["status"] not in TERMINAL else st["status"]
                bar.update(task, completed=st["partitions_done"], description=f"job {job.job_id} {said}")
                if st["status"] in TERMINAL:
                    break
                if end is not None and time.monotonic() > end:
                    raise CommandError(f"job {job.job_id} not done after {timeout_s:.0f} s "
                                       f"({st['partitions_done']}/{st['num_partitions']} partitions); "
                                       f"see `status` and `timeline {job.job_id}`")
                time.sleep(poll_s)
        return job.result(timeout=5)
    except KeyError as e:
        raise CommandError(e.args[0]) from None
    except JobFailed as e:
        raise CommandError(str(e)) from None


@contextlib.contextmanager
def spinner(what: str, *, stderr: bool = True):
    """A spinner with the elapsed time while the block runs."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=_console(stderr), transient=False) as bar:
        task = bar.add_task(what, total=None)
        yield
        bar.update(task, description=f"{what}: done")
