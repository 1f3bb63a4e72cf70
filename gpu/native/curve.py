"""Host build of the curve and MSM kernel code (gpu/kernels/curve.cuh, msm_core.cuh).

The same ``__host__ __device__`` bodies the CUDA MSM runs per thread, compiled with g++ and run
in loops, so CI checks the device algorithm (signed digits, counting sort, balanced bucket
ranges with partial sums, segmented window reduction) on the CPU against arkworks. Not a fast
CPU MSM: the CPU backend uses arkworks' (``gpu.msm.CpuBases``).

Built on first use by ``arith.native.build`` (cache in ``ZKHIVE_CACHE_DIR``, keyed by the sources,
every kernel header and the flags).
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from pathlib import Path

from arith.native import build

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parent / "kernels"

#: -Wno-unknown-pragmas: g++ does not know nvcc's #pragma unroll in the shared headers
FLAGS = ["-O3", "-std=c++17", "-fopenmp", "-shared", "-fPIC", "-Wno-unknown-pragmas"]

_lib = None
_lock = threading.Lock()
_i64, _p, _u32, _int = ctypes.c_int64, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int


def _build():
    return build(HERE / "curve_host.cpp", stem="curve", flags=FLAGS, include_dirs=(KERNELS,))


def lib() -> ctypes.CDLL:
    global _lib
    with _lock:
        if _lib is None:
            L = ctypes.CDLL(str(_build()))
            for g in ("g1", "g2"):
                f = getattr(L, f"{g}_point_op")
                f.argtypes, f.restype = [_int, _p, _p, _u32, _p], _int
                f = getattr(L, f"{g}_msm")
                f.argtypes, f.restype = [_i64, _p, _p, _int, _i64, _i64, _i64, _i64, _i64, _int, _int,
                                         _int, _p], _i64
                f = getattr(L, f"{g}_combine")
                f.argtypes, f.restype = [_int, _int, _p, _p], None
                f = getattr(L, f"{g}_sum_ones_affine")
                f.argtypes, f.restype = [_i64, _p, _i64, _p, _i64, _i64, _int, _int, _p], _i64
            L.msm_digits.argtypes = [_p, _int, _p]
            _lib = L
    return _lib


POINT_OPS = {"add_mixed": 0, "add": 1, "dbl": 2, "dbl_add_mixed": 3, "dbl_add_dbl": 4,
             "mul_small": 5, "neg": 6, "on_curve": 7, "add_mixed_lean": 8,
             "dbl_add_mixed_lean": 9, "dbl_sub_mixed_lean": 10}


def point_op(group, op: str, a, b=None, k: int = 0):
    """One host-build point operation on arkworks points (tests of curve.cuh):
    add_mixed a+b, add a+b, dbl 2a, dbl_add_mixed 2a+b, dbl_add_dbl 2a+2b, mul_small k a, neg -a,
    on_curve (bool); add_mixed_lean a+b, dbl_add_mixed_lean 2a+b, dbl_sub_mixed_lean 2a-b (the
    mixed addition in add_affine_lean's order). The result is decoded with the checked decoder."""
    from gpu import msm_input as msm
    g = msm.group_of(group)
    ra = msm.encode_points([a], g)
    rb = msm.encode_points([b if b is not None else g.point.identity()], g)
    return point_op_raw(g, op, ra[0], rb[0], k)


def point_op_raw(group, op: str, a: np.ndarray, b: np.ndarray, k: int = 0):
    """point_op on raw xy limbs (lets tests feed points that are not on the curve)."""
    from gpu import msm_input as msm
    g = msm.group_of(group)
    a = np.ascontiguousarray(a, dtype=np.uint32)
    b = np.ascontiguousarray(b, dtype=np.uint32)
    out = np.zeros(g.limbs, dtype=np.uint32)
    rc = getattr(lib(), f"{g.name}_point_op")(POINT_OPS[op], a.ctypes.data, b.ctypes.data,
                                              int(k), out.ctypes.data)
    if op == "on_curve":
        return rc == 1
    return msm.decode_point(out, g)


def msm(group, bases: np.ndarray, scalars: np.ndarray, *, window: int | None = None,
        ranges: int = 64, level_width: int = 8, segment: int = 32, segment2: int = 8,
        chunk: int = 0, affine: tuple[int, int, int] | None = None, affine_slice: int = 0,
        lean: bool = False, slice_range: bool = False, final_into: bool = False,
        inv_block: tuple[int, int] | None = None, apply_lean: bool = False):
    """The device MSM's algorithm on the CPU: sum scalars[i] * bases[i].

    bases: xy limbs (n, 24 | 48) uint32 (``gpu.msm.encode_points``); scalars: Fr vector.
    ranges (level-1 threads), level_width (partials per range later), segment (buckets per
    reduction segment) and segment2 (first-level segments per second-level one: gpu/cuda/msm.py
    REDUCE_G2) are the device's launch shapes; tests vary them to reach the edge cases.
    chunk > 0: the chunked dense MSM (gpu/cuda/msm.py DenseEngine): chunks of that many scalars
    sorted one after the other, their runs added into one set of buckets, one reduction.
    affine = (rounds, K, K2): the buckets summed by rounds of batched affine additions
    (msm_affine.cuh, gpu/cuda/affine_acc.py's steps): K pairs a thread, K2 values a thread at
    the inversion's levels; affine_slice > 0: the buckets that many windows at a time (the
    dense engine's slices). lean: level 1 by accumulate_range_lean and add_affine_lean, the
    body of the device's g2_accumulate_bases_lean (ZKHIVE_MSM_G2_LEAN=1). slice_range: each
    slice's round 0 over its own stretch of the sorted items, the halvings over its own
    buckets (ZKHIVE_MSM_AFFINE_SLICE_RANGE=1). final_into (with chunk and affine): each chunk's
    affine tail added into the running buckets, no merge (ZKHIVE_MSM_DENSE_FINAL_INTO=1).
    inv_block = (log2 threads, longest chain): the inversion's levels stop at that many values
    and one block's product tree takes them (ZKHIVE_MSM_INV_BLOCK, the device's default: (9,
    32), gpu/affine_plan.py BLOCK_THREADS, BLOCK_WIDTH); None: levels and one thread.
    apply_lean: the rounds' additions by pair_apply's lean form (ZKHIVE_MSM_APPLY_KERNEL's forms).
    """
    from gpu import msm_input as m
    g = m.group_of(group)
    bases = m.check_bases(bases, g)
    scalars = m.check_scalars(scalars, len(bases))
    c = window or m.window_bits(len(bases))
    if not 1 <= c <= 24:
        raise ValueError(f"window {c} out of range 1..24")
    if level_width < 4 or ranges < 1 or segment < 1 or segment & (segment - 1) or \
            segment2 < 2 or segment2 & (segment2 - 1):
        raise ValueError("need level_width >= 4, ranges >= 1, segment a power of two, segment2 a "
                         "power of two >= 2")
    if lean and affine is not None:
        raise ValueError("lean is level 1's XYZZ accumulation; affine replaces level 1")
    if (slice_range or final_into or inv_block or apply_lean) and affine is None:
        raise ValueError("slice_range, final_into, inv_block and apply_lean are steps of the "
                         "affine rounds: give affine")
    steps = 0
    if inv_block is not None:
        log_bt, width = (int(x) for x in inv_block)
        if not (1 <= log_bt <= 12 and 1 <= width < 1 << 15):
            raise ValueError(f"inv_block (log2 threads, chain) = {inv_block}: need 1..12, "
                             "1..32767")
        steps = 8 | log_bt << 8 | width << 16
    packed = 0
    if affine is not None:
        rounds, k, k2 = (int(x) for x in affine)
        if not (1 <= rounds <= 255 and 1 <= k < 4096 and 2 <= k2 < 2048):
            raise ValueError(f"affine (rounds, K, K2) = {affine}: need 1..255, 1..4095, 2..2047")
        packed = rounds | k << 8 | k2 << 20
    out = np.zeros(g.limbs, dtype=np.uint32)
    bad = getattr(lib(), f"{g.name}_msm")(len(bases), bases.ctypes.data, scalars.ctypes.data, c,
                                          ranges, level_width, segment, segment2, int(chunk),
                                          packed, int(affine_slice),
                                          int(bool(lean)) | 2 * bool(slice_range)
                                          | 4 * bool(final_into) | 16 * bool(apply_lean)
                                          | steps, out.ctypes.data)
    if bad >= 0:
        raise m.MsmInputError(f"{g.name} base {bad} is not a point on the curve (or a coordinate is "
                          "not below the field modulus)", index=int(bad))
    return m.decode_point(out, g)


def sum_ones_affine(group, bases: np.ndarray, lists, *, blocks: int, threads: int,
                    chains: int, lean: bool = False):
    """The split MSM's 1s on the CPU as the device's ones_affine.cu sums them: the bases at
    ``lists`` (indices, repeats allowed) into blocks x threads x chains affine accumulators,
    each step's additions of a block sharing one inversion (chains of ``chains`` a thread, a
    product tree over the block's ``threads``), then the accumulators summed in XYZZ. ``lean``:
    each step's additions a coordinate at a time (ones_apply's Lean), else points whole.
    bases: xy limbs (n, 24 | 48) uint32 (``gpu.msm.encode_points``)."""
    from gpu import msm_input as m
    g = m.group_of(group)
    bases = m.check_bases(bases, g)
    idx = np.ascontiguousarray(lists, dtype=np.int64)
    if idx.ndim != 1 or (len(idx) and (idx.min() < 0 or idx.max() >= len(bases))):
        raise ValueError(f"{g.name} 1s: every index must name one of the {len(bases)} bases")
    if blocks < 1 or chains < 1 or threads < 1 or threads & (threads - 1):
        raise ValueError(f"{g.name} 1s: blocks {blocks}, threads {threads}, chains {chains}: "
                         "need blocks >= 1, chains >= 1 and threads a power of two")
    idx = idx.astype(np.uint32)
    out = np.zeros(g.limbs, dtype=np.uint32)
    bad = getattr(lib(), f"{g.name}_sum_ones_affine")(len(bases), bases.ctypes.data, len(idx),
                                                      idx.ctypes.data, int(blocks), int(threads),
                                                      int(chains), int(bool(lean)),
                                                      out.ctypes.data)
    if bad >= 0:
        raise m.MsmInputError(f"{g.name} base {bad} is not a point on the curve (or a coordinate is "
                              "not below the field modulus)", index=int(bad))
    return m.decode_point(out, g)


def combine(group, windows: np.ndarray, c: int) -> np.ndarray:
    """The device MSM's last step on the CPU: sum_w 2^(c w) windows[w] (XYZZ points in the
    device layout, Montgomery limbs; a (W, 4 limbs) uint32 array) -> xy limbs of the affine sum."""
    from gpu import msm_input as m
    g = m.group_of(group)
    win = np.ascontiguousarray(windows, dtype=np.uint32)
    if win.ndim != 2 or win.shape[1] != 2 * g.limbs or len(win) < 1:
        raise ValueError(f"{g.name} window sums: expected shape (W, {2 * g.limbs}), got {win.shape}")
    out = np.zeros(g.limbs, dtype=np.uint32)
    getattr(lib(), f"{g.name}_combine")(len(win), int(c), win.ctypes.data, out.ctypes.data)
    return out


def digits(scalar: int, c: int) -> list[int]:
    """Signed c-bit digits of one scalar, lowest window first (tests)."""
    from gpu.msm_input import windows
    s = np.frombuffer(int(scalar).to_bytes(32, "little"), dtype=np.uint32).copy()
    out = np.zeros(windows(c), dtype=np.uint32)
    lib().msm_digits(s.ctypes.data, c, out.ctypes.data)
    return [-(int(d) & 0x7FFFFFFF) if d & 0x80000000 else int(d) for d in out]
