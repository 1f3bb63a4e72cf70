"""The key holder's protocol, socket and lifecycle on the CPU (cluster/pipeline/keyholder.py):
a real holder process on a real unix socket (tests/integration/holder_cpu_serve.py: the CPU
backend, whose ``hold`` is refused in one line); the CUDA side (export, attach, a prover's SIGKILL
survived) is tests/gpu/test_keyholder_cuda.py."""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cluster.pipeline.keyholder import (MAX_REQUEST, HolderClient, HolderError, HolderGone,
                                        HolderServer, parse_request, socket_path)

SERVE = Path(__file__).with_name("holder_cpu_serve.py")


def start_holder(path: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, str(SERVE), str(path)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=os.environ.copy())
    line = p.stdout.readline()
    assert b"serving" in line, line + p.stdout.read()
    return p


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.wait(10)


def raw(path: Path, data: bytes) -> dict:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    s.connect(str(path))
    s.sendall(data)
    line = s.makefile("rb").readline()
    s.close()
    return json.loads(line)


@pytest.fixture
def holder(tmp_path):
    path = tmp_path / "keyholder-cuda0.sock"
    p = start_holder(path)
    yield path, p
    stop(p)


# -- requests -------------------------------------------------------------------------------------

def test_parse_request_accepts_each_op():
    assert parse_request(b'{"op": "hold", "params": "filecoin-32g"}\n')["params"] == "filecoin-32g"
    assert parse_request(b'{"op": "release", "params": "test-tiny"}')["op"] == "release"
    assert parse_request(b'{"op": "list"}') == {"op": "list"}
    assert parse_request(b'{"op": "watch"}') == {"op": "watch"}


@pytest.mark.parametrize("line, says", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "JSON list, not an object"),
    (b'{"op": "format"}', "op 'format' is not one of"),
    (b'{"params": "x"}', "op 'None' is not one of"),
    (b'{"op": "list", "params": "x"}', "unknown field 'params'"),
    (b'{"op": "hold"}', "field params missing"),
    (b'{"op": "hold", "params": 7}', "field params '7'"),
    (b'{"op": "hold", "params": "../../etc/passwd"}', "is not a parameter set name"),
    (b'{"op": "hold", "params": "A-Upper"}', "is not a parameter set name"),
    (b'{"op": "hold", "params": "' + b"x" * 65 + b'"}', "is not a parameter set name"),
    (b'{"op": "list", "pad": "' + b"x" * MAX_REQUEST + b'"}', f"more than {MAX_REQUEST}"),
])
def test_parse_request_refuses_in_one_line(line, says):
    with pytest.raises(ValueError) as e:
        parse_request(line)
    assert says in str(e.value) and "\n" not in str(e.value)


# -- the process --------------------------------------------------------------------------------

def test_socket_is_private_and_lists(holder):
    path, p = holder
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    out = HolderClient(path).listing()
    assert out["pid"] == p.pid and out["device"] == "cpu:0" and out["keys"] == {}


def test_bad_requests_refused_in_one_line_and_holder_keeps_serving(holder):
    path, p = holder
    for data, says in [(b"garbage\n", "not JSON"), (b'{"op": "drop"}\n', "op 'drop'"),
                       (b'{"op": "hold", "params": "../x"}\n', "not a parameter set name"),
                       (b"x" * (MAX_REQUEST + 10) + b"\n", f"longer than {MAX_REQUEST}")]:
        reply = raw(path, data)
        assert reply["ok"] is False and says in reply["error"] and "\n" not in reply["error"]
    with pytest.raises(HolderError, match="unknown parameter set 'no-such-set'"):
        HolderClient(path).hold("no-such-set")
    # the CPU backend has nothing to lend: refused, named, the holder still answers
    with pytest.raises(HolderError, match="cpu backend keeps keys in host memory"):
        HolderClient(path).hold("porep-lite-4k")
    assert HolderClient(path).listing()["pid"] == p.pid


