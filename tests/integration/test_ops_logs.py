"""`zkhive logs NAME [-f]` (issue 27): one process's log of a cluster of `up`, by its name in the
state file, through the real CLI."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def test_logs_prints_and_follows_one_process_log(tmp_path):
    """`zkhive logs NAME` (and -f) on a state file that names a real process writing its log."""
    import os
    import time

    from cluster.ops.supervisor import ServiceSpec, Supervisor

    run = tmp_path / "run"
    code = "import time\nfor i in range(600):\n    print('line', i, flush=True); time.sleep(0.2)\n"
    spec = ServiceSpec(name="synthesis-0", argv=[sys.executable, "-c", code], log=run / "logs" / "synthesis-0.log",
                       ready=lambda rec: True, stop_grace_s=5)
    sup = Supervisor(run)
    sup.start_all([spec])
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKHIVE_")}
    env.update(ZKHIVE_STATE_DIR=str(tmp_path / "state"), PYTHONPATH=str(ROOT))
    try:
        time.sleep(1.0)
        p = subprocess.run([sys.executable, "-m", "cluster", "logs", "synthesis-0", "-n", "2", "--run-dir", str(run)],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert len(p.stdout.splitlines()) == 2 and p.stdout.splitlines()[-1].startswith("line "), p.stdout
        f = subprocess.Popen([sys.executable, "-m", "cluster", "logs", "synthesis-0", "-f", "-n", "0",
                              "--run-dir", str(run)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
        try:
            first = f.stdout.readline()  # written after `logs -f` started
            assert first.startswith("line ") and int(first.split()[1]) > int(p.stdout.split()[-1]), first
        finally:
            f.terminate()
            f.wait(10)
        bad = subprocess.run([sys.executable, "-m", "cluster", "logs", "nosuch", "--run-dir", str(run)],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and bad.stderr.strip().startswith("zkhive logs: nothing named 'nosuch' in ")
        assert bad.stderr.strip().endswith("recorded: synthesis-0"), bad.stderr
    finally:
        s = Supervisor(run)
        s.load() and s.stop_all()
