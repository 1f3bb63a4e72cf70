"""The prover a prove worker owns: one device, its backend, and the proving keys resident on it.

The task code only calls ``Prover.prove(circuit, z)``; which backend does the arithmetic ("cpu"
or "cuda") follows from the device kind, so the backend changes nothing here.

The Prover is the one owner of residency (gpu/backends/base.py): keys stay resident between tasks
(the point of routing by residency), and before a new key goes up it evicts idle keys, least
recently used first, until the new one fits the device's capacity (``worker.device_memory_bytes``,
else what the backend reports). A key a proof is using is never evicted. A key that cannot fit
even on an empty device is refused with DeviceMemoryExhausted, a transient error for the task
layer: another device may hold it.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import re
import threading
import time
from collections import Counter, OrderedDict, deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np

from cluster.errors import DeviceSpecError

from .keys import KeyCache

log = logging.getLogger(__name__)

#: evictions a prover remembers for `zkhive status` (the metrics count all of them)
EVICTIONS_KEPT = 8

#: seconds an attach waits for device memory the ledger granted but the device has not yet
#: freed (a killed prover's context being torn down) before the allocation failure stands
DEAD_MEMORY_WAIT_S = 30.0

_DEVICE = re.compile(r"^(cpu|cuda)(?::(\d{1,3}))?$")


@dataclass(frozen=True)
class Device:
    kind: str   # "cpu" | "cuda"
    index: int

    def __str__(self) -> str:
        return f"{self.kind}:{self.index}"

    def queue(self, host: str) -> str:
        """``prove.<host>.<n>`` for GPUs, ``prove.<host>.cpu<n>`` for CPU provers."""
        return f"prove.{host}.{self.index}" if self.kind == "cuda" else f"prove.{host}.cpu{self.index}"


def parse_device(spec: str) -> Device:
    m = _DEVICE.match(spec or "")
    if not m:
        raise DeviceSpecError(f"device {spec!r} is not cpu, cpu:N or cuda:N")
    return Device(m.group(1), int(m.group(2) or 0))


class Prover:
    def __init__(self, device: Device, keys: KeyCache, memory_limit: int | None = None,
                 in_process=None, *, backend=None, holder=None):
        """``in_process``: a cluster.pipeline.inprocess.InProcessKeys, the sets whose keys this prover
        makes itself instead of reading them from the key cache. ``backend``: one made by the
        caller (a key holder's, in holder mode). ``holder``: a cluster.pipeline.keyholder
        HolderClient: keys come from the device's key holder (CUDA IPC), not from this process."""
        from gpu.backends import get_backend

        self.device, self.keys, self.in_process = device, keys, in_process
        # raises gpu BackendError ("the cuda backend is not available here") before any work
        self.backend = backend or get_backend(str(device))  # "cuda:N" opens that device's context here
        self.holder = holder
        #: keys never evicted for room (a key holder's: those a live prover has attached)
        self.pinned: set[str] = set()
        #: times the key holder went away under this prover (the metrics count them as
        #: evictions of reason "holder"; this counts losses with no key attached too)
        self.holder_losses = 0
        self._limit = memory_limit
        #: name -> (circuit, pk, booked bytes), least recently used first
        self._resident: "OrderedDict[str, tuple[object, object, int]]" = OrderedDict()
        self._busy: set[str] = set()   # keys a proof is using now: never evicted
        self._lock = threading.Lock()  # the heartbeat thread reads the resident set
        #: one proof on the device at a time: the task's thread and the prove-ahead thread, the
        #: most urgent waiter first (a critical partition proved ahead before a normal task's own)
        self._device_lock = PriorityLock()
        self._make_lock = threading.Lock()
        self.ahead = None  # cluster.pipeline.prefetch.ProveAhead, started by the first prove task
        #: name -> {"seconds", "bytes", "gbps"} of the key's last load (registry: status, metrics)
        self._loads: dict[str, dict[str, float]] = {}
        #: the last EVICTIONS_KEPT evictions, oldest first: {"key", "at", "bytes", "reason"}
        #: (registry: `zkhive status` says what left the device, when and why; the metrics count
        #: them by key and reason)
        self._evictions: deque = deque(maxlen=EVICTIONS_KEPT)
        self._evicted: Counter = Counter()  # (key, reason kind) -> evictions since start

    # -- memory ---------------------------------------------------------------------------------
    def capacity(self) -> int | None:
        """Bytes resident keys may fill: the setting, else the backend's; None: no limit."""
        return self._limit or self.backend.capacity()

    def total_memory(self) -> int | None:
        if self._limit:
            return self._limit
        info = self.backend.memory_info()
        if info is not None:  # a GPU backend: (free, total) of the device
            return int(info[1])
        import psutil
        return int(psutil.virtual_memory().total)

    def used_memory(self) -> int:
        with self._lock:
            return sum(size for _, _, size in self._resident.values())

    def free_memory(self) -> int | None:
        """Room for a key: the device's free memory and what the backend gives up for a load
        (the last proof's buffers, kept for the next: gpu/cuda/memory.py BufferPool); routing
        prefers a device with room for a key it does not hold (cluster/pipeline/routing.py)."""
        if self._limit:
            return max(0, self._limit - self.used_memory())
        info = self.backend.memory_info()
        if info is not None:
            return int(info[0]) + int(getattr(self.backend, "pooled_bytes", 0))
        import psutil
        return int(psutil.virtual_memory().available)

    def resident_names(self) -> list[str]:
        with self._lock:
            return list(self._resident)

    # -- keys -----------------------------------------------------------------------------------
    def load(self, circuit, on_evict: Callable[[str], None] | None = None) -> object:
        """The circuit's proving key, made resident (evicting idle keys first) when it is not.
        ``on_evict(name)`` hears of every key dropped for it (the task's timeline)."""
        from gpu.backends.forms import circuit_digest
        from gpu.budget import DeviceMemoryExhausted
        from gpu.errors import GpuOutOfMemory
        from gpu.groth16.errors import CircuitMismatch

        with self._lock:
            hit = self._resident.get(circuit.name)
            if hit is not None:
                self._resident.move_to_end(circuit.name)
                return hit[1]
        if self.holder is not None:
            return self._attach(circuit, on_evict)
        if self.in_process is not None and self.in_process.makes(circuit):
            return self._make(circuit, on_evict)
        from gpu.phases import phase

        t0 = time.time()
        pk = self.keys.load_pk(circuit)
        # the matrices now, not inside the first timed prove: the compact form where the circuit
        # has one (filecoin-32g's full R1CS would be ~30 GB of host memory and 29.8 GiB of
        # device matrices, which no H200 budget admits beside the key)
        r1cs = self._matrices(circuit)
        # a key made for other matrices is refused here, at load (preload: before ready), and
        # the digest is computed now, not inside the first proof (0.5-1 s at 2^20, measured on
        # the H200 as a gap before partition 0's upload)
        with phase("circuit digest"):
            digest = circuit_digest(r1cs)
        if pk.circuit_digest != digest:
            raise CircuitMismatch("the proving key was made for another circuit (circuit digests "
                                  f"{pk.circuit_digest.hex()[:16]} and {digest.hex()[:16]} differ)")
        # the device's one admission, the one a key made in process takes (gpu/budget.py
        # admit_shape: lean where only that fits), refusing with every part named
        with phase("admission"):
            need = self.backend.admit(pk, r1cs) or self.keys.size(circuit)
        limit = self.capacity()
        if limit is not None and need > limit:
            raise DeviceMemoryExhausted(
                f"the proving key of {circuit.name} needs {need} bytes resident, more than device "
                f"{self.device} can hold ({limit} bytes)", device=str(self.device), shape=need)
        while limit is not None and self.used_memory() + need > limit:
            if not self._evict_one(on_evict, f"room for {circuit.name} ({need} bytes)"):
                break  # only busy keys left: let the backend's ledger decide
        while True:
            try:
                self.backend.load(pk, r1cs)  # a GPU backend: key and matrices on the device now
                break
            except GpuOutOfMemory:
                # the device's ledger (other processes, proofs in flight) has no room yet:
                # drop one more idle key and try again; with none left the error stands
                if not self._evict_one(on_evict, f"room for {circuit.name} (the device refused it)"):
                    raise
        need = self.backend.held_bytes(pk.circuit_digest) or need
        m = getattr(pk, "mirror", None)   # read through its compressed mirror (keys.py)
        through = m is not None and m.refused is None
        try:   # the bytes read: a partial mirror's and the .params' sections it lacks
            nbytes = m.load_bytes(pk.h_query.lay) if through else self.keys.size(circuit)
        except OSError:
            nbytes = 0
        self._loaded(circuit.name, time.time() - t0, nbytes,
                     m.share(pk.h_query.lay) if through else 0.0)
        if hasattr(self.keys, "mirror_later"):
            self.keys.mirror_later(pk)   # a checked .params load: its mirror, in the background
        with self._lock:
            self._resident[circuit.name] = (circuit, pk, need)
        return pk

    def _loaded(self, name: str, seconds: float, nbytes: int, mirror: float = 0.0) -> None:
        with self._lock:
            self._loads[name] = {"seconds": round(seconds, 3), "bytes": int(nbytes),
                                 "gbps": nbytes / 1e9 / seconds if seconds > 0 else 0.0,
                                 "from_mirror": float(mirror)}

    def key_loads(self) -> dict[str, dict[str, float]]:
        """The last load of each resident key: seconds, the file's bytes, GB/s, whether it was
        read through its compressed mirror (from_mirror: the part of the .params' query bytes the
        mirror held, 1 all of them, 0 none), and where this process writes its mirror:
        mirror_progress 0..1 (1 written; -1 the writing failed), mirror_share the part of the
        .params the written mirror holds (< 1: the disk had room for only some sections)."""
        with self._lock:
            out = {n: dict(v) for n, v in self._loads.items() if n in self._resident}
        for n, st in self._mirror_states().items():
            out[n]["mirror_progress"] = -1.0 if st.get("state") == "failed" else float(st.get("progress", 0.0))
            if st.get("share") is not None:
                out[n]["mirror_share"] = float(st["share"])
        return out

    def mirror_errors(self) -> dict[str, str]:
        """{resident key: why its .params mirror was not written} (``key_loads``' -1)."""
        return {n: str(st.get("error") or "unknown")[:500]
                for n, st in self._mirror_states().items() if st.get("state") == "failed"}

    def _mirror_states(self) -> dict[str, dict]:
        """{loaded resident key: the state of the .params mirror this process writes for it}
        (KeyCache.mirrors), for the keys that have one."""
        with self._lock:
            pks = {n: self._resident[n][1] for n in self._loads if n in self._resident}
        out = {}
        for n, pk in pks.items():
            path = getattr(pk, "params_path", None)
            st = getattr(self.keys, "mirrors", {}).get(path.name) if path is not None else None
            if st:
                out[n] = st
        return out

    def _make(self, circuit, on_evict=None) -> object:
        """Make the key in this process ([srs] in_process, cluster/pipeline/inprocess.py), evicting idle
        keys while the device refuses it; the vk goes to the key cache."""
        from gpu.budget import DeviceMemoryExhausted
        from gpu.errors import GpuOutOfMemory

        with self._make_lock:  # the task's thread and the prove-ahead thread: one setup
            with self._lock:
                hit = self._resident.get(circuit.name)
                if hit is not None:
                    return hit[1]
            t0 = time.time()
            while True:
                try:
                    resident, _vk = self.in_process.make(self.backend, circuit)
                    break
                except (GpuOutOfMemory, DeviceMemoryExhausted) as e:
                    if not self._evict_one(on_evict, f"room for {circuit.name} (made in process: "
                                                     f"{type(e).__name__})"):
                        raise
            need = (self.backend.held_bytes(resident.circuit_digest)
                    or _resident_size(resident) or _shape_bytes(circuit))
            self._loaded(circuit.name, time.time() - t0, 0)
            with self._lock:
                self._resident[circuit.name] = (circuit, resident, need)
            return resident

    def _attach(self, circuit, on_evict=None) -> object:
        """The key from the device's key holder (cluster/pipeline/keyholder.py): made or loaded
        there (once), mapped here; while the holder or this process's ledger share has no room,
        this prover's idle keys are released first."""
        from cluster.errors import HolderError, HolderGone
        from gpu.budget import DeviceMemoryExhausted
        from gpu.errors import GpuOutOfMemory

        with self._make_lock:  # the task's thread and the prove-ahead thread: one attach
            with self._lock:
                hit = self._resident.get(circuit.name)
                if hit is not None:
                    return hit[1]
            t0 = time.time()
            while True:
                try:
                    manifest = self.holder.hold(circuit.name)
                    pk = self.backend.adopt(manifest, self._matrices(circuit))
                    break
                except HolderGone as e:
                    # died between two requests: the keeper starts it again within seconds
                    log.warning("%s: %s; waiting for the key holder", self.device, e)
                    self.holder.wait(self.holder.timeout_s)
                except (GpuOutOfMemory, HolderError) as e:
                    room = isinstance(e, GpuOutOfMemory) or "needs" in str(e) or "budget" in str(e)
                    if room and self._evict_one(on_evict, f"room for {circuit.name} "
                                                          f"(held: {type(e).__name__})"):
                        continue
                    if (isinstance(e, GpuOutOfMemory) and not isinstance(e, DeviceMemoryExhausted)
                            and time.time() - t0 < DEAD_MEMORY_WAIT_S):
                        # booked, but the device has not yet given back the memory of the prover
                        # this one replaces (SIGKILLed a moment ago: its context is torn down)
                        time.sleep(0.2)
                        continue
                    if isinstance(e, HolderError) and room:
                        raise DeviceMemoryExhausted(f"key holder: {e}", device=str(self.device)) from None
                    raise
            need = self.backend.held_bytes(pk.circuit_digest) or 0
            self._loaded(circuit.name, time.time() - t0, 0)
            log.info("attached the proving key of %s from the key holder in %.2f s",
                     circuit.name, time.time() - t0)
            with self._lock:
                self._resident[circuit.name] = (circuit, pk, need)
            return pk

    def holder_lost(self, reason: str) -> None:
        """The key holder went away (its watch line ended): every attached key is dropped here
        (unmapped once no proof is running on the device), seen in status (evictions, reason
        "key holder gone"), the log and the metrics; the next proof asks the restarted holder."""
        self.holder_losses += 1
        log.warning("%s: %s; dropping the keys attached from it", self.device, reason)
        current = getattr(self.backend, "current", None)
        from contextlib import nullcontext
        with self._device_lock.hold(0), (current() if current else nullcontext()):
            with self._lock:
                names = list(self._resident)
            for name in names:
                with self._lock:
                    hit = self._resident.pop(name, None)
                if hit is None:
                    continue
                self.backend.unload(hit[1].circuit_digest)
                self._evicted_now(name, hit[2], f"key holder gone ({reason})")

    def _evict_one(self, on_evict=None, reason: str = "room") -> bool:
        """Drop the least recently used idle key; False when there is none. ``reason``: why,
        as status shows it ("room for NAME (N bytes)")."""
        with self._lock:
            name = next((n for n in self._resident if n not in self._busy and n not in self.pinned),
                        None)
            if name is None:
                return False
            _, pk, size = self._resident.pop(name)
        self.backend.unload(pk.circuit_digest)  # a GPU backend frees the key's device memory now
        self._release_held(name)
        self._evicted_now(name, size, reason)
        log.info("evicted the proving key of %s from %s: %s", name, self.device, reason)
        if on_evict is not None:
            on_evict(name)
        return True

    def evict(self, name: str) -> int | None:
        """Drop ``name``'s proving key on request (the gateway's EvictSRS): the bytes it held,
        None when it was not resident; ValueError while a proof is using it."""
        with self._lock:
            if name not in self._resident:
                return None
            if name in self._busy:
                raise ValueError(f"the proving key of {name} is in use by a proof on {self.device}")
            _, pk, size = self._resident.pop(name)
        self.backend.unload(pk.circuit_digest)
        self._release_held(name)
        self._evicted_now(name, size, "request (EvictSRS / zkhive evict)")
        log.info("evicted the proving key of %s from %s on request", name, self.device)
        return size

    def _release_held(self, name: str) -> None:
        """An eviction goes through the key holder: it frees the key when no other prover
        holds it (a holder that is gone has nothing to free)."""
        if self.holder is None:
            return
        from cluster.errors import HolderError
        try:
            self.holder.release(name)
        except HolderError as e:
            log.warning("releasing %s at the key holder: %s", name, e)

    def _evicted_now(self, name: str, size: int, reason: str) -> None:
        kind = ("request" if reason.startswith("request")
                else "holder" if reason.startswith("key holder gone") else "room")
        with self._lock:
            self._evictions.append({"key": name, "at": time.time(), "bytes": int(size or 0),
                                    "reason": reason})
            self._evicted[(name, kind)] += 1

    def evictions(self) -> list[dict]:
        """The last evictions, oldest first: key, at (epoch s), bytes, reason."""
        with self._lock:
            return [dict(e) for e in self._evictions]

    def evicted_counts(self) -> dict[str, int]:
        """Evictions since start by "key/reason kind" (room, request): the metrics' counter."""
        with self._lock:
            return {f"{k}/{r}": n for (k, r), n in self._evicted.items()}

    def is_resident(self, circuit) -> bool:
        with self._lock:
            return circuit.name in self._resident

    def prove_terms(self, circuit, z, timer=None,
                    on_evict: Callable[[str], None] | None = None, priority: int | None = None):
        """The device part of a proof (the backend's five sums), on any thread: the device
        lock serialises it (the task's thread and the prove-ahead thread; waiters of a lower
        ``priority`` number, more urgent, go first), and a GPU backend's context is made current
        for it. The key is busy (never evicted) meanwhile."""
        from contextlib import nullcontext

        from gpu.timing import NULL_TIMER

        from synthesis import assignment

        pk = self.load(circuit, on_evict)
        r1cs = self._matrices(circuit)
        if not isinstance(z, np.ndarray) and not self.backend.accepts_compact:
            # a backend that cannot take the compact form gets the Fr vector, expanded here
            z = z.to_vec() if isinstance(z, assignment.Compact) else assignment.decode(z)
        if isinstance(z, np.ndarray):
            z = r1cs.check_assignment_shape(z) if hasattr(r1cs, "check_assignment_shape") else z
        else:  # the encoded blob (checked by cluster.pipeline.assignments), staged, or a Compact
            blob = z.blob if getattr(z, "is_staged_assignment", False) else z
            count = len(z) if isinstance(z, assignment.Compact) else assignment._HEADER.unpack_from(blob)[1]
            if count != _num_variables(circuit):
                raise assignment.AssignmentError(f"assignment has {count} values, the circuit has "
                                                 f"{_num_variables(circuit)} variables")
        current = getattr(self.backend, "current", None)
        with self._lock:
            self._busy.add(circuit.name)
        try:
            with self._device_lock.hold(9 if priority is None else priority), \
                    (current() if current else nullcontext()):
                return self.backend.prove_terms(pk, r1cs, z, timer or NULL_TIMER)
        finally:
            with self._lock:
                self._busy.discard(circuit.name)

    def stage(self, circuit, z):
        """Assignment z prepared for the device ahead of its proof (``Backend.stage``: the CUDA
        backend lays a blob's planes out in page-locked memory), on the calling thread, outside
        the device lock: the prove-ahead fetcher runs it while the device proves the partition
        before. Returns what prove_terms then takes (z itself where nothing is prepared)."""
        return self.backend.stage(z, _num_variables(circuit))

    def _matrices(self, circuit):
        """What the backend proves against: the circuit itself where it has compact matrices
        (sdr-32g's full R1CS would be ~32 GB on the host; the CUDA backend holds the compact
        form, the CPU backend expands it once), for a key made in process and a key from a file
        alike, else the full R1CS."""
        if hasattr(circuit, "compact_r1cs"):
            return circuit
        return circuit.r1cs()

    def finish(self, circuit, terms, timer=None) -> bytes:
        """The host part: A, B, C from the sums with fresh r, s, as 192 bytes (off the device's
        critical path when the next partition was proved ahead)."""
        from gpu.groth16.prover import combine

        return combine(self.load(circuit), terms, timer=timer).to_bytes()

    def prove(self, circuit, z, timer=None, on_evict: Callable[[str], None] | None = None) -> bytes:
        """A 192-byte Groth16 proof of assignment z for ``circuit``."""
        return self.finish(circuit, self.prove_terms(circuit, z, timer, on_evict), timer)

    def close(self) -> None:
        """Drop every resident key and free the device (the backend's release)."""
        if self.ahead is not None:
            self.ahead.close()
            self.ahead = None
        if self.holder is not None:
            self.holder.close()  # the keys stay with the holder: only this process's maps go
        with self._lock:
            self._resident.clear()
        self.backend.release()


class PriorityLock:
    """A lock whose waiters get it most urgent first (the lowest priority number), then in the
    order they came; Python's Lock hands it to any waiter."""

    def __init__(self):
        self._cond = threading.Condition()
        self._held = False
        self._waiting: list[tuple[int, int]] = []  # a heap of (priority, arrival)
        self._arrivals = itertools.count()

    @contextmanager
    def hold(self, priority: int = 9):
        me = (priority, next(self._arrivals))
        with self._cond:
            heapq.heappush(self._waiting, me)
            while self._held or self._waiting[0] != me:
                self._cond.wait()
            heapq.heappop(self._waiting)
            self._held = True
        try:
            yield
        finally:
            with self._cond:
                self._held = False
                self._cond.notify_all()


def _resident_size(resident) -> int:
    """Bytes a key made in process holds: the backend's own count where it keeps one, else the
    sum of its point arrays (the CPU backend's key lives in host memory)."""
    n = getattr(resident, "nbytes", None)
    if isinstance(n, int):
        return n
    total = 0
    for name in ("a_query", "b_g1_query", "b_g2_query", "h_query", "l_query"):
        q = getattr(resident, name, None)
        total += int(getattr(q, "nbytes", 0) or 0)
    return total


def _num_variables(circuit) -> int:
    # the compact form's count where the circuit has one (no full R1CS built for it)
    compact = getattr(circuit, "compact_r1cs", None)
    return compact().num_variables if compact else circuit.r1cs().num_variables


def _shape_bytes(circuit) -> int:
    """The ledger's estimate of a key kept on the device (a key made there has no host arrays)."""
    from .devshare import key_shape

    shape = key_shape(circuit)
    return shape.resident_bytes() if shape is not None else 0
