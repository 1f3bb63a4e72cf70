"""Which sort an MSM uses for its (bucket key, point) pairs, and the radix sort's sizes (pure
Python: gpu/budget.py books the bytes without a GPU). The kernels are gpu/kernels/msm.cu's
counting sorts and gpu/kernels/msm_sort.cu's radix sort; gpu/cuda/msm.py drives them."""
from __future__ import annotations

import os
from dataclasses import dataclass

from gpu.errors import GpuError

#: the radix sort's tile (RADIX_TILE in msm_sort.cu) and bits a pass
RADIX_TILE, RADIX_BITS = 4096, 8
#: the window sort's tile (SEG_TILE in msm_sort.cu), its most bits a pass (SEG_MAX_BINS = 2^10)
#: and the scan's chunk (msm.cu's SCAN_CHUNK: the counts' chunk totals)
WINDOW_TILE, WINDOW_MAX_BITS, SCAN_CHUNK = 8192, 10, 4096


def sort_kind() -> str:
    """The plain MSM's sort (the resident queries' own MSMs, the split MSM's tails): ``radix``
    (msm_sort.cu, the default: G1 2^24 119.4 against 147.1 ms on the H200) or ``atomic``
    (msm.cu's one-level counting sort, a warp's equal keys counted once; 36 ms of a 2^24 MSM's
    147), from ZKHIVE_MSM_SORT."""
    kind = os.environ.get("ZKHIVE_MSM_SORT", "radix")
    if kind not in ("atomic", "radix"):
        raise GpuError(f"ZKHIVE_MSM_SORT={kind!r}: use 'atomic' or 'radix'")
    return kind


def dense_sort() -> str:
    """The dense engine's sort: ``radix`` (the default: msm_sort.cu's LSD radix sort, every
    write part of a run), ``plain`` (msm.cu's counting sort without the warp match: 36 ms a
    2^24 chunk on the H200) or ``match`` (with it), from ZKHIVE_MSM_DENSE_SORT."""
    kind = os.environ.get("ZKHIVE_MSM_DENSE_SORT", "radix")
    if kind not in ("radix", "plain", "match"):
        raise GpuError(f"ZKHIVE_MSM_DENSE_SORT={kind!r}: use 'radix', 'plain' or 'match'")
    return kind


def radix_plan() -> str:
    """How the radix sort orders a plain MSM's digits (not over precomputed bases):
    ``window`` (the default: WindowSortPlan, each window's digits in place, 2 passes of at most
    10 bits; the H query's 2^27 dense engine 739.5 ms against 748.2 on an H100, 2026-12-07) or
    ``lsd`` (8-bit passes over the whole key, window and digit, 3 at c = 20), from
    ZKHIVE_MSM_RADIX."""
    plan = os.environ.get("ZKHIVE_MSM_RADIX", "window")
    if plan not in ("lsd", "window"):
        raise GpuError(f"ZKHIVE_MSM_RADIX={plan!r}: use 'lsd' or 'window'")
    return plan


@dataclass(frozen=True)
class WindowPass:
    """One pass of the window sort: bits [shift, shift + bits) of the bare digit; ``bins`` a
    window (the last pass: its nonzero bins, the zero digits in bin ``bins``)."""
    shift: int
    bits: int
    bins: int
    last: bool


@dataclass(frozen=True)
class WindowSortPlan:
    """msm_sort.cu's sort within each window of n scalars' W windows of c-bit signed digits.

    The digits are written window-major (window w's at w n ..), so the list is in window order
    before any pass: each pass sorts every window's part in place (its tiles inside one window,
    its counts matrix window by window). A digit d is sorted as its bare |d| - 1 (D = c - 1
    bits) and a zero digit as 2^D, so D + 1 bits: one pass where they are at most 10, else
    two, the low ceil((D + 1) / 2) bits first. The last pass writes the accumulation's key and
    puts the zero digits' entries after every window's nonzero ones, so the list ends as the
    8-bit passes leave it: the M nonzero digits by key, then the zero digits."""
    n: int
    W: int
    c: int

    @property
    def tiles(self) -> int:
        """Tiles a window (the last one short where WINDOW_TILE does not divide n)."""
        return max(1, -(-self.n // WINDOW_TILE))

    @property
    def zero(self) -> int:
        """The bare key of a zero digit (the bit above every digit's |d| - 1)."""
        return 1 << (self.c - 1)

    @property
    def passes(self) -> tuple[WindowPass, ...]:
        bits = self.c                       # D + 1
        if bits <= WINDOW_MAX_BITS:
            return (WindowPass(0, bits, 1 << (bits - 1), True),)
        low = -(-bits // 2)
        return (WindowPass(0, low, 1 << low, False),
                WindowPass(low, bits - low, 1 << (bits - low - 1), True))

    def entries(self, p: WindowPass) -> int:
        """The pass's counts matrix: (bins, plus the last pass's zero bin) x tiles a window."""
        return (self.W * p.bins + (self.W if p.last else 0)) * self.tiles

    @property
    def count_words(self) -> int:
        return max(self.entries(p) for p in self.passes)


def window_sort_plan(n: int, W: int, c: int) -> WindowSortPlan | None:
    """The window sort's plan for n scalars at c-bit windows, or None where it does not apply
    (c above 2 x WINDOW_MAX_BITS: a digit then needs three passes; c < 2)."""
    if not 2 <= c <= 2 * WINDOW_MAX_BITS or n <= 0:
        return None
    return WindowSortPlan(int(n), int(W), int(c))


def radix_passes(key_space: int) -> int:
    """Passes of RADIX_BITS for keys 0..key_space (key_space itself marks a zero digit)."""
    return max(1, -(-int(key_space).bit_length() // RADIX_BITS))


def radix_blocks(items: int) -> int:
    return max(1, -(-int(items) // RADIX_TILE))


def radix_count_words(n: int, W: int, c: int | None = None) -> int:
    """u32 words of the radix sort's counts: the 8-bit passes' (digit, block) counts and their
    offsets, or the window sort's matrix at c-bit windows (scanned in place), whichever is
    larger: one allocation serves both, so the setting may change between proofs."""
    words = 2 * 256 * radix_blocks(n * W)
    plan = window_sort_plan(n, W, c) if c else None
    return max(words, plan.count_words) if plan else words


def radix_sort_bytes(n: int, W: int, c: int | None = None) -> int:
    """Device bytes of the radix sort's buffers for n scalars of W windows (c bits each): the
    second (key, point) list, the counts (radix_count_words) and the scan's chunk totals
    (gpu/budget.py books them)."""
    words = radix_count_words(n, W, c)
    return 8 * n * W + 4 * words + 4 * (-(-words // SCAN_CHUNK)) + (1 << 20)
