"""Start, watch and stop the processes of a one-machine cluster (``zkhive up`` / ``down``).

The daemons zkhive replaces fail in three familiar ways: a process that "started" but crashed
silently, an old process still running after a rebuild, and a supervisor that kills the wrong
thing because it matched a name. This module answers each one:

- every process is recorded in a state file with its PID *and* its start time
  (``psutil.Process.create_time``, and the same as seconds since boot, which a step of the wall
  clock does not move); a record only names a live process when both match, so a PID reused
  by the kernel is never mistaken for ours and never signalled;
- a process counts as started only when its readiness check passes; if it exits or times out
  first, :class:`StartFailure` names it and carries the tail of its log;
- a previous cluster still running, a stale state file, or a port already bound are detected
  before anything starts, and reported (:class:`ClusterRunning`, :class:`PortInUse`); nothing
  is joined or killed by name;
- :meth:`Supervisor.stop_all` stops exactly the recorded processes (and the children they had
  when the stop began), waits for the warm shutdown, escalates to SIGKILL after the grace
  period, then verifies that every process is gone and every port released.

Errors, as a tree (caught by the CLI and printed as one message)::

    SupervisorError
    ├── ClusterRunning     a live process from a previous ``up`` holds the state file
    ├── PortInUse          a port the cluster needs is bound by someone else
    ├── Busy               another ``up``/``down`` is working on the same state directory
    ├── StartFailure       a process exited or never became ready (log tail attached)
    └── StopFailure        a process or port survived ``stop_all``
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import psutil

from cluster.cli import cli_name

#: the state file's name inside the state directory (``<data_dir>/run`` for ``zkhive up``)
STATE_FILE = "cluster.json"
STATE_VERSION = 1
#: psutil derives create_time from boot time plus clock ticks; the same process always reads
#: back the same float, but allow a little slack for a boot-time re-read on another psutil call
CREATE_TIME_TOLERANCE_S = 0.05
#: lines of a failed process's log shown to the operator
LOG_TAIL_LINES = 30


class SupervisorError(RuntimeError):
    """Base of every failure this module reports."""


class ClusterRunning(SupervisorError):
    """A process recorded by a previous ``up`` is still alive (same PID and start time)."""

    def __init__(self, state_file: Path, alive: list["ProcessRecord"]):
        self.state_file, self.alive = state_file, alive
        procs = ", ".join(f"{r.name} (pid {r.pid})" for r in alive)
        super().__init__(
            f"a previous cluster is still running: {procs}; recorded in {state_file}. "
            f"Run `{cli_name()} down` first (or `{cli_name()} status` to use it).")


class Busy(SupervisorError):
    """Another supervisor process holds the state directory's lock."""


class PortInUse(SupervisorError):
    def __init__(self, port: int, host: str, service: str, holder: str | None):
        self.port, self.host, self.service, self.holder = port, host, service, holder
        who = f" by {holder}" if holder else ""
        super().__init__(f"port {host}:{port} needed by {service} is already in use{who}; "
                         f"free it or choose another port in the settings")


class StartFailure(SupervisorError):
    def __init__(self, name: str, reason: str, log: Path | None, tail: str):
        self.name, self.reason, self.log, self.tail = name, reason, log, tail
        msg = f"{name} failed to start: {reason}"
        if log is not None:
            msg += f"\n--- last lines of {log} ---\n{tail.rstrip()}\n---"
        super().__init__(msg)


class StopFailure(SupervisorError):
    def __init__(self, survivors: list[str], bound_ports: list[int]):
        self.survivors, self.bound_ports = survivors, bound_ports
        parts = []
        if survivors:
            parts.append("still alive: " + ", ".join(survivors))
        if bound_ports:
            parts.append("ports still bound: " + ", ".join(map(str, bound_ports)))
        super().__init__("stop incomplete; " + "; ".join(parts))


