"""The split MSM: zero scalars skipped, scalars equal to 1 summed by a batch-addition kernel
(millions of them first by chains of affine additions, ones_affine.cu), the rest ("the tail")
through the Pippenger MSM of gpu/cuda/msm.py (kernels: gpu/kernels/split_msm.cu, whose header
says why).

    split = SplitMsm()                              # per backend, per device context
    cls = split.classify(z_device, n, lists)        # one pass: counts of 0, 1 and the rest
    point = split.msm(resident_bases, z_device, cls)

Per query the path is chosen from the witness's statistics (``choose``): ``pippenger`` (the
resident bases' own MSM, as before) when at most ``DENSE_SHARE`` of the scalars are 0 or 1 and
the query fits one tail chunk; else ``split``: the 1s summed, the tail gathered into compact
buffers and summed by Pippenger in chunks of at most ``capacity`` scalars (one
:class:`TailEngine` per group, its workspace sized for one chunk). So a 2^27 query never needs a
workspace for 2^27 scalars: memory is bounded by the chunk, whatever the mix. Every partial
result is decoded with arkworks' checked decoder and the parts are added on the host (a few
point additions).

A G1 query larger than a chunk with at most ``DENSE_SHARE`` of its scalars 0 or 1 takes the
chunked dense engine instead (``takes_dense``: straight over the resident bases, the chunks'
buckets merged, one reduction).

``ZKHIVE_SPLIT_MSM=auto|on|off|dense`` forces the path (tests, benchmarks; ``dense``: the dense
engine for every G1 query larger than a chunk, whatever its mix); ``ZKHIVE_SPLIT_CHUNK_LOG``
sets the chunk (default 2^24 scalars).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from gpu.cuda import loader
from gpu.cuda.memory import DeviceBuffer
from gpu.cuda.launch import memset_words
from gpu.budget import chunk_capacity, dense_chunk, tail_engine_bytes
from gpu.errors import GpuError, MsmInputError
from gpu.msm_input import decode_point, group_of, window_bits

BLOCK = 256
#: the share of scalars that are 0 or 1 below which a query stays on plain Pippenger
DENSE_SHARE = float(os.environ.get("ZKHIVE_SPLIT_MIN_SHARE", "0.05"))
_NO_INDEX = 0xFFFFFFFFFFFFFFFF


def _u(x) -> np.uintp:
    return np.uintp(x.ptr if hasattr(x, "ptr") else x)


def _grid(n: int, block: int = BLOCK) -> tuple:
    return (max(1, -(-int(n) // block)), 1)


def mode() -> str:
    m = os.environ.get("ZKHIVE_SPLIT_MSM", "auto")
    if m not in ("auto", "on", "off", "dense"):
        raise GpuError(f"ZKHIVE_SPLIT_MSM={m!r}: expected auto, on, off or dense")
    return m


@dataclass
class Classified:
    """Where a scalar vector's 0s, 1s and other values are (lists on the device)."""
    n: int
    ones: int
    tail: int
    lists: DeviceBuffer   # [0, ones): indices of 1s; [n - tail, n): the tail, read backwards
    scalars: DeviceBuffer

    @property
    def zeros(self) -> int:
        return self.n - self.ones - self.tail

    def stats(self) -> dict:
        return {"n": self.n, "zeros": self.zeros, "ones": self.ones, "tail": self.tail}


def choose(n: int, ones: int, tail: int, capacity: int) -> str:
    """``pippenger`` or ``split`` for a query of n scalars (see the module docstring)."""
    m = mode()
    if m == "on":
        return "split"
    if m == "off":
        return "pippenger" if n <= capacity else "split"
    dense = tail > (1.0 - DENSE_SHARE) * n
    return "pippenger" if dense and n <= capacity else "split"


