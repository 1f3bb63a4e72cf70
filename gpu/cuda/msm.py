"""Pippenger MSM on the device (kernels: gpu/kernels/msm.cu over msm_core.cuh and curve.cuh).

A :class:`DeviceBases` uploads a base set once (converted to Montgomery form and checked on the
curve on the device) and keeps it, plus a per-window-size workspace, until ``close()``; each
``msm(scalars)`` then moves only the scalars (or none, when they are already on the device)::

    loader.init_context(0)
    with DeviceBases(gpu.msm.encode_points(pk.h_query, "g1"), "g1") as h_bases:
        H = h_bases.msm(h)          # (n, 4) uint64 host array (pinned: async copy) or DeviceBuffer

One MSM, on the context's default stream (msm_core.cuh explains the steps):
  histogram of the signed digits -> exclusive scan (chunks, chunk totals, add back; the total M
  stays on the device) -> scatter (counting sort) -> level-1 bucket accumulation over T1 equal
  ranges, T1 = the threads the chip holds at once, so every range is one resident thread ->
  partial-sum levels, 8 partials per thread, until one thread -> segmented window reduction ->
  per-window sums -> the W window sums back (W x 192/384 bytes) -> Horner combination and affine
  conversion on the CPU (the host build of the same code) -> decoded with arkworks' checked
  decoder.

Set ``ZKHIVE_MSM_PROFILE=1`` to record per-stage device times (CUDA events) in
``DeviceBases.last_profile`` (ms).
"""
from __future__ import annotations

import os

import numpy as np

from gpu.affine_plan import (dense_affine_rounds, dense_affine_windows, dense_final_into,
                              dense_sharing, env_switch)
from gpu.cuda import loader
from gpu.cuda.launch import _SCAN_CHUNK, BLOCK, _grid, _u, exclusive_scan, memset_words
from gpu.cuda.marks import StageMarks
from gpu.cuda.memory import DeviceBuffer, DeviceView
from gpu.errors import GpuError, MsmInputError
from gpu.msm_input import check_bases, check_scalars, decode_point, group_of, window_bits, windows
from gpu.msm_sort import dense_sort, radix_blocks, radix_count_words, radix_passes, radix_plan, \
    sort_kind, window_sort_plan

#: Partial sums each thread reduces per level after level 1 (>= 4 so each level shrinks).
LEVEL_WIDTH = 8
#: Window-reduction threads per resident level-1 thread (ZKHIVE_MSM_SEG_FACTOR overrides it,
#: read when a workspace is made; bench/gpu_msm.py's variants).
SEG_FACTOR = 1.0
#: First-level segments a second-level segment of the window reduction (msm_core.cuh
#: first_run_out), and the points a thread adds in the per-window sums after it: short
#: chains, many threads (each step of a chain waits for the one before). H200 (bench/gpu_msm.py,
#: reduce stage, G2 2^21 / G1 2^24 / G1 2^24 precomputed): 32, 32: 11.4 / 13.3 / 5.8 ms;
#: 8, 32: 8.8 / 12.4 / 5.1; 8, 8: 6.7 / 11.8 / 4.4; 4, 8: 7.4 / 12.1 / 4.4.
#: ZKHIVE_MSM_REDUCE_G2 / ZKHIVE_MSM_SUM_GROUP override them (read when a workspace is made).
REDUCE_G2 = 8
SUM_GROUP = 8
_NO_INDEX = 0xFFFFFFFFFFFFFFFF
#: gpu.native.curve.combine once the host build loaded, False when it cannot be built
_host_combine = None


def reduction_shape() -> tuple[int, int]:
    """(REDUCE_G2, SUM_GROUP) with their settings (ZKHIVE_MSM_REDUCE_G2, ZKHIVE_MSM_SUM_GROUP):
    powers of two, at least 2."""
    out = []
    for var, default in (("ZKHIVE_MSM_REDUCE_G2", REDUCE_G2), ("ZKHIVE_MSM_SUM_GROUP", SUM_GROUP)):
        v = os.environ.get(var, "") or str(default)
        try:
            x = int(v)
        except ValueError:
            x = 0
        if x < 2 or x & (x - 1):
            raise GpuError(f"{var}={v!r}: expected a power of two, at least 2")
        out.append(x)
    return out[0], out[1]


#: which module of gpu/kernels holds a kernel (msm.cu was split so that a cold build compiles
#: its heavy kernels in parallel: one module per heavy kernel)
_MODULE_OF = {
    "g1_accumulate_bases": "msm_g1_acc", "g1_merge_buckets": "msm_merge",
    "g1_accumulate_parts": "msm_g1_parts",
    "g2_accumulate_bases_np": "msm_g2_acc", "g2_accumulate_parts": "msm_g2_parts",
    "g2_gen_bases": "msm_g2_gen", "g2_combine": "msm_g2_combine",
    "g2_reduce_segments": "msm_g2_reduce", "g2_sum_groups": "msm_g2_sum",
    "g1_accumulate_bases_lb": "msm_variants", "g2_accumulate_bases": "msm_variants",
    "g2_accumulate_bases_lean": "msm_g2_lean", "g2_sum_ones_lean": "msm_g2_lean",
    "msm_radix_digits": "msm_sort", "msm_radix_upsweep": "msm_sort",
    "msm_radix_downsweep": "msm_sort", "msm_window_upsweep": "msm_sort",
    "msm_window_downsweep": "msm_sort",
}


def g2_lean() -> bool:
    """G2's level-1 accumulation and the split MSM's G2 ones-sum by the kernels of
    msm_g2_lean.cu (the mixed addition ordered to keep fewer values live, the next base
    prefetched into L1; ptxas: 74 bytes of spill stores against 1,838, docs/gpu.md): on by
    default (1 or unset), since the H200 measured the 32 GiB partition 62 ms faster with them
    (1,376.7 against 1,439.1 ms, docs/performance.md); ZKHIVE_MSM_G2_LEAN=0: the others."""
    return env_switch("ZKHIVE_MSM_G2_LEAN", True)


