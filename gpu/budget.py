"""Device-memory admission: several prover processes on one device never run it out of memory.

The daemon this replaces crashed when two workers each staged 12 GiB on a 16 GiB card. Here every
process that uses a device books what it holds in one ledger per device, shared through a file
under ``$ZKHIVE_CACHE_DIR/budget/`` and guarded by ``flock``:

- *resident* bytes (proving keys, matrices) are booked when a key is loaded and refused, with a
  message that says what is in use and by whom, when they would not fit;
- each proof's *working set* is booked for the length of the proof; a proof whose working set
  does not fit now waits until others finish (or times out), and one that can never fit is
  refused at once;
- *pooled* bytes: a prover that keeps its last proof's buffers for the next one (allocating
  and freeing ~17 GiB at 2^27 costs ~40 ms a proof with the device idle: gpu/cuda/memory.py
  ``BufferPool``) books them between its proofs, and gives them up as soon as another
  process waits for room (``waiting`` in the ledger: ``pool_wanted``).

Entries are keyed by (pid, process start time), so the booking of a process that died (SIGKILL,
OOM killer) is dropped the next time anyone reads the ledger, and a recycled PID is never
mistaken for the old owner.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
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
        return sum(e.get("resident", 0) + e.get("pooled", 0) + sum(e.get("working", {}).values())
                   for e in book.values())

    def usage(self) -> dict:
        with self._ledger() as book:
            return {"capacity": self.capacity, "used": self._used(book),
                    "processes": {k: dict(v) for k, v in book.items()}}

    def _describe(self, book) -> str:
        parts = [f"pid {k.split(':')[0]}: {_fmt(v.get('resident', 0))} resident, "
                 f"{_fmt(sum(v.get('working', {}).values()))} in proofs"
                 + (f", {_fmt(v['pooled'])} pooled for its next proof" if v.get("pooled") else "")
                 for k, v in book.items()]
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
    def working_set(self, nbytes: int, what: str, *, timeout: float = 600.0, poll: float = 0.05,
                    pooled: int = 0):
        """Book ``nbytes`` for the duration of the block; wait while it does not fit (marked
        ``waiting`` in the ledger meanwhile: a process that pools gives its pool up). ``pooled``:
        bytes of this process's pool the block takes over (already on the device: they are
        counted into ``nbytes``, not again). Yields a ``WorkingSet``: ``keep(n)`` before the
        block ends books n of its bytes as pooled after it (the buffers kept for the next
        proof) in the same ledger write that releases the rest."""
        token = f"{what}:{time.monotonic_ns()}"
        deadline = time.monotonic() + timeout
        refused = None
        while refused is None:
            # the ledger is written back only when its block ends without an exception: a
            # refusal is raised after it, so the waiting mark it drops is written
            with self._ledger() as book:
                mine = book.setdefault(self._key, {})
                reuse = min(int(pooled), mine.get("pooled", 0))
                used = self._used(book) - reuse
                own_resident = mine.get("resident", 0)
                real_free = self._free_bytes() if self._free_bytes else None
                if nbytes > self.capacity - own_resident:
                    refused = DeviceMemoryExhausted(
                        f"{what} needs a working set of {_fmt(nbytes)}, more than device "
                        f"{self.device_id} can ever give it ({_fmt(self.capacity)} budget, "
                        f"{_fmt(own_resident)} resident in this worker)",
                        device=self.device_id, shape=nbytes)
                elif used + nbytes <= self.capacity and (real_free is None or nbytes <= real_free + reuse):
                    mine.pop("waiting", None)
                    if reuse:
                        mine["pooled"] = mine["pooled"] - reuse
                    mine.setdefault("working", {})[token] = int(nbytes)
                    break
                elif time.monotonic() > deadline:
                    refused = DeviceMemoryExhausted(
                        f"{what}: waited {timeout:.0f} s for {_fmt(nbytes)} on device {self.device_id} "
                        f"({self._describe(book)})", device=self.device_id, shape=nbytes)
                if refused is not None:
                    mine.pop("waiting", None)
                else:
                    mine["waiting"] = int(nbytes)
            if refused is not None:
                raise refused
            time.sleep(poll)
        held = WorkingSet(int(nbytes))
        try:
            yield held
        finally:
            with self._ledger() as book:
                mine = book.setdefault(self._key, {})
                mine.setdefault("working", {}).pop(token, None)
                if held.kept:
                    mine["pooled"] = mine.get("pooled", 0) + held.kept

    def pool_wanted(self) -> bool:
        """Whether another process waits for room (its working set did not fit): this one's
        pool goes then, whether or not it alone is in the way."""
        with self._ledger() as book:
            return any(v.get("waiting") for k, v in book.items() if k != self._key)

    def unpool(self, nbytes: int) -> None:
        """Release ``nbytes`` of this process's pooled booking (its buffers were freed)."""
        with self._ledger() as book:
            mine = book.setdefault(self._key, {})
            left = mine.get("pooled", 0) - int(nbytes)
            if left > 0:
                mine["pooled"] = left
            else:
                mine.pop("pooled", None)

    def pooled(self) -> int:
        """This process's pooled booking."""
        with self._ledger() as book:
            return book.get(self._key, {}).get("pooled", 0)

    def leave(self) -> None:
        """Drop every booking of this process (worker shutdown)."""
        with self._ledger() as book:
            book.pop(self._key, None)


