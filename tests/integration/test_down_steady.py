"""``zkhive down`` on a real ``zkhive up`` cluster finishes whatever happens to its stdout, and
gives every worker its warm shutdown however it was started (issue 39): a worker the keeper
restarted is the keeper's child, and stopping the keeper took it along (SIGKILL after the
keeper's 10 s grace, no warm shutdown)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from cluster.ops.supervisor import Supervisor
from test_keeper import _wait_record
from test_up_cluster import ROOT, Setup

pytestmark = pytest.mark.integration


def test_down_piped_into_head_stops_everything_and_a_restarted_worker_shuts_down_warm(tmp_path):
    setup = Setup(tmp_path)
    setup.up(check=0)
    sup = Supervisor(setup.run_dir)
    try:
        sup.load()
        old = sup.record("synthesis-0")
        os.kill(old.pid, signal.SIGKILL)
        # the keeper starts it again (its child) and it becomes ready
        assert _wait_record(sup, "synthesis-0", lambda r: r.pid != old.pid and r.ready_at > 0, 120), \
            (setup.run_dir / "logs" / "keeper.log").read_text()
        new = sup.record("synthesis-0")
        assert new.process().ppid() == sup.record("keeper").pid
        log = setup.run_dir / "logs" / "synthesis-0.log"
        before = log.stat().st_size
        # unbuffered, as a terminal or PYTHONUNBUFFERED has it: the first line reaches head at once
        env = dict(setup.env, PYTHONUNBUFFERED="1")
        cmd = (f"{sys.executable} -m cluster down --config {setup.config} --run-dir {setup.run_dir}"
               f" | head -1")
        t0 = time.monotonic()
        res = subprocess.run(["sh", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=240)
        took = time.monotonic() - t0
        assert res.returncode == 0, res.stderr
        assert len(res.stdout.splitlines()) == 1, res.stdout
        assert "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, res.stderr
        # everything `up` started is gone, not only the keeper (checked before any cleanup)
        assert not sup.state_file.exists(), f"down stopped midway: {res.stdout}{res.stderr}"
        deadline = time.monotonic() + 10
        while setup.ours() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert setup.ours() == []
    finally:
        if sup.state_file.exists():
            setup.down()
    # the restarted worker got SIGTERM (Celery's warm shutdown), not the keeper's SIGKILL
    tail = log.read_bytes()[before:].decode(errors="replace")
    assert "Warm shutdown" in tail, tail[-2000:]
    assert took < 60, took


def test_steady_stdout_swallows_any_failure_to_write_and_the_command_goes_on(tmp_path):
    """``down > /dev/full`` (ENOSPC) or into a closed pipe (EPIPE): each write is dropped, none
    raises, and nothing is left for the interpreter's last flush to fail on."""
    from cluster.ops.commands import _SteadyOut

    for target in ("/dev/full", "pipe"):
        if target == "pipe":
            r, w = os.pipe()
            os.close(r)  # the reader left
            stream = os.fdopen(w, "w")
        else:
            stream = open(target, "w")
        out = _SteadyOut(stream)
        assert out.write("  keeper         pid 1   stopped\n") > 0  # no exception
        assert out.gone, target
        out.write("more\n")
        out.flush()
        stream.close()  # its own flush goes to /dev/null now: no error either