def module_of(name: str) -> str:
    """The module of gpu/kernels that holds MSM kernel ``name``: msm_*, fq_mul_rate and
    fq_sqr_rate in msm.cu, g1_*/g2_* in msm_g1.cu / msm_g2.cu unless ``_MODULE_OF`` names
    another."""
    mod = _MODULE_OF.get(name)
    if mod is None:
        mod = "msm_g1" if name.startswith("g1_") else "msm_g2" if name.startswith("g2_") else "msm"
    return mod


def kernel(name: str):
    """An MSM kernel by name, from the module that holds it (loaded once per context)."""
    return loader.get_function(loader.load_module(module_of(name)), name)


def host_combine():
    """gpu.native.curve.combine once the host build loaded, False when it cannot be built."""
    global _host_combine
    if _host_combine is None:
        try:
            from gpu.native import curve
            curve.lib()
            _host_combine = curve.combine
        except Exception:  # no g++ (arith.native.NativeBuildError) or a broken build
            _host_combine = False
    return _host_combine


_pinned: dict[int, np.ndarray] = {}


def _pinned_scratch(words: int) -> np.ndarray:
    """A page-locked uint64 array of ``words`` (kept per size; read back and consumed at once,
    under the device lock, so one per size is enough)."""
    arr = _pinned.get(words)
    if arr is None:
        arr = _pinned[words] = loader.driver().pagelocked_empty(words, np.uint64)
    return arr


def read_back(host: np.ndarray, ptr: int, stream=None) -> None:
    """Copy device memory at ptr into ``host``; with a stream, ordered on it and waited for
    (the other streams run on)."""
    cuda = loader.driver()
    with loader.guard(kernel="read back", shape=host.shape):
        if stream is None:
            cuda.memcpy_dtoh(host, ptr)
        else:
            cuda.memcpy_dtoh_async(host, ptr, stream)
            stream.synchronize()


