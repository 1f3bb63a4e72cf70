"""Which sort an MSM uses for its (bucket key, point) pairs, and the radix sort's sizes (pure
Python: gpu/budget.py books the bytes without a GPU). The kernels are gpu/kernels/msm.cu's
counting sorts and gpu/kernels/msm_sort.cu's radix sort; gpu/cuda/msm.py drives them."""
from __future__ import annotations

import os

from gpu.errors import GpuError

#: the radix sort's tile (RADIX_TILE in msm_sort.cu) and bits a pass
RADIX_TILE, RADIX_BITS = 4096, 8


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


def radix_passes(key_space: int) -> int:
    """Passes of RADIX_BITS for keys 0..key_space (key_space itself marks a zero digit)."""
    return max(1, -(-int(key_space).bit_length() // RADIX_BITS))


def radix_blocks(items: int) -> int:
    return max(1, -(-int(items) // RADIX_TILE))


def radix_sort_bytes(n: int, W: int) -> int:
    """Device bytes of the radix sort's buffers for n scalars of W windows: the second (key,
    point) list and the (digit, block) counts and offsets (gpu/budget.py books them)."""
    blocks = radix_blocks(n * W)
    return 8 * n * W + 2 * 4 * 256 * blocks + 4 * (-(-256 * blocks // 4096)) + (1 << 20)
