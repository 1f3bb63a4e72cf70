"""Bucket sums by rounds of batched affine additions, on the device (G1).

gpu/kernels/msm_affine.cuh explains the method: each round pairs up the points of every
bucket's run and adds each pair in affine coordinates, all pairs of the round sharing one field
inversion (Montgomery's trick, levelled: K pairs a thread, then LEVEL_WIDTH values a thread a
level up, until one thread inverts at most TOP values); 6 Fq products an addition against the
XYZZ mixed addition's 10. After the rounds the few points left of each bucket are summed in
XYZZ into the buckets the window reduction reads::

    acc = AffineBuckets(items=n * W, buckets=B, rounds=affine_plan.default_rounds(n * W, B))
    acc.run(keys, vals, m, bases, buckets, stream)   # after the radix sort; M on the device

Counts live on the device (M from the sort, each round's total from its scan): the grids are
sized by the host's bounds (a round leaves at most (m + min(B, m)) / 2 points) and threads past
the device's count return, so the MSM needs no read-back before its end.
"""
from __future__ import annotations

import numpy as np

from gpu.affine_plan import (BLOCK_THREADS, BLOCK_WIDTH, FQ_BYTES, LEVEL_WIDTH, PAIRS_PER_THREAD,
                              POINT_BYTES, SCAN_CHUNK, TOP, affine_slice_range, apply_kernel,
                              apply_kernel_of, estimate_bytes, inv_block, level_sizes, round_bounds, threads)
from gpu.cuda import loader
from gpu.cuda.marks import StageMarks
from gpu.cuda.memory import DeviceBuffer
from gpu.cuda.launch import BLOCK, _grid, _u, exclusive_scan, memset_words
from gpu.errors import GpuError


