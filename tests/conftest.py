"""Shared fixtures: a real Redis server started by the tests, and real worker processes.

``cluster`` (session) starts one Redis (with a password) and writes the settings every process
uses into the environment; ``workers`` starts ``python -m cluster worker ...`` subprocesses and
stops them after the test. Integration tests fail, not skip, when Redis cannot start in CI.
"""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_CIRCUITS_DIR = ROOT / "tests" / "integration"


class WorkerProcess:
    """One ``zkhive worker`` subprocess with its log file."""

    def __init__(self, role: str, env: dict, log: Path, device: str | None = None, extra_env: dict | None = None,
                 options: tuple = ()):
        self.role, self.device, self.log = role, device, log
        argv = [sys.executable, "-m", "cluster", "worker", role, "--loglevel", "INFO", *options]
        if device:
            argv += ["--device", device]
        self.env = {**env, **(extra_env or {})}
        self._logf = open(log, "wb")
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=self._logf,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        self._logf.flush()
        return self.log.read_text(errors="replace")

    def wait_ready(self, redis_client, timeout_s: float = 60.0):
        """Wait until this process's registry entry says ready; returns the WorkerInfo."""
        from cluster.pipeline import registry

        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"worker {self.role} {self.device or ''} exited with "
                                     f"{self.proc.returncode}:\n{self.log_text()[-3000:]}")
            for w in registry.workers(redis_client):
                if w.pid == self.pid and w.ready:
                    return w
            time.sleep(0.1)
        raise AssertionError(f"worker {self.role} {self.device or ''} not ready after {timeout_s} s:\n"
                             f"{self.log_text()[-3000:]}")

    def signal(self, sig) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def wait(self, timeout_s: float = 30.0) -> int:
        return self.proc.wait(timeout_s)

    def stop(self, timeout_s: float = 20.0) -> None:
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._logf.close()


class Cluster:
    """The session's Redis plus the settings (as environment) for clients and workers."""

    def __init__(self, root: Path):
        from cluster.ops.redis_server import RedisServer, RedisServerError

        self.root = root
        self.password = secrets.token_hex(12)
        self.server = RedisServer(password=self.password, data_dir=root / "redis")
        try:
            self.server.start()
        except RedisServerError as e:
            if os.environ.get("CI"):
                raise
            pytest.skip(f"cannot start a Redis server: {e}")
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(TEST_CIRCUITS_DIR), os.environ.get("PYTHONPATH", "")]),
            "ZKHIVE_REDIS__URL": self.server.url,
            "ZKHIVE_REDIS__PASSWORD": self.password,
            "ZKHIVE_BLOBS__DIR": str(root / "blobs"),
            "ZKHIVE_SRS__PARAM_CACHE": str(root / "keys"),
            "ZKHIVE_WORKER__CIRCUIT_MODULES": '["circuits_for_tests"]',
            "ZKHIVE_WORKER__HEARTBEAT_S": "0.5",
            "ZKHIVE_WORKER__REGISTRY_TTL_S": "3",
            "ZKHIVE_WORKER__LOCK_TTL_S": "5",
            "ZKHIVE_DELIVERY__WATCHDOG_INTERVAL_S": "0.5",
            "ZKHIVE_DELIVERY__JOB_DEADLINE_S": "240",
            "PYTHONUNBUFFERED": "1",
        }
        self.env.pop("ZKHIVE_CONFIG", None)
        self.redis = self.server.client()
        self.configure_here()

    def configure_here(self, **overrides) -> None:
        """Point this test process's Celery app and runtime at the test cluster."""
        from cluster import settings
        from cluster.pipeline.app import configure

        if str(TEST_CIRCUITS_DIR) not in sys.path:
            sys.path.insert(0, str(TEST_CIRCUITS_DIR))
        env = {k: v for k, v in self.env.items() if k.startswith("ZKHIVE_")}
        env.update(overrides)
        configure(settings.load(env=env))

    def runtime(self):
        from cluster.pipeline.app import runtime
        return runtime()

    def setup_keys(self, *circuits) -> None:
        rt = self.runtime()
        for c in circuits:
            rt.keys.setup(c)

    def flush(self) -> None:
        """Forget every job, message and registry entry between tests (Redis stays up)."""
        self.redis.flushdb()

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    yield c
    c.stop()


class WorkerSet:
    """Starts workers of one test (or module) and stops them all at the end, in parallel."""

    def __init__(self, cluster: Cluster, log_dir: Path):
        self.cluster, self.log_dir = cluster, log_dir
        self.started: list[WorkerProcess] = []

    def __call__(self, role: str, device: str | None = None, *, wait: bool = True, options: tuple = (),
                 **extra_env) -> WorkerProcess:
        """``options``: more of `zkhive worker`'s options (``("--urgent",)``)."""
        name = f"{role}-{(device or '').replace(':', '')}-{len(self.started)}"
        w = WorkerProcess(role, self.cluster.env, self.log_dir / f"{name}.log", device,
                          {k: str(v) for k, v in extra_env.items()}, options)
        self.started.append(w)
        if wait:
            w.wait_ready(self.cluster.redis)
        return w

    def stop_all(self) -> None:
        # SIGTERM all first, then wait: the warm shutdowns run in parallel
        for w in self.started:
            w.signal(signal.SIGTERM)
        for w in self.started:
            w.stop()


@pytest.fixture(scope="session")
def worker_set(cluster):
    """``worker_set(log_dir) -> WorkerSet`` for module-scoped workers."""
    return lambda log_dir: WorkerSet(cluster, log_dir)


@pytest.fixture
def workers(cluster, tmp_path):
    """``workers(role, device=None, wait=True, **env) -> WorkerProcess``, on a flushed Redis;
    every worker is stopped after the test."""
    cluster.flush()
    cluster.configure_here()
    ws = WorkerSet(cluster, tmp_path)
    yield ws
    ws.stop_all()


@pytest.fixture
def ready(cluster):
    """``ready(*workers)``: wait until every one of them is registered and ready."""
    def wait(*ws):
        return [w.wait_ready(cluster.redis) for w in ws]
    return wait
