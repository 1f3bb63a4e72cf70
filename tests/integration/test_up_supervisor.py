"""The process supervisor behind ``zkhive up``/``down``, on real processes (no Celery needed):
readiness, failure with the log tail, stale and live state files, PID reuse, ports, escalation."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import psutil
import pytest

from cluster.ops.supervisor import (
    Busy,
    ClusterRunning,
    PortInUse,
    ProcessRecord,
    ServiceSpec,
    StartFailure,
    Supervisor,
    free_port,
    port_is_free,
)

PY = sys.executable


def _listening(port):
    def check(rec):
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    return check


def http_server(tmp_path, name="web", port=None, **kw):
    port = port or free_port()
    return ServiceSpec(name=name, argv=[PY, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
                       log=tmp_path / f"{name}.log", ready=_listening(port),
                       waiting_for=f"port {port} to accept connections", ports=(port,),
                       ready_timeout_s=kw.pop("ready_timeout_s", 15), stop_grace_s=5, **kw)


def test_start_ready_and_stop_leaves_nothing(tmp_path):
    sup = Supervisor(tmp_path / "run")
    spec = http_server(tmp_path)
    [rec] = sup.start_all([spec])
    assert not port_is_free(spec.ports[0])
    doc = json.loads((tmp_path / "run" / "cluster.json").read_text())
    assert doc["processes"][0]["pid"] == rec.pid
    assert doc["processes"][0]["create_time"] == psutil.Process(rec.pid).create_time()

    # a separate Supervisor (as `zkhive down` is a separate process) stops it from the file
    other = Supervisor(tmp_path / "run")
    assert other.load() and [r.name for r in other.alive()] == ["web"]
    other.stop_all()
    assert not psutil.pid_exists(rec.pid) or rec.process() is None
    assert port_is_free(spec.ports[0])
    assert not (tmp_path / "run" / "cluster.json").exists()


def test_previous_cluster_running_is_refused_not_joined(tmp_path):
    sup = Supervisor(tmp_path / "run")
    spec = http_server(tmp_path)
    [rec] = sup.start_all([spec])
    try:
        again = Supervisor(tmp_path / "run")
        with pytest.raises(ClusterRunning, match=rf"web \(pid {rec.pid}\).*zkhive down"):
            again.check_clear([http_server(tmp_path, name="web2")])
        assert rec.process() is not None  # detection never signals anything
    finally:
        sup.stop_all()


def test_stale_state_file_is_reported_and_removed(tmp_path):
    gone = subprocess.Popen([PY, "-c", "pass"])
    gone.wait()
    sup = Supervisor(tmp_path / "run")
    sup.records = [ProcessRecord("redis", gone.pid, time.time() - 100, ["redis-server"], "x.log")]
    sup.save()
    note = Supervisor(tmp_path / "run").check_clear([])
    assert note and "stale state file" in note and f"pid {gone.pid}" in note
    assert not (tmp_path / "run" / "cluster.json").exists()


def test_reused_pid_is_not_ours_and_never_signalled(tmp_path):
    # a live process (this test) recorded with another start time: a PID the kernel reused
    me = psutil.Process()
    rec = ProcessRecord("worker", me.pid, me.create_time() - 3600, ["x"], "x.log")
    assert rec.process() is None
    sup = Supervisor(tmp_path / "run")
    sup.records = [rec]
    sup.save()
    assert Supervisor(tmp_path / "run").check_clear([]) is not None  # stale, not "running"
    sup.records = [rec]
    sup.stop_all()  # must not SIGTERM the test process
    assert me.is_running()


def test_port_in_use_is_detected_before_starting(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        sup = Supervisor(tmp_path / "run")
        with pytest.raises(PortInUse, match=rf"127.0.0.1:{port} needed by web is already in use"):
            sup.check_clear([http_server(tmp_path, port=port)])
        assert sup.records == []


def test_crash_during_start_reports_log_tail_and_stops_the_rest(tmp_path):
    sup = Supervisor(tmp_path / "run")
    first = http_server(tmp_path, name="redis")
    crash = ServiceSpec(
        name="worker-0", argv=[PY, "-c", "import sys; print('loading key: digest mismatch'); sys.exit(3)"],
        log=tmp_path / "worker.log", ready=lambda rec: False, waiting_for="registry entry")
    with pytest.raises(StartFailure) as ei:
        sup.start_all([first, crash])
    msg = str(ei.value)
    assert "worker-0 failed to start: exited with status 3" in msg
    assert "loading key: digest mismatch" in msg and str(tmp_path / "worker.log") in msg
    redis_pid = sup.records[0].pid if sup.records else None
    assert sup.records == []  # everything recorded was stopped and the state file removed
    assert port_is_free(first.ports[0])
    assert redis_pid is None or not psutil.pid_exists(redis_pid) or \
        psutil.Process(redis_pid).status() == psutil.STATUS_ZOMBIE


def test_readiness_timeout_names_what_it_waited_for(tmp_path):
    sup = Supervisor(tmp_path / "run")
    spec = ServiceSpec(name="flower", argv=[PY, "-c", "import time; print('up'); time.sleep(60)"],
                       log=tmp_path / "f.log", ready=lambda rec: 1 / 0,
                       waiting_for="GET /healthcheck", ready_timeout_s=1.0, stop_grace_s=2)
    with pytest.raises(StartFailure, match=r"not ready after 1 s: waiting for GET /healthcheck "
                                           r"\(last check: ZeroDivisionError"):
        sup.start_all([spec])
    assert sup.records == []


def test_sigterm_ignored_escalates_to_sigkill_including_children(tmp_path):
    code = ("import os, signal, subprocess, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import signal,time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
            "print('CHILD_PID', child.pid, flush=True)\n"
            "time.sleep(60)\n")
    log = tmp_path / "stubborn.log"

    def has_child(rec):
        return "CHILD_PID " in log.read_text()
    sup = Supervisor(tmp_path / "run")
    spec = ServiceSpec(name="stubborn", argv=[PY, "-c", code], log=log, ready=has_child,
                       stop_grace_s=1)
    [rec] = sup.start_all([spec])
    child_pid = int(log.read_text().split("CHILD_PID ")[-1].split()[0])
    child_ct = psutil.Process(child_pid).create_time()
    stopped = []
    sup.stop_all(on_stopped=lambda r, how: stopped.append(how))
    assert stopped == ["killed after 1 s grace"]
    assert rec.process() is None
    assert ProcessRecord("c", child_pid, child_ct, [], "").process() is None


def test_malformed_state_file_is_an_error_naming_it(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "cluster.json").write_text("{not json")
    with pytest.raises(Exception, match=r"cluster.json is not valid JSON"):
        Supervisor(tmp_path / "run").check_clear([])
    assert (tmp_path / "run" / "cluster.json").exists()  # never silently overwritten


def test_two_supervisors_on_one_state_directory_exclude_each_other(tmp_path):
    first = Supervisor(tmp_path / "run")
    with first.locked():
        with pytest.raises(Busy, match=rf"another zkhive up/down/restart \(pid {os.getpid()}\) is working on"):
            with Supervisor(tmp_path / "run").locked():
                pass
    with Supervisor(tmp_path / "run").locked():  # released on exit
        pass