@dataclass
class WorkingSet:
    """A booked working set (``DeviceBudget.working_set``)."""
    nbytes: int
    kept: int = 0

    def keep(self, nbytes: int) -> None:
        """Book ``nbytes`` (at most the working set) as pooled when the block ends."""
        self.kept = max(0, min(int(nbytes), self.nbytes))


# -- what a proving key and a proof take on the device --------------------------------------------

#: (query, group) in the order the CUDA backend holds them
QUERIES = (("a_query", "g1"), ("b_g1_query", "g1"), ("b_g2_query", "g2"), ("l_query", "g1"),
           ("h_query", "g1"))
AFFINE = {"g1": 96, "g2": 192}   # Montgomery affine x, y on the device
XYZZ = {"g1": 192, "g2": 384}


def chunk_capacity(group: str) -> int:
    """Scalars per split-MSM tail chunk (gpu/cuda/split_msm.py): its workspace is sized for one."""
    return 1 << int(os.environ.get("ZKHIVE_SPLIT_CHUNK_LOG", "24"))


def dense_chunk() -> int:
    """Scalars per chunk of the dense engine (the H query at 2^27): 2^ZKHIVE_DENSE_CHUNK_LOG,
    default 2^25, for the affine rounds (ZKHIVE_MSM_DENSE_AFFINE_ROUNDS): their buffers grow
    with the chunk; half the chunks halve the tails into the running buckets (the H query alone
    at 2^27 on an H100, 2026-12-06: 772.5 ms at 2^24 in 5-window slices, 741.2 at 2^25 in 3,
    the tail 74.1 -> 30.3 ms), and 2^25 in 3-window slices fits beside filecoin-32g's key on
    the H200 with the memory the engine lends its rounds (gpu/affine_plan.py dense_sharing).
    Earlier: 2^24 in 5-window slices, 1,466.9 ms a partition; 2^23: 1,835.7. In XYZZ (rounds
    0, or a key the ledger admitted lean) a larger chunk merges its buckets into the running
    ones fewer times (3.5 ms a merge at c = 20) for 16 bytes a digit more of sorted lists:
    1,636.8 / 1,610.7 / 1,613.1 ms at 2^24 / 2^25 / 2^26 before the sort's second pass; 1,606.0
    at 2^24 and 1,586.0 at 2^25 after it."""
    return 1 << int(os.environ.get("ZKHIVE_DENSE_CHUNK_LOG", "25"))


def pippenger_workspace(group: str, n: int, c: int | None = None, *, radix: bool = True) -> int:
    """Bytes of one Pippenger workspace for n scalars and c-bit windows (gpu/cuda/msm.py's
    _Workspace, with the radix sort's second list when that sort is on and ``radix``; c
    defaults to window_bits(n))."""
    from gpu.msm_input import window_bits, windows
    from gpu.msm_sort import radix_sort_bytes, sort_kind
    c = c or window_bits(n)
    W, B = windows(c), 1 << (c - 1)
    second = radix_sort_bytes(n, W, c) if radix and sort_kind() == "radix" else 0
    return W * n * 8 + W * B * 8 + W * B * XYZZ[group] + (16 << 20) + second


