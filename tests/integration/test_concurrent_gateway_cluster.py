"""Many callers at once through a cluster of the real ``zkhive up`` (issue 39), the small version
of bench/concurrent_submit.py: 64 concurrent gRPC SubmitProof and 32 threads of the Python
client at once, every call answered, every job created verified, GetStatus answered meanwhile;
then liveness: a wedged gateway (SIGSTOP) fails ``zkhive ready gateway`` and is replaced by
the keeper, and a process whose liveness probe fails (alive, not answering) is replaced too."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import psutil
import pytest

from circuits_for_tests import SQUARES_A, make_c1
from cluster.gateway.pb import proving_pb2 as pb
from cluster.gateway.pb import proving_pb2_grpc as pb_grpc
from cluster.ops.keeper import Keeper, KeeperPolicy
from cluster.ops.supervisor import Supervisor, free_port
from test_up_cluster import ROOT, Setup, zkhive
from test_up_supervisor import http_server

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))
from concurrent_submit import await_and_verify, load  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GRPC_CALLS, CLIENT_THREADS = 24, 16  # both past the broker pool (10); the 1,000 / 200 run: bench/concurrent_submit.py


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    s = Setup(tmp_path_factory.mktemp("concurrent"), preload=[SQUARES_A.name])
    s.setup_keys(SQUARES_A)
    s.up(check=0)
    try:
        yield s
    finally:
        s.down()
    assert s.ours() == []


def _target(s) -> str:
    """The gateway of ``up``: its unix socket in the cluster's run directory (the default)."""
    return f"unix://{(s.run_dir / 'gateway.sock').resolve()}"


def _record(s, name):
    sup = Supervisor(s.run_dir)
    sup.load()
    return sup.record(name)


def _until(cond, timeout_s, every=0.1):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(every)
    return None


def test_many_grpc_calls_and_client_threads_at_once_are_all_answered_and_verified(up):
    from cluster import settings
    from cluster.pipeline.app import configure

    configure(settings.load(up.run_dir / "settings.toml"))
    docs = {f"g-{i}": make_c1(SQUARES_A, seed=5000 + i) for i in range(GRPC_CALLS)}
    docs.update({f"c-{i}": make_c1(SQUARES_A, seed=6000 + i) for i in range(CLIENT_THREADS)})
    rep = load(_target(up),
               [(k, json.dumps(v).encode()) for k, v in docs.items() if k.startswith("g-")],
               [(k, v) for k, v in docs.items() if k.startswith("c-")], answer_s=120)
    assert rep.unanswered == 0, rep.summary()
    assert not rep.grpc_other and not rep.client_other, rep.summary()
    answered = len(rep.grpc_jobs) + len(rep.grpc_refused) + len(rep.client_jobs) + len(rep.client_refused)
    assert answered == GRPC_CALLS + CLIENT_THREADS
    assert len(rep.grpc_jobs) + len(rep.client_jobs) >= (GRPC_CALLS + CLIENT_THREADS) // 2, rep.summary()
    assert all(rid == jid for rid, jid in {**rep.grpc_jobs, **rep.client_jobs}.items())
    # the gateway answered GetStatus all along (its speed is the bench's: bench/concurrent_submit.py)
    assert rep.status_ms and not rep.status_failed, rep.summary()
    ok, bad = await_and_verify(up.tmp / "keys", SQUARES_A, docs, {**rep.grpc_jobs, **rep.client_jobs}, 300)
    assert bad == [] and ok == len(rep.grpc_jobs) + len(rep.client_jobs)


def test_a_wedged_gateway_fails_ready_and_the_keeper_replaces_it(up):
    old = _record(up, "gateway")
    os.kill(old.pid, signal.SIGSTOP)
    try:
        new = _until(lambda: (lambda r: r if r.pid != old.pid and r.ready_at and r.process() else None)(
            _record(up, "gateway")), 90)
        assert new is not None, (up.run_dir / "logs" / "keeper.log").read_text()[-2000:]
    finally:
        if psutil.pid_exists(old.pid):
            os.kill(old.pid, signal.SIGCONT)
    assert new.restarts == old.restarts + 1
    log = (up.run_dir / "logs" / "keeper.log").read_text()
    assert f"gateway (pid {old.pid}) is frozen (stopped (SIGSTOP)" in log
    with grpc.insecure_channel(_target(up)) as ch:
        st = pb_grpc.ProvingEngineStub(ch).GetStatus(pb.GetStatusRequest(), timeout=30)
    assert [q.proof_kind for q in st.queues] == ["porep-c2"]
    res = zkhive(*up.args("ready", "gateway", "--pid", str(new.pid)), env=up.env)
    assert res.returncode == 0, res.stderr


def test_a_process_alive_but_not_answering_its_probe_is_replaced(tmp_path):
    """The keeper's liveness probe on a real process: answering keeps it; failing for less than
    ``unanswered_s`` keeps it; failing longer kills and restarts it (``process_wedged``)."""
    spec = http_server(tmp_path, name="gateway")
    answers = {"now": None}
    spec.alive = lambda rec: answers["now"]
    sup = Supervisor(tmp_path / "run")
    [rec] = sup.start_all([spec])
    events = []
    keeper = Keeper(tmp_path / "run", lambda: {"gateway": spec}, out=lambda m: None,
                    policy=KeeperPolicy(poll_s=0.1, backoff_s=0.2, max_backoff_s=1.0, unanswered_s=3.0),
                    on_event=lambda e, **f: events.append((e, f)))
    try:
        t = time.time()
        assert keeper.step(t) == [] and rec.process() is not None  # answering
        answers["now"] = "no answer within 2 s"
        assert keeper.step(t + 1) == [] and keeper.step(t + 3.9) == []  # 2.9 s of silence: kept
        assert rec.process() is not None
        assert keeper.step(t + 4.1) == ["gateway"] and rec.process() is None
        assert events[0] == ("process_wedged", {"name": "gateway", "pid": rec.pid,
                                                "reason": "alive but not answering for 3 s: no answer within 2 s"})
        answers["now"] = None
        end = time.monotonic() + 15
        while time.monotonic() < end:
            keeper.step()
            keeper.sup.load()
            r = keeper.sup.record("gateway")
            if r.pid != rec.pid and r.process() is not None:
                break
            time.sleep(0.05)
        assert r.pid != rec.pid and r.process() is not None
    finally:
        keeper.stopping.set()
        keeper.wait()
        s = Supervisor(tmp_path / "run")
        s.load() and s.stop_all()


def test_ready_gateway_fails_for_a_stopped_standalone_gateway(up):
    """``zkhive ready gateway`` asks the gateway: listening alone is not ready."""
    port = free_port()
    env = {**up.env, "ZKHIVE_GATEWAY__ADDRESS": "127.0.0.1", "ZKHIVE_GATEWAY__PORT": str(port)}
    proc = subprocess.Popen([sys.executable, "-m", "cluster", *up.args("gateway")], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ready = lambda: zkhive(*up.args("ready", "gateway", "--pid", str(proc.pid)), env=env)  # noqa: E731
        assert _until(lambda: ready().returncode == 0, 60)
        os.kill(proc.pid, signal.SIGSTOP)
        res = ready()
        assert res.returncode == 1 and f"the gateway at 127.0.0.1:{port} did not answer GetStatus" in res.stderr
        os.kill(proc.pid, signal.SIGCONT)
        assert ready().returncode == 0
    finally:
        proc.kill()
        proc.wait(30)