@dataclass
class ServiceSpec:
    """One process to start. ``ready(record)`` returns True once the service is usable (it is
    polled with the started process's record; an exception counts as not ready yet and its text
    is kept for the timeout message)."""

    name: str
    argv: list[str]
    log: Path
    ready: Callable[["ProcessRecord"], bool]
    #: what ``ready`` waits for, in words, for the failure message
    waiting_for: str = "readiness"
    ports: tuple[int, ...] = ()
    env: dict[str, str] | None = None
    ready_timeout_s: float = 60.0
    #: seconds ``stop_all`` waits after SIGTERM before SIGKILL (the warm shutdown)
    stop_grace_s: float = 30.0
    #: where it can be reached, for the operator (printed by ``up`` and ``status``)
    address: str = ""
    cwd: str | None = None
    #: ``[logs]``: the log is rotated past this size (0: never) keeping ``log_backups`` copies
    log_max_bytes: int = 0
    log_backups: int = 5
    #: liveness once ready: None while it answers, else a one-line reason (the gateway: a
    #: GetStatus with a deadline). A ready process that fails it for ``KeeperPolicy.unanswered_s``
    #: is wedged: the keeper kills and replaces it (a process alive and listening, not answering)
    alive: Callable[["ProcessRecord"], str | None] | None = None


@dataclass
class ProcessRecord:
    """One started process as the state file stores it."""

    name: str
    pid: int
    create_time: float
    argv: list[str]
    log: str
    ports: list[int] = field(default_factory=list)
    stop_grace_s: float = 30.0
    address: str = ""
    #: start group: processes of one group are stopped together, groups in reverse order
    group: int = 0
    #: times the keeper (``cluster.ops.keeper``) or ``zkhive restart`` started it again
    restarts: int = 0
    #: consecutive runs that failed to start or died soon after (the keeper's backoff counter)
    failures: int = 0
    #: set when the keeper stopped restarting it: the reason and the log tail
    given_up: str = ""
    #: when this run passed its readiness check (0: never): a run that was ready and then died
    #: is not a failed start, however young
    ready_at: float = 0.0
    #: consecutive runs that never became ready (the keeper's give-up counter)
    unready: int = 0
    #: why the keeper keeps retrying a failing process it may not leave stopped (the last of its role)
    note: str = ""
    #: a ``zkhive worker`` started by hand against this cluster: ``down`` stops it, the keeper
    #: never restarts it (it has no spec in ``up``'s plan)
    by_hand: bool = False
    #: the start time as seconds since boot (:func:`start_stamp`); 0: a state file from before
    #: it was recorded, and create_time alone identifies the process
    since_boot: float = 0.0

    @property
    def role(self) -> str:
        """``prove`` of prove-cpu0, ``synthesis`` of synthesis-1, ``redis`` of redis."""
        return self.name.split("-", 1)[0]

    def process(self) -> psutil.Process | None:
        """The live process this record names, or None when it exited or its PID was reused."""
        return _same_process(self.pid, self.create_time, self.since_boot)


def start_stamp(pid: int) -> tuple[psutil.Process, float, float]:
    """(process, create_time, seconds since boot) of a live PID. psutil's create_time is the
    boot time plus the kernel's start ticks, and the boot time it reads is the wall clock minus
    the uptime: a step of the wall clock (NTP, a resumed VM) moves it, and with it every
    process's create_time at once (+20.00 s on all of a CI run's processes, after which the
    keeper took a live Redis for gone and restarted it against its own port, 595 times). The
    seconds since boot do not move; the boot time is read before the process, whose create_time
    psutil computes from the boot time it last read."""
    boot = psutil.boot_time()
    proc = psutil.Process(pid)
    created = proc.create_time()
    return proc, created, created - boot


def _same_process(pid: int, create_time: float, since_boot: float = 0.0) -> psutil.Process | None:
    """The live process a (PID, start) record names, or None. With since_boot the start is
    compared as seconds since boot (a clock step does not move it); else as create_time."""
    try:
        proc, created, since = start_stamp(pid)
        same = abs(since - since_boot) if since_boot else abs(created - create_time)
        if same > CREATE_TIME_TOLERANCE_S:
            return None  # the kernel reused the PID for somebody else's process
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None


