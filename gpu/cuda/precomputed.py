"""Pippenger over precomputed bases: every window's digits in one set of buckets (G1).

For a base set that lives as long as its key, the multiples 2^(c w) P_i of every window w can be
made once: then digit w of scalar i is a digit of the base 2^(c w) P_i, every window adds into
the same 2^(c-1) buckets, and the MSM ends with one bucket reduction instead of W of them and
no Horner doublings. That also lets the window grow (the W reductions no longer grow with it):
at 2^24, c = 22 gives 12 windows (2^24 x 12 digits) against c = 20's 13. What it costs: W
copies of the bases (96 bytes a point each: 19.3 GB at 2^24 and c = 22), made on the device in a
few seconds (c doublings a point, then compact.cu's batched affine conversion, one inversion a
range of 16 points). At 2^27 (the H query of a 32 GiB partition) the copies would take 154 GB and
do not fit next to the key on an H200: the partition keeps the chunked engine (msm.DenseEngine).

    with DeviceBases(xy, "g1") as plain, PrecomputedBases(plain, c=22) as pre:
        pre.msm(scalars)                     # == plain.msm(scalars)

The sort is msm_sort.cu's radix sort with one key space of 2^(c-1) buckets and values w n + i
(the table's row-major index). The buckets are summed by rounds of batched affine additions
(gpu/cuda/affine_acc.py: 6 Fq products a point against the XYZZ mixed addition's 10; the runs
average n W / 2^(c-1) points, 96 at 2^24 and c = 22) unless the runs are too short for a round
(ZKHIVE_MSM_AFFINE_ROUNDS=0 forces gpu/cuda/msm.py's XYZZ accumulation). Reduction and the host
combination (one window) are gpu/cuda/msm.py's.
"""
from __future__ import annotations

import numpy as np

from gpu.affine_plan import rounds_from_env
from gpu.cuda import loader
from gpu.cuda.affine_acc import AffineBuckets
from gpu.cuda.marks import StageMarks
from gpu.cuda.memory import DeviceBuffer
from gpu.cuda.launch import BLOCK, _grid, _u
from gpu.cuda.msm import DeviceBases
from gpu.errors import GpuError, MsmInputError
from gpu.msm_input import decode_point, windows

#: points a thread of the batched affine conversion shares one inversion with (fixed_base_batch.cuh)
FB_BATCH = 16
#: points converted at a time (the XYZZ scratch: 192 bytes a point)
SHIFT_CHUNK = 1 << 22


def table_bytes(n: int, c: int) -> int:
    """Device bytes of the W tables of n G1 points (Montgomery affine, 96 bytes a point)."""
    return windows(c) * n * 96


def check_table_shape(n: int, c: int) -> None:
    """The window and the number of table points the sort can index: values w n + i with the
    sign in bit 31."""
    if not 2 <= int(c) <= 24:
        raise MsmInputError(f"precomputed MSM: window {c} out of range 2..24")
    if windows(int(c)) * int(n) >= 1 << 31:
        raise MsmInputError(f"precomputed MSM: {windows(int(c))} x {n} table points do not fit "
                            "the sort's 31-bit point indices; use a smaller base set")


