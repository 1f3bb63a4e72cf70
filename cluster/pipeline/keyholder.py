"""The key holder: one process per CUDA device that makes or loads proving keys, keeps them
resident, and lends them to the device's provers through CUDA IPC, so that a prover that crashes,
is restarted by the keeper or is replaced by a new build attaches to the key it left instead of
making it again (issue 40: a SIGKILLed prover took 28.3 s to its first partition, ~21 s of it the
2^27 key made again on the device; from a ``.params`` file the reload alone is ~86 s).

``[gpu] key_holder = true`` (``ZKHIVE_GPU__KEY_HOLDER``; off by default): ``zkhive up`` starts
``keyholder-cudaN`` before the provers of device N, the keeper restarts it like any process, and
a prover of that device asks it for keys instead of loading them itself:

- the holder makes or loads a key the way a prover would (``Prover.load`` over a CUDA backend in
  holder mode: an in-process development key, a ``.params`` / ``param_cache`` file; the
  ``srs.preload`` sets at start), booking in the device's ledger only the key itself (matrices
  and base sets, gpu/budget.py ``ProofShape.key_bytes``) and building no proving engines;
- a prover's ``hold`` gets the key's manifest (gpu/backends/cuda.py ``CudaBackend.export``: the
  key's host part and an IPC handle per allocation), maps it (``CudaBackend.adopt``) and books
  its own parts (``ProofShape.process_bytes``: NTT tables, workspaces, tail and dense engines);
- a key a live prover holds is pinned (never evicted for room); ``release`` unpins it and frees
  it when no other prover holds it (a prover's eviction goes through here); a prover that dies
  unpins its keys, which stay resident for the next one;
- each prover keeps a ``watch`` connection open: when the holder dies it sees the end of it, drops
  its attached keys (log, status evictions, metrics: reason "key holder gone"), waits for the
  keeper's restart and asks again (the new holder makes or loads the key again).

The protocol: a unix socket ``<run dir>/keyholder-cudaN.sock`` (mode 0600, peers of another uid
refused), one JSON object a line each way, at most ``MAX_REQUEST`` bytes a request::

    {"op": "hold", "params": NAME}    -> {"ok": true, "manifest": {...}, "seconds": S}
    {"op": "release", "params": NAME} -> {"ok": true, "released": BYTES | null}
    {"op": "list"}                    -> {"ok": true, "pid": P, "device": "cuda:N", "keys":
                                          {NAME: {"bytes": BOOKED, "provers": [PID], "load": {...}}}}
    {"op": "watch"}                   -> {"ok": true, "pid": P}, then the line stays open
    anything else                     -> {"ok": false, "error": ONE LINE naming what is wrong}
"""
from __future__ import annotations

import json
import logging
import os
import re
import socket
import socketserver
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cluster.errors import HolderError, HolderGone  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

#: bytes of one request line (names and an op: a few hundred bytes; anything longer is refused)
MAX_REQUEST = 4096
#: bytes of one reply line (a manifest: ~100 handles of 64 bytes hex and the vk, a few KiB)
MAX_REPLY = 16 << 20
OPS = {"hold": {"params"}, "release": {"params"}, "list": set(), "watch": set()}
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def socket_path(run_dir, device) -> Path:
    """``<run dir>/keyholder-cudaN.sock``: where device N's holder listens."""
    return Path(run_dir) / f"keyholder-{str(device).replace(':', '')}.sock"


def service_name(device) -> str:
    return f"keyholder-{str(device).replace(':', '')}"


