"""cluster/ops/supervisor.py: a record names a live process by its PID and its start, and a
step of the wall clock does not change which process that is.

psutil's create_time is the boot time plus the kernel's start ticks, and the boot time moves
with the wall clock: in a CI run every live process's create_time read 20.00 s later than
recorded, and the keeper took a live Redis for gone. A record written before such a step has
its create_time off by the step and its seconds since boot unchanged."""
from __future__ import annotations

import subprocess
import sys

import pytest

from cluster.ops.supervisor import ProcessRecord, Supervisor, start_stamp

STEP_S = 20.0


@pytest.fixture
def sleeper():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p
    p.kill()
    p.wait()


def record(pid, create_time, since_boot):
    return ProcessRecord("worker-0", pid, create_time, ["python"], "log", since_boot=since_boot)


def test_a_clock_step_after_the_record_leaves_the_process_ours(sleeper):
    _, created, since = start_stamp(sleeper.pid)
    assert since > 0 and abs(created - since - __import__("psutil").boot_time()) < 0.05
    # written before a 20 s step of the wall clock: create_time off by the step, the rest not
    assert record(sleeper.pid, created - STEP_S, since).process() is not None


def test_another_start_under_the_same_pid_is_not_ours(sleeper):
    _, created, since = start_stamp(sleeper.pid)
    assert record(sleeper.pid, created, since + STEP_S).process() is None
    assert record(sleeper.pid, created, since - 1.0).process() is None


def test_a_record_from_before_since_boot_still_compares_create_time(sleeper):
    _, created, _ = start_stamp(sleeper.pid)
    assert record(sleeper.pid, created, 0.0).process() is not None
    assert record(sleeper.pid, created - STEP_S, 0.0).process() is None


def test_a_process_that_exited_is_gone(sleeper):
    _, created, since = start_stamp(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    assert record(sleeper.pid, created, since).process() is None


def test_the_state_file_keeps_since_boot(tmp_path, sleeper):
    _, created, since = start_stamp(sleeper.pid)
    sup = Supervisor(tmp_path)
    sup.records = [record(sleeper.pid, created, since)]
    sup.save()
    again = Supervisor(tmp_path)
    assert again.load() and again.records[0].since_boot == since
    assert again.records[0].process() is not None


def test_a_process_age_ignores_a_clock_step(sleeper, monkeypatch):
    """The keeper's young-death test (a restart backs off when a process died before
    ``stable_s``) reads the age from the seconds since boot: after a 20 s step of the wall clock
    (now and psutil's boot time both 20 s later) a process a second old is still a second
    old, where now - create_time would say 21."""
    import time

    import psutil

    from cluster.ops.keeper import age
    _, created, since = start_stamp(sleeper.pid)
    now = time.time()
    rec = record(sleeper.pid, created, since)
    assert abs(age(rec, now) - (now - created)) < 0.1
    boot = psutil.boot_time()
    monkeypatch.setattr(psutil, "boot_time", lambda: boot + STEP_S)
    assert abs(age(rec, now + STEP_S) - (now - created)) < 0.1
    assert abs(age(record(sleeper.pid, created, 0.0), now + STEP_S) - (now - created)) > STEP_S - 0.1