def test_one_holder_a_socket_and_a_dead_ones_socket_replaced(holder, tmp_path):
    path, p = holder
    with pytest.raises(HolderError, match="already answers"):
        HolderServer(path, None)
    p.kill()
    p.wait(10)
    assert path.exists()  # SIGKILL left the socket file behind
    with pytest.raises(HolderGone):
        HolderClient(path).listing()
    q = start_holder(path)  # the restarted holder takes the dead one's path
    try:
        assert HolderClient(path).listing()["pid"] == q.pid
    finally:
        stop(q)
    with pytest.raises(HolderError, match="107 bytes"):
        HolderServer(tmp_path / ("d" * 120) / "k.sock", None)


def test_watch_sees_the_holder_die_and_come_back(holder):
    """A prover's watch line: on_lost once when the holder is SIGKILLed (naming its pid), then
    on_back with the new holder's pid once one answers on the socket again."""
    path, p = holder
    lost, back = [], []
    ev_lost, ev_back = threading.Event(), threading.Event()
    client = HolderClient(path)
    client.watch(lambda why: (lost.append(why), ev_lost.set()),
                 lambda pid: (back.append(pid), ev_back.set()))
    deadline = time.time() + 20
    while client.holder_pid != p.pid and time.time() < deadline:
        time.sleep(0.02)
    assert client.holder_pid == p.pid
    os.kill(p.pid, signal.SIGKILL)
    assert ev_lost.wait(20), "the watch did not see the holder die"
    assert lost == [f"key holder pid {p.pid} gone"]
    q = start_holder(path)
    try:
        assert ev_back.wait(20), "the watch did not see the holder come back"
        assert back == [q.pid] and len(lost) == 1
    finally:
        client.close()
        stop(q)


def test_holder_wait_gives_up_with_holder_gone(tmp_path):
    client = HolderClient(tmp_path / "none.sock")
    t0 = time.time()
    with pytest.raises(HolderGone, match="no key holder answers"):
        client.wait(0.3)
    assert time.time() - t0 < 5


# -- the plan of `zkhive up` --------------------------------------------------------------------

def _plan(tmp_path, monkeypatch, on: bool, devices: str):
    from cluster import settings
    from cluster.ops.plan import flat, plan

    monkeypatch.setenv("ZKHIVE_GPU__KEY_HOLDER", "true" if on else "false")
    s = settings.load()
    args = argparse.Namespace(run_dir=str(tmp_path / "run"), devices=devices, synthesis_workers=1,
                              ready_timeout=60.0, config=None, no_keeper=True)
    services, _ = plan(args, s)
    return [x.name for x in flat(services)], services


def test_up_starts_a_holder_before_each_cuda_prover_only_when_on(tmp_path, monkeypatch):
    names, services = _plan(tmp_path, monkeypatch, True, "cuda:0,cuda:1,cpu:0")
    assert [n for n in names if n.startswith("keyholder")] == ["keyholder-cuda0", "keyholder-cuda1"]
    assert names.index("keyholder-cuda0") < names.index("prove-cuda0")
    group = services[1]  # started and ready as a group before the workers' group
    assert [g.name for g in group] == ["keyholder-cuda0", "keyholder-cuda1"]
    assert group[0].argv[-4:-2] == ["--device", "cuda:0"] or "cuda:0" in group[0].argv
    assert group[0].address == str(socket_path(tmp_path / "run", "cuda:0"))
    # its liveness probe (the keeper kills a wedged holder): no socket -> a reason, in one line
    why = group[0].alive(argparse.Namespace(pid=os.getpid()))
    assert why.startswith("its socket does not answer (HolderGone: no key holder answers on")
    p = start_holder(socket_path(tmp_path / "run", "cuda:0"))
    try:
        assert group[0].alive(argparse.Namespace(pid=p.pid)) is None
        assert group[0].ready(argparse.Namespace(pid=p.pid)) is True
        assert group[0].alive(argparse.Namespace(pid=1)) == f"pid {p.pid} answers on its socket, not 1"
    finally:
        stop(p)
    names, _ = _plan(tmp_path, monkeypatch, False, "cuda:0")
    assert not any(n.startswith("keyholder") for n in names)


