"""Smaller operator points of issue 39, on real processes and a real Redis: ``zkhive timeline
cluster`` (ended in a ValueError), ``zkhive ready gateway`` without ``--pid`` (inspected pid 1)."""
from __future__ import annotations

import pytest

from cluster.cli import main
from cluster.ops.supervisor import Supervisor
from test_up_supervisor import http_server

pytestmark = pytest.mark.integration


@pytest.fixture
def as_cli(cluster, monkeypatch):
    """This process with the environment a `zkhive` process of the test cluster would have."""
    for k, v in cluster.env.items():
        if k.startswith("ZKHIVE_"):
            monkeypatch.setenv(k, v)
    monkeypatch.delenv("ZKHIVE_CONFIG", raising=False)
    return cluster


def test_the_cluster_timeline_prints_its_events_and_draws_no_empty_chart(as_cli, tmp_path, capsys):
    from cluster.pipeline import timeline

    as_cli.redis.delete(timeline.key("cluster"))
    timeline.emit(as_cli.redis, "cluster", "worker_restarted", name="prove-cpu0", pid=4242, restarts=1)
    timeline.emit(as_cli.redis, "cluster", "worker_frozen", name="synthesis-0", pid=4243, reason="stopped")
    png = tmp_path / "t.png"
    assert main(["timeline", "cluster", "--png", str(png)]) == 0
    out = capsys.readouterr()
    assert "worker_restarted" in out.out and "prove-cpu0" in out.out and "worker_frozen" in out.out
    assert "no gantt chart: the timeline of cluster has no timed spans" in out.out
    assert not png.exists() and "Traceback" not in out.err
    # a job's timeline still gets its chart (timed spans), as before
    for ev, t in (("aggregate_start", 1.0), ("aggregated", 2.5)):
        timeline.emit(as_cli.redis, "job-x", ev, t=t)
    assert main(["timeline", "job-x", "--png", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG" and f"gantt chart: {png}" in capsys.readouterr().out


def test_ready_gateway_without_pid_checks_the_gateway_up_recorded(as_cli, tmp_path, capsys, monkeypatch):
    spec = http_server(tmp_path, name="gateway")
    monkeypatch.setenv("ZKHIVE_GATEWAY__ADDRESS", "127.0.0.1")  # this stand-in listens on TCP
    monkeypatch.setenv("ZKHIVE_GATEWAY__PORT", str(spec.ports[0]))
    run = tmp_path / "run"
    sup = Supervisor(run)
    # nothing recorded, and pid 1 is not a gateway here: said so, not pid 1's sockets
    assert main(["ready", "gateway", "--run-dir", str(run)]) == 1
    assert f"no gateway recorded in {run / 'cluster.json'} and pid 1 is not one" in capsys.readouterr().err
    [rec] = sup.start_all([spec])
    try:
        # the recorded process listens, so ready goes on to ask it GetStatus (this stand-in is
        # an HTTP server, no gateway: not ready, and said so for the recorded one's address)
        assert main(["ready", "gateway", "--run-dir", str(run)]) == 1
        assert f"the gateway at 127.0.0.1:{spec.ports[0]} did not answer GetStatus" in capsys.readouterr().err
        # --pid still names the process to check (here one that does not listen on the port)
        assert main(["ready", "gateway", "--run-dir", str(run), "--pid", "1"]) == 1
        assert "pid 1" in capsys.readouterr().err
    finally:
        sup.stop_all()
    sup.records = [rec]  # the record of a gateway that is gone
    sup.save()
    assert main(["ready", "gateway", "--run-dir", str(run)]) == 1
    assert f"(pid {rec.pid}) is not running" in capsys.readouterr().err


def test_a_proof_of_another_key_is_invalid_with_a_hint_naming_the_key(tmp_path, capsys, monkeypatch):
    """Proofs made with one development key, verified against another checkout's key of the same
    parameter set: INVALID, and a hint naming the key file, its id and --keys (there was none)."""
    import hashlib
    import json

    from circuits_for_tests import SQUARES_A, make_c1
    from cluster.pipeline.keys import KeyCache
    from cluster.user.local import prove_c1

    monkeypatch.setenv("ZKHIVE_CLI_NAME", "./run")
    ours, theirs = KeyCache(tmp_path / "ours"), KeyCache(tmp_path / "theirs")
    ours.setup(SQUARES_A)
    theirs.setup(SQUARES_A)
    doc = make_c1(SQUARES_A, seed=7)
    (tmp_path / "c1.json").write_text(json.dumps(doc))
    proof = b"".join(prove_c1(SQUARES_A, SQUARES_A.parse_c1(doc), ours, "cpu", out=lambda m: None))
    (tmp_path / "proof.bin").write_bytes(proof)
    args = ["verify", str(tmp_path / "c1.json"), str(tmp_path / "proof.bin")]
    assert main(args + ["--keys", str(tmp_path / "ours")]) == 0
    out = capsys.readouterr()
    assert "INVALID" not in out.out and out.err == ""
    assert main(args + ["--keys", str(tmp_path / "theirs")]) == 1
    out = capsys.readouterr()
    vk = theirs.find(SQUARES_A, "vk")
    kid = hashlib.sha256(vk.read_bytes()).hexdigest()[:16]
    assert "partition 0: INVALID" in out.out
    assert (f"./run verify: 2 of 2 partition proofs do not verify against the verifying key {vk} "
            f"(key id {kid}") in out.err and "Pass --keys with the key cache" in out.err, out.err


def test_hints_name_the_command_as_run_through_dot_run(tmp_path, capsys, monkeypatch):
    """./run sets ZKHIVE_CLI_NAME: the commands a message tells the user to run say ./run, not
    zkhive (which is not on the PATH of a ./run install)."""
    from cluster.ops.supervisor import ClusterRunning, ProcessRecord

    monkeypatch.setenv("ZKHIVE_CLI_NAME", "./run")
    monkeypatch.setenv("ZKHIVE_STATE_DIR", str(tmp_path / "state"))
    assert main(["logs", "keeper", "--run-dir", str(tmp_path / "run")]) == 2
    assert "`./run up` first" in capsys.readouterr().err
    rec = ProcessRecord("redis", 1, 0.0, [], "")
    msg = str(ClusterRunning(tmp_path / "cluster.json", [rec]))
    assert "Run `./run down` first (or `./run status` to use it)" in msg and "zkhive" not in msg
    monkeypatch.delenv("ZKHIVE_CLI_NAME")
    assert "`./run" not in str(ClusterRunning(tmp_path / "cluster.json", [rec]))