class PrecomputedBases:
    """The tables 2^(c w) P_i of a resident G1 base set, and its MSM with one set of buckets."""

    backend = "cuda"

    def __init__(self, bases: DeviceBases, c: int = 22, *, affine_rounds: int | None = None):
        """affine_rounds: rounds of batched affine additions before the XYZZ tail (None:
        ZKHIVE_MSM_AFFINE_ROUNDS or gpu.affine_plan.default_rounds; 0: XYZZ only)."""
        if bases.group.name != "g1":
            raise GpuError("precomputed MSM tables exist for G1 only")
        check_table_shape(bases.n, c)
        self.c, self.n, self.W = int(c), bases.n, windows(int(c))
        self.group = bases.group
        shell = DeviceBases.__new__(DeviceBases)
        shell.group, shell.n, shell.window = bases.group, self.n, self.c
        shell.point_bytes = bases.point_bytes
        shell.last_profile = {}
        shell._bind_kernels()
        shell._work, shell._scalars, shell._bases = {}, None, None
        self.shell = shell
        self.table = self.affine = None
        self.table = DeviceBuffer(table_bytes(self.n, self.c), what="precomputed G1 tables")
        try:
            self._fill(bases)
            shell._bases = self.table
            shell._workspace(self.c, bucket_windows=1)
            items, B = self.n * self.W, 1 << (self.c - 1)
            rounds = rounds_from_env(items, B) if affine_rounds is None else int(affine_rounds)
            if rounds > 0:
                self.affine = AffineBuckets(items, B, rounds)
        except Exception:
            self.close()
            raise

    def _fill(self, bases: DeviceBases) -> None:
        """table[0] = the bases; table[w] = 2^c table[w - 1] (XYZZ doublings, then one inversion
        a range of FB_BATCH points)."""
        cuda = loader.driver()
        shift = loader.get_function(loader.load_module("msm_g1"), "g1_shift_bases")
        affine = loader.get_function(loader.load_module("compact"), "fixed_base_affine_g1")
        row = 96 * self.n
        with loader.guard(kernel="precomputed table 0", shape=self.n):
            cuda.memcpy_dtod(self.table.ptr, bases._bases.ptr, row)
        chunk = min(SHIFT_CHUNK, self.n)
        with DeviceBuffer(192 * chunk, what="precomputed XYZZ scratch") as acc:
            for w in range(1, self.W):
                src, dst = self.table.ptr + row * (w - 1), self.table.ptr + row * w
                for lo in range(0, self.n, chunk):
                    k = min(chunk, self.n - lo)
                    with loader.guard(kernel="g1_shift_bases", shape=k):
                        shift(np.int64(k), np.int32(self.c), np.uintp(src + 96 * lo), _u(acc),
                              block=(BLOCK, 1, 1), grid=_grid(k))
                        affine(np.int64(k), _u(acc), np.uintp(dst + 96 * lo), block=(BLOCK, 1, 1),
                               grid=_grid(-(-k // FB_BATCH)))
            cuda.Context.synchronize()

    def msm(self, scalars, stream=None):
        """sum_i scalars[i] P_i, as DeviceBases.msm: canonical Fr (n, 4) uint64 on the host or a
        DeviceBuffer (checked on the device: a scalar >= r raises MsmInputError naming it)."""
        sh = self.shell
        if self.table is None:
            raise GpuError("precomputed base set is closed")
        sc = sh._scalar_buffer(scalars)
        ws = sh._workspace(self.c, bucket_windows=1)
        mark = StageMarks(stream)
        mark("start")
        sh._memset_ones(ws.flags, 4, stream)
        sh._sort_radix(ws, sc.ptr, self.n, self.c, precomputed=True, stream=stream)
        mark("sort")
        if self.affine is not None:
            self.affine.run(ws.keys.ptr, ws.vals.ptr, ws.flags.ptr, self.table.ptr,
                            ws.buckets.ptr, stream)
        else:
            sh._accumulate(ws, self.table.ptr, stream)
        mark("accumulate")
        src = sh._reduce(ws, counts=0, stream=stream)
        mark("reduce")
        out = sh._combine(ws, src, 1, self.c, stream)
        mark("combine")
        bad = sh._read_u64(ws.flags, 8, stream)
        if bad != 0xFFFFFFFFFFFFFFFF:
            raise MsmInputError(f"MSM scalar {bad} is not below the Fr modulus", index=int(bad),
                                device=sh._device, kernel="msm_radix_digits", shape=self.n)
        if mark.on:
            sh.last_profile = mark.times()
            if self.affine is not None:
                sh.last_profile.update({f"affine {k}": v
                                        for k, v in self.affine.last_profile.items()})
        return decode_point(out, self.group)

    @property
    def last_profile(self) -> dict:
        """Per-stage device times (ms) of the last msm under ZKHIVE_MSM_PROFILE=1."""
        return self.shell.last_profile

    def close(self) -> None:
        if self.affine is not None:
            self.affine.close()
            self.affine = None
        self.shell._bases = None
        self.shell.close()
        if self.table is not None:
            self.table.free()
            self.table = None

    def __enter__(self) -> "PrecomputedBases":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