def test_setting_is_off_by_default_and_validated(monkeypatch):
    from cluster import settings
    from cluster.errors import SettingsError

    monkeypatch.delenv("ZKHIVE_GPU__KEY_HOLDER", raising=False)
    assert settings.load().gpu.key_holder is False
    monkeypatch.setenv("ZKHIVE_GPU__KEY_HOLDER", "maybe")
    with pytest.raises(SettingsError, match="key_holder"):
        settings.load()


def test_holder_command_refuses_a_cpu_device_in_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "cluster", "keyholder", "--device", "cpu:0",
                        "--run-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip() == ("zkhive keyholder: device cpu:0: a key holder lends device memory "
                                "through CUDA IPC: cuda:N only")
    assert not socket_path(tmp_path, "cpu:0").exists()


def test_task_layer_retries_a_gone_holder_and_fails_a_refusal_at_once():
    from cluster.errors import HolderError, HolderGone
    from cluster.pipeline.retry import classify

    gone = classify(HolderGone("no key holder answers on /run/keyholder-cuda0.sock"))
    assert gone.transient and gone.kind == "key holder gone"
    refused = classify(HolderError("no proving key for parameter set 'x'"))
    assert not refused.transient and refused.message(2) == \
        "partition 2: key holder: no proving key for parameter set 'x'"


def test_pins_follow_live_provers_only():
    """A key a live prover holds is pinned (never evicted by the holder for room); a release or
    the end of that prover's watch unpins it; a prover that died without either unpins too."""
    from concurrent.futures import ThreadPoolExecutor

    from cluster.pipeline.keyholder import KeyHolder
    from cluster.pipeline.keys import KeyCache
    from cluster.pipeline.prover import Device, Prover

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        prover = Prover(Device("cpu", 0), KeyCache("/nonexistent-keys"))
        kh = KeyHolder(Device("cpu", 0), prover, ThreadPoolExecutor(1))
        for name, pid in (("a", os.getpid()), ("a", live.pid), ("b", dead.pid), ("c", live.pid)):
            kh.pins.setdefault(name, set()).add(pid)
        kh.forget(-1)  # nothing of its own: prunes the dead prover's pin of b
        assert prover.pinned == {"a", "c"} and kh.pins["a"] == {os.getpid(), live.pid}
        assert kh.unpin("a", os.getpid()) == {live.pid} and prover.pinned == {"a", "c"}
        kh.forget(live.pid)  # its watch ended: a and c unpinned, still resident at the holder
        assert prover.pinned == set() and kh.pins == {}
    finally:
        live.kill()
        live.wait()


def test_up_plans_one_prover_more_a_device_with_a_standby(tmp_path, monkeypatch):
    """``[worker] prover_standby``: ``prove-cudaN-1`` beside each device's prover (the same
    command: whichever finds the lock taken stands by), and none without it."""
    monkeypatch.setenv("ZKHIVE_WORKER__PROVER_STANDBY", "true")
    from cluster.ops.plan import flat
    names, services = _plan(tmp_path, monkeypatch, True, "cuda:0,cuda:1")
    provers = [n for n in names if n.startswith("prove-")]
    assert provers == ["prove-cuda0", "prove-cuda0-1", "prove-cuda1", "prove-cuda1-1"]
    argv = {x.name: x.argv for x in flat(services)}
    assert argv["prove-cuda0"] == argv["prove-cuda0-1"]
    monkeypatch.setenv("ZKHIVE_WORKER__PROVER_STANDBY", "false")
    names, _ = _plan(tmp_path, monkeypatch, True, "cuda:0,cuda:1")
    assert [n for n in names if n.startswith("prove-")] == ["prove-cuda0", "prove-cuda1"]
