"""Device-memory admission: several prover processes on one device never run it out of memory.

The daemon this replaces crashed when two workers each staged 12 GiB on a 16 GiB card. Here every
process that uses a device books what it holds in one ledger per device, shared through a file
under ``$ZKHIVE_CACHE_DIR/budget/`` and guarded by ``flock``:

- *resident* bytes (proving keys, matrices) are booked when a key is loaded and refused, with a
  message that says what is in use and by whom, when they would not fit;
- each proof's *working set* is booked for the length of the proof; a proof whose working set
  does not fit now waits until others finish (or times out), and one that can never fit is
  refused at once.

Entries are keyed by (pid, process start time), so the booking of a process that died (SIGKILL,
OOM killer) is dropped the next time anyone reads the ledger, and a recycled PID is never
mistaken for the old owner.
"""
from __future__ import annotations

import fcntl
import json
import time
from contextlib import contextmanager
from pathlib import Path

import psutil

from gpu.errors import GpuOutOfMemory


class DeviceMemoryExhausted(GpuOutOfMemory):
    """A booking does not fit the device's budget (now, or ever)."""


def _me() -> str:
    p = psutil.Process()
    return f"{p.pid}:{p.create_time():.3f}"


def _alive(key: str) -> bool:
    """Same PID, same start time, and not a zombie (a killed worker not yet reaped holds no
    device memory)."""
    pid, _, start = key.partition(":")
    try:
        p = psutil.Process(int(pid))
        return abs(p.create_time() - float(start)) < 0.01 and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, ValueError):
        return False
    except psutil.AccessDenied:
        return True


def _fmt(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB"


class DeviceBudget:
    def __init__(self, device_id: str, capacity: int, *, ledger_dir: Path | None = None,
                 free_bytes=None):
        """``capacity``: bytes all zkhive processes together may book on the device.
        ``free_bytes``: optional callable returning the device's real free memory, consulted
        as a second check (memory taken by processes that are not ours)."""
        if capacity <= 0:
            raise ValueError("device memory capacity must be positive")
        self.device_id, self.capacity, self._free_bytes = device_id, int(capacity), free_bytes
        from arith.native import cache_dir

        root = Path(ledger_dir) if ledger_dir else cache_dir("budget")
        root.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in device_id)
        self.path = root / f"{safe}.json"
        self._key = _me()

    # -- ledger -------------------------------------------------------------------------------
    @contextmanager
    def _ledger(self):
        with open(self.path, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.seek(0)
                text = f.read()
                try:
                    book = json.loads(text) if text.strip() else {}
                except json.JSONDecodeError:
                    book = {}  # a torn write from a crashed process: start over, bookings re-made
                book = {k: v for k, v in book.items() if k == self._key or _alive(k)}
                yield book
                f.seek(0)
                f.truncate()
                f.write(json.dumps(book))
                f.flush()
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    @staticmethod
    def _used(book) -> int:
        return sum(e.get("resident", 0) + sum(e.get("working", {}).values()) for e in book.values())

    def usage(self) -> dict:
        with self._ledger() as book:
            return {"capacity": self.capacity, "used": self._used(book),
                    "processes": {k: dict(v) for k, v in book.items()}}

    def _describe(self, book) -> str:
        parts = [f"pid {k.split(':')[0]}: {_fmt(v.get('resident', 0))} resident, "
                 f"{_fmt(sum(v.get('working', {}).values()))} in proofs" for k, v in book.items()]
        return "; ".join(parts) or "nothing booked"

    # -- resident data ------------------------------------------------------------------------
    def reserve_resident(self, nbytes: int, what: str) -> None:
        with self._ledger() as book:
            used = self._used(book)
            if used + nbytes > self.capacity:
                raise DeviceMemoryExhausted(
                    f"{what} needs {_fmt(nbytes)} on device {self.device_id}, but only "
                    f"{_fmt(self.capacity - used)} of its {_fmt(self.capacity)} budget is free "
                    f"({self._describe(book)}); unload a key, lower gpu_workers_per_device, or use "
                    "a device with more memory", device=self.device_id, shape=nbytes)
            mine = book.setdefault(self._key, {})
            mine["resident"] = mine.get("resident", 0) + int(nbytes)

    def release_resident(self, nbytes: int) -> None:
        with self._ledger() as book:
            mine = book.setdefault(self._key, {})
            mine["resident"] = max(0, mine.get("resident", 0) - int(nbytes))

    # -- per-proof working sets ---------------------------------------------------------------
    @contextmanager
    def working_set(self, nbytes: int, what: str, *, timeout: float = 600.0, poll: float = 0.05):
        """Book ``nbytes`` for the duration of the block; wait while it does not fit."""
        token = f"{what}:{time.monotonic_ns()}"
        deadline = time.monotonic() + timeout
        while True:
            with self._ledger() as book:
                used = self._used(book)
                own_resident = book.get(self._key, {}).get("resident", 0)
                if nbytes > self.capacity - own_resident:
                    raise DeviceMemoryExhausted(
                        f"{what} needs a working set of {_fmt(nbytes)}, more than device "
                        f"{self.device_id} can ever give it ({_fmt(self.capacity)} budget, "
                        f"{_fmt(own_resident)} resident in this worker)",
                        device=self.device_id, shape=nbytes)
                real_free = self._free_bytes() if self._free_bytes else None
                if used + nbytes <= self.capacity and (real_free is None or nbytes <= real_free):
                    book.setdefault(self._key, {}).setdefault("working", {})[token] = int(nbytes)
                    break
            if time.monotonic() > deadline:
                raise DeviceMemoryExhausted(
                    f"{what}: waited {timeout:.0f} s for {_fmt(nbytes)} on device {self.device_id} "
                    f"({self._describe(book)})", device=self.device_id, shape=nbytes)
            time.sleep(poll)
        try:
            yield
        finally:
            with self._ledger() as book:
                book.setdefault(self._key, {}).setdefault("working", {}).pop(token, None)

    def leave(self) -> None:
        """Drop every booking of this process (worker shutdown)."""
        with self._ledger() as book:
            book.pop(self._key, None)
