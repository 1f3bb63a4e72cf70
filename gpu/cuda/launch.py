"""The launch helpers shared by the device MSM's modules (msm, affine_acc, precomputed,
split_msm): grid sizes, pointer arguments, word memsets and msm.cu's exclusive scan."""
from __future__ import annotations

import numpy as np

from gpu.cuda import loader
from gpu.msm_sort import SCAN_CHUNK as _SCAN_CHUNK

#: Threads per block for the non-accumulation kernels.
BLOCK = 128


def _u(x) -> np.uintp:
    return np.uintp(x.ptr if hasattr(x, "ptr") else x)


def memset_words(ptr: int, value: int, words: int, stream=None) -> None:
    """``words`` 32-bit words at ptr set to ``value``, on ``stream`` (None: the default
    stream, synchronously)."""
    cuda = loader.driver()
    with loader.guard(kernel="memset", shape=words):
        if stream is None:
            cuda.memset_d32(ptr, value, words)
        else:
            cuda.memset_d32_async(ptr, value, words, stream)


def exclusive_scan(launch, n: int, counts, out, sums, total, stream=None) -> None:
    """out = the exclusive scan of the n u32 counts, their sum into the u64 at ``total``:
    msm.cu's three kernels (each chunk of _SCAN_CHUNK scanned, the chunk totals ``sums``
    scanned by one block, added back). ``launch``: the caller's kernel launcher (its table
    holds msm_scan_chunks, msm_scan_sums, msm_scan_add)."""
    nb = -(-int(n) // _SCAN_CHUNK)
    launch("msm_scan_chunks", (nb, 1), np.int64(n), _u(counts), _u(out), _u(sums), block=1024,
           stream=stream)
    launch("msm_scan_sums", (1, 1), np.int64(nb), _u(sums), _u(total), block=1024,
           stream=stream)
    launch("msm_scan_add", _grid(n), np.int64(n), _u(out), _u(sums), stream=stream)


def _grid(n: int, block: int = BLOCK) -> tuple:
    return (max(1, -(-int(n) // block)), 1)
