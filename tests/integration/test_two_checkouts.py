"""A cluster's state belongs to its checkout (issue 27): two checkouts of zkhive, one user.

Checkout A is this repository; checkout B is a copy of the ``cluster`` package elsewhere (its
own code root, so its own pointer). A's cluster is recorded the way ``zkhive up`` records one
(a state file naming a live process, and ``current.point_at``); then B's ``ps`` and ``down``, run
from B without ``--run-dir``, must neither see nor stop it, while A's do. On the main of b6c19ea
the pointer was one per user (``current.json``): B's ``ps`` listed A's processes and B's
``down`` stopped them.
"""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def test_commands_in_another_checkout_never_see_or_stop_this_ones_cluster(tmp_path, monkeypatch):
    from cluster.ops import current
    from cluster.ops.supervisor import ServiceSpec, Supervisor

    state = tmp_path / "state"  # one user's state directory, shared by both checkouts
    monkeypatch.setenv("ZKHIVE_STATE_DIR", str(state))
    b = tmp_path / "b"
    shutil.copytree(ROOT / "cluster", b / "cluster", ignore=shutil.ignore_patterns("__pycache__"))
    work_a, work_b = tmp_path / "work-a", tmp_path / "work-b"
    work_a.mkdir()
    work_b.mkdir()

    run_a = tmp_path / "run-a"
    sup = Supervisor(run_a)
    spec = ServiceSpec(name="redis", argv=[sys.executable, "-c", "import time; time.sleep(600)"],
                       log=run_a / "logs" / "redis.log", ready=lambda rec: True, stop_grace_s=5)
    [rec] = sup.start_all([spec])
    sup.meta = {"redis": "redis://127.0.0.1:1/0"}
    sup.save()
    current.point_at(run_a)  # what `up` in checkout A does

    def cli(code_root, cwd, *args):
        env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("ZKHIVE_")}
        env.update(ZKHIVE_STATE_DIR=str(state), PYTHONPATH=str(code_root))
        return subprocess.run([sys.executable, "-m", "cluster", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120)

    try:
        ps_b = cli(b, work_b, "ps")
        assert ps_b.returncode == 1 and ps_b.stdout.startswith(f"no cluster recorded in {work_b}"), ps_b.stdout
        down_b = cli(b, work_b, "down")
        assert down_b.returncode == 0 and "nothing to stop" in down_b.stdout, down_b.stdout + down_b.stderr
        assert rec.process() is not None  # A's cluster untouched
        assert [p.name for p in state.glob("current*.json")] == [current.pointer_file().name]

        ps_a = cli(ROOT, work_a, "ps")  # checkout A, from anywhere: its own cluster
        assert ps_a.returncode == 0 and f"pid {rec.pid}" in ps_a.stdout and " running " in ps_a.stdout, ps_a.stdout
        down_a = cli(ROOT, work_a, "down")
        assert down_a.returncode == 0 and f"redis (pid {rec.pid})" in down_a.stdout, down_a.stdout + down_a.stderr
        assert rec.process() is None and not list(state.glob("current*.json"))
    finally:
        s = Supervisor(run_a)
        s.load() and s.stop_all()

