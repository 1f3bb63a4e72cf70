"""The README's two commands, in the README's order, from a fresh copy of this checkout (the files
a clone of it has: tracked and not ignored; no .venv, no node_modules, no var/), run by dash
where there is one (Debian's /bin/sh; `[ a -nt b ]` is false there when b is missing):

    ./run demo      creates .venv, installs zkhive, proves and verifies a sector on a new cluster
                    (its gateway on the default unix socket in the clone's var/up)
    ./run status    in a "fresh shell" without the settings the demo was started with: finds it
    ./run demo      again: the running cluster is used, not a second one started
    (another checkout's demo on the same ports: every clash refused at once, before its keys)
    ./test ...      with the demo's cluster still up (issue 39: the fault campaign's cluster
                    clashed with it on the gateway's 9820): installs the dev extra into the venv
                    ./run made, then runs pytest, a fault-campaign scenario among its tests
    ./run down

Bounded for a 2-core CI machine: pip's cache is reused (as a second clone on one machine would),
and ./test runs one small test file and one fault-campaign scenario (its own `zkhive up`), which
is enough to show pytest is installed and a second cluster runs beside the demo's.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.ops.supervisor import free_ports, port_is_free

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def fresh_copy(dest: Path) -> Path:
    """What `git clone` of this checkout would give, with its uncommitted changes."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / os.fsdecode(name)
        if src.is_file():  # a tracked file deleted in the work tree is not in a clone of it
            (dest / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / os.fsdecode(name))
    return dest


@pytest.mark.timeout(3600)
def test_readme_commands_in_order_from_a_fresh_clone(tmp_path):
    clone = fresh_copy(tmp_path / "zkhive")
    assert not (clone / ".venv").exists() and (clone / "run").exists()
    shell = shutil.which("dash") or "/bin/sh"
    ours = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ZKHIVE_", "VIRTUAL_ENV", "PYTHONPATH", "PYTEST"))}
    # a machine where zkhive is not installed: the PATH without this venv
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != ours)
    env["ZKHIVE_STATE_DIR"] = str(tmp_path / "state")  # where `up` records the cluster: the test's own
    # the first shell's own ports for Redis, Flower and the exporter; the gateway's default (a
    # unix socket in the clone's run directory) as a user gets it
    redis_port, flower_port, metrics_port = free_ports(3)
    ports = {"ZKHIVE_REDIS__URL": f"redis://127.0.0.1:{redis_port}/0", "ZKHIVE_FLOWER__PORT": str(flower_port),
             "ZKHIVE_METRICS__PORT": str(metrics_port)}

    def sh(*args, extra=None, timeout=1200):
        res = subprocess.run([shell, *args], cwd=clone, env={**env, **(extra or {})}, capture_output=True,
                             text=True, timeout=timeout)
        return res

    demo = sh("./run", "demo", extra=ports)  # the first shell: its own ports, in its environment
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "[5/5] verify: all 2 partition proofs verify" in demo.stdout, demo.stdout
    # the hints name the command as it was typed: zkhive is not on this PATH
    assert "status     ./run status" in demo.stdout and "stop       ./run down" in demo.stdout, demo.stdout
    sock = clone.resolve() / "var" / "up" / "gateway.sock"
    assert f"gateway    unix://{sock}  (cuzk's" in demo.stdout and stat.S_IMODE(sock.lstat().st_mode) == 0o660, demo.stdout
    try:
        status = sh("./run", "status")  # a fresh shell: none of those variables
        assert status.returncode == 0, status.stderr
        assert "prove" in status.stdout and "cpu:0" in status.stdout and "done" in status.stdout, status.stdout
        assert f"gateway  unix://{sock}" in status.stdout, status.stdout
        again = sh("./run", "demo")
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert "[2/5] cluster: already running" in again.stdout
        assert "[5/5] verify: all 2 partition proofs verify" in again.stdout

        # another checkout's demo (this one's code, its own state) on the same ports: every clash
        # named with its setting, at once, before minutes of keys
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        t0 = time.monotonic()
        second = subprocess.run([sys.executable, "-m", "cluster", "demo"], cwd=elsewhere, capture_output=True, text=True,
                                env={**env, **ports, "PYTHONPATH": str(ROOT), "ZKHIVE_STATE_DIR": str(tmp_path / "state2")},
                                timeout=300)
        assert second.returncode == 2 and "[1/5] keys" not in second.stdout, second.stdout + second.stderr
        for setting in ("redis.url (ZKHIVE_REDIS__URL)", "flower.port (ZKHIVE_FLOWER__PORT)",
                        "metrics.port (ZKHIVE_METRICS__PORT)"):
            assert f"move it with {setting}" in second.stderr, second.stderr
        assert "3 port(s) of this cluster are taken" in second.stderr and time.monotonic() - t0 < 120

        # the README's second command while the demo's cluster is up, into the venv the first one
        # made (no pytest in it yet): a fault-campaign scenario starts a second cluster beside it
        assert not (clone / ".venv" / ".zkhive-dev-installed").exists()
        test = sh("./test", "-q", "-p", "no:cacheprovider", "tests/unit/test_budget.py",
                  "tests/integration/test_faults_cluster.py", "-k", "budget or corrupt_verifying_key", timeout=1800)
        assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-3000:]
        summary = test.stdout.strip().splitlines()[-1]
        assert re.match(r"\d+ passed, \d+ deselected in ", summary), test.stdout[-3000:]
        assert "No module named pytest" not in test.stderr
        assert (clone / ".venv" / ".zkhive-dev-installed").exists()
        still = sh("./run", "status")  # the demo's cluster went on beside it
        assert still.returncode == 0 and "done" in still.stdout, still.stdout + still.stderr
    finally:
        down = sh("./run", "down")
    assert down.returncode == 0 and "every process is gone and every port released" in down.stdout, \
        down.stdout + down.stderr
    port = int(ports["ZKHIVE_REDIS__URL"].rsplit(":", 1)[1].split("/")[0])
    assert port_is_free(port) and port_is_free(int(ports["ZKHIVE_FLOWER__PORT"])) and not sock.exists()