def parse_request(line: bytes) -> dict:
    """The request of one line, validated: a JSON object with a known ``op`` and exactly that
    op's fields, names of at most 64 characters of [a-z0-9._-]. ValueError names what is wrong."""
    if len(line) > MAX_REQUEST:
        raise ValueError(f"request of {len(line)} bytes, more than {MAX_REQUEST}")
    try:
        req = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"request is not JSON ({e.__class__.__name__} at {getattr(e, 'pos', 0)})") from None
    if not isinstance(req, dict):
        raise ValueError(f"request is a JSON {type(req).__name__}, not an object")
    op = req.get("op")
    if op not in OPS:
        raise ValueError(f"op {str(op)[:32]!r} is not one of {', '.join(sorted(OPS))}")
    extra = set(req) - OPS[op] - {"op"}
    if extra:
        raise ValueError(f"op {op}: unknown field {sorted(extra)[0][:32]!r}")
    for field in OPS[op]:
        v = req.get(field)
        if not isinstance(v, str) or not _NAME.match(v):
            shown = "missing" if v is None else repr(str(v)[:32])
            raise ValueError(f"op {op}: field {field} {shown} is not a parameter set name "
                             "(1-64 of a-z 0-9 . _ -)")
    return req


def _peer(sock) -> tuple[int, int]:
    """(pid, uid) of a unix socket's peer (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return pid, uid


class KeyHolder:
    """The holder's state: a Prover over a holder-mode CUDA backend (``prover``: its keys, LRU,
    ledger) whose device work runs on one thread, and the pins of live provers."""

    def __init__(self, device, prover, work: ThreadPoolExecutor):
        """``work``: the one thread every CUDA call runs on (the backend's context is current
        there only; ``prover`` was made on it)."""
        self.device, self.prover, self.work = device, prover, work
        self.pins: dict[str, set[int]] = {}   # params -> pids of provers holding it
        self._lock = threading.Lock()

    # -- requests -----------------------------------------------------------------------------
    def hold(self, name: str, pid: int) -> dict:
        from synthesis.circuits import get_circuit
        try:
            circuit = get_circuit(name)
        except KeyError as e:
            raise ValueError(str(e).strip("'\"")) from None
        t0 = time.time()
        with self._lock:  # pinned first: an eviction for another key's room never takes it
            self.pins.setdefault(name, set()).add(pid)
            self._sync_pins()
        try:
            manifest = self.work.submit(self._hold, circuit).result()
        except BaseException:
            self.unpin(name, pid)
            raise
        return {"manifest": manifest, "seconds": round(time.time() - t0, 3)}

    def _hold(self, circuit) -> dict:
        if not hasattr(self.prover.backend, "export"):
            raise HolderError(f"device {self.device}: the {self.prover.backend.name} backend keeps "
                              "keys in host memory, nothing to lend through CUDA IPC")
        pk = self.prover.load(circuit)
        return self.prover.backend.export(pk)

    def release(self, name: str, pid: int) -> int | None:
        """Unpin ``name`` for ``pid``; free it when no live prover holds it (the bytes freed)."""
        left = self.unpin(name, pid)
        if left:
            return None
        return self.work.submit(self.prover.evict, name).result()

    def unpin(self, name: str, pid: int) -> set[int]:
        with self._lock:
            self.pins.get(name, set()).discard(pid)
            self._sync_pins()
            return set(self.pins.get(name, ()))

    def forget(self, pid: int) -> None:
        """A prover's watch ended (it exited or died): its keys stay, evictable for room."""
        with self._lock:
            for held in self.pins.values():
                held.discard(pid)
            self._sync_pins()

    def _sync_pins(self) -> None:
        """The prover's pinned set from ``pins`` (under ``_lock``), pins of provers no longer
        alive dropped first (one that died without its watch line closing: never a key stuck)."""
        for name in list(self.pins):
            self.pins[name] = {p for p in self.pins[name] if _pid_alive(p)}
            if not self.pins[name]:
                del self.pins[name]
        self.prover.pinned = set(self.pins)

    def listing(self) -> dict:
        loads = self.prover.key_loads()
        with self._lock:
            pins = {k: sorted(v) for k, v in self.pins.items()}
        with self.prover._lock:
            sizes = {n: size for n, (_, _, size) in self.prover._resident.items()}
        return {"pid": os.getpid(), "device": str(self.device),
                "keys": {n: {"bytes": b, "provers": pins.get(n, []), "load": loads.get(n, {})}
                         for n, b in sizes.items()}}

    def preload(self, names) -> None:
        """Make or load each set now; one that fails is logged and left to the provers' ``hold``
        (which then says why in its one line): the holder keeps serving the others."""
        from synthesis.circuits import get_circuit
        for name in names:
            t0 = time.time()
            try:
                self.work.submit(self.prover.load, get_circuit(name)).result()
            except Exception as e:
                log.error("could not hold the proving key of %s: %s", name,
                          str(e).splitlines()[0] if str(e) else type(e).__name__)
                continue
            log.info("holding the proving key of %s (%.1f s)", name, time.time() - t0)

    def close(self) -> None:
        self.work.submit(self.prover.close).result()
        self.work.shutdown()


