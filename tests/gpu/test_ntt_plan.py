"""The pass plan of the device NTT (CPU only): every bit covered once, tiles within bounds."""
from __future__ import annotations

import pytest

from gpu.cuda import ntt
from gpu.errors import GpuInputError


@pytest.mark.parametrize("tile_bits", [4, 9, 10])
def test_plan_covers_every_bit_once(monkeypatch, tile_bits):
    monkeypatch.setattr(ntt, "TILE_BITS", tile_bits)
    for log_n in range(1, ntt.MAX_LOG_N + 1):
        passes = ntt.plan(log_n)
        bits = [b for lo, kb, _ in passes for b in range(lo, lo + kb)]
        assert bits == list(range(log_n)), (log_n, passes)
        for i, (lo, kb, cb) in enumerate(passes):
            assert kb >= 1 and kb + cb <= tile_bits
            # the lowest pass needs no coalescing bits; the others take theirs below lo
            assert (cb == 0) if i == 0 else (cb == ntt.COALESCE_BITS and lo >= cb)
        # passes above the lowest are balanced to within one bit
        upper = [kb for _, kb, _ in passes[1:]]
        assert not upper or max(upper) - min(upper) <= 1


def test_plan_rejects_unsupported_sizes():
    for log_n in (0, ntt.MAX_LOG_N + 1):
        with pytest.raises(GpuInputError, match="outside"):
            ntt.plan(log_n)
    with pytest.raises(GpuInputError, match="not a power of two"):
        ntt.log2_size(48)
    with pytest.raises(GpuInputError, match="exceeds"):
        ntt.log2_size(1 << 28)
    assert ntt.log2_size(1 << 27) == 27
