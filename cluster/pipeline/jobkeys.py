"""A job's Redis keys and the job id they are built from (the key list: cluster.pipeline.jobs).

Every key of a job is ``zkhive:job:<id>`` or ``zkhive:job:<id>:<part>:...``, built by ``key``,
which checks the id: 1-128 letters, digits, ``.``, ``_`` and ``-``, starting with a letter or
digit. No ``:``, the separator, so no id can name another job's key (issue 27: ``<victim>:part:1``
was the victim's proof slot; ``X:state`` made the record of ``X`` a hash, and its submit a
WRONGTYPE traceback), and whichever command or task carries a bad id gets one line.
"""
from __future__ import annotations

import re
from typing import Any

from cluster.errors import JobError
from synthesis.limits import clip

PREFIX = "zkhive:job:"
JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not JOB_ID.match(job_id):
        raise JobError(f"job id {clip(job_id)} is invalid: 1-128 characters of letters, digits, '.', '_', '-', "
                       "starting with a letter or digit")
    return job_id


def key(job_id: str, *parts: Any) -> str:
    """A job's key (the id checked first)."""
    check_job_id(job_id)
    return PREFIX + job_id + "".join(f":{p}" for p in parts)