def _pid_alive(pid: int) -> bool:
    import psutil
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        holder: KeyHolder = self.server.holder  # type: ignore[attr-defined]
        pid, uid = _peer(self.connection)
        if uid != os.getuid():
            self._reply({"ok": False, "error": f"peer uid {uid} is not this holder's ({os.getuid()})"})
            return
        while True:
            line = self.rfile.readline(MAX_REQUEST + 1)
            if not line:
                return
            if len(line) > MAX_REQUEST and not line.endswith(b"\n"):
                self._reply({"ok": False, "error": f"request longer than {MAX_REQUEST} bytes"})
                return
            try:
                req = parse_request(line)
                op = req["op"]
                if op == "watch":
                    self._reply({"ok": True, "pid": os.getpid()})
                    try:
                        while self.rfile.read(1):  # held open until either end goes
                            pass
                    finally:
                        holder.forget(pid)
                    return
                if op == "hold":
                    out = holder.hold(req["params"], pid)
                elif op == "release":
                    out = {"released": holder.release(req["params"], pid)}
                else:
                    out = holder.listing()
                self._reply({"ok": True, **out})
            except Exception as e:  # one line back; the holder keeps serving
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                log.warning("refused %s from pid %d: %s", line[:80], pid, msg)
                self._reply({"ok": False, "error": msg})

    def _reply(self, obj: dict) -> None:
        self.wfile.write(json.dumps(obj).encode() + b"\n")
        self.wfile.flush()


class HolderServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, holder: KeyHolder):
        path = Path(path)
        if len(str(path).encode()) > 107:
            raise HolderError(f"key holder socket {path}: over the 107 bytes a unix socket path may have")
        if path.exists() or path.is_symlink():
            probe = socket.socket(socket.AF_UNIX)
            try:
                probe.connect(str(path))
                raise HolderError(f"a key holder already answers on {path}")
            except (ConnectionRefusedError, FileNotFoundError):
                path.unlink()  # a dead holder's socket
            finally:
                probe.close()
        self.holder = holder
        old = os.umask(0o177)  # created 0600: only this uid's provers connect
        try:
            super().__init__(str(path), _Handler)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        self.path = path