#: the smallest window a tail engine uses (its one workspace is sized for the capacity)
TAIL_MIN_WINDOW = 12


def tail_engine_bytes(group: str, capacity: int) -> int:
    """A split-MSM tail engine: compact bases and scalars for one chunk, and its one workspace,
    at the window of the largest workspace it may pick (windows from TAIL_MIN_WINDOW up; that
    workspace's lists are sized for the capacity). The radix sort's second list is made at the
    length sorted, k windows(c) for a tail of k at its window c = max(TAIL_MIN_WINDOW,
    window_bits(k)): at most the capacity's own, booked once."""
    from gpu.msm_input import window_bits, windows
    from gpu.msm_sort import radix_sort_bytes, sort_kind
    top = max(TAIL_MIN_WINDOW, window_bits(capacity))
    work = max(pippenger_workspace(group, capacity, c, radix=False)
               for c in range(min(TAIL_MIN_WINDOW, top), top + 1))
    second = radix_sort_bytes(capacity, windows(top), top) if sort_kind() == "radix" else 0
    return capacity * (AFFINE[group] + 32) + work + second + (48 << 20)


def dense_engine_bytes(group: str, chunk: int, window: int | None = None, *,
                       affine: bool = True) -> int:
    """The chunked dense MSM (gpu/cuda/msm.py DenseEngine): a Pippenger workspace for one chunk
    at the chunk's window (ZKHIVE_MSM_DENSE_WINDOW overrides it), a second set of buckets, the
    running sums, the radix sort's second list (its page-locked window sums are host
    memory, not booked) and, with ``affine`` (where the setting has rounds), the affine
    accumulation's buffers for one slice of windows, less what the engine lends them
    (gpu/affine_plan.py dense_sharing: the running sums in the workspace's buckets, the
    prefix products in the second list)."""
    from gpu.affine_plan import dense_affine_bytes, dense_sharing
    from gpu.msm_input import window_bits, windows
    from gpu.msm_sort import dense_sort, radix_sort_bytes, sort_kind
    c = window or int(os.environ.get("ZKHIVE_MSM_DENSE_WINDOW", "0")) or window_bits(chunk)
    K = windows(c) * (1 << (c - 1))
    # the workspace books the radix list when the plain MSM sorts that way; else book it here
    radix = radix_sort_bytes(chunk, windows(c), c) \
        if dense_sort() == "radix" and sort_kind() != "radix" else 0
    lent, acc_shared = dense_sharing(chunk, c, radix=dense_sort() == "radix") \
        if affine else (0, False)
    return pippenger_workspace(group, chunk, c) + (0 if acc_shared else K * XYZZ[group]) + \
        radix + (dense_affine_bytes(chunk, c, pre_elsewhere=lent > 0) if affine else 0)


