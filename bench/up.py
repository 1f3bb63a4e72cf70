"""The cluster a benchmark measures, started the way an operator starts one: ``zkhive up`` with
a settings file of its own, the caller's environment without its ZKHIVE_ settings (the file
alone decides them; ZKHIVE_CACHE_DIR with carried cubins, and the like, go along), and this
process's Celery app pointed at it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cluster.ops.supervisor import free_port, free_ports

ROOT = Path(__file__).resolve().parent.parent


def settings_file(tmp: Path, keys: Path, preload: str, *, gateway_port: bool = False) -> Path:
    """A settings file of the benchmark's own in ``tmp``: free ports, a fresh Redis password,
    the key cache ``keys`` with ``preload`` on the provers (the gateway on a TCP port when asked;
    else its default unix socket in the run directory)."""
    ports = dict(zip(("redis", "flower", "metrics", "gateway"), free_ports(4)))
    cfg = tmp / "zkhive.toml"
    cfg.write_text(f"""
[redis]
url = "redis://127.0.0.1:{ports['redis']}/0"
password = "{os.urandom(8).hex()}"
[blobs]
dir = "{tmp / 'blobs'}"
[srs]
param_cache = "{keys}"
preload = ["{preload}"]
[flower]
port = {ports['flower']}
password = "bench"
[metrics]
port = {ports['metrics']}
""" + (f"[gateway]\nport = {ports['gateway']}\n" if gateway_port else ""))
    return cfg


def up(cfg: Path, tmp: Path, devices: str) -> dict[str, str]:
    """``zkhive up --config cfg --run-dir tmp/run --devices devices``; returns the environment it
    ran in (for ``zkhive down`` and other commands). The run directory holds the gateway's socket."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("ZKHIVE_") and ("__" in k or k == "ZKHIVE_CONFIG"))}
    env["ZKHIVE_STATE_DIR"] = str(tmp / "state")
    subprocess.run([sys.executable, "-m", "cluster", "up", "--config", str(cfg), "--run-dir", str(tmp / "run"),
                    "--devices", devices], cwd=ROOT, env=env, check=True)
    from cluster import settings
    from cluster.pipeline.app import configure

    configure(settings.load(tmp / "run" / "settings.toml"))
    return env


def bare_redis(tmp: Path, code: Path) -> tuple[subprocess.Popen, int, dict[str, str]]:
    """A Redis of the benchmark's own (no password, nothing saved), its port, and the environment of one
    zkhive process of checkout ``code`` over it (its blobs, keys and state in ``tmp``): for the
    memory benchmarks, which start the one process they measure, not a cluster."""
    from cluster.ops.redis_server import find_executable

    port = free_port()
    proc = subprocess.Popen([find_executable(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--dir", str(tmp)], stdout=subprocess.DEVNULL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKHIVE_")}
    env.update(PYTHONPATH=str(code.resolve()), ZKHIVE_REDIS__URL=f"redis://127.0.0.1:{port}/0",
               ZKHIVE_BLOBS__DIR=str(tmp / "blobs"), ZKHIVE_SRS__PARAM_CACHE=str(tmp / "keys"),
               ZKHIVE_STATE_DIR=str(tmp / "state"))
    return proc, port, env


def stop(*procs) -> None:
    """Terminate each process started (None: never started) and wait for it."""
    for p in procs:
        if p is not None:
            p.terminate()
            p.wait(30)