def serve(device_spec: str, run_dir, settings) -> None:
    """The ``zkhive keyholder --device cuda:N`` process: the socket answers at once; the
    preloaded sets load on the device thread (a ``hold`` of one waits for it)."""
    import importlib
    import signal

    from .inprocess import InProcessKeys
    from .keys import KeyCache
    from .prover import Prover, parse_device

    device = parse_device(device_spec)
    if device.kind != "cuda":
        raise HolderError(f"device {device}: a key holder lends device memory through CUDA IPC: cuda:N only")
    try:
        from gpu.backends.cuda import CudaBackend
    except ImportError as e:
        raise HolderError(f"device {device}: the cuda backend is not available here ({e})") from None
    for mod in settings.worker.circuit_modules:
        importlib.import_module(mod)
    keys = KeyCache.from_settings(settings)
    made = InProcessKeys(settings.srs, keys)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="keyholder-device")

    def make_prover():  # on the device thread: the backend's context is current there
        return Prover(device, keys, settings.worker.device_memory_bytes, in_process=made,
                      backend=CudaBackend(device.index, holder=True))
    try:
        holder = KeyHolder(device, pool.submit(make_prover).result(), pool)
    except Exception as e:  # no such device, no driver: one line, not a traceback
        pool.shutdown()
        raise HolderError(f"device {device}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    server = HolderServer(socket_path(run_dir, device), holder)
    stop = threading.Event()

    def on_term(*_):
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    threading.Thread(target=server.serve_forever, name="keyholder-socket", daemon=True).start()
    log.info("key holder of %s listening on %s (pid %d)", device, server.path, os.getpid())
    try:
        holder.preload(settings.srs.preload)
        stop.wait()
    finally:
        server.server_close()
        server.path.unlink(missing_ok=True)
        holder.close()


# -- the prover's side ---------------------------------------------------------------------------

class HolderClient:
    """A prover's line to its device's holder: ``hold``/``release``/``list`` on short
    connections, and ``watch(on_lost)``: a thread that keeps a connection open and calls
    ``on_lost(reason)`` once when the holder goes, then waits for one to answer again."""

    def __init__(self, path, *, timeout_s: float = 900.0):
        self.path, self.timeout_s = Path(path), float(timeout_s)
        self._watch = None
        self._closing = threading.Event()
        self.holder_pid: int | None = None

    def call(self, op: str, timeout_s: float | None = None, **fields) -> dict:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(self.timeout_s if timeout_s is None else timeout_s)
        try:
            try:
                s.connect(str(self.path))
            except (FileNotFoundError, ConnectionRefusedError) as e:
                raise HolderGone(f"no key holder answers on {self.path} ({type(e).__name__})") from None
            s.sendall(json.dumps({"op": op, **fields}).encode() + b"\n")
            f = s.makefile("rb")
            line = f.readline(MAX_REPLY)
            if not line:
                raise HolderGone(f"the key holder on {self.path} closed the connection during {op}")
            reply = json.loads(line)
        except socket.timeout:
            raise HolderError(f"the key holder on {self.path} did not answer {op} in "
                              f"{s.gettimeout():.0f} s") from None
        finally:
            s.close()
        if not reply.get("ok"):
            raise HolderError(str(reply.get("error")))  # the task layer says "key holder: ..."
        return reply

    def hold(self, name: str) -> dict:
        return self.call("hold", params=name)["manifest"]

    def release(self, name: str):
        return self.call("release", params=name).get("released")

    def listing(self) -> dict:
        return self.call("list", timeout_s=10.0)

    def wait(self, timeout_s: float) -> int:
        """Block until a holder answers ``list``; its pid (HolderGone after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return int(self.listing()["pid"])
            except HolderGone:
                if time.monotonic() > deadline or self._closing.is_set():
                    raise
                time.sleep(0.05)

    def watch(self, on_lost, on_back=None) -> None:
        """Start the watch thread: ``on_lost(reason)`` when the holder's watch line ends,
        ``on_back(pid)`` when a holder answers again."""
        self._watch = threading.Thread(target=self._watch_loop, args=(on_lost, on_back),
                                       name="keyholder-watch", daemon=True)
        self._watch.start()

    def _watch_loop(self, on_lost, on_back) -> None:
        first = True
        while not self._closing.is_set():
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(str(self.path))
                s.sendall(b'{"op": "watch"}\n')
                f = s.makefile("rb")
                reply = json.loads(f.readline(MAX_REPLY) or b"{}")
                if not reply.get("ok"):
                    raise HolderGone(str(reply.get("error")))
                pid = int(reply["pid"])
                if not first and on_back is not None:
                    on_back(pid)
                self.holder_pid, first = pid, False
                while s.recv(1):  # the holder never writes again: this returns at its end
                    pass
            except (OSError, ValueError, HolderError):
                if first:  # not up yet at the prover's start: keep trying
                    time.sleep(0.05)
                    continue
            finally:
                s.close()
            if self._closing.is_set():
                return
            if self.holder_pid is not None:
                gone, self.holder_pid = self.holder_pid, None
                on_lost(f"key holder pid {gone} gone")
            first = False
            time.sleep(0.05)

    def close(self) -> None:
        self._closing.set()