@dataclass(frozen=True)
class ProofShape:
    """The sizes that decide a circuit's device memory (no key or matrix needed)."""
    num_vars: int          # 1 + public + aux: the A, B query length
    num_aux: int           # the L query length
    domain: int            # n: the H query has n - 1 points
    matrix_bytes: int      # A, B, C as the device holds them
    # the dense engine's affine rounds booked (admit_shape drops them when only that fits)
    dense_affine: bool = True

    def query_lengths(self) -> dict[str, int]:
        return {"a_query": self.num_vars, "b_g1_query": self.num_vars, "b_g2_query": self.num_vars,
                "l_query": self.num_aux, "h_query": self.domain - 1}

    def resident(self) -> dict[str, int]:
        """What loading the key books: matrices, bases, the domain's NTT tables, each query's
        own Pippenger workspace where it fits one split chunk (else the chunked path serves
        it), one tail engine per group."""
        out = {"matrices": self.matrix_bytes, "ntt tables": 2 * 32 * self.domain + (8 << 20)}
        biggest = {"g1": 0, "g2": 0}
        for name, group in QUERIES:
            n = self.query_lengths()[name]
            if not n:
                continue
            biggest[group] = max(biggest[group], n)
            out[f"{name} bases"] = n * AFFINE[group]
            if n <= chunk_capacity(group):
                out[f"{name} workspace"] = 32 * n + pippenger_workspace(group, n)
        for group, n in biggest.items():
            if n:
                out[f"{group} tail engine"] = tail_engine_bytes(group, min(n, chunk_capacity(group)))
            if group == "g1" and n > chunk_capacity(group):
                # gpu/cuda/msm.py DenseEngine: the chunked dense MSM (H at 2^27) straight over
                # the resident bases: one chunk's sorted digits and one set of buckets
                out["g1 dense engine"] = dense_engine_bytes(group, dense_chunk(),
                                                            affine=self.dense_affine)
        return out

    def resident_bytes(self) -> int:
        return sum(self.resident().values())

    #: the parts of ``resident`` that are the key itself (what a key holder books once and
    #: shares, cluster/pipeline/keyholder.py); the rest (NTT tables, per-query workspaces, the
    #: tail and dense engines) belongs to each process that proves from it
    @staticmethod
    def is_key_part(name: str) -> bool:
        return name == "matrices" or name.endswith(" bases")

    def key_bytes(self) -> int:
        """Bytes of the key itself: the matrices and the five base sets (the holder's booking)."""
        return sum(v for k, v in self.resident().items() if self.is_key_part(k))

    def process_bytes(self) -> int:
        """Bytes each prover attached to a held key books for itself: NTT tables, per-query
        workspaces, the tail engines, the dense engine (``resident_bytes - key_bytes``)."""
        return sum(v for k, v in self.resident().items() if not self.is_key_part(k))

    def working_set_bytes(self) -> int:
        """Per proof: z, a, b, c, the split MSM's index lists, room for partial sums."""
        n, nv = self.domain, self.num_vars
        return 32 * (3 * n + nv) + 4 * max(n, nv) + (128 << 20)

    def describe(self, capacity: int) -> str:
        parts = ", ".join(f"{k} {_fmt(v)}" for k, v in self.resident().items())
        return (f"resident {_fmt(self.resident_bytes())} ({parts}) + {_fmt(self.working_set_bytes())} "
                f"a proof, against a budget of {_fmt(capacity)}")


def admit_shape(budget: "DeviceBudget", shape: ProofShape, what: str, *,
                working: int = 0) -> ProofShape:
    """Refuse at once, with the numbers, a circuit whose key and one proof (or ``working``
    bytes, where more: the device setup's temporaries) can never fit the device (before any
    upload); a key that fits is then booked by reserve_resident, with the shape this returns:
    the one given, or where only that fits, the same without the dense engine's affine buffers
    (the engine then sums in XYZZ: slower, 9 GiB less at 2^27; see affine_upgrade)."""
    need = shape.resident_bytes() + max(shape.working_set_bytes(), int(working))
    if need > budget.capacity and shape.dense_affine:
        lean = replace(shape, dense_affine=False)
        lean_need = lean.resident_bytes() + max(lean.working_set_bytes(), int(working))
        if lean_need < need:
            shape, need = lean, lean_need
    if need > budget.capacity:
        setup = (f" (its device setup needs {_fmt(int(working))} of temporaries)"
                 if int(working) > shape.working_set_bytes() else "")
        raise DeviceMemoryExhausted(
            f"{what} cannot run on device {budget.device_id}: {shape.describe(budget.capacity)}"
            f"{setup}; use a device with more memory (or smaller split chunks: "
            "ZKHIVE_SPLIT_CHUNK_LOG)", device=budget.device_id, shape=need)
    return shape


def affine_upgrade(budget: "DeviceBudget", shape: ProofShape, what: str) -> int:
    """After a device setup whose temporaries left room only for the lean shape: book the
    dense engine's affine buffers now that the setup's working set is gone, where they and one
    proof fit beside everything booked. Returns the bytes booked (0: the engine stays XYZZ)."""
    if shape.dense_affine:
        return 0
    full = replace(shape, dense_affine=True)
    extra = full.resident_bytes() - shape.resident_bytes()
    if extra <= 0 or full.resident_bytes() + full.working_set_bytes() > budget.capacity:
        return 0
    try:
        budget.reserve_resident(extra, f"{what}: the dense engine's affine buffers")
    except DeviceMemoryExhausted:
        return 0
    return extra
