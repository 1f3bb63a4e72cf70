"""The keeper (``cluster.ops.keeper``) on real processes: a crashed process comes back with backoff,
a process that keeps failing is left stopped with its log tail, a stopped keeper brings nothing
back; then ``zkhive up``'s keeper, ``zkhive restart`` and ``zkhive down`` on a real cluster."""
from __future__ import annotations

import os
import signal
import sys
import time

import psutil
import pytest

from cluster.ops.keeper import Keeper, KeeperPolicy
from cluster.ops.supervisor import ServiceSpec, Supervisor, free_port
from test_up_cluster import Setup, zkhive
from test_up_supervisor import http_server

PY = sys.executable
FAST = KeeperPolicy(poll_s=0.1, backoff_s=0.2, max_backoff_s=1.0, stable_s=30.0, max_failures=3)


def _kill(pid):
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)


def _step_until(keeper, cond, timeout_s=15.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        keeper.step()
        keeper.sup.load()
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_a_killed_process_is_started_again_and_recorded(tmp_path):
    spec = http_server(tmp_path)
    sup = Supervisor(tmp_path / "run")
    [rec] = sup.start_all([spec])
    events = []
    keeper = Keeper(tmp_path / "run", lambda: {"web": spec}, policy=FAST,
                    on_event=lambda e, **f: events.append((e, f)), out=lambda m: None)
    try:
        assert keeper.step() == []  # alive: nothing to do
        _kill(rec.pid)
        t0 = time.monotonic()
        assert _step_until(keeper, lambda: (keeper.sup.record("web").process() is not None
                                            and keeper.sup.record("web").pid != rec.pid))
        took = time.monotonic() - t0
        new = keeper.sup.record("web")
        assert new.restarts == 1 and new.failures == 1 and not new.given_up
        assert ("worker_restarted", {"name": "web", "pid": new.pid, "restarts": 1}) in events
        assert took >= FAST.backoff_s  # the backoff delay was applied, not a tight loop
        # the restarted process is what the state file names: another Supervisor stops it
        other = Supervisor(tmp_path / "run")
        other.load()
        other.stop_all()
        assert new.process() is None
    finally:
        s = Supervisor(tmp_path / "run")
        s.load() and s.stop_all()


def test_a_process_that_keeps_failing_is_left_stopped_with_its_log_tail(tmp_path):
    port = free_port()
    # healthy at first (the marker file is absent), then every start exits at once
    marker = tmp_path / "broken"
    code = (f"import os, sys, http.server\n"
            f"if os.path.exists({str(marker)!r}):\n"
            f"    print('cannot open the key cache: permission denied', flush=True); sys.exit(3)\n"
            f"http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler, port={port}, bind='127.0.0.1')\n")
    spec = http_server(tmp_path, port=port)
    spec.argv = [PY, "-c", code]
    sup = Supervisor(tmp_path / "run")
    [rec] = sup.start_all([spec])
    events = []
    keeper = Keeper(tmp_path / "run", lambda: {"web": spec}, policy=FAST,
                    on_event=lambda e, **f: events.append(e), out=lambda m: None)
    try:
        marker.write_text("x")
        _kill(rec.pid)
        assert _step_until(keeper, lambda: bool(keeper.sup.record("web").given_up), timeout_s=30)
        rec = keeper.sup.record("web")
        assert "failed 3 times in a row" in rec.given_up
        assert "exited with status 3" in rec.given_up
        assert "cannot open the key cache: permission denied" in rec.given_up  # the log tail
        assert events.count("worker_start_failed") == 2 and events[-1] == "worker_given_up"
        starts = (tmp_path / "web.log").read_text().count("starting web")
        for _ in range(10):  # given up: no more starts
            keeper.step()
            time.sleep(0.05)
        assert (tmp_path / "web.log").read_text().count("starting web") == starts
    finally:
        s = Supervisor(tmp_path / "run")
        s.load() and s.stop_all()


def test_nothing_comes_back_once_the_state_file_is_gone(tmp_path):
    spec = http_server(tmp_path)
    sup = Supervisor(tmp_path / "run")
    [rec] = sup.start_all([spec])
    keeper = Keeper(tmp_path / "run", lambda: {"web": spec}, policy=FAST, out=lambda m: None)
    sup.stop_all()  # what `down` does once the keeper is stopped: the state file goes
    for _ in range(10):
        assert keeper.step() == []
    assert keeper.stopping.is_set()
    assert "starting web" in (tmp_path / "web.log").read_text()
    assert (tmp_path / "web.log").read_text().count("starting web") == 1


@pytest.mark.integration
def test_up_restarts_a_killed_worker_restart_replaces_one_and_down_stops_everything(tmp_path):
    setup = Setup(tmp_path)
    setup.up(check=0)
    try:
        sup = Supervisor(setup.run_dir)
        sup.load()
        names = [r.name for r in sup.records]
        assert names[-1] == "keeper" and "synthesis-0" in names
        old = sup.record("synthesis-0")
        _kill(old.pid)
        t0 = time.monotonic()
        new = None
        while time.monotonic() - t0 < 60:
            sup.load()
            r = sup.record("synthesis-0")
            if r.pid != old.pid and r.process() is not None:
                new = r
                break
            time.sleep(0.2)
        assert new is not None, (setup.run_dir / "logs" / "keeper.log").read_text()
        # ready again (its registry entry), and the operator can see it
        ps = zkhive(*setup.args("ps", "--run-dir", str(setup.run_dir)), env=setup.env)
        assert "restarts 1" in ps.stdout, ps.stdout
        keeper_log = (setup.run_dir / "logs" / "keeper.log").read_text()
        assert "synthesis-0 was gone; started again" in keeper_log

        # on purpose: `zkhive restart synthesis` replaces it (warm), waits for it to be ready
        res = zkhive(*setup.args("restart", "synthesis", "--run-dir", str(setup.run_dir)),
                     env=setup.env, check=0)
        assert "synthesis-0" in res.stdout and "ready in" in res.stdout
        sup.load()
        assert sup.record("synthesis-0").pid != new.pid and sup.record("synthesis-0").restarts == 2
        res = zkhive(*setup.args("restart", "nosuch", "--run-dir", str(setup.run_dir)), env=setup.env)
        assert res.returncode != 0 and "nothing named 'nosuch'" in res.stderr
    finally:
        setup.down()
    time.sleep(3)  # the keeper was stopped first: nothing it supervised comes back
    assert setup.ours() == []
