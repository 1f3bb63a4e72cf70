"""The keeper's backoff on a real process, with the clock it is given (``Keeper.step(now)``):
the delay before a restart doubles with each consecutive short-lived run (up to its cap), and a
run that lived ``stable_s`` starts the count again. Each restart is checked at the instant it
becomes due and just before it (nothing may start early), so a constant delay or a count that
never resets fails here. (Give-up and restart rules: tests/integration/test_keeper.py.)"""
from __future__ import annotations

import time

import pytest

from cluster.ops.keeper import Keeper, KeeperPolicy
from cluster.ops.supervisor import Supervisor
from test_keeper import _kill
from test_up_supervisor import http_server

pytestmark = pytest.mark.integration

POLICY = KeeperPolicy(poll_s=0.1, backoff_s=1.0, max_backoff_s=6.0, stable_s=100.0, max_failures=50)
EARLY = 0.01  # how far before the due time the keeper is asked first


def test_delay_doubles_per_failure_up_to_its_cap():
    p = KeeperPolicy(backoff_s=0.5, max_backoff_s=10.0)
    assert [p.delay(n) for n in range(0, 8)] == [0.5, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert POLICY.delay(30) == POLICY.max_backoff_s


def _set_failures(run, name: str, failures: int):
    s = Supervisor(run)
    with s.locked():
        s.load()
        s.record(name).failures = failures
        s.save()


def _restart_due_after(keeper, run, rec, now: float) -> float:
    """Kill ``rec``'s process, show it to the keeper at ``now``; returns the delay after which
    the keeper restarted it (it must not have at ``now + delay - EARLY``)."""
    _kill(rec.pid)
    assert keeper.step(now) == []  # gone: the restart is scheduled, not done
    for delay in sorted({POLICY.delay(n) for n in range(0, 12)}):
        acted = keeper.step(now + delay - EARLY)
        if acted:
            raise AssertionError(f"restarted {delay - EARLY:.2f} s after it was found gone")
        if keeper.step(now + delay) == ["web"]:
            return delay
    raise AssertionError("never restarted")


@pytest.fixture
def kept(tmp_path):
    spec = http_server(tmp_path)
    run = tmp_path / "run"
    sup = Supervisor(run)
    sup.start_all([spec])
    keeper = Keeper(run, lambda: {"web": spec}, policy=POLICY, out=lambda m: None)
    yield keeper, run
    s = Supervisor(run)
    s.load() and s.stop_all()


def test_consecutive_short_runs_double_the_delay_until_the_cap(kept):
    keeper, run = kept
    delays, failures = [], []
    for _ in range(4):
        keeper.sup.load()
        rec = keeper.sup.record("web")
        # died young: the clock says it lived 1 s of its stable_s
        delays.append(_restart_due_after(keeper, run, rec, rec.create_time + 1.0))
        keeper.sup.load()
        failures.append(keeper.sup.record("web").failures)
        assert keeper.sup.record("web").process() is not None
    assert failures == [1, 2, 3, 4]
    assert delays == [1.0, 2.0, 4.0, 6.0]  # backoff_s * 2^(failures - 1), capped at 6


def test_a_stable_run_resets_the_count(kept):
    keeper, run = kept
    _set_failures(run, "web", 3)
    keeper.sup.load()
    rec = keeper.sup.record("web")
    # it lived past stable_s: the count starts again, the first delay is backoff_s
    assert _restart_due_after(keeper, run, rec, rec.create_time + POLICY.stable_s + 1) == 1.0
    keeper.sup.load()
    assert keeper.sup.record("web").failures == 0
    # the same count, but a short run: it goes on from 3 (delay 2^3), not from zero
    _set_failures(run, "web", 3)
    keeper.sup.load()
    rec = keeper.sup.record("web")
    assert _restart_due_after(keeper, run, rec, rec.create_time + 1.0) == 6.0  # 8, capped
    keeper.sup.load()
    assert keeper.sup.record("web").failures == 4
