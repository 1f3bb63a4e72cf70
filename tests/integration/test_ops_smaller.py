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
    monkeypatch.setenv("ZKHIVE_GATEWAY__PORT", str(spec.ports[0]))
    run = tmp_path / "run"
    sup = Supervisor(run)
    # nothing recorded, and pid 1 is not a gateway here: said so, not pid 1's sockets
    assert main(["ready", "gateway", "--run-dir", str(run)]) == 1
    assert f"no gateway recorded in {run / 'cluster.json'} and pid 1 is not one" in capsys.readouterr().err
    [rec] = sup.start_all([spec])
    try:
        assert main(["ready", "gateway", "--run-dir", str(run)]) == 0
        assert capsys.readouterr().out.strip() == "ready"
        # --pid still names the process to check (here one that does not listen on the port)
        assert main(["ready", "gateway", "--run-dir", str(run), "--pid", "1"]) == 1
        assert "pid 1" in capsys.readouterr().err
    finally:
        sup.stop_all()
    sup.records = [rec]  # the record of a gateway that is gone
    sup.save()
    assert main(["ready", "gateway", "--run-dir", str(run)]) == 1
    assert f"(pid {rec.pid}) is not running" in capsys.readouterr().err
