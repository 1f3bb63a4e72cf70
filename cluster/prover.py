"""The prover a prove worker owns: one device, its backend, and the proving keys resident on it.

The task code only calls ``Prover.prove(circuit, z)``; which backend does the arithmetic ("cpu"
now, "cuda" from issue 8) follows from the device kind, so adding the GPU changes nothing here.
Keys stay resident between tasks (the point of routing by residency); when a new key does not
fit in ``worker.device_memory_bytes`` the least recently used ones are dropped first.
"""
from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .errors import DeviceSpecError
from .keys import KeyCache

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
    def __init__(self, device: Device, keys: KeyCache, memory_limit: int | None = None):
        from gpu.backends import get_backend

        self.device, self.keys = device, keys
        # raises gpu BackendError ("the cuda backend is not available here") before any work
        self.backend = get_backend(str(device))  # "cuda:N" opens that device's context here
        self._limit = memory_limit
        self._resident: "OrderedDict[str, tuple[object, object, int]]" = OrderedDict()
        self._lock = threading.Lock()  # the heartbeat thread reads the resident set
        #: one proof on the device at a time: the task's thread and the prove-ahead thread
        self._device_lock = threading.Lock()
        self.ahead = None  # cluster.prefetch.ProveAhead, started by the first prove task

    # -- memory ---------------------------------------------------------------------------------
    def total_memory(self) -> int | None:
        if self._limit:
            return self._limit
        info = getattr(self.backend, "memory_info", None)
        if info is not None:  # a GPU backend: (free, total) of the device
            return int(info(self.device.index)[1])
        import psutil
        return int(psutil.virtual_memory().total)

    def used_memory(self) -> int:
        with self._lock:
            return sum(size for _, _, size in self._resident.values())

    def free_memory(self) -> int | None:
        info = getattr(self.backend, "memory_info", None)
        if info is not None and not self._limit:
            return int(info(self.device.index)[0])
        if self._limit:
            return max(0, self._limit - self.used_memory())
        import psutil
        return int(psutil.virtual_memory().available)

    def resident_names(self) -> list[str]:
        with self._lock:
            return list(self._resident)

    # -- keys -----------------------------------------------------------------------------------
    def load(self, circuit) -> object:
        """The circuit's proving key, loading it (and evicting old keys) when not resident."""
        with self._lock:
            hit = self._resident.get(circuit.name)
            if hit is not None:
                self._resident.move_to_end(circuit.name)
                return hit[1]
        size = self.keys.size(circuit)
        pk = self.keys.load_pk(circuit)
        r1cs = circuit.r1cs()  # build the matrices now, not inside the first timed prove
        # a key made for other matrices is refused here, at load (preload: before ready), and
        # the digest is computed now, not inside the first proof (0.5-1 s at 2^20, measured on
        # the H200 as a gap before partition 0's upload)
        from gpu.groth16.prover import check_key_matches
        check_key_matches(pk, r1cs)
        upload = getattr(self.backend, "load", None)
        if upload is not None:  # a GPU backend: key and matrices resident on the device now
            upload(pk, r1cs)  # DeviceMemoryExhausted (a GpuOutOfMemory) when they do not fit
        with self._lock:
            total = self.total_memory() if self._limit else None
            while total is not None and self._resident and \
                    sum(s for _, _, s in self._resident.values()) + size > total:
                _, (_, old_pk, _) = self._resident.popitem(last=False)
                unload = getattr(self.backend, "unload", None)
                if unload is not None:  # a GPU backend frees the key's device memory now
                    unload(old_pk.circuit_digest)
            self._resident[circuit.name] = (circuit, pk, size)
        return pk

    def is_resident(self, circuit) -> bool:
        with self._lock:
            return circuit.name in self._resident

    def prove_terms(self, circuit, z: np.ndarray, timer=None):
        """The device part of a proof (the backend's five sums), on any thread: the device
        lock serialises it, and a GPU backend's context is made current for it."""
        from contextlib import nullcontext

        from gpu.groth16.prover import check_key_matches
        from gpu.timing import NULL_TIMER

        pk = self.load(circuit)
        r1cs = circuit.r1cs()
        check_key_matches(pk, r1cs)
        z = r1cs.check_assignment_shape(z)
        current = getattr(self.backend, "current", None)
        with self._device_lock, (current() if current else nullcontext()):
            return self.backend.prove_terms(pk, r1cs, z, timer or NULL_TIMER)

    def finish(self, circuit, terms, timer=None) -> bytes:
        """The host part: A, B, C from the sums with fresh r, s, as 192 bytes."""
        from gpu.groth16.prover import combine

        return combine(self.load(circuit), terms, timer=timer).to_bytes()

    def prove(self, circuit, z: np.ndarray, timer=None) -> bytes:
        """A 192-byte Groth16 proof of assignment z for ``circuit``."""
        return self.finish(circuit, self.prove_terms(circuit, z, timer), timer)

    def close(self) -> None:
        """Drop every resident key (device memory goes with them; a GPU backend frees here)."""
        if self.ahead is not None:
            self.ahead.close()
            self.ahead = None
        with self._lock:
            self._resident.clear()
        release = getattr(self.backend, "release", None)
        if release is not None:
            release()
