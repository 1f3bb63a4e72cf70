"""The keeper (``cluster.ops.keeper``) on real processes: a crashed process comes back with backoff,
a process that keeps failing is left stopped with its log tail, a stopped keeper brings nothing
back; then ``zkhive up``'s keeper, ``zkhive restart`` and ``zkhive down`` on a real cluster."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from cluster.ops.keeper import Keeper, KeeperPolicy
from cluster.ops.supervisor import ServiceSpec, Supervisor, free_port
from test_up_cluster import ROOT, Setup, zkhive
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
        keeper.wait()  # its readiness wait runs in a thread of its own
        keeper.sup.load()
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


def test_a_workers_death_is_told_once_before_its_restart_and_another_roles_is_not(tmp_path):
    """``on_gone``: a killed worker (``prove-...``: its role) is told once, at the first step that
    finds it gone, before its restart's backoff; its restarted run killed again is told again;
    a process of another role (the gateway's ``web`` here) is restarted but not told (it holds
    no units). ``zkhive keeper`` asks the watchdogs for a sweep there."""
    prover, web = http_server(tmp_path, name="prove-cpu0"), http_server(tmp_path, name="web")
    sup = Supervisor(tmp_path / "run")
    recs = {r.name: r for r in sup.start_all([prover, web])}
    told = []
    keeper = Keeper(tmp_path / "run", lambda: {"prove-cpu0": prover, "web": web}, policy=FAST,
                    out=lambda m: None, on_gone=lambda rec: told.append((rec.name, rec.pid)))
    try:
        assert keeper.step() == [] and told == []
        _kill(recs["prove-cpu0"].pid)
        _kill(recs["web"].pid)
        keeper.step()
        assert told == [("prove-cpu0", recs["prove-cpu0"].pid)]   # at once, before the backoff
        assert _step_until(keeper, lambda: all(
            keeper.sup.record(n).process() is not None and keeper.sup.record(n).pid != recs[n].pid
            for n in ("prove-cpu0", "web")))
        assert told == [("prove-cpu0", recs["prove-cpu0"].pid)]   # once, not at every step
        keeper.wait()
        keeper.sup.load()
        again = keeper.sup.record("prove-cpu0")
        _kill(again.pid)
        keeper.step()
        assert told == [("prove-cpu0", recs["prove-cpu0"].pid), ("prove-cpu0", again.pid)]
    finally:
        keeper.wait()
        s = Supervisor(tmp_path / "run")
        s.load() and s.stop_all()


def _breakable(tmp_path, name):
    """An HTTP server that is healthy until the marker file exists; then every start exits 3."""
    port = free_port()
    marker = tmp_path / f"{name}.broken"
    code = (f"import os, sys, http.server\n"
            f"if os.path.exists({str(marker)!r}):\n"
            f"    print('cannot open the key cache: permission denied', flush=True); sys.exit(3)\n"
            f"http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler, port={port}, bind='127.0.0.1')\n")
    spec = http_server(tmp_path, name=name, port=port)
    spec.argv = [PY, "-c", code]
    return spec, marker


def test_a_process_that_keeps_failing_is_left_stopped_with_its_log_tail(tmp_path):
    """Given up after max_failures runs that never became ready, when another process of its
    role (``web-1``) is alive."""
    spec, marker = _breakable(tmp_path, "web-0")
    peer = http_server(tmp_path, name="web-1")
    sup = Supervisor(tmp_path / "run")
    [rec, _] = sup.start_all([[spec, peer]])
    events = []
    keeper = Keeper(tmp_path / "run", lambda: {"web-0": spec, "web-1": peer}, policy=FAST,
                    on_event=lambda e, **f: events.append(e), out=lambda m: None)
    try:
        marker.write_text("x")
        _kill(rec.pid)
        assert _step_until(keeper, lambda: bool(keeper.sup.record("web-0").given_up), timeout_s=30)
        rec = keeper.sup.record("web-0")
        # the first death was a ready run's (a crash): 3 unready runs after it, then the give-up
        assert "failed to become ready 3 times in a row" in rec.given_up
        assert "exited with status 3" in rec.given_up
        assert "cannot open the key cache: permission denied" in rec.given_up  # the log tail
        assert events.count("worker_start_failed") == 3 and events[-1] == "worker_given_up"
        starts = (tmp_path / "web-0.log").read_text().count("starting web-0")
        for _ in range(10):  # given up: no more starts
            keeper.step()
            time.sleep(0.05)
        assert (tmp_path / "web-0.log").read_text().count("starting web-0") == starts
    finally:
        s = Supervisor(tmp_path / "run")
        s.load() and s.stop_all()


def test_the_last_of_its_role_is_never_left_stopped(tmp_path):
    """The same failures without a live peer: retried at the backoff ceiling with a note, and
    back for good once its fault is gone."""
    spec, marker = _breakable(tmp_path, "web")
    sup = Supervisor(tmp_path / "run")
    [rec] = sup.start_all([spec])
    keeper = Keeper(tmp_path / "run", lambda: {"web": spec}, policy=FAST, out=lambda m: None)
    try:
        marker.write_text("x")
        _kill(rec.pid)
        assert _step_until(keeper, lambda: "the last web process" in keeper.sup.record("web").note,
                           timeout_s=30)
        assert not keeper.sup.record("web").given_up
        assert "retried every 1 s" in keeper.sup.record("web").note
        marker.unlink()
        assert _step_until(keeper, lambda: keeper.sup.record("web").ready_at > 0
                           and keeper.sup.record("web").process() is not None, timeout_s=30)
        new = keeper.sup.record("web")
        assert new.unready == 0 and new.note == "" and not new.given_up
    finally:
        keeper.stopping.set()
        keeper.wait()
        s = Supervisor(tmp_path / "run")
        s.load() and s.stop_all()


def test_a_ready_run_that_dies_young_is_a_crash_not_a_failed_start(tmp_path):
    """Killed within stable_s of each start, but ready each time: backoff grows, no give-up."""
    spec = http_server(tmp_path, name="web-0")
    peer = http_server(tmp_path, name="web-1")
    sup = Supervisor(tmp_path / "run")
    sup.start_all([[spec, peer]])
    keeper = Keeper(tmp_path / "run", lambda: {"web-0": spec, "web-1": peer}, policy=FAST,
                    out=lambda m: None)
    try:
        for i in range(FAST.max_failures + 2):
            keeper.sup.load()
            old = keeper.sup.record("web-0")
            _kill(old.pid)
            assert _step_until(keeper, lambda: keeper.sup.record("web-0").pid != old.pid
                               and keeper.sup.record("web-0").ready_at > 0, timeout_s=30), i
        rec = keeper.sup.record("web-0")
        assert not rec.given_up and rec.unready == 0 and rec.failures == FAST.max_failures + 2
    finally:
        keeper.stopping.set()
        keeper.wait()
        s = Supervisor(tmp_path / "run")
        s.load() and s.stop_all()


def test_restarts_run_in_parallel_and_redis_goes_first(tmp_path):
    """A worker whose readiness wait takes long does not hold back ``redis``: both gone, redis is
    started first, and is ready while the slow one still waits."""
    redis_like = http_server(tmp_path, name="redis")
    slow = http_server(tmp_path, name="synthesis-0", ready_timeout_s=30)
    gate = tmp_path / "slow.ready"
    inner = slow.ready
    slow.ready = lambda rec: gate.exists() and inner(rec)
    sup = Supervisor(tmp_path / "run")
    gate.write_text("")
    recs = sup.start_all([redis_like, [slow]])
    gate.unlink()
    keeper = Keeper(tmp_path / "run", lambda: {"redis": redis_like, "synthesis-0": slow}, policy=FAST,
                    out=lambda m: None)
    try:
        _kill(recs[1].pid)
        assert _step_until(keeper, lambda: keeper.sup.record("synthesis-0").pid != recs[1].pid)
        _kill(recs[0].pid)  # redis dies while the worker's readiness wait is in flight
        t0 = time.monotonic()
        assert _step_until(keeper, lambda: keeper.sup.record("redis").pid != recs[0].pid
                           and keeper.sup.record("redis").ready_at > 0, timeout_s=15)
        assert time.monotonic() - t0 < 10
        assert keeper.sup.record("synthesis-0").ready_at == 0  # still waiting, not in the way
        gate.write_text("")
        assert _step_until(keeper, lambda: keeper.sup.record("synthesis-0").ready_at > 0)
    finally:
        keeper.stopping.set()
        keeper.wait()
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
    setup.env["ZKHIVE_KEEPER_WATCH_S"] = "15"  # the workers look at the keeper every 15 s
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

        # the sole synthesis worker frozen (SIGSTOP): killed and replaced by the keeper
        sup.load()
        frozen = sup.record("synthesis-0")
        os.kill(frozen.pid, signal.SIGSTOP)
        assert _wait_record(sup, "synthesis-0", lambda r: r.pid != frozen.pid and r.ready_at > 0, 90), \
            (setup.run_dir / "logs" / "keeper.log").read_text()
        assert "synthesis-0 (pid %d) is frozen (stopped (SIGSTOP)" % frozen.pid in \
            (setup.run_dir / "logs" / "keeper.log").read_text()

        # the keeper SIGKILLed: `status` warns; a worker brings it back within its watch interval
        from cluster.ops.commands import supervision_lines
        from cluster.settings import load

        keeper = sup.record("keeper")
        _kill(keeper.pid)
        # what `zkhive status` appends (read at once: a worker revives the keeper within 15 s)
        lines = supervision_lines(load(setup.config), setup.run_dir)
        assert any(line.startswith(f"  WARNING: the keeper (pid {keeper.pid}) is not running: a process "
                                   f"that dies stays dead until a worker or `") for line in lines), lines
        assert _wait_record(sup, "keeper", lambda r: r.pid != keeper.pid and r.process() is not None, 40)
        st = zkhive(*setup.args("status", "--run-dir", str(setup.run_dir)), env=setup.env)
        # ten: the gateway, two aggregate workers ([worker] aggregate_workers) and the urgent
        # synthesis worker ([worker] urgent_synthesis_workers)
        assert "WARNING" not in st.stdout and "(10/10 processes running)" in st.stdout, st.stdout

        # a worker started by hand joins the state file; `down` stops it and names it
        hand = subprocess.Popen([PY, "-m", "cluster", "worker", "synthesis", "--config",
                                 str(setup.run_dir / "settings.toml")], env=setup.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        assert _wait_record(sup, f"synthesis-hand-{hand.pid}", lambda r: r.by_hand, 60)
    finally:
        down = setup.down()
    assert f"synthesis-hand-{hand.pid}" in down.stdout and "1 of them started by hand" in down.stdout
    assert hand.wait(10) is not None
    time.sleep(3)  # the keeper was stopped first: nothing it supervised comes back
    assert setup.ours() == []


def _wait_record(sup, name, cond, timeout_s):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        sup.load()
        r = sup.record(name)
        if r is not None and cond(r):
            return True
        time.sleep(0.2)
    return False


def test_a_worker_without_a_heartbeat_is_frozen_and_replaced_but_not_while_redis_is_away(tmp_path):
    """The registry heartbeat check on the clock step() is given: a fresh beat keeps it, Redis
    away judges nothing, a beat older than frozen_s (Redis answering) kills and restarts it."""
    spec = http_server(tmp_path, name="synthesis-0")
    sup = Supervisor(tmp_path / "run")
    [rec] = sup.start_all([spec])
    policy = KeeperPolicy(poll_s=0.1, backoff_s=0.2, max_backoff_s=1.0, frozen_s=5.0)
    beats: dict = {"now": {}}
    events = []
    keeper = Keeper(tmp_path / "run", lambda: {"synthesis-0": spec}, policy=policy,
                    heartbeats=lambda: beats["now"], on_event=lambda e, **f: events.append((e, f)),
                    out=lambda m: None)
    try:
        t = time.time()
        beats["now"] = {rec.pid: t}
        assert keeper.step(t + 4.9) == []  # a beat 4.9 s old: alive
        beats["now"] = None  # Redis away: nobody is judged, however old the last beat
        assert keeper.step(t + 30) == [] and rec.process() is not None
        beats["now"] = {rec.pid: t}  # Redis back, with the old beat: judged from its return
        assert keeper.step(t + 31) == [] and rec.process() is not None
        assert keeper.step(t + 36) == ["synthesis-0"]  # 5 s since Redis came back, no new beat
        assert rec.process() is None
        assert events[0] == ("worker_frozen", {"name": "synthesis-0", "pid": rec.pid,
                                               "reason": "its heartbeat is 36 s old"})
        assert _step_until(keeper, lambda: keeper.sup.record("synthesis-0").pid != rec.pid
                           and keeper.sup.record("synthesis-0").process() is not None)
    finally:
        keeper.stopping.set()
        keeper.wait()
        s = Supervisor(tmp_path / "run")
        s.load() and s.stop_all()


def test_redis_is_never_backed_off_past_its_cap(tmp_path):
    """Five young deaths in a row would put a worker 16 s out; Redis waits at most 2 s."""
    spec = http_server(tmp_path, name="redis")
    sup = Supervisor(tmp_path / "run")
    [rec] = sup.start_all([spec])
    with sup.locked():
        sup.load()
        sup.record("redis").failures = 4
        sup.save()
    keeper = Keeper(tmp_path / "run", lambda: {"redis": spec}, policy=KeeperPolicy(), out=lambda m: None)
    try:
        _kill(rec.pid)
        now = rec.create_time + 1.0  # died young: the fifth short run
        assert keeper.step(now) == []
        assert keeper.step(now + KeeperPolicy().redis_max_backoff_s - 0.01) == []
        assert keeper.step(now + KeeperPolicy().redis_max_backoff_s) == ["redis"]
        keeper.sup.load()
        assert keeper.sup.record("redis").failures == 5 and KeeperPolicy().delay(5) == 16.0
    finally:
        keeper.stopping.set()
        keeper.wait()
        s = Supervisor(tmp_path / "run")
        s.load() and s.stop_all()


def test_a_prover_is_never_backed_off_past_its_cap(tmp_path):
    """Six young deaths in a row would put a worker 32 s out (60 s at the seventh); a prover
    waits at most prove_max_backoff_s (10 s); a synthesis worker still the whole delay."""
    policy = KeeperPolicy()
    specs = {"prove-cpu0": http_server(tmp_path, name="prove-cpu0"),
             "synthesis-0": http_server(tmp_path, name="synthesis-0")}
    sup = Supervisor(tmp_path / "run")
    recs = sup.start_all([list(specs.values())])
    with sup.locked():
        sup.load()
        for r in sup.records:
            r.failures, r.ready_at = 5, time.time()
        sup.save()
    keeper = Keeper(tmp_path / "run", lambda: specs, policy=policy, out=lambda m: None)
    try:
        for r in recs:
            _kill(r.pid)
        now = max(r.create_time for r in recs) + 1.0  # died young: the sixth short run
        assert keeper.step(now) == []
        assert keeper.step(now + policy.prove_max_backoff_s - 0.01) == []
        assert keeper.step(now + policy.prove_max_backoff_s) == ["prove-cpu0"]
        assert policy.delay(6) == 32.0
        assert keeper.step(now + 31.9) == []
        assert keeper.step(now + 32.0) == ["synthesis-0"]
    finally:
        keeper.stopping.set()
        keeper.wait()
        s = Supervisor(tmp_path / "run")
        s.load() and s.stop_all()


def _provers(setup):
    """{pid: registry entry} of the cluster's prove processes (zkhive status --json)."""
    doc = json.loads(zkhive(*setup.args("status", "--json"), env=setup.env, check=0).stdout)
    return {w["pid"]: w for w in doc["workers"] if w["role"] == "prove"}