def log_tail(path: Path | str, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log (reads at most the last 64 KiB)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 65536))
            data = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return "(no log written)"
    return "\n".join(data.splitlines()[-lines:])


def rotate_log(path: Path | str, max_bytes: int, backups: int) -> bool:
    """Rotate ``path`` when it holds ``max_bytes`` or more (0: never): ``.1`` .. ``.N`` move up
    one (the oldest is dropped), the log is copied to ``.1`` and then truncated in place. The
    processes writing it keep their descriptor, opened with O_APPEND, so their next line lands
    at the start of the emptied file (logrotate's ``copytruncate``; renaming the file instead
    would leave them writing into ``.1`` for good). A line written between the read that found
    the end and the truncation right after it is lost (as with ``copytruncate``). Returns True
    when it rotated."""
    path = Path(path)
    try:
        if max_bytes <= 0 or path.stat().st_size < max_bytes:
            return False
    except FileNotFoundError:
        return False
    if backups > 0:
        for i in range(backups - 1, 0, -1):
            older = path.with_name(f"{path.name}.{i}")
            if older.exists():
                os.replace(older, path.with_name(f"{path.name}.{i + 1}"))
        tmp = path.with_name(f"{path.name}.1.tmp")
        with open(path, "rb") as src, open(tmp, "wb") as dst:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                dst.write(chunk)
            os.truncate(path, 0)  # at once after the read that found the end
        os.replace(tmp, path.with_name(f"{path.name}.1"))
    else:
        os.truncate(path, 0)
    return True


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a listening socket could be bound to ``host:port`` now. SO_REUSEADDR makes a
    port whose last connection sits in TIME_WAIT count as free, as it does for the servers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def port_holder(port: int) -> str | None:
    """``name (pid N)`` of the process listening on ``port``, when the OS lets us see it."""
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                if conn.pid is None:
                    return "another process (not visible to this user)"
                try:
                    return f"{psutil.Process(conn.pid).name()} (pid {conn.pid})"
                except psutil.Error:
                    return f"pid {conn.pid}"
    except (psutil.AccessDenied, PermissionError):
        return None
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS considers free right now (for tests and ``--port 0`` style defaults)."""
    return free_ports(1, host)[0]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports the OS considers free right now. Every socket stays bound until all
    are picked: ``free_port()`` called twice may get the same port back once the first socket is
    closed (a full-suite run: "metrics and redis both want port 43057")."""
    with contextlib.ExitStack() as held:
        socks = [held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]


