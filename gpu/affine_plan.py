"""The sizes of the batched affine accumulation (gpu/cuda/affine_acc.py): rounds, each round's
bound on its points, the inversion's levels and the device bytes, without CUDA (the memory
ledger, gpu/budget.py, books them before a device is touched)."""
from __future__ import annotations

import math
import os

from gpu.errors import GpuError

#: pairs a thread takes in a round: its share of the batched inversion (3 products a pair,
#: one product a pair a level up). Measured at G1 2^24 (5 rounds): K = 4 / 16 / 64 gave
#: 95.9 / 89.8 / 94.0 ms (K = 4: the levels above take 4x the values; K = 64: a quarter of
#: the threads, too few to hide the gathers' latency)
PAIRS_PER_THREAD = 16
#: values a thread takes at the inversion's levels above the round
LEVEL_WIDTH = 32
#: values the last level's single thread inverts (one exponentiation, ~570 products serial)
TOP = 64
#: bytes of an Fq value and of an affine G1 point (Montgomery limbs)
FQ_BYTES, POINT_BYTES = 48, 96
SCAN_CHUNK = 4096


def default_rounds(items: int, buckets: int) -> int:
    """Rounds that leave about 2 to 4 points a bucket for the XYZZ tail: floor(log2(mean
    run)) - 1, 0 (no rounds: the XYZZ accumulation) when runs average under 4 points. The later
    rounds are small and each pays a serial inversion (~0.4 ms), so halving all the way is
    not worth it."""
    mean = items / max(1, buckets)
    return max(0, int(math.floor(math.log2(mean))) - 1) if mean >= 4 else 0


def rounds_from_env(items: int, buckets: int) -> int:
    """ZKHIVE_MSM_AFFINE_ROUNDS (0: the XYZZ accumulation) or default_rounds."""
    v = os.environ.get("ZKHIVE_MSM_AFFINE_ROUNDS")
    if v is None or v == "":
        return default_rounds(items, buckets)
    try:
        r = int(v)
    except ValueError:
        raise GpuError(f"ZKHIVE_MSM_AFFINE_ROUNDS={v!r}: expected a whole number of rounds "
                       "(0 turns the affine accumulation off)") from None
    if not 0 <= r <= 40:
        raise GpuError(f"ZKHIVE_MSM_AFFINE_ROUNDS={r}: expected 0..40")
    return r


def dense_affine_rounds() -> int:
    """ZKHIVE_MSM_DENSE_AFFINE_ROUNDS: rounds of batched affine additions in the dense engine's
    accumulation (0, the default: XYZZ)."""
    v = os.environ.get("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", "0") or "0"
    try:
        r = int(v)
    except ValueError:
        raise GpuError(f"ZKHIVE_MSM_DENSE_AFFINE_ROUNDS={v!r}: expected a whole number of rounds "
                       "(0: the XYZZ accumulation)") from None
    if not 0 <= r <= 40:
        raise GpuError(f"ZKHIVE_MSM_DENSE_AFFINE_ROUNDS={r}: expected 0..40")
    return r


def round_bounds(items: int, buckets: int, rounds: int) -> list[int]:
    """The most points each round can leave: a run of c becomes ceil(c / 2), so m points in at
    most min(B, m) runs become at most (m + min(B, m)) / 2."""
    out, m = [], int(items)
    for _ in range(rounds):
        m = (m + min(buckets, m)) // 2
        out.append(m)
    return out


def level_sizes(n: int) -> list[tuple[int, int]]:
    """(values, threads) of each level of the inversion of n values, until TOP are left."""
    out = []
    while n > TOP:
        t = -(-n // LEVEL_WIDTH)
        out.append((n, t))
        n = t
    return out


def threads(m: int) -> int:
    return max(1, -(-m // PAIRS_PER_THREAD))


def estimate_bytes(items: int, buckets: int, rounds: int) -> int:
    """Device bytes of AffineBuckets(items, buckets, rounds)."""
    if rounds < 1:
        return 0
    b = round_bounds(items, buckets, rounds)
    b0, b1 = b[0], b[1] if rounds > 1 else 1
    T0 = threads(b0)
    total = 4 * 4 * buckets + 4 * -(-buckets // SCAN_CHUNK) + 8 * rounds
    total += 4 * b0 + 4 * (b0 + b1) + POINT_BYTES * (b0 + b1) + FQ_BYTES * b0 + FQ_BYTES * T0
    total += sum(FQ_BYTES * (n + t) for n, t in level_sizes(T0)) + FQ_BYTES * TOP
    return total