class AffineBuckets:
    """The buffers and launches of the affine accumulation of a sorted list of up to ``items``
    digits over ``buckets`` keys (G1), summed a slice of ``slice_buckets`` keys at a time
    (default: all at once), a slice holding at most ``slice_items`` digits (the buffers' size;
    default ``items``); ``pre``: device memory lent for the prefix products (gpu.affine_plan
    prefix_bytes), idle whenever ``run`` is queued."""

    def __init__(self, items: int, buckets: int, rounds: int, *,
                 slice_items: int | None = None, slice_buckets: int | None = None,
                 pre: DeviceBuffer | None = None):
        if rounds < 1:
            raise GpuError(f"affine accumulation with {rounds} rounds: at least 1 (0 means the "
                           "XYZZ accumulation, which the caller runs instead)")
        if items >= 1 << 31:
            raise GpuError(f"affine accumulation of {items} digits: the pair slots index 31 bits")
        self.items, self.B, self.rounds = int(items), int(buckets), int(rounds)
        self.slice_items = self.items if slice_items is None else min(int(slice_items), self.items)
        self.slice_buckets = self.B if slice_buckets is None else min(int(slice_buckets), self.B)
        if self.slice_buckets < 1:
            raise GpuError(f"affine accumulation: a slice of {slice_buckets} buckets")
        self.bounds = round_bounds(self.slice_items, self.slice_buckets, self.rounds)
        self.last_profile: dict[str, float] = {}
        self.nbytes = estimate_bytes(self.items, self.B, self.rounds,
                                     slice_items=self.slice_items,
                                     slice_buckets=self.slice_buckets,
                                     pre_elsewhere=pre is not None)
        if pre is not None and pre.nbytes < FQ_BYTES * self.bounds[0]:
            raise GpuError(f"affine accumulation: {pre.nbytes} bytes lent for the prefix "
                           f"products, {FQ_BYTES * self.bounds[0]} needed")
        self._lent_pre = pre
        self._f = {}
        aff = loader.load_module("msm_affine")
        for k in ("msm_run_bounds", "msm_run_counts", "msm_run_halve", "msm_pair_layout",
                  "fq_batch_prefix", "fq_batch_back", "fq_batch_top", "g1_pair_prefix_table",
                  "g1_pair_prefix", "g1_pair_apply_table", "g1_pair_apply", "g1_bucket_final",
                  "msm_slice_items", "msm_pair_layout_range", "g1_bucket_final_into",
                  "fq_batch_block"):
            self._f[k] = loader.get_function(aff, k)
        self.apply_form = apply_kernel()  # the form of the last run (each run reads it)
        scan = loader.load_module("msm")
        for k in ("msm_scan_chunks", "msm_scan_sums", "msm_scan_add"):
            self._f[k] = loader.get_function(scan, k)
        self._buffers: list[DeviceBuffer] = []
        try:
            self._alloc()
        except Exception:
            self.close()
            raise

    def kernel_info(self) -> dict:
        """Registers and local (spill) bytes a thread of each kernel (bench/gpu_msm.py)."""
        return {k: (f.num_regs, f.local_size_bytes) for k, f in self._f.items()
                if k.startswith(("g1_", "fq_"))}

    def _buf(self, nbytes: int, what: str) -> DeviceBuffer:
        b = DeviceBuffer(max(int(nbytes), 8), what=what)
        self._buffers.append(b)
        return b

    def _alloc(self) -> None:
        B, b = self.B, self.bounds
        b0, b1 = b[0], b[1] if self.rounds > 1 else 1
        # the sorted list's runs (read by every slice's first round), then two rounds' worth
        self.start0 = self._buf(4 * B, "affine run starts")
        self.cnt0 = self._buf(4 * B, "affine run lengths")
        self.start = [self._buf(4 * B, "affine run starts") for _ in range(2)]
        self.cnt = [self._buf(4 * B, "affine run lengths") for _ in range(2)]
        self.sums = self._buf(4 * -(-B // SCAN_CHUNK), "affine scan chunk totals")
        self.mout = self._buf(8 * self.rounds, "affine round totals")
        self.range = self._buf(16, "affine slice's stretch of the sorted items")
        self.src = self._buf(4 * b0, "affine pair slots")
        self.keys = [self._buf(4 * b0, "affine keys"), self._buf(4 * b1, "affine keys")]
        self.pts = [self._buf(POINT_BYTES * b0, "affine sums"),
                    self._buf(POINT_BYTES * b1, "affine sums")]
        # the prefix products: memory the caller lends (the dense engine: its radix sort's idle
        # second list; never freed here) or our own
        self.pre = self._lent_pre if self._lent_pre is not None else \
            self._buf(FQ_BYTES * b0, "affine prefix products")
        self.T0 = threads(b0)
        self.tot = self._buf(FQ_BYTES * self.T0, "affine thread products")
        self.levels = [(self._buf(FQ_BYTES * n, "inversion level prefixes"),
                        self._buf(FQ_BYTES * t, "inversion level products"))
                       for n, t in level_sizes(self.T0)]
        self.top = self._buf(FQ_BYTES * TOP, "inversion top scratch")
        self.block_pre = self._buf(FQ_BYTES * BLOCK_THREADS * BLOCK_WIDTH,
                                   "inversion block's prefixes")
        self.tree = self._buf(FQ_BYTES * 2 * BLOCK_THREADS, "inversion block's product tree")

    def _apply_kernel(self, name: str, form: str) -> str:
        """The apply kernel ``name`` in ``form`` (ZKHIVE_MSM_APPLY_KERNEL; the benchmark's forms
        from msm_affine_variants.cu, loaded on first use): the key for ``_launch``."""
        module, key = apply_kernel_of(name, form)
        if key not in self._f:  # the default's were loaded with the module's others
            self._f[key] = loader.get_function(loader.load_module(module), key)
        return key

    def _launch(self, name: str, grid, *args, block: int = BLOCK, stream=None) -> None:
        with loader.guard(kernel=name, shape=self.items):
            self._f[name](*args, block=(block, 1, 1), grid=grid, stream=stream)

    def _invert(self, v: int, n: int, stream, *, block: bool = False) -> None:
        """v[0..n) (Fq, Montgomery, none zero) inverted in place: each level's thread products
        go a level up, the top's few values are inverted by one thread (block: the last <=
        BLOCK_THREADS x BLOCK_WIDTH by one thread block, fq_batch_block), then each level's
        inverses come back down (batch_back)."""
        stack = []
        for (size, t), (pre, tot) in zip(level_sizes(n, BLOCK_THREADS * BLOCK_WIDTH if block
                                                     else TOP), self.levels):
            self._launch("fq_batch_prefix", _grid(t), np.int64(size), np.int64(t),
                         np.int32(LEVEL_WIDTH), np.uintp(v), _u(pre), _u(tot), stream=stream)
            stack.append((v, size, t, pre, tot))
            v, n = tot.ptr, t
        if block:
            width = -(-n // BLOCK_THREADS)
            self._launch("fq_batch_block", (1, 1), np.int64(n), np.int32(width), np.uintp(v),
                         _u(self.block_pre), _u(self.tree), block=BLOCK_THREADS, stream=stream)
        else:
            self._launch("fq_batch_top", (1, 1), np.int64(n), np.uintp(v), _u(self.top),
                         block=1, stream=stream)
        for v_l, size, t, pre, tot in reversed(stack):
            self._launch("fq_batch_back", _grid(t), np.int64(size), np.int64(t),
                         np.int32(LEVEL_WIDTH), np.uintp(v_l), _u(pre), _u(tot), stream=stream)

    def run(self, keys: int, vals: int, m: int, bases: int, buckets: int, stream=None, *,
            into: bool = False) -> None:
        """Every bucket's sum into buckets (XYZZ, B of them) from the sorted digits: keys[i]
        the bucket (ascending over the first M), vals[i] the base's index | sign, M the u64 at
        m; bases: the affine (Montgomery) points the values index. into: each sum added to
        what buckets holds (the dense engine's running buckets) instead of written over it.
        The slices one after the other (ZKHIVE_MSM_AFFINE_SLICE_RANGE=1: each slice's round 0
        over its own stretch of the sorted items and its own buckets, read at each run);
        ZKHIVE_MSM_PROFILE=1 keeps each stage's time, summed, in last_profile;
        ZKHIVE_MSM_INV_BLOCK=0 inverts through levels and one thread, ZKHIVE_MSM_APPLY_KERNEL
        picks the apply's kernel form (gpu/affine_plan.py; each read at each run)."""
        ranged, block = affine_slice_range(), inv_block()
        self.apply_form = form = apply_kernel()
        mark = StageMarks(stream)
        mark("start")
        B = self.B
        memset_words(self.start0.ptr, 0, B, stream)
        memset_words(self.cnt0.ptr, 0, B, stream)
        self._launch("msm_run_bounds", _grid(self.items), np.uintp(m), np.uintp(keys),
                     _u(self.start0), _u(self.cnt0), stream=stream)
        self._launch("msm_run_counts", _grid(B), np.int64(B), _u(self.start0), _u(self.cnt0),
                     stream=stream)
        mark("runs")
        for lo in range(0, B, self.slice_buckets):
            self._slice(lo, min(B, lo + self.slice_buckets), keys, vals, m, bases, buckets,
                        stream, mark, ranged=ranged, into=into, block=block, form=form)
        if mark.on:  # the stage times summed over the slices and rounds (each round's apart)
            self.last_profile = mark.times()

    def _slice(self, lo: int, hi: int, keys: int, vals: int, m: int, bases: int, buckets: int,
               stream, mark, *, ranged: bool, into: bool, block: bool, form: str) -> None:
        """The rounds and the XYZZ tail of the buckets [lo, hi) (``run``'s settings)."""
        B, K, R = self.B, PAIRS_PER_THREAD, self.rounds
        keys_in, m_in, bound_in = keys, m, self.items
        start_in, cnt_in = self.start0, self.cnt0
        if ranged:
            self._launch("msm_slice_items", (1, 1), np.uintp(m), np.uintp(keys), np.int64(lo),
                         np.int64(hi), _u(self.range), block=1, stream=stream)
        for r in range(R):
            start_out, cnt_out = self.start[r % 2], self.cnt[r % 2]
            m_out = self.mout.ptr + 8 * r
            if ranged:  # only the slice's buckets: nothing outside [lo, hi) is read
                nb = hi - lo
                self._launch("msm_run_halve", _grid(nb), np.int64(nb), np.int64(0),
                             np.int64(nb), np.uintp(cnt_in.ptr + 4 * lo),
                             np.uintp(cnt_out.ptr + 4 * lo), stream=stream)
                exclusive_scan(self._launch, nb, cnt_out.ptr + 4 * lo, start_out.ptr + 4 * lo,
                               self.sums, m_out, stream)
            else:
                self._launch("msm_run_halve", _grid(B), np.int64(B), np.int64(lo), np.int64(hi),
                             _u(cnt_in), _u(cnt_out), stream=stream)
                exclusive_scan(self._launch, B, cnt_out, start_out, self.sums, m_out, stream)
            out_keys = self.keys[r % 2]
            if ranged and r == 0:  # the slice's stretch of the sorted list (slice_items bounds it)
                self._launch("msm_pair_layout_range", _grid(self.slice_items), _u(self.range),
                             np.int64(lo), np.int64(hi), np.uintp(keys_in), _u(start_in),
                             _u(cnt_in), _u(start_out), _u(self.src), _u(out_keys),
                             stream=stream)
            else:
                self._launch("msm_pair_layout", _grid(bound_in), np.uintp(m_in), np.int64(lo),
                             np.int64(hi), np.uintp(keys_in), _u(start_in), _u(cnt_in),
                             _u(start_out), _u(self.src), _u(out_keys), stream=stream)
            mark("layout")
            T = threads(self.bounds[r])
            head = (np.uintp(m_out), np.int64(T), np.int32(K), _u(self.src))
            if r == 0:
                src = (np.uintp(bases), np.uintp(vals))
                prefix, apply = "g1_pair_prefix_table", "g1_pair_apply_table"
            else:
                src = (_u(self.pts[(r - 1) % 2]),)
                prefix, apply = "g1_pair_prefix", "g1_pair_apply"
            apply = self._apply_kernel(apply, form)
            self._launch(prefix, _grid(T), *head, *src, _u(self.pre), _u(self.tot),
                         stream=stream)
            mark(f"prefix{r}")
            self._invert(self.tot.ptr, T, stream, block=block)
            mark("invert")
            self._launch(apply, _grid(T), *head, *src, _u(self.pre), _u(self.tot),
                         _u(self.pts[r % 2]), stream=stream)
            mark(f"apply{r}")
            keys_in, m_in, bound_in = out_keys.ptr, m_out, self.bounds[r]
            start_in, cnt_in = start_out, cnt_out
        final = "g1_bucket_final_into" if into else "g1_bucket_final"
        self._launch(final, _grid(hi - lo), np.int64(lo), np.int64(hi),
                     _u(start_in), _u(cnt_in), _u(self.pts[(R - 1) % 2]), np.uintp(buckets),
                     stream=stream)
        mark("final")

    def close(self) -> None:
        for b in self._buffers:
            b.free()
        self._buffers = []

    def __enter__(self) -> "AffineBuckets":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