class Supervisor:
    """Starts services in order and records them in ``state_dir/cluster.json``.

    The state file is rewritten after every start, so an ``up`` that dies half-way still leaves
    a record that ``down`` can act on. ``meta`` holds what ``status`` needs to find the cluster
    again (Redis URL, Flower address, settings file)."""

    def __init__(self, state_dir: Path | str, *, host: str = "127.0.0.1"):
        self.state_dir = Path(state_dir)
        self.state_file = self.state_dir / STATE_FILE
        self.host = host
        self.records: list[ProcessRecord] = []
        self.meta: dict = {}

    # -- the state file -------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, wait_s: float = 0.0):
        """Hold the state directory's lock: two ``up`` (or an ``up`` and a ``down``, or the
        keeper restarting a worker) on one directory would overwrite each other's records and
        orphan processes. The kernel drops the lock when its holder dies, so a crashed ``up``
        never leaves it stale. ``wait_s``: how long to wait for another holder."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path = self.state_dir / ".lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait_s
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() < deadline:
                        time.sleep(0.1)
                        continue
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                    raise Busy(f"another zkhive up/down/restart (pid {holder}) is working on "
                               f"{self.state_dir}; wait for it to finish") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield self
        finally:
            os.close(fd)  # releases the lock

    def record(self, name: str) -> ProcessRecord | None:
        return next((r for r in self.records if r.name == name), None)

    def load(self) -> bool:
        """Read the state file; False when there is none. A malformed file is an error naming it
        (it is never silently overwritten: it may describe live processes)."""
        try:
            doc = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return False
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise SupervisorError(f"state file {self.state_file} is not valid JSON ({e}); "
                                  f"inspect it, stop its processes by hand, then delete it") from None
        if not isinstance(doc, dict) or doc.get("version") != STATE_VERSION:
            raise SupervisorError(f"state file {self.state_file}: unknown format "
                                  f"(version {doc.get('version') if isinstance(doc, dict) else '?'})")
        known = set(ProcessRecord.__dataclass_fields__)
        try:
            # fields a newer zkhive added are dropped, not fatal: the keeper of a running cluster
            # may be older or newer than the command reading its state
            self.records = [ProcessRecord(**{k: v for k, v in r.items() if k in known})
                            for r in doc["processes"]]
        except (KeyError, TypeError) as e:
            raise SupervisorError(f"state file {self.state_file}: bad process record ({e})") from None
        self.meta = doc.get("meta", {})
        return True

    def save(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        doc = {"version": STATE_VERSION, "written_at": time.time(), "meta": self.meta,
               "processes": [asdict(r) for r in self.records]}
        tmp = self.state_file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=2))
        os.replace(tmp, self.state_file)  # atomic: a reader never sees half a file

    def alive(self) -> list[ProcessRecord]:
        """Records whose process is still running (PID and start time both match)."""
        return [r for r in self.records if r.process() is not None]

    # -- before starting ------------------------------------------------------------------------
    def check_clear(self, services: Iterable[ServiceSpec]) -> str | None:
        """Refuse to start over a live cluster or on a bound port. Returns a note when a stale
        state file (every recorded process gone) was found and removed, else None."""
        note = None
        if self.load():
            live = self.alive()
            if live:
                raise ClusterRunning(self.state_file, live)
            pids = ", ".join(f"{r.name} pid {r.pid}" for r in self.records) or "no processes"
            note = (f"stale state file {self.state_file} removed: none of its processes "
                    f"({pids}) is running any more")
            self.state_file.unlink()
            self.records, self.meta = [], {}
        for spec in services:
            for port in spec.ports:
                if not port_is_free(port, self.host):
                    raise PortInUse(port, self.host, spec.name, port_holder(port))
        return note

    # -- starting -------------------------------------------------------------------------------
    def start(self, spec: ServiceSpec, group: int | None = None) -> ProcessRecord:
        """Start one service and record it (not yet waiting for readiness)."""
        popen, create_time, since_boot = self._spawn(spec)
        rec = ProcessRecord(spec.name, popen.pid, create_time, list(spec.argv), str(spec.log),
                            list(spec.ports), spec.stop_grace_s, spec.address,
                            len(self.records) if group is None else group, since_boot=since_boot)
        rec._popen = popen  # type: ignore[attr-defined]  # to reap it and read its exit code
        self.records.append(rec)
        self.save()
        return rec

    def replace(self, spec: ServiceSpec) -> ProcessRecord:
        """Start ``spec`` again in place of its record (same name, group and counters; the
        old process must be gone) and save the state file at once, so a ``down`` that comes
        while it is still starting stops the new process too."""
        i = next(i for i, r in enumerate(self.records) if r.name == spec.name)
        old = self.records[i]
        if old.process() is not None:
            raise SupervisorError(f"{old.name} (pid {old.pid}) is still running: stop it first")
        popen, create_time, since_boot = self._spawn(spec)
        rec = ProcessRecord(spec.name, popen.pid, create_time, list(spec.argv), str(spec.log),
                            list(spec.ports), spec.stop_grace_s, spec.address, old.group,
                            restarts=old.restarts + 1, failures=old.failures, unready=old.unready,
                            note=old.note, since_boot=since_boot)
        rec._popen = popen  # type: ignore[attr-defined]
        self.records[i] = rec
        self.save()
        return rec

    def stop_one(self, rec: ProcessRecord, grace_s: float | None = None) -> str:
        """Warm-stop one recorded process (SIGKILL after its grace); returns how it ended."""
        return self._finish_stop(rec, self._terminate(rec),
                                 rec.stop_grace_s if grace_s is None else grace_s)

    def _spawn(self, spec: ServiceSpec) -> tuple[subprocess.Popen, float, float]:
        spec.log.parent.mkdir(parents=True, exist_ok=True)
        try:
            rotate_log(spec.log, spec.log_max_bytes, spec.log_backups)
        except OSError:
            pass  # a log that cannot be rotated never keeps a process from starting
        env = dict(os.environ if spec.env is None else spec.env)
        env.setdefault("PYTHONUNBUFFERED", "1")  # the log tail must show the last words
        with open(spec.log, "ab") as logf:
            logf.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} "
                       f"starting {spec.name}: {' '.join(spec.argv)}\n".encode())
            logf.flush()
            try:
                # A new session: Ctrl-C in the operator's terminal must not reach the cluster,
                # and the process outlives ``zkhive up`` by design.
                popen = subprocess.Popen(spec.argv, stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env, cwd=spec.cwd,
                                         start_new_session=True)
            except OSError as e:
                raise StartFailure(spec.name, f"cannot execute {spec.argv[0]!r}: {e}",
                                   spec.log, log_tail(spec.log)) from None
        try:
            _, create_time, since_boot = start_stamp(popen.pid)
        except psutil.NoSuchProcess:
            create_time = since_boot = 0.0  # already gone; wait_ready reports it with the log
        return popen, create_time, since_boot

    def wait_ready(self, spec: ServiceSpec, rec: ProcessRecord, *, poll_s: float = 0.2) -> float:
        """Poll ``spec.ready`` until it passes; returns seconds since the process started. Raises StartFailure
        when the process exits first or the timeout passes."""
        t0 = time.monotonic()
        last_err = ""
        popen: subprocess.Popen | None = getattr(rec, "_popen", None)
        while True:
            code = popen.poll() if popen is not None else (None if rec.process() else -1)
            if code is not None:
                raise StartFailure(spec.name, f"exited with status {code} before it was ready",
                                   spec.log, log_tail(spec.log))
            try:
                if spec.ready(rec):
                    # from the process's start, not from this wait: a group starts together
                    return time.time() - rec.create_time if rec.create_time else time.monotonic() - t0
            except Exception as e:  # not ready yet; keep the reason for the timeout message
                last_err = f" (last check: {type(e).__name__}: {e})"
            if time.monotonic() - t0 > spec.ready_timeout_s:
                raise StartFailure(spec.name, f"not ready after {spec.ready_timeout_s:.0f} s: "
                                   f"waiting for {spec.waiting_for}{last_err}",
                                   spec.log, log_tail(spec.log))
            time.sleep(poll_s)

    def start_all(self, services: list["ServiceSpec | list[ServiceSpec]"],
                  on_ready: Callable[[ServiceSpec, ProcessRecord, float], None] | None = None
                  ) -> list[ProcessRecord]:
        """Start the services in order, each ready before the next (workers need Redis; Flower
        needs the broker). A nested list is a group started together and then waited for (the
        workers: their imports and key loads overlap). On any failure, stop everything started so
        far, then re-raise."""
        started = []
        try:
            for item in services:
                group = item if isinstance(item, list) else [item]
                gid = max((r.group for r in self.records), default=-1) + 1
                recs = [self.start(spec, gid) for spec in group]
                for spec, rec in zip(group, recs):
                    took = self.wait_ready(spec, rec)
                    rec.ready_at = time.time()
                    self.save()
                    started.append(rec)
                    if on_ready:
                        on_ready(spec, rec, took)
        except BaseException:
            try:
                self.stop_all()
            except SupervisorError:
                pass  # the start failure is the message that matters; stop_all already tried
            raise
        return started

    # -- stopping -------------------------------------------------------------------------------
    def stop_all(self, *, grace_s: float | None = None,
                 on_stopped: Callable[[ProcessRecord, str], None] | None = None) -> None:
        """Stop the recorded processes group by group in reverse start order (Flower, then the
        workers together, then Redis last, so workers can ack and deregister). Only processes
        whose PID *and* start time match are signalled. Removes the state file once everything
        is verified gone."""
        for gid in sorted({r.group for r in self.records}, reverse=True):
            group = [r for r in self.records if r.group == gid]
            pending = [(r, self._terminate(r)) for r in group]
            for rec, family in pending:
                how = self._finish_stop(rec, family, rec.stop_grace_s if grace_s is None else grace_s)
                if on_stopped:
                    on_stopped(rec, how)
        survivors = [f"{r.name} (pid {r.pid})" for r in self.records if r.process() is not None]
        bound = self._wait_ports_released([p for r in self.records for p in r.ports])
        if survivors or bound:
            raise StopFailure(survivors, bound)
        self.records, self.meta = [], {}
        self.state_file.unlink(missing_ok=True)

    def _terminate(self, rec: ProcessRecord) -> list[tuple[int, float]] | None:
        """SIGTERM (warm shutdown: finish the task in hand) to a recorded process that is still
        ours; returns the (pid, seconds since boot) of it and its children as they were, or None."""
        proc = rec.process()
        popen: subprocess.Popen | None = getattr(rec, "_popen", None)
        if proc is None:
            if popen is not None:
                popen.poll()  # reap our own child so it does not linger as a zombie
            return None
        # Children as they are now (e.g. Celery's prefork pool); each is checked by its own
        # start time before any later signal, like the leader.
        try:
            boot = psutil.boot_time()  # read before the children's Process objects (start_stamp)
            family = own_family(proc)
            ids = [(p.pid, p.create_time() - boot) for p in family if _alive(p)]
            proc.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            return None
        return ids

    def _finish_stop(self, rec: ProcessRecord, ids: list[tuple[int, float]] | None,
                     grace_s: float) -> str:
        if ids is None:
            return "already gone"
        popen: subprocess.Popen | None = getattr(rec, "_popen", None)
        if _wait_gone(ids, grace_s, popen):
            return "stopped"
        for pid, since in ids:  # the grace period is over: the rest is killed, ours only
            p = _same_process(pid, 0.0, since)
            if p is not None:
                try:
                    p.send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:
                    pass
        _wait_gone(ids, 5.0, popen)
        return f"killed after {grace_s:.0f} s grace"

    def _wait_ports_released(self, ports: list[int], timeout_s: float = 5.0) -> list[int]:
        deadline = time.monotonic() + timeout_s
        while True:
            bound = [p for p in ports if not port_is_free(p, self.host)]
            if not bound or time.monotonic() > deadline:
                return bound
            time.sleep(0.1)


def own_family(proc: psutil.Process) -> list[psutil.Process]:
    """``proc`` and its descendants in its own session: Celery's prefork pool, not a process of
    the cluster that ``proc`` started. Every process of ``up`` starts in a session of its own
    (:meth:`Supervisor._spawn`), so a worker the keeper restarted is the keeper's child but not of
    its family: stopping the keeper must not take it along (it was SIGKILLed after the keeper's
    grace, without the warm shutdown that ``stop_all`` gives it next)."""
    try:
        sid = os.getsid(proc.pid)
        kids = proc.children(recursive=True)
    except (psutil.Error, OSError):  # gone, or not ours to look at
        return [proc]
    family = [proc]
    for p in kids:
        try:
            if os.getsid(p.pid) == sid:
                family.append(p)
        except OSError:  # exited meanwhile
            pass
    return family


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(ids: list[tuple[int, float]], timeout_s: float,
               popen: subprocess.Popen | None) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if popen is not None:
            popen.poll()
        if all(_same_process(pid, 0.0, since) is None for pid, since in ids):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
