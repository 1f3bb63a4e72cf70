"""Job ids live in their own namespace (issue 27): no id can name another job's key.

Against a real Redis, no workers: a submission stores the record and sends the chord's messages,
which is where the collisions happened. On the main of b6c19ea the id pattern allowed ':' and
keys are ``zkhive:job:<id>:...``: ``<victim>:part:1`` was accepted and its record took the
victim's proof slot; ``X:state`` submitted first made the submit of ``X`` a WRONGTYPE traceback.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from circuits_for_tests import SQUARES_A, make_c1

pytestmark = pytest.mark.integration


@pytest.fixture
def here(cluster):
    cluster.flush()
    cluster.configure_here()
    cluster.setup_keys(SQUARES_A)
    return cluster


def test_an_id_that_would_name_another_jobs_key_is_refused(here):
    from cluster.errors import JobError
    from cluster.pipeline.jobs import key
    from cluster.pipeline.workflow import submit_job

    rt = here.runtime()
    victim, _ = submit_job(rt, make_c1(SQUARES_A, seed=1))  # the default id, computable from the C1
    for attacker in (f"{victim.job_id}:part:1", f"{victim.job_id}:state", f"{victim.job_id}:assign:0",
                     f"{victim.job_id}:events", f"{victim.job_id}:leases"):
        with pytest.raises(JobError, match=r"^job id .* is invalid: 1-128 characters of letters, digits, "
                                           r"'\.', '_', '-', starting with a letter or digit$"):
            submit_job(rt, make_c1(SQUARES_A, seed=2), job_id=attacker)
    # the victim's keys are its own: no record, state or proof slot written by the attempts
    assert rt.redis.get(key(victim.job_id, "part", 1)) is None
    assert rt.redis.type(key(victim.job_id, "state")) in (b"hash", b"none")
    assert sorted(k.decode() for k in rt.redis.scan_iter(match="zkhive:job:*")) == sorted(
        k.decode() for k in rt.redis.scan_iter(match=f"zkhive:job:{victim.job_id}*"))

    # `X:state` first, then `X`: refused, then accepted (no WRONGTYPE)
    with pytest.raises(JobError):
        submit_job(rt, make_c1(SQUARES_A, seed=3), job_id="X:state")
    rec, created = submit_job(rt, make_c1(SQUARES_A, seed=3), job_id="X")
    assert created and rec.job_id == "X" and rt.jobs.state("X").get("status") == "queued"
    # a name that looks like a suffix is an ordinary id, as long as it has no separator
    rec, created = submit_job(rt, make_c1(SQUARES_A, seed=4), job_id="X.state")
    assert created and rt.jobs.get("X").job_id == "X"


PROBE = r"""
import contextlib, io, json, sys
from cluster.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
        except BaseException as e:  # a traceback the user would have seen
            rc, err = "raised", io.StringIO(f"Traceback: {type(e).__name__}: {e}")
    out.append([argv, rc, err.getvalue()])
print(json.dumps(out))
"""


def test_no_traceback_on_any_id(here, tmp_path):
    """Every command that takes a job id answers a bad one in one line naming the rule, and a
    well-formed id that names nothing as 'no job' (one interpreter runs the real CLI's main for
    every case: 48 processes would cost a minute of CI)."""
    from tests.conftest import ROOT

    c1 = tmp_path / "c1.json"
    c1.write_text(json.dumps(make_c1(SQUARES_A, seed=5)))
    bad = ["X:state", "a:b", ":", "", "_x", "../etc", "a/b", "a b", "\u00e9", "x" * 129, "a\nb",
           "zkhive:job:x"]
    argvs = [argv for job_id in bad for argv in (
        ["submit", str(c1), f"--job-id={job_id}"], ["result", job_id],
        ["cancel", job_id], ["timeline", job_id])]
    argvs.append(["submit", str(c1), "--job-id=-x"])  # argparse's own error is one line too
    argvs.append(["result", "never-submitted"])
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argvs)], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, env=here.env)
    assert p.returncode == 0, p.stderr
    results = json.loads(p.stdout.splitlines()[-1])
    for argv, rc, err in results[:-1]:
        assert rc == 2, (argv, rc, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, (argv, err)
        assert "is invalid: 1-128 characters" in err, (argv, err)
    argv, rc, err = results[-1]
    assert rc != 0 and "Traceback" not in err and "no job" in err, err