def max_dense_ones(n: int) -> int:
    """The most scalars equal to 1 a query of n may hold and still take the dense engine.

    Every 1 is digit 1 of window 0: one bucket's run. The dense engine's affine rounds halve a
    run each round and one thread then sums what is left of it, so its time grows with the 1s:
    at G1 2^25 on an H100 (bench/gpu_split_msm.py --modes on,dense,auto, 2026-12-05) 9,584 /
    5,380 / 2,801 / 1,251 ms with 15.2 / 8.4 / 4.2 / 1.7 M ones (~0.63 us a 1), where the
    split (the 1s summed by a balanced kernel, the rest through the tail engine) took 39 / 131 /
    211 / 229 ms. The dense engine's gain on a dense 2^27 query is ~140 ms (~780 against ~920
    ms through the tail engine's 8 chunks, H200), ~1 ns a scalar: 1s past ~n/600 cost more than
    that. Half of it, and never under 4,096 (2.6 ms)."""
    return max(4096, int(n) // 1024)


def dense_query(n: int, tail: int, capacity: int, ones: int = 0) -> bool:
    """Whether a G1 query of n scalars, ``ones`` of them 1 and ``tail`` neither 0 nor 1, takes
    the chunked dense engine (SplitMsm.takes_dense): larger than a chunk and, in the auto mode,
    at most DENSE_SHARE of it 0 or 1 and at most max_dense_ones(n) 1s (WindowPoSt's 2^27
    witness holds 469,915: it stays on the split); in the dense mode whatever the mix; never in
    on or off."""
    m = mode()
    if m not in ("auto", "dense") or n <= capacity:
        return False
    return m == "dense" or (tail > (1.0 - DENSE_SHARE) * n and ones <= max_dense_ones(n))


class TailEngine:
    """Pippenger over a compact chunk of (scalar, base) pairs: msm.cu's kernels through a
    DeviceBases whose base buffer is this engine's compact one (no upload of its own)."""

    def __init__(self, group, capacity: int, lean: bool | None = None):
        from gpu.cuda.msm import DeviceBases

        g = group_of(group)
        self.group, self.capacity = g, int(capacity)
        self.words16 = g.limbs // 4               # affine Montgomery base (g.limbs words)
        engine = DeviceBases.__new__(DeviceBases)
        # the attributes DeviceBases.__init__ sets, minus the upload: the bases are whatever
        # split_gather wrote into self.bases for the current chunk
        engine.group, engine.n, engine.window = g, self.capacity, window_bits(self.capacity)
        engine.point_bytes = 4 * 2 * g.limbs
        engine.last_profile = {}
        engine._bind_kernels(lean)
        engine._work, engine._scalars, engine._bases = {}, None, None
        self.engine = engine
        self.bases = self.scalars = None
        try:
            self.bases = DeviceBuffer(16 * self.words16 * self.capacity, what=f"{g.name} tail bases")
            self.scalars = DeviceBuffer(32 * self.capacity, what=f"{g.name} tail scalars")
            engine._bases = self.bases
        except Exception:
            self.close()
            raise

    @staticmethod
    def estimate_bytes(group, capacity: int) -> int:
        return tail_engine_bytes(group_of(group).name, capacity)

    def msm(self, k: int, stream=None):
        """Pippenger over the first k compact pairs (k <= capacity), with the window for k (not
        for the capacity: a 1.5 M tail with 2^24-sized windows spends its time in 2^19-bucket
        reductions). One workspace, sized for the capacity, re-made when the window changes
        (a circuit's tails are about the same size from proof to proof)."""
        from gpu.budget import TAIL_MIN_WINDOW
        e = self.engine
        c = max(min(TAIL_MIN_WINDOW, e.window), window_bits(int(k)))
        if c not in e._work:
            for ws in e._work.values():
                ws.free()
            e._work = {}
            e._workspace(c)  # sized by e.n, the capacity, before e.n changes
        e.n = int(k)  # the histogram and scatter run over k scalars; the workspace stays sized
        try:          # for the capacity
            return e.msm(self.scalars, window=c, stream=stream)
        finally:
            e.n = self.capacity

    def warm(self) -> None:
        """Allocate the workspace now (at load), sized for a full chunk."""
        self.engine._workspace(self.engine.window)

    def close(self) -> None:
        self.engine._bases = None  # ours, freed below
        self.engine.close()
        for b in (self.bases, self.scalars):
            if b is not None:
                b.free()
        self.bases = self.scalars = None


class SplitMsm:
    """The split MSM over resident base sets (gpu.cuda.msm.DeviceBases) of one device."""

    def __init__(self, capacity: dict | None = None, dense_chunk: int | None = None,
                 ones_shape: tuple[int, int] | None = None):
        # dense_chunk: the dense engine's chunk (None: gpu.budget.dense_chunk(), read at use);
        # ones_shape: (blocks, chains a thread) of the 1s' affine chains in place of the plan's
        # (tests: the plan needs millions of 1s before it fills the SMs)
        self._ones_shape = ones_shape
        self._cuda = loader.driver()
        # modules: split_msm (classify, gather, G1), split_msm_g2 (G2's ones-sum),
        # split_msm_g2_parts (G2's folds and result): built in parallel
        g1, g2 = loader.load_module("split_msm"), loader.load_module("split_msm_g2")
        g2p = loader.load_module("split_msm_g2_parts")
        self._f = {k: loader.get_function(g1, k) for k in ("split_classify", "split_gather")}
        for k in ("sum_ones", "sum_parts", "store_point"):
            self._f[f"g1_{k}"] = loader.get_function(g1, f"g1_{k}")
            self._f[f"g2_{k}"] = loader.get_function(g2 if k == "sum_ones" else g2p, f"g2_{k}")
        from gpu.cuda.msm import g2_lean
        # ZKHIVE_MSM_G2_LEAN (on unless 0) when this object is made: G2's ones-sum and its tail
        # engine's level 1 without spills (msm_g2_lean.cu; 62 ms off the 32 GiB partition)
        self._lean = g2_lean()
        if self._lean:
            self._f["g2_sum_ones"] = loader.get_function(
                loader.load_module("msm_g2_lean"), "g2_sum_ones_lean")
        dev = self._cuda.Context.get_device()
        self._sms = dev.get_attribute(self._cuda.device_attribute.MULTIPROCESSOR_COUNT)
        self.capacity = {g: chunk_capacity(g) for g in ("g1", "g2")}
        self.capacity.update(capacity or {})
        self._tails: dict[str, TailEngine] = {}
        self._dense: dict[str, object] = {}  # gpu.cuda.msm.DenseEngine per group (G1)
        self._dense_chunk = dense_chunk
        # False once the ledger admitted a key only without the dense engine's affine buffers
        # (gpu.budget.admit_shape): its accumulation is XYZZ from then on
        self.dense_affine = True
        self.last: dict = {}  # per query: path, counts, chunks (the benchmark reports them)
        self._flags = DeviceBuffer(16, what="split counts and bad index")
        self._out = DeviceBuffer(4 * 48, what="split result")
        self._parts = {}

    # -- plumbing -------------------------------------------------------------------------
    def _launch(self, name, grid, *args, block=BLOCK, shape=None, stream=None):
        with loader.guard(kernel=name, shape=shape):
            self._f[name](*args, block=(block, 1, 1), grid=grid, stream=stream)

    def dense(self, group: str, n: int):
        """The chunked dense MSM engine of a group (G1 only; None for G2 or a query that fits
        one chunk, which plain Pippenger serves)."""
        from gpu.affine_plan import dense_affine_rounds
        from gpu.cuda.msm import DenseEngine
        g = group_of(group).name
        if g != "g1" or n <= self.capacity[g]:
            return None
        chunk = self._dense_chunk or dense_chunk()
        e = self._dense.get(g)
        rounds = dense_affine_rounds(chunk, e.window) if e is not None and self.dense_affine else 0
        if e is not None and (e.chunk != chunk or e.affine_rounds != rounds or
                              e.affine_windows != os.environ.get(
                                  "ZKHIVE_MSM_DENSE_AFFINE_WINDOWS", "")):
            # the setting changed (benchmarks), or the ledger took the affine buffers away
            e.close()
            e = None
        if e is None:
            e = self._dense[g] = DenseEngine(g, chunk, affine=self.dense_affine)
        return e

    def takes_dense(self, group: str, cls: Classified):
        """The dense engine, where a query of these counts takes it (``dense_query``: G1, more
        scalars than a tail chunk, nearly all of them full-size and few 1s: a gather would copy
        nearly all of them and the tail engine reduce its windows once a chunk), else None."""
        g = group_of(group).name
        if g != "g1" or not dense_query(cls.n, cls.tail, self.capacity[g], cls.ones):
            return None
        return self.dense(g, cls.n)

    def tail(self, group: str, n: int) -> TailEngine:
        g = group_of(group).name
        cap = min(int(n), self.capacity[g])
        t = self._tails.get(g)
        if t is None or t.capacity < cap:
            if t is not None:
                t.close()
            t = self._tails[g] = TailEngine(g, cap, self._lean)
        return t

    # -- classification -------------------------------------------------------------------
    def classify(self, scalars: DeviceBuffer, n: int, lists: DeviceBuffer,
                 stream=None) -> Classified:
        """One pass over n device scalars; raises MsmInputError naming a scalar >= r."""
        from gpu.cuda.msm import _pinned_scratch, read_back
        if lists.nbytes < 4 * n or scalars.nbytes < 32 * n:
            raise MsmInputError(f"split MSM buffers too small for {n} scalars")
        memset_words(self._flags.ptr, 0, 2, stream)
        memset_words(self._flags.ptr + 8, 0xFFFFFFFF, 2, stream)
        if n:
            self._launch("split_classify", _grid(n), np.int64(n), _u(scalars), _u(lists),
                         _u(self._flags), np.uintp(self._flags.ptr + 8), shape=n, stream=stream)
        out = np.zeros(2, dtype=np.uint64) if stream is None else _pinned_scratch(2)
        read_back(out, self._flags.ptr, stream)
        counts = out[:1].view(np.uint32)
        if int(out[1]) != _NO_INDEX:
            raise MsmInputError(f"MSM scalar {int(out[1])} is not below the Fr modulus",
                                index=int(out[1]), kernel="split_classify", shape=n)
        return Classified(n, int(counts[0]), int(counts[1]), lists, scalars)

    # -- the MSM --------------------------------------------------------------------------
    def msm(self, bases, cls: Classified, *, name: str = "msm", stream=None,
            dense_ok: bool = True):
        """sum_i s_i P_i over the first cls.n bases of a resident DeviceBases. ``stream``: all
        of it on that stream (the host waits for it only); ``dense_ok``: a dense query larger
        than a chunk may take the chunked dense engine (False when another stream uses it)."""
        g = bases.group
        if bases.n < cls.n:
            raise MsmInputError(f"{name}: {cls.n} scalars for {bases.n} bases")
        cap = min(cls.n, self.capacity[g.name]) or 1
        path = choose(cls.n, cls.ones, cls.tail, cap)
        if dense_ok and self.takes_dense(g.name, cls) is not None:
            path = "dense"
        info = {**cls.stats(), "path": path, "chunks": 0}
        self.last[name] = info
        if path == "pippenger":
            return bases.msm(cls.scalars, stream=stream)
        if path == "dense":
            e = self.dense(g.name, cls.n)
            pending = e.start(bases, cls.scalars, cls.n, stream)
            info["chunks"] = pending.chunks
            return pending.finish()
        total = None
        if cls.ones:
            total = self._sum_ones(bases, cls, stream, info)
        if cls.tail:
            t = self.tail(g.name, cls.n)
            for lo in range(0, cls.tail, t.capacity):
                k = min(t.capacity, cls.tail - lo)
                self._launch("split_gather", _grid(k), np.int64(k), np.int64(lo), np.int64(cls.n),
                             _u(cls.lists), _u(cls.scalars), _u(bases._bases), np.int32(t.words16),
                             _u(t.scalars), _u(t.bases), shape=k, stream=stream)
                part = t.msm(k, stream)
                total = part if total is None else total + part
                info["chunks"] += 1
        if total is None:
            from py_arkworks_bls12381 import G1Point, G2Point
            total = G2Point.identity() if g.name == "g2" else G1Point.identity()
        return total

    def _ones_chains(self, bases, cls: Classified, stream=None):
        """ZKHIVE_MSM_ONES_AFFINE: the 1s by affine chains (ones_affine.cu) into accumulators
        in the group's tail engine's compact bases, idle until the tail's gather after this sum
        on the same stream (the engine is booked with the key: no memory of its own). Returns
        (the accumulators' device address, their count, what the benchmark reports), or None
        where the plan leaves the 1s to the XYZZ sum (gpu/affine_plan.py ones_plan)."""
        from gpu.affine_plan import ONES_ACC_BYTES, ONES_THREADS, blocks_per_sm, ones_affine, \
            ones_chains, ones_chains_kernel, ones_kernel, ones_plan
        g = bases.group.name
        if not ones_affine():
            return None
        form = ones_kernel(g)  # "whole" unless a benchmark sets ZKHIVE_MSM_ONES_KERNEL
        module, name = ones_chains_kernel(g, form)
        f = self._f.get(name)
        if f is None:
            f = self._f[name] = loader.get_function(loader.load_module(module), name)
        t = self.tail(g, cls.n)
        if self._ones_shape:
            G, W = self._ones_shape
            S = -(-cls.ones // (G * ONES_THREADS * W))
            if G * ONES_THREADS * W * ONES_ACC_BYTES[g] > t.bases.nbytes:
                raise GpuError(f"{g} 1s: {G} x {ONES_THREADS} x {W} accumulators need more than "
                               f"the tail engine's {t.bases.nbytes} bytes")
        else:
            W = ones_chains()
            plan = ones_plan(g, cls.ones, self._sms,
                             blocks_per_sm(f.num_regs, f.shared_size_bytes), t.bases.nbytes, W)
            if plan is None:
                return None
            G, S = plan
        An = G * ONES_THREADS * W
        # An affine points (4 bytes a limb of x, y), then An prefix products (the rest of
        # ONES_ACC_BYTES: one coordinate's)
        accs = t.bases.ptr
        pre = accs + An * 4 * bases.group.limbs  # ones_plan kept An ONES_ACC_BYTES in room
        self._launch(name, (G, 1), np.int64(cls.ones), np.int64(S), np.int32(W),
                     _u(cls.lists), _u(bases._bases), np.uintp(accs), np.uintp(pre),
                     block=ONES_THREADS, shape=cls.ones, stream=stream)
        return accs, An, {"ones_sum": "affine", "ones_blocks": G, "ones_chains": W,
                          "ones_steps": S, "ones_kernel": form, "ones_regs": f.num_regs}

    def _sum_ones(self, bases, cls: Classified, stream=None, info: dict | None = None):
        g = bases.group.name
        point = 8 * bases.group.limbs  # XYZZ: four coordinates
        chains = self._ones_chains(bases, cls, stream)
        # the XYZZ sum over the listed bases, or over the chains' accumulators (no list)
        lists, pts, count = (0, chains[0], chains[1]) if chains else \
            (_u(cls.lists), _u(bases._bases), cls.ones)
        if info is not None:
            info.update(chains[2] if chains else {"ones_sum": "xyzz"})
        T = max(1, min(count, self._sms * 1024))
        parts = self._parts.get(g)
        if parts is None or parts[0].nbytes < point * T:
            if parts is not None:
                for p in parts:
                    p.free()
            parts = self._parts[g] = (DeviceBuffer(point * self._sms * 1024, what=f"{g} ones partials"),
                                      DeviceBuffer(point * (self._sms * 32 + 1), what=f"{g} ones partials"))
        self._launch(f"{g}_sum_ones", _grid(T, 128), np.int64(T), np.int64(count), np.uintp(lists),
                     np.uintp(pts), _u(parts[0]), block=128, shape=T, stream=stream)
        src, length = 0, T
        while length > 1:
            q = -(-length // 32)
            self._launch(f"{g}_sum_parts", _grid(q, 64), np.int64(length), np.int64(32),
                         _u(parts[src]), _u(parts[1 - src]), block=64, shape=length, stream=stream)
            src, length = 1 - src, q
        self._launch(f"{g}_store_point", (1, 1), _u(parts[src]), _u(self._out), block=1,
                     stream=stream)
        from gpu.cuda.msm import _pinned_scratch, read_back
        out = np.zeros(bases.group.limbs, dtype=np.uint32) if stream is None else \
            _pinned_scratch(bases.group.limbs // 2).view(np.uint32)
        read_back(out, self._out.ptr, stream)
        return decode_point(out, bases.group)

    def engines(self) -> set[int]:
        """The ids of the tail and dense engines made so far (``close_engines_since``)."""
        return {id(e) for e in (*self._tails.values(), *self._dense.values())}

    def close_engines_since(self, before: set[int]) -> None:
        """Close the engines not in ``before`` (``engines()`` then): a key's load that failed
        after they were warmed for it (gpu/backends/cuda.py); the next load makes what it needs."""
        for table in (self._tails, self._dense):
            for g, e in list(table.items()):
                if id(e) not in before:
                    e.close()
                    del table[g]

    def close(self) -> None:
        for t in self._tails.values():
            t.close()
        self._tails = {}
        for e in self._dense.values():
            e.close()
        self._dense = {}
        for parts in self._parts.values():
            for p in parts:
                p.free()
        self._parts = {}
        for b in (self._flags, self._out):
            b.free()