class _Workspace:
    """Device buffers for one window size (reused across MSMs of a base set)."""

    def __init__(self, n: int, c: int, point_bytes: int, T1: int, segs: int,
                 bucket_windows: int | None = None, g2: int = REDUCE_G2):
        # bucket_windows: the sets of buckets (1 over precomputed bases, where every window's
        # digits share one set); the sorted lists still hold n windows(c) digits
        nw, B = windows(c), 1 << (c - 1)
        W = bucket_windows or nw
        K = W * B
        self.c, self.W, self.B, self.K, self.T1, self.segs = c, W, B, K, T1, segs
        self.buffers = []
        self._radix = None  # the radix sort's buffers, made at its first use (radix())
        try:
            def buf(nbytes, what):
                b = DeviceBuffer(max(int(nbytes), 8), what=what)
                self.buffers.append(b)
                return b
            self.counts = buf(4 * K, "msm bucket counts")
            self.cursor = buf(4 * K, "msm bucket offsets")
            self.sums = buf(4 * (-(-K // _SCAN_CHUNK)), "msm scan chunk totals")
            self.flags = buf(16, "msm total and bad index")  # u64 M, u64 bad scalar index
            self.keys = buf(4 * n * nw, "msm sorted keys")
            self.vals = buf(4 * n * nw, "msm sorted point indices")
            self.buckets = buf(point_bytes * K, "msm buckets")
            self.part_keys = [buf(4 * 2 * T1, "msm partial keys") for _ in range(2)]
            self.parts = [buf(point_bytes * 2 * T1, "msm partial sums") for _ in range(2)]
            # seg[0]: both reduction levels' parts a window (S + S / REDUCE_G2); seg[1]: the
            # first level's G T_j, then the per-window sums
            self.seg = [buf(point_bytes * W * (segs + segs // min(segs, g2)),
                            "msm window segments"),
                        buf(point_bytes * W * segs, "msm window segments")]
            self.out = buf(4 * 48, "msm result")
        except Exception:
            self.free()
            raise

    def radix(self, n: int) -> "_RadixSort":
        """The radix sort's buffers for up to n scalars (made once, freed with the workspace)."""
        rs = self._radix
        if rs is None or rs.n < n:
            if rs is not None:  # a longer tail than before: its lists may still be in use
                loader.driver().Context.synchronize()
                rs.free(self.buffers)
            rs = self._radix = _RadixSort(n, windows(self.c), self.buffers, self.c)
        return rs

    def free(self) -> None:
        for b in self.buffers:
            b.free()
        self.buffers = []
        self._radix = None


class _RadixSort:
    """The radix sort's buffers (msm_sort.cu): the second (key, point) list the passes
    alternate with the workspace's, the counts (the 8-bit passes' (digit, block) counts and
    offsets, or the window sort's matrix scanned in place: one allocation of
    gpu.msm_sort.radix_count_words), the scan's chunk totals and its grand total (not M: M is
    the digits kernel's)."""

    def __init__(self, n: int, W: int, owner: list, c: int | None = None):
        self.n, self.c, self.mine = int(n), c, []
        blocks = radix_blocks(n * W)
        words = radix_count_words(n, W, c)

        def buf(nbytes, what):
            b = DeviceBuffer(max(int(nbytes), 8), what=what)
            self.mine.append(b)
            owner.append(b)
            return b
        try:
            # one allocation: idle while the dense engine's rounds run, it lends them its bytes
            # (gpu/affine_plan.py dense_sharing)
            self.list = buf(8 * n * W, "msm radix second list")
            self.keys = DeviceView(self.list, 0, 4 * n * W, "msm radix keys")
            self.vals = DeviceView(self.list, 4 * n * W, 4 * n * W, "msm radix values")
            self.counts = buf(4 * words, "msm radix digit counts")
            self.hist = DeviceView(self.counts, 0, 4 * 256 * blocks, "msm radix digit counts")
            self.offs = DeviceView(self.counts, 4 * 256 * blocks, 4 * 256 * blocks,
                                   "msm radix digit offsets")
            self.sums = buf(4 * -(-words // _SCAN_CHUNK), "msm radix scan totals")
            self.total = buf(8, "msm radix scan total")
        except Exception:
            self.free(owner)
            raise

    def free(self, owner: list) -> None:
        for b in self.mine:
            b.free()
            if b in owner:
                owner.remove(b)
        self.mine = []


class DeviceBases:
    """A base set resident on the current device; ``msm(scalars)`` -> arkworks point."""

    backend = "cuda"

    def __init__(self, bases: np.ndarray, group, *, window: int | None = None):
        self.group = g = group_of(group)
        bases = check_bases(bases, g)
        self.n = len(bases)
        self.window = window
        self.point_bytes = 4 * 2 * g.limbs       # XYZZ: four coordinates
        self.last_profile: dict[str, float] = {}
        self._bind_kernels()
        self._work: dict[int, _Workspace] = {}
        self._scalars = None
        self._bases = DeviceBuffer(bases.nbytes, what=f"{g.name} bases")
        try:
            with DeviceBuffer(bases.nbytes, what=f"{g.name} raw bases") as raw, \
                    DeviceBuffer(8, what="bad base index") as bad:
                raw.upload(bases)
                self._memset_ones(bad, 2)
                self._launch("load_bases", _grid(self.n), np.int64(self.n), _u(raw),
                             _u(self._bases), _u(bad))
                idx = self._read_u64(bad)
            if idx != _NO_INDEX:
                raise MsmInputError(f"{g.name} base {idx} is not a point on the curve (or a "
                                    "coordinate is not below the field modulus)", index=int(idx),
                                    device=self._device, kernel=f"{g.name}_load_bases",
                                    shape=self.n)
        except Exception:
            self.close()
            raise

    @classmethod
    def filled_on_device(cls, n: int, group, fill, *, window: int | None = None) -> "DeviceBases":
        """A base set of ``n`` points that ``fill(buffer)`` writes on the device, in the layout
        ``load_bases`` writes (Montgomery affine, identity = 0, 0): the device setup's fixed-base
        kernel fills it, so the points never exist on the host and are not checked again (the
        caller computed them from the generator)."""
        self = cls.__new__(cls)
        self.group = g = group_of(group)
        self.n, self.window = int(n), window
        self.point_bytes = 4 * 2 * g.limbs
        self.last_profile = {}
        self._bind_kernels()
        self._work, self._scalars = {}, None
        self._bases = DeviceBuffer(max(4 * g.limbs * self.n, 8), what=f"{g.name} bases")
        try:
            fill(self._bases)
        except Exception:
            self.close()
            raise
        return self

    def export(self, table) -> dict:
        """This base set for another process (gpu/cuda/memory.py ExportTable): the points'
        allocation and the scalars that describe it; the workspaces stay (per process)."""
        return {"group": self.group.name, "n": int(self.n), "window": self.window,
                "bases": table.ref(self._bases)}

    @classmethod
    def attach(cls, entry: dict, table) -> "DeviceBases":
        """A base set over another process's points (``export``'s entry, its table opened):
        workspaces of this process's own, made at first use; close() unmaps the points."""
        self = cls.__new__(cls)
        self.group = g = group_of(entry["group"])
        self.n, self.window = int(entry["n"]), entry.get("window")
        if self.n <= 0:
            raise GpuError(f"manifest: a {g.name} base set of {self.n} points")
        self.point_bytes = 4 * 2 * g.limbs
        self.last_profile = {}
        self._bind_kernels()
        self._work, self._scalars = {}, None
        self._bases = table.get(entry["bases"], 4 * g.limbs * self.n, f"{g.name} bases")
        return self

    # -- plumbing ---------------------------------------------------------------------------

    def _bind_kernels(self, lean: bool | None = None) -> None:
        """The msm modules' kernels for this group (with the measured per-group variants);
        also used by gpu.cuda.split_msm's engines over base buffers of their own. lean: G2's
        lean level 1 (None: g2_lean(), the setting now)."""
        g = self.group
        self._cuda = loader.driver()
        self._f = {k: kernel(k) for k in (
            "msm_histogram", "msm_scan_chunks", "msm_scan_sums", "msm_scan_add", "msm_scatter",
            "msm_radix_digits", "msm_radix_upsweep", "msm_radix_downsweep",
            "msm_window_upsweep", "msm_window_downsweep")}
        for k in ("load_bases", "accumulate_parts", "reduce_segments", "sum_groups", "combine"):
            self._f[k] = kernel(f"{g.name}_{k}")
        # level 1: only the kernel this run uses is looked up (a variant's module, msm_variants.cu,
        # is not precompiled: looking it up would compile it, ~45 s of nvcc at the first G2 base
        # set, as calls 1 and 2 of issue 25 did inside the setup's b_g2 stage)
        acc = f"{g.name}_accumulate_bases"
        if g.name == "g1" and os.environ.get("ZKHIVE_MSM_G1_LB", "0") == "1":
            acc = "g1_accumulate_bases_lb"  # capped at 168 registers (msm_variants.cu)
        if g.name == "g2" and os.environ.get("ZKHIVE_MSM_G2_PREFETCH", "0") != "1":
            # G2's default level-1 kernel has no next-base prefetch: its 48 registers spill on top
            # of the 96-register accumulator; the prefetching one (msm_variants.cu,
            # ZKHIVE_MSM_G2_PREFETCH=1) measured 202.9 against 153.7 ms at 2^22 on the H200
            acc = "g2_accumulate_bases_np"
        if g.name == "g2" and (g2_lean() if lean is None else lean):
            acc = "g2_accumulate_bases_lean"  # fewer live registers (msm_g2_lean.cu)
        self._f["accumulate_bases"] = kernel(acc)
        self._device = loader.device_name()

    def _launch(self, name: str, grid, *args, block: int = BLOCK, stream=None) -> None:
        with loader.guard(kernel=name, shape=self.n):
            self._f[name](*args, block=(block, 1, 1), grid=grid, stream=stream)

    def _memset_ones(self, buf: DeviceBuffer, words: int, stream=None) -> None:
        memset_words(buf.ptr, 0xFFFFFFFF, words, stream)

    def _read_u64(self, buf: DeviceBuffer, offset: int = 0, stream=None) -> int:
        out = np.zeros(1, dtype=np.uint64) if stream is None else _pinned_scratch(1)
        read_back(out, buf.ptr + offset, stream)
        return int(out[0])

    def _level1_threads(self) -> tuple[int, int]:
        """(threads, block) for level 1: exactly the threads the chip holds at once, so the
        equal ranges finish together (a second partial wave would double the time)."""
        f = self._f["accumulate_bases"]
        dev = self._cuda.Context.get_device()
        sms = dev.get_attribute(self._cuda.device_attribute.MULTIPROCESSOR_COUNT)
        regs = max(1, f.num_regs)
        warps = min(64, 65536 // (-(-regs * 32 // 256) * 256))
        best = max((warps // wb * wb, wb) for wb in (4, 3, 2, 1) if warps // wb <= 32)
        block = 32 * best[1]
        return sms * (warps // best[1]) * block, block

    def _workspace(self, c: int, bucket_windows: int | None = None) -> _Workspace:
        ws = self._work.get(c)
        if ws is None:
            T1, block = self._level1_threads()
            B, W = 1 << (c - 1), bucket_windows or windows(c)
            # segments of G buckets: enough reduction threads to fill the chip SEG_FACTOR
            # times over (each runs a serial chain of 2G additions, latency-bound)
            G, want = 1, T1 * float(os.environ.get("ZKHIVE_MSM_SEG_FACTOR", SEG_FACTOR))
            while G < B and W * B // (2 * G) >= want:
                G *= 2
            g2, group_width = reduction_shape()
            ws = _Workspace(self.n, c, self.point_bytes, T1, B // G, bucket_windows, g2)
            ws.block1, ws.G, ws.G2, ws.group_width = block, G, g2, group_width
            self._work[c] = ws
        return ws

    # -- the MSM ----------------------------------------------------------------------------

    def msm(self, scalars, *, window: int | None = None, stream=None):
        """sum_i scalars[i] * bases[i]. ``scalars``: canonical Fr vector (n, 4) uint64 on the
        host, or a DeviceBuffer holding one (checked on the device: a scalar >= r raises
        MsmInputError naming it). ``stream``: every launch, copy and event on that CUDA stream
        (the host waits for that stream only); None: the context's default stream."""
        if self._bases is None:
            raise GpuError(f"{self.group.name} base set is closed")
        c = window or self.window or window_bits(self.n)
        if not 1 <= c <= 24:
            raise MsmInputError(f"window {c} out of range 1..24")
        ws = self._workspace(c)
        sc = self._scalar_buffer(scalars)
        mark = StageMarks(stream)
        n, W, K = self.n, ws.W, ws.K
        mark("start")
        self._memset_ones(ws.flags, 4, stream)
        radix = sort_kind() == "radix"
        if radix:
            self._sort_radix(ws, sc.ptr, n, c, stream=stream)
        else:
            memset_words(ws.counts.ptr, 0, K, stream)
            self._launch("msm_histogram", _grid(n), np.int64(n), _u(sc), np.int32(c),
                         _u(ws.counts), np.uintp(ws.flags.ptr + 8), stream=stream)
            self._scan(ws, stream)
            self._launch("msm_scatter", _grid(n), np.int64(n), _u(sc), np.int32(c),
                         _u(ws.cursor), _u(ws.keys), _u(ws.vals), stream=stream)
        mark("sort")
        self._accumulate(ws, self._bases.ptr, stream)
        mark("accumulate")
        src = self._reduce(ws, counts=0 if radix else ws.counts.ptr, stream=stream)
        mark("reduce")
        out = self._combine(ws, src, W, c, stream)
        mark("combine")
        bad = self._read_u64(ws.flags, 8, stream)
        if bad != _NO_INDEX:
            raise MsmInputError(f"MSM scalar {bad} is not below the Fr modulus", index=int(bad),
                                device=self._device, kernel="msm_histogram", shape=n)
        if mark.on:
            self.last_profile = mark.times()
        return decode_point(out, self.group)

    def _sort_radix(self, ws: _Workspace, sptr, k: int, c: int, *, first: int = 0,
                    precomputed: bool = False, zero_buckets: bool = True, stream=None) -> None:
        """msm_sort.cu's LSD radix sort of k scalars' digits at sptr into ws.keys/vals (keys
        ascending, the M nonzero digits first), M into flags[0], and the buckets zeroed (no
        counts: the reduction and the merge then take every bucket; zero_buckets=False where
        nothing reads them: the dense engine's tail into its running buckets); a scalar >= r
        sets flags[1] to first + its index. precomputed: every window's digit goes to one set
        of 2^(c-1) buckets, the value w k + i naming the base 2^(c w) P_i of the table
        (gpu/cuda/precomputed.py)."""
        W = windows(c)
        key_space = ws.B if precomputed else ws.K
        rs = ws.radix(k)
        plan = None if precomputed or radix_plan() != "window" else window_sort_plan(k, W, c)
        if plan is not None:
            self._sort_windows(ws, rs, plan, sptr, first=first, stream=stream)
            if zero_buckets:
                memset_words(ws.buckets.ptr, 0, ws.K * self.point_bytes // 4, stream)
            return
        items, blocks = k * W, radix_blocks(k * W)
        wstride, vstride = (0, k) if precomputed else (ws.B, 0)
        passes = radix_passes(key_space)
        # the digits go where the last pass reads from, so the sorted list ends in ws.keys/vals
        lists = [(ws.keys, ws.vals), (rs.keys, rs.vals)]
        src = passes % 2
        memset_words(ws.flags.ptr, 0, 2, stream)                 # M = 0
        self._launch("msm_radix_digits", _grid(k), np.int64(k), np.uintp(sptr), np.int32(c),
                     np.uint32(wstride), np.uint32(vstride), np.uint32(key_space),
                     _u(lists[src][0]), _u(lists[src][1]), _u(ws.flags),
                     np.uintp(ws.flags.ptr + 8), np.int64(first), stream=stream)
        for p in range(passes):
            (ki, vi), (ko, vo) = lists[src], lists[1 - src]
            self._launch("msm_radix_upsweep", (blocks, 1), np.int64(items), _u(ki),
                         np.int32(8 * p), np.int64(blocks), _u(rs.hist), block=256,
                         stream=stream)
            exclusive_scan(self._launch, 256 * blocks, rs.hist, rs.offs, rs.sums, rs.total,
                           stream)
            self._launch("msm_radix_downsweep", (blocks, 1), np.int64(items), _u(ki), _u(vi),
                         np.int32(8 * p), np.int64(blocks), _u(rs.offs), _u(ko), _u(vo),
                         block=256, stream=stream)
            src = 1 - src
        if zero_buckets:
            memset_words(ws.buckets.ptr, 0, ws.K * self.point_bytes // 4, stream)

    def _sort_windows(self, ws: _Workspace, rs: "_RadixSort", plan, sptr, *, first: int,
                      stream=None) -> None:
        """msm_sort.cu's window sort (gpu.msm_sort.WindowSortPlan) of plan.n scalars' digits at
        sptr into ws.keys/vals: the same list as the 8-bit passes leave (the M nonzero digits by
        key, then the zero digits under the key K), M into flags[0], a scalar >= r into
        flags[1] as first + its index."""
        k, W, tiles = plan.n, plan.W, plan.tiles
        passes = plan.passes
        lists = [(ws.keys, ws.vals), (rs.keys, rs.vals)]
        src = len(passes) % 2   # the digits go where the last pass reads from
        memset_words(ws.flags.ptr, 0, 2, stream)                 # M = 0
        # the bare digit |d| - 1 (no window part: wstride = 0), a zero digit as plan.zero
        self._launch("msm_radix_digits", _grid(k), np.int64(k), np.uintp(sptr), np.int32(plan.c),
                     np.uint32(0), np.uint32(0), np.uint32(plan.zero),
                     _u(lists[src][0]), _u(lists[src][1]), _u(ws.flags),
                     np.uintp(ws.flags.ptr + 8), np.int64(first), stream=stream)
        for p in passes:
            (ki, vi), (ko, vo) = lists[src], lists[1 - src]
            entries = plan.entries(p)
            common = (np.int32(p.shift), np.int32(p.bits), np.uint32(p.bins), np.int32(p.last),
                      np.int32(W))
            self._launch("msm_window_upsweep", (tiles, W), np.int64(k), _u(ki), *common,
                         _u(rs.counts), block=512, stream=stream)
            # in place; the chunk totals are added by the downsweep (no msm_scan_add pass)
            nb = -(-entries // _SCAN_CHUNK)
            self._launch("msm_scan_chunks", (nb, 1), np.int64(entries), _u(rs.counts),
                         _u(rs.counts), _u(rs.sums), block=1024, stream=stream)
            self._launch("msm_scan_sums", (1, 1), np.int64(nb), _u(rs.sums), _u(rs.total),
                         block=1024, stream=stream)
            self._launch("msm_window_downsweep", (tiles, W), np.int64(k), _u(ki), _u(vi),
                         *common, _u(rs.counts), _u(rs.sums), np.uint32(ws.B),
                         np.uint32(ws.K), _u(ko), _u(vo), block=512, stream=stream)
            src = 1 - src

    def _scalar_buffer(self, scalars) -> DeviceBuffer:
        """The n scalars on the device: a DeviceBuffer as it is (long enough), a host array
        checked (canonical Fr) and copied into the base set's own scalar buffer."""
        if isinstance(scalars, DeviceBuffer):
            if scalars.nbytes < 32 * self.n:
                raise MsmInputError(f"scalar buffer holds {scalars.nbytes} bytes, "
                                    f"{self.n} scalars need {32 * self.n}")
            return scalars
        host = check_scalars(scalars, self.n)
        if self._scalars is None:
            self._scalars = DeviceBuffer(32 * self.n, what="msm scalars")
        self._scalars.upload(host)  # synchronous for pageable memory; pinned at full speed
        return self._scalars

    def _scan(self, ws: _Workspace, stream=None) -> None:
        """Exclusive scan of the bucket counts into the scatter's cursors; M into flags[0]."""
        exclusive_scan(self._launch, ws.K, ws.counts, ws.cursor, ws.sums, ws.flags, stream)

    def _accumulate(self, ws: _Workspace, bases_ptr: int, stream=None) -> None:
        """Level 1 over T1 equal ranges of the sorted digits, then partial-sum levels until one
        range holds everything."""
        T = ws.T1
        acc, parts = "accumulate_bases", "accumulate_parts"
        self._launch(acc, _grid(T, ws.block1), np.int64(T), _u(ws.flags), _u(ws.keys),
                     _u(ws.vals), np.uintp(bases_ptr), _u(ws.buckets), _u(ws.part_keys[0]),
                     _u(ws.parts[0]), block=ws.block1, stream=stream)
        src = 0
        while T > 1:
            Mp, Tn = 2 * T, -(-2 * T // LEVEL_WIDTH)
            self._launch(parts, _grid(Tn, 32), np.int64(Tn), np.int64(LEVEL_WIDTH),
                         np.int64(Mp), _u(ws.part_keys[src]), _u(ws.parts[src]), _u(ws.buckets),
                         _u(ws.part_keys[1 - src]), _u(ws.parts[1 - src]), block=32,
                         stream=stream)
            src, T = 1 - src, Tn

    def _reduce(self, ws: _Workspace, *, counts: int, stream=None) -> int:
        """Segmented window reduction in two levels (msm_core.cuh reduce_segment): the S
        segments of G buckets each without their offsets (G T_j into seg[1]), then the offsets
        sum_j j (G T_j) by the same reduction over those S points in segments of ws.G2,
        both levels' parts of a window side by side in seg[0] (rows of S + S2), then the
        per-window sums; returns which seg buffer holds the W window sums. counts = 0: every
        bucket holds a point (the chunked MSM zeroes them)."""
        W, B, S = ws.W, ws.B, ws.segs
        G2 = min(S, ws.G2)
        S2 = S // G2 if S > 1 else 0
        row = S + S2
        self._launch("reduce_segments", _grid(W * S, 64), np.int32(W), np.int64(B),
                     np.int64(ws.G), _u(ws.buckets), np.uintp(counts), _u(ws.seg[0]),
                     np.uintp(ws.seg[1].ptr if S > 1 else 0), np.int64(row), np.int64(0),
                     block=64, stream=stream)
        if S2:
            self._launch("reduce_segments", _grid(W * S2, 64), np.int32(W), np.int64(S),
                         np.int64(G2), _u(ws.seg[1]), np.uintp(0), _u(ws.seg[0]), np.uintp(0),
                         np.int64(row), np.int64(S), block=64, stream=stream)
        src, length = 0, row
        while length > 1:
            grp = min(length, ws.group_width)
            q = -(-length // grp)
            self._launch("sum_groups", _grid(W * q, 32), np.int64(W), np.int64(length),
                         np.int64(grp), _u(ws.seg[src]), _u(ws.seg[1 - src]), block=32,
                         stream=stream)
            src, length = 1 - src, q
        return src

    def _combine(self, ws: _Workspace, src: int, W: int, c: int, stream=None) -> np.ndarray:
        """sum_w 2^(c w) W_w -> xy limbs: the W window sums come back (W x 96/192 bytes) and the
        host build of the same Horner loop runs on the CPU (gpu/native/curve_host.cpp), under a
        millisecond; on one GPU thread it took 10 ms (G1) and 27 ms (G2) at every size. Without
        a C++ compiler for the host build, the one-thread kernel does it."""
        if host_combine():
            win = np.empty((W, self.point_bytes // 4), dtype=np.uint32) if stream is None else \
                _pinned_scratch(W * self.point_bytes // 8).view(np.uint32).reshape(W, -1)
            read_back(win, ws.seg[src].ptr, stream)
            return _host_combine(self.group, win, c)
        self._launch("combine", (1, 1), np.int32(W), np.int32(c), _u(ws.seg[src]), _u(ws.out),
                     block=1, stream=stream)
        out = np.zeros(self.group.limbs, dtype=np.uint32)
        read_back(out, ws.out.ptr, stream)
        return out

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Free the bases, the scalar buffer and every workspace now (not at GC)."""
        for ws in self._work.values():
            ws.free()
        self._work = {}
        for name in ("_bases", "_scalars"):
            b = getattr(self, name, None)
            if b is not None:
                b.free()
                setattr(self, name, None)

    def __enter__(self) -> "DeviceBases":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class DenseEngine:
    """The chunked MSM for queries larger than one Pippenger workspace whose scalars are dense
    (the H query at 2^27: 2^27 - 1 random scalars): straight over the resident bases (no
    gather into compact buffers), a chunk of ``chunk`` scalars at a time: each chunk's buckets
    made as any MSM's, then merged into the MSM's running buckets (``g1_merge_buckets``: one
    full addition a bucket the chunk wrote, ~3.5 ms a 2^24 chunk at 20-bit windows, where a
    reduction of its own costs ~13 ms), one window reduction and one read-back at the end; no
    host round trip between the chunks, so the whole query is queued on a stream at once
    (``start``) and collected later (``finish``) while other streams run. Memory: one
    Pippenger workspace for a chunk plus a second set of buckets (the running sums).

    Sort: msm_sort.cu's radix sort (every write part of a run; memory: a second list, 8 bytes
    a digit; the chunk's buckets zeroed and all of them merged); ZKHIVE_MSM_DENSE_SORT=plain
    takes msm.cu's one-level ``msm_histogram_dense``/``msm_scatter_dense`` (36 ms a 2^24 chunk
    on the H200), =match the one-level kernels with the warp match (gpu.msm_sort.dense_sort).
    G1 only (the kernels with add-in exist for G1).

    Accumulation: rounds of batched affine additions (gpu/cuda/affine_acc.py: 6 Fq products a
    point against XYZZ's 10; ZKHIVE_MSM_DENSE_AFFINE_ROUNDS, default auto), a slice of
    DENSE_WINDOWS windows at a time so that their buffers fit beside the key (at 2^25 chunks in
    3-window slices, their prefix products in the radix sort's idle second list and the
    running sums in the workspace's own buckets: gpu/affine_plan.py dense_sharing; the engine
    15.85 GiB), then msm_core.cuh's XYZZ ranges over what is left of each run; with rounds 0
    (or ``affine=False``) the XYZZ ranges alone. filecoin-32g on the H200, key made on the device:
    1,466.9 ms a partition against 1,606.0 in XYZZ at the same chunks (gpu/affine_plan.py has
    the slice measurements)."""

    def __init__(self, group, chunk: int, *, window: int | None = None, affine: bool = True):
        """affine=False: the XYZZ accumulation whatever the setting (the ledger admitted the
        key without the affine buffers)."""
        g = group_of(group)
        if g.name != "g1":
            raise GpuError("the chunked dense MSM exists for G1 only")
        self.group, self.chunk = g, int(chunk)
        self.window = window or int(os.environ.get("ZKHIVE_MSM_DENSE_WINDOW", "0")) or \
            window_bits(self.chunk)
        shell = DeviceBases.__new__(DeviceBases)
        shell.group, shell.n, shell.window = g, self.chunk, self.window
        shell.point_bytes = 4 * 2 * g.limbs
        shell.last_profile = {}
        shell._bind_kernels()
        shell._work, shell._scalars, shell._bases = {}, None, None
        shell._f["merge"] = kernel("g1_merge_buckets")
        shell._f["hist_match"] = kernel("msm_histogram_first")
        shell._f["hist_plain"] = kernel("msm_histogram_dense")
        shell._f["scatter_match"] = shell._f["msm_scatter"]
        shell._f["scatter_plain"] = kernel("msm_scatter_dense")
        self.shell = shell
        self.ws = self.acc = self.affine = None
        # page-locked window sums, one per query queued and not yet collected: the H query and
        # a dense witness's G1 queries are queued on one stream back to back (the device
        # buffers are reused in stream order; each read-back needs its own host buffer)
        self._hosts: list = []
        self.last_profile: dict[str, float] = {}  # ZKHIVE_MSM_PROFILE=1: stage ms of the last
        self.affine_rounds = dense_affine_rounds(self.chunk, self.window) if affine else 0
        self.affine_windows = os.environ.get("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS", "")

    @staticmethod
    def estimate_bytes(group, chunk: int, window: int | None = None) -> int:
        from gpu.budget import dense_engine_bytes
        return dense_engine_bytes(group_of(group).name, chunk, window)

    def warm(self) -> None:
        if self.ws is None:
            self.ws = self.shell._workspace(self.window)
            rs = self.ws.radix(self.chunk) if dense_sort() == "radix" else None
            lent, acc_shared = dense_sharing(self.chunk, self.window, radix=rs is not None) \
                if self.affine_rounds else (0, False)
            # the running buckets: the workspace's own where the chunks' tails go into them
            # (their own buckets then never used), else a second set (start() makes it where
            # the setting changed since)
            self.acc = self.ws.buckets if acc_shared else self._own_buckets()
            W = self.ws.W
            if self.affine_rounds:
                from gpu.cuda.affine_acc import AffineBuckets
                wps = dense_affine_windows(W)
                pre = DeviceView(rs.list, 0, lent, "affine prefix products (the radix sort's "
                                 "second list)") if lent else None
                self.affine = AffineBuckets(self.chunk * W, self.ws.K, self.affine_rounds,
                                            slice_items=self.chunk * wps,
                                            slice_buckets=wps * self.ws.B, pre=pre)

    def _own_buckets(self) -> DeviceBuffer:
        acc = DeviceBuffer(self.ws.K * self.shell.point_bytes, what="dense MSM running buckets")
        self.ws.buffers.append(acc)
        return acc

    def _host(self) -> np.ndarray:
        """A free page-locked buffer for one query's W window sums and its bad index."""
        if self._hosts:
            return self._hosts.pop()
        return loader.driver().pagelocked_empty(self.ws.W * self.shell.point_bytes // 8 + 1,
                                                np.uint64)

    def start(self, bases: "DeviceBases", scalars, n: int, stream=None) -> "DensePending":
        """Queue sum_{i < n} scalars[i] bases[i] on ``stream``; ``scalars``: a device buffer
        (or view) of at least n canonical Fr values."""
        if bases.group.name != self.group.name or bases.n < n:
            raise MsmInputError(f"dense MSM: {n} scalars for {bases.n} {bases.group.name} bases")
        if scalars.nbytes < 32 * n:
            raise MsmInputError(f"scalar buffer holds {scalars.nbytes} bytes, {n} scalars need "
                                f"{32 * n}")
        self.warm()
        sh, ws, cuda = self.shell, self.ws, loader.driver()
        c, K, pb = self.window, ws.K, sh.point_bytes
        sort = dense_sort()
        into = dense_final_into()
        if self.acc is ws.buckets and not (into and self.affine is not None):
            self.acc = self._own_buckets()  # the chunks' buckets are merged into a second set
        mark = StageMarks(stream)  # ZKHIVE_MSM_PROFILE=1: each stage summed over the chunks
        mark("start")
        memset_words(self.acc.ptr, 0, K * pb // 4, stream)  # zero = the identity
        sh._memset_ones(ws.flags, 4, stream)                 # flags[1] = the bad index
        chunks = 0
        rounds: dict[str, float] = {}
        for lo in range(0, n, self.chunk):
            k = min(self.chunk, n - lo)
            sh.n = k
            sptr = np.uintp(scalars.ptr + 32 * lo)
            if sort == "radix":
                # with the tail into the running buckets the chunk's own are never read: 1.3 GB
                # of memset a 2^24 chunk at c = 20 saved (~0.3 ms each on the H200)
                sh._sort_radix(ws, sptr, k, c, first=lo, stream=stream,
                               zero_buckets=not (into and self.affine is not None))
            else:
                memset_words(ws.counts.ptr, 0, K, stream)
                sh._launch(f"hist_{sort}", _grid(k), np.int64(k), sptr, np.int32(c),
                           _u(ws.counts), np.uintp(ws.flags.ptr + 8), np.int64(lo), stream=stream)
                sh._scan(ws, stream)
                sh._launch(f"scatter_{sort}", _grid(k), np.int64(k), sptr, np.int32(c),
                           _u(ws.cursor), _u(ws.keys), _u(ws.vals), stream=stream)
            mark("sort")
            if self.affine is not None:
                # every bucket written (as the merge below wants), or with into, each chunk's
                # sums added straight into the running buckets and no merge
                self.affine.run(ws.keys.ptr, ws.vals.ptr, ws.flags.ptr,
                                bases._bases.ptr + (pb // 2) * lo,
                                self.acc.ptr if into else ws.buckets.ptr, stream, into=into)
                for name, ms in self.affine.last_profile.items():
                    rounds[name] = rounds.get(name, 0.0) + ms
            else:
                sh._accumulate(ws, bases._bases.ptr + (pb // 2) * lo, stream)
            mark("accumulate")
            if not (into and self.affine is not None):
                sh._launch("merge", _grid(K), np.int64(K),
                           np.uintp(0) if sort == "radix" else _u(ws.counts), _u(ws.buckets),
                           _u(self.acc), stream=stream)
                mark("merge")
            chunks += 1
        sh.n = self.chunk
        # the reduction reads the running buckets (every one written: zero is the identity)
        buckets, ws.buckets = ws.buckets, self.acc
        try:
            src = sh._reduce(ws, counts=0, stream=stream)
        finally:
            ws.buckets = buckets
        mark("reduce")
        if mark.on:  # the affine stages inside "accumulate", under their own names
            self.last_profile = {**mark.times(), **{f"affine {k}": v for k, v in rounds.items()}}
        W = ws.W
        host = self._host()
        with loader.guard(kernel="download window sums", shape=W):
            if stream is None:
                cuda.memcpy_dtoh(host[:-1], ws.seg[src].ptr)
                cuda.memcpy_dtoh(host[-1:], ws.flags.ptr + 8)
            else:
                cuda.memcpy_dtoh_async(host[:-1], ws.seg[src].ptr, stream)
                cuda.memcpy_dtoh_async(host[-1:], ws.flags.ptr + 8, stream)
        done = cuda.Event()
        done.record(stream)
        return DensePending(self, done, W, c, n, chunks, host)

    def msm(self, bases: "DeviceBases", scalars, n: int, stream=None):
        return self.start(bases, scalars, n, stream).finish()

    def close(self) -> None:
        self.shell.close()  # the workspace's buffers, the running buckets among them
        if self.affine is not None:
            self.affine.close()
        self.ws = self.acc = self.affine = None
        for host in self._hosts:
            getattr(host.base, "free", lambda: None)()
        self._hosts = []


class DensePending:
    """A queued DenseEngine MSM: ``finish()`` waits for its stream's work and returns the point."""

    def __init__(self, engine: DenseEngine, done, W: int, c: int, n: int, chunks: int, host):
        self.engine, self.done, self.W, self.c, self.n, self.chunks = engine, done, W, c, n, chunks
        self.host = host

    def finish(self):
        e, host = self.engine, self.host
        with loader.guard(kernel="dense msm", shape=self.n):
            self.done.synchronize()
        try:
            bad = int(host[-1])
            win = host[:-1].view(np.uint32).reshape(self.W, -1).copy()
        finally:
            e._hosts.append(host)  # read: free for the next query
        if bad != _NO_INDEX:
            raise MsmInputError(f"MSM scalar {bad} is not below the Fr modulus", index=bad,
                                kernel="msm_histogram_dense", shape=self.n)
        if host_combine():
            out = _host_combine(e.group, win, self.c)
        else:
            raise GpuError("the dense MSM needs the host build of the combination (g++)")
        return decode_point(out, e.group)


def known_log_bases(group, a_points: list, b_points: list, n: int) -> np.ndarray:
    """Test and benchmark inputs: n xy bases P_i = a_points[i // m2] + b_points[i % m2]
    (m2 = len(b_points)), made on the device. With a_points = a_j G and b_points = b_l G the
    discrete logs are known, so MSM(P, s) = (sum_i s_i (a_{i//m2} + b_{i%m2})) G checks a 2^24
    MSM without a CPU MSM of that size."""
    from gpu.msm_input import encode_points
    g = group_of(group)
    m2 = len(b_points)
    if len(a_points) * m2 < n:
        raise ValueError(f"{len(a_points)} x {m2} table points give fewer than {n} bases")
    cuda = loader.driver()
    load = kernel(f"{g.name}_load_bases")
    gen = kernel(f"{g.name}_gen_bases")
    ta, tb = encode_points(a_points, g), encode_points(b_points, g)
    out = np.empty((n, g.limbs), dtype=np.uint32)
    with DeviceBuffer(ta.nbytes, what="table A") as da, DeviceBuffer(tb.nbytes, what="table B") \
            as db, DeviceBuffer(ta.nbytes, what="table A mont") as ma, \
            DeviceBuffer(tb.nbytes, what="table B mont") as mb, \
            DeviceBuffer(out.nbytes, what="generated bases") as dout, \
            DeviceBuffer(8, what="bad") as bad, loader.guard(kernel=f"{g.name}_gen_bases", shape=n):
        da.upload(ta)
        db.upload(tb)
        cuda.memset_d32(bad.ptr, 0xFFFFFFFF, 2)
        load(np.int64(len(ta)), _u(da), _u(ma), _u(bad), block=(BLOCK, 1, 1), grid=_grid(len(ta)))
        load(np.int64(len(tb)), _u(db), _u(mb), _u(bad), block=(BLOCK, 1, 1), grid=_grid(len(tb)))
        gen(np.int64(n), np.int64(m2), _u(ma), _u(mb), _u(dout), block=(BLOCK, 1, 1),
            grid=_grid(n))
        dout.download(out)
    return out
