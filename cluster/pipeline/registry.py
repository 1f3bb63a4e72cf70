"""The worker registry and device locks, kept alive by a heartbeat.

Each worker owns one Redis key ``zkhive:worker:<id>`` holding its ``WorkerInfo`` as JSON with a
TTL (``worker.registry_ttl_s``); its heartbeat rewrites it every ``worker.heartbeat_s``. A worker
that dies simply stops refreshing and drops out: no one has to notice the death for routing to
stop sending it work. ``workers(redis)`` is what routing, ``zkhive status`` and ``zkhive up``'s
readiness poll read.

A prover also holds a device lock ``zkhive:devlock:<host>:<device>:<slot>`` (SET NX with a TTL,
refreshed only by its owner token), so a second prover on the same device is refused with a
message naming the holder. A lock whose holder is dead is taken over: after its TTL by anyone,
at once when the holder was a process on this host that no longer exists.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from typing import Callable, Literal

from pydantic import BaseModel, Field

from cluster.errors import DeviceBusy

log = logging.getLogger(__name__)

WORKER_PREFIX = "zkhive:worker:"
LOCK_PREFIX = "zkhive:devlock:"

Role = Literal["synthesis", "prove", "aggregate"]


class WorkerInfo(BaseModel):
    """One registry entry."""

    worker_id: str
    role: Role
    host: str
    pid: int
    queues: list[str]
    #: "cpu:0", "cuda:1"; None for synthesis and aggregation workers
    device: str | None = None
    device_kind: Literal["cpu", "cuda"] | None = None
    backend: str | None = None
    #: bytes the prover may still fill with keys; None when the device cannot tell
    free_memory: int | None = None
    total_memory: int | None = None
    #: parameter sets whose proving keys are loaded and resident
    resident_keys: list[str] = []
    #: parameter sets whose proving keys this prover makes in its own process ([srs] in_process)
    makes_keys: list[str] = []
    #: parameter sets whose proving keys are being loaded now (preload before ready, or a job's
    #: first partition of a set that was not resident): ``zkhive status`` says ``loading``
    loading: list[str] = []
    #: the last load of each resident key: {params: {"seconds", "bytes", "gbps"}} (bytes: the
    #: .params file read; 0 for a key made in process)
    key_loads: dict[str, dict[str, float]] = {}
    #: the keys whose .params mirror this prover failed to write: {params: the reason's first
    #: line} (key_loads' mirror_progress is then -1)
    key_mirror_errors: dict[str, str] = {}
    #: seconds of each phase of this prover's start, process start to ready (gpu/phases.py:
    #: "imports", "CUDA context", "circuit shape (densities)", "section a", ..., "ready")
    start_phases: dict[str, float] = {}
    #: the prover's last evictions, oldest first: {"key", "at", "bytes", "reason"}
    evictions: list[dict] = []
    #: evictions since the prover started, by "params/room" and "params/request"
    evicted_counts: dict[str, int] = {}
    #: first-use work done at start for the preloaded kinds (cluster/pipeline/warmup.py):
    #: ``poseidon`` (its constants), ``vk:<params>`` (a verifying key read by the aggregate worker)
    warmed: list[str] = []
    ready: bool = False
    #: a prover process waiting on its device's lock (``[worker] prover_standby``): no queues,
    #: no keys, never routed to; it takes over when the device's prover goes
    standby: bool = False
    #: (job, partition) being worked on, or None
    inflight: list[str] = []
    version: str = "unknown"
    code_digest: str = "unknown"
    started_at: float = Field(default_factory=time.time)
    heartbeat_at: float = Field(default_factory=time.time)
    nodename: str | None = None
    #: unique per process start: a restarted worker reuses its slot's id, not its incarnation,
    #: so work claimed by the dead process is still recognised as lost
    incarnation: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])


def worker_key(worker_id: str) -> str:
    return WORKER_PREFIX + worker_id


def publish(r, info: WorkerInfo, ttl_s: float) -> None:
    info.heartbeat_at = time.time()
    r.set(worker_key(info.worker_id), info.model_dump_json(), px=int(ttl_s * 1000))


def leave(r, worker_id: str) -> None:
    r.delete(worker_key(worker_id))


def workers(r, *, role: str | None = None, ready_only: bool = False) -> list[WorkerInfo]:
    """Live registry entries (heartbeat within the TTL), sorted by worker id."""
    keys = sorted(r.scan_iter(match=WORKER_PREFIX + "*", count=500))
    out = []
    for raw in (r.mget(keys) if keys else []):
        if raw is None:  # expired between SCAN and MGET
            continue
        try:
            info = WorkerInfo.model_validate_json(raw)
        except ValueError as e:
            log.warning("ignoring a malformed registry entry: %s", e)
            continue
        if (role is None or info.role == role) and (info.ready or not ready_only):
            out.append(info)
    return sorted(out, key=lambda w: w.worker_id)


def is_alive(r, worker_id: str) -> bool:
    return bool(r.exists(worker_key(worker_id)))


# refresh only a lock we still own: a lock taken over after our TTL lapsed stays with its new owner
_REFRESH = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def _pid_alive(pid: int, create_time: float | None = None) -> bool:
    """The process exists, is not a zombie (a killed worker whose parent is gone may stay one
    for a while where init is slow to reap: it holds no device), and, when the lock recorded
    its start time, is the same process and not a later one that got the PID again."""
    import psutil

    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(p.create_time() - create_time) < 0.05
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


class DeviceLock:
    """One slot of a device, held by one worker process."""

    def __init__(self, r, host: str, device: str, slots: int, ttl_s: float, owner: str):
        self.r, self.host, self.device, self.slots, self.ttl_s = r, host, device, slots, ttl_s
        import psutil

        self.token = json.dumps({"owner": owner, "host": host, "pid": os.getpid(),
                                 "started": psutil.Process().create_time(),
                                 "nonce": uuid.uuid4().hex, "at": time.time()})
        self.key: str | None = None
        self.slot: int | None = None

    def _slot_key(self, slot: int) -> str:
        return f"{LOCK_PREFIX}{self.host}:{self.device}:{slot}"

    def acquire(self) -> int:
        """Take a free slot (or one whose holder is provably dead); DeviceBusy names the holders."""
        holders = []
        ttl_ms = int(self.ttl_s * 1000)
        for slot in range(self.slots):
            key = self._slot_key(slot)
            if self.r.set(key, self.token, nx=True, px=ttl_ms):
                self.key, self.slot = key, slot
                return slot
            current = self.r.get(key)
            if current is None:
                continue
            try:
                holder = json.loads(current)
            except ValueError:
                holder = {"owner": str(current)}
            if holder.get("host") == self.host and isinstance(holder.get("pid"), int) \
                    and not _pid_alive(holder["pid"], holder.get("started")):
                # the holder was a process on this host that no longer exists: a stale lock
                pipe = self.r.pipeline()
                pipe.watch(key)
                if pipe.get(key) == current:
                    pipe.multi()
                    pipe.set(key, self.token, px=ttl_ms)
                    try:
                        pipe.execute()
                        log.warning("took over the stale lock of %s (pid %s is gone)", key, holder["pid"])
                        self.key, self.slot = key, slot
                        return slot
                    except Exception:  # someone else took it first
                        pass
                pipe.reset()
            holders.append(f"{holder.get('owner')} (pid {holder.get('pid')} on {holder.get('host')})")
        raise DeviceBusy(f"device {self.device} on {self.host} is in use by {', '.join(holders)}; "
                         f"worker.gpu_workers_per_device={self.slots} allows {self.slots} prover(s) per device")

    def refresh(self) -> bool:
        if self.key is None:
            return False
        return bool(self.r.eval(_REFRESH, 1, self.key, self.token, int(self.ttl_s * 1000)))

    def release(self) -> None:
        if self.key is not None:
            self.r.eval(_RELEASE, 1, self.key, self.token)
            self.key = None


class Heartbeat:
    """A daemon thread that republishes a worker's entry (and refreshes its lock) every interval.

    ``update`` is called before each publish to refresh free memory and in-flight work. The thread
    only touches Redis, so it keeps beating while a prove runs in the main thread: arkworks' MSM
    and the host library release the GIL.
    """

    def __init__(self, r, info: WorkerInfo, *, interval_s: float, ttl_s: float,
                 lock: DeviceLock | None = None, update: Callable[[WorkerInfo], None] | None = None):
        self.r, self.info, self.interval_s, self.ttl_s = r, info, interval_s, ttl_s
        self.lock, self.update = lock, update
        self._stop = threading.Event()
        self._mutex = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="zkhive-heartbeat", daemon=True)

    def start(self) -> "Heartbeat":
        self.beat()
        self._thread.start()
        return self

    def beat(self) -> None:
        with self._mutex:
            if self._stop.is_set():
                return
            if self.update:
                self.update(self.info)
            publish(self.r, self.info, self.ttl_s)
            if self.lock is not None and not self.lock.refresh():
                log.error("lost the device lock %s: another worker took it over", self.lock.key)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except Exception as e:  # Redis down for a moment: keep trying, the TTL decides
                log.warning("heartbeat failed: %s", e)

    def stop(self, leave_registry: bool = True) -> None:
        with self._mutex:
            self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.interval_s + 1)
        if leave_registry:
            leave(self.r, self.info.worker_id)