def _with_standby(setup, srs: str = "") -> None:
    """``setup``'s settings file with ``[worker] prover_standby = true`` (and ``srs``, lines of
    its own, added to ``[srs]``)."""
    setup.config.write_text(setup.config.read_text().replace(
        "[worker]\n", "[worker]\nprover_standby = true\n", 1).replace("[srs]\n", f"[srs]\n{srs}", 1))


def _submit_waiting(setup, doc: dict, job_id: str, timeout_s: int) -> subprocess.Popen:
    """``zkhive submit --wait`` of ``doc`` as job ``job_id``, in the background, through the CLI
    (this test process keeps its own settings)."""
    path = setup.tmp / f"{job_id}.json"
    path.write_text(json.dumps(doc))
    return subprocess.Popen(
        [sys.executable, "-m", "cluster", *setup.args("submit", str(path), "--job-id", job_id, "--wait",
                                                      "--timeout", str(timeout_s))],
        cwd=ROOT, env=setup.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _first_event(r, job_id: str, name: str, timeout_s: float = 60) -> dict | None:
    """The job's first ``name`` event, polled for up to ``timeout_s``; None if none came."""
    from cluster.pipeline import timeline

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = next((e for e in timeline.load(r, job_id) if e["event"] == name), None)
        if found is not None:
            return found
        time.sleep(0.01)
    return None


def test_a_unit_held_by_a_killed_prover_goes_to_its_standby_once_ready(tmp_path):
    """``[worker] prover_standby``, the prover SIGKILLed mid-prove: the standby takes the lock at
    once, registers (not ready: it makes the key in process, ~1.5 s here) and asks for a sweep,
    which re-dispatches the dead one's unit (``holder_gone``) while no prover is ready, so the
    unit waits in ``prove.unassigned``. The standby, once ready, asks for a sweep itself
    (cluster/pipeline/lifecycle.py ``_on_ready``) and the unit is re-routed to it then, not at
    the next periodic sweep: here the periodic sweeps are 600 s apart, so without that request
    the job would not end within the minute it is given (on the H200 the same wait was up to
    ``delivery.watchdog_interval_s``, 2 s, of the SIGKILL goal's 3)."""
    from circuits_for_tests import SQUARES_SLOW, make_c1

    setup = Setup(tmp_path, preload=[SQUARES_SLOW.name],
                  extra_toml="[delivery]\nwatchdog_interval_s = 600\n")
    _with_standby(setup, srs=f"in_process = [\"{SQUARES_SLOW.name}\"]\nsetup_seed = \"test-standby-wait\"\n")
    res = setup.up(check=0)
    try:
        import redis as redis_py

        from cluster.pipeline import timeline
        from cluster.pipeline.jobs import JobStore
        from test_up_cluster import _verify
        ws = _provers(setup)
        [primary] = [w for w in ws.values() if not w["standby"]]
        [standby] = [w for w in ws.values() if w["standby"]]
        doc = make_c1(SQUARES_SLOW, seed=61)
        wait = _submit_waiting(setup, doc, "waiting", 60)
        r = redis_py.Redis(port=setup.redis_port, password=setup.password)
        pickup = _first_event(r, "waiting", "prove_pickup")
        assert pickup is not None, (res.stdout, timeline.load(r, "waiting"))
        k = pickup["partition"]
        os.kill(primary["pid"], signal.SIGSTOP)   # mid-prove: its proof not stored yet
        assert JobStore(r, 3600).partition("waiting", k) is None, "the prove finished before the stop"
        _kill(primary["pid"])
        assert wait.wait(90) == 0, wait.communicate()
        out = json.loads(zkhive(*setup.args("result", "waiting"), env=setup.env, check=0).stdout)
        _verify(setup, SQUARES_SLOW, doc, bytes.fromhex(out["proof"]),
                [[int(x, 16) for x in p] for p in out["public_inputs"]])
        ev = [e for e in timeline.load(r, "waiting") if e.get("partition") == k]
        names = [e["event"] for e in ev]
        assert "holder_gone" in names, names
        gone = names.index("holder_gone")
        # re-dispatched while no prover was ready, then re-routed to the standby once it was
        routed = [e["queue"] for e in ev[gone:] if e["event"] == "prove_routed"]
        assert routed == ["prove.unassigned", *primary["queues"]], ev
        assert any(e["event"] == "redispatched" and "has no live prover" in e["reason"] for e in ev[gone:]), ev
        assert names.count("prove_end") == 1 and names.index("prove_end") > gone, names
        now = [w for w in _provers(setup).values() if not w["standby"]]
        assert [w["pid"] for w in now] == [standby["pid"]], now
    finally:
        zkhive(*setup.args("down", "--run-dir", str(setup.run_dir)), env=setup.env, check=None)


def test_a_standby_prover_takes_the_device_over_and_the_killed_one_stands_by_next(tmp_path):
    """``[worker] prover_standby``: ``up`` starts two prove processes for cpu:0; one takes the
    device's lock, the other registers as its standby (no queue, not ready, ``status`` says
    standby; ``up`` waited for it as such). The prover SIGKILLed between two jobs' partitions:
    the standby (a process older than the kill) is the device's prover next, its log says it
    took the device over, every job verifies, and the keeper's restart of the killed one is the
    next standby. Without the setting, a second prover on the device is refused
    (test_cluster_faults: ``test_second_worker_on_a_device_is_refused``)."""
    from circuits_for_tests import SQUARES_SLOW, make_c1

    setup = Setup(tmp_path, preload=[SQUARES_SLOW.name])
    _with_standby(setup)
    setup.setup_keys(SQUARES_SLOW)
    res = setup.up(check=0)
    try:
        assert re.search(r"^  prove-cpu0\s+ready in", res.stdout, re.M), res.stdout
        assert re.search(r"^  prove-cpu0-1\s+ready in", res.stdout, re.M), res.stdout
        ws = _provers(setup)
        [primary] = [w for w in ws.values() if not w["standby"]]
        [standby] = [w for w in ws.values() if w["standby"]]
        assert primary["ready"] and primary["queues"] and primary["resident_keys"] == [SQUARES_SLOW.name]
        assert not standby["ready"] and standby["queues"] == [] and standby["resident_keys"] == []
        text = zkhive(*setup.args("status"), env=setup.env, check=0).stdout
        assert re.search(rf"{re.escape(standby['worker_id'])}\s+prove\s+cpu:0\s+standby", text), text

        # the jobs through the CLI (this test process keeps its own settings)
        import redis as redis_py

        from test_up_cluster import _verify
        docs = [make_c1(SQUARES_SLOW, seed=40 + j) for j in range(2)]
        waits = [_submit_waiting(setup, d, f"standby-{j}", 120) for j, d in enumerate(docs)]
        r = redis_py.Redis(port=setup.redis_port, password=setup.password)
        _first_event(r, "standby-0", "prove_end")
        _kill(primary["pid"])
        t_kill = time.time()
        for j, (w, d) in enumerate(zip(waits, docs)):
            assert w.wait(150) == 0, w.communicate()
            out = json.loads(zkhive(*setup.args("result", f"standby-{j}"), env=setup.env, check=0).stdout)
            _verify(setup, SQUARES_SLOW, d, bytes.fromhex(out["proof"]),
                    [[int(x, 16) for x in p] for p in out["public_inputs"]])
        sup = Supervisor(setup.run_dir)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ws = _provers(setup)
            now_primary = [w for w in ws.values() if not w["standby"] and w["pid"] != primary["pid"]]
            back = [w for w in ws.values() if w["standby"]]
            if now_primary and back:
                break
            time.sleep(0.2)
        assert [w["pid"] for w in now_primary] == [standby["pid"]], ws
        assert psutil.Process(standby["pid"]).create_time() < t_kill
        sup.load()
        killed = next(rec for rec in sup.records if rec.pid != standby["pid"] and rec.name.startswith("prove-"))
        assert [w["pid"] for w in back] == [killed.pid] and killed.restarts == 1, (ws, killed)
        standby_log = next(rec.log for rec in sup.records if rec.pid == standby["pid"])
        text = Path(standby_log).read_text()
        assert re.search(r"took cpu:0 over after [\d.]+ s as its standby", text)
        # Celery's start made while it waited (lifecycle.warm_celery), before the takeover
        made = re.search(r"made Celery's start ahead .* in [\d.]+ s", text)
        assert made and made.start() < text.index("took cpu:0 over"), text[-3000:]
        # `down` ends a standby's wait with the rest (SIGTERM), not after the stop grace
        down = zkhive(*setup.args("down", "--run-dir", str(setup.run_dir)), env=setup.env, check=0)
        assert re.search(r"^  prove-cpu0-1\s+pid \d+\s+stopped$", down.stdout, re.M), down.stdout
        assert re.search(r"^  prove-cpu0\s+pid \d+\s+stopped$", down.stdout, re.M), down.stdout
    finally:
        zkhive(*setup.args("down", "--run-dir", str(setup.run_dir)), env=setup.env, check=None)
