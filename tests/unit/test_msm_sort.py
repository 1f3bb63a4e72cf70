"""gpu/msm_sort.py: which sort an MSM takes, and the radix sort's passes and bytes (the kernels
are checked against the counting sort in tests/gpu/test_msm.py)."""
from __future__ import annotations

import pytest

from gpu.errors import GpuError
from gpu.msm_sort import RADIX_TILE, dense_sort, radix_blocks, radix_passes, radix_sort_bytes, \
    sort_kind


def test_sort_choice_is_checked(monkeypatch):
    monkeypatch.delenv("ZKHIVE_MSM_SORT", raising=False)
    monkeypatch.delenv("ZKHIVE_MSM_DENSE_SORT", raising=False)
    assert sort_kind() == "radix" and dense_sort() == "radix"
    monkeypatch.setenv("ZKHIVE_MSM_SORT", "bucket")
    with pytest.raises(GpuError, match="ZKHIVE_MSM_SORT='bucket'"):
        sort_kind()
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_SORT", "bogus")
    with pytest.raises(GpuError, match="ZKHIVE_MSM_DENSE_SORT='bogus'"):
        dense_sort()
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_SORT", "match")
    assert dense_sort() == "match"


def test_radix_passes_cover_the_zero_key():
    # c = 20, the H query's chunks: keys below K = 13 x 2^19, zero digits under K: 23 bits
    assert radix_passes(13 << 19) == 3
    assert radix_passes(255) == 1 and radix_passes(256) == 2      # 256 itself needs 9 bits
    assert radix_passes(1 << 21) == 3 and radix_passes((1 << 24) - 1) == 3
    assert radix_blocks(1) == 1 and radix_blocks(RADIX_TILE + 1) == 2


def test_radix_sort_bytes_book_the_second_list():
    n, W = 1 << 24, 13
    b = radix_sort_bytes(n, W)
    assert 8 * n * W < b < 8 * n * W + (160 << 20)


def test_precomputed_table_shape_is_bounded():
    """gpu.cuda.precomputed: the window range and the 31-bit point indices of the sort."""
    from gpu.cuda.precomputed import check_table_shape, table_bytes
    from gpu.errors import MsmInputError
    check_table_shape(1 << 24, 22)
    assert table_bytes(1 << 24, 22) == 12 * (1 << 24) * 96        # 18 GiB: 12 copies
    with pytest.raises(MsmInputError, match="window 25 out of range"):
        check_table_shape(1 << 10, 25)
    with pytest.raises(MsmInputError, match="window 1 out of range"):
        check_table_shape(1 << 10, 1)
    with pytest.raises(MsmInputError, match=r"12 x 178956971 table points"):
        check_table_shape(178_956_971, 22)                       # 12 n >= 2^31
    check_table_shape(178_956_970, 22)


def test_precompile_starts_the_g2_modules_first():
    """gpu.cuda.precompile: the G2 modules (30-60 s of ptxas each) start before the small ones;
    by file size they started last and the precompile took 75.5 s against 59.6."""
    from gpu.cuda.loader import KERNELS
    from gpu.cuda.precompile import compile_weight
    srcs = sorted((p for p in KERNELS.glob("*.cu") if not p.stem.endswith("_variants")),
                  key=lambda p: (-compile_weight(p), -p.stat().st_size))
    names = [p.stem for p in srcs]
    g2 = [i for i, n in enumerate(names) if "g2" in n]
    assert g2 == list(range(len(g2))) and "msm_g2_reduce" in names[:len(g2)]
    assert compile_weight(KERNELS / "subgroup.cu") == 1 and compile_weight(KERNELS / "msm.cu") == 0
    assert names.index("fixed_base") < names.index("msm_g1") < len(names)


def test_the_window_reductions_shape_is_read_and_checked(monkeypatch):
    """ZKHIVE_MSM_REDUCE_G2 / ZKHIVE_MSM_SUM_GROUP (gpu/cuda/msm.py reduction_shape): the
    second level's segment and the per-window sums' group, powers of two from 2 (the device's
    buffers are sized by them); anything else is refused naming the setting."""
    from gpu.cuda.msm import REDUCE_G2, SUM_GROUP, reduction_shape
    monkeypatch.delenv("ZKHIVE_MSM_REDUCE_G2", raising=False)
    monkeypatch.delenv("ZKHIVE_MSM_SUM_GROUP", raising=False)
    assert reduction_shape() == (REDUCE_G2, SUM_GROUP) == (8, 8)
    monkeypatch.setenv("ZKHIVE_MSM_REDUCE_G2", "32")
    monkeypatch.setenv("ZKHIVE_MSM_SUM_GROUP", "2")
    assert reduction_shape() == (32, 2)
    for bad in ("6", "1", "0", "-8", "eight"):
        monkeypatch.setenv("ZKHIVE_MSM_SUM_GROUP", bad)
        with pytest.raises(GpuError, match=rf"ZKHIVE_MSM_SUM_GROUP='{bad}': expected a power of two"):
            reduction_shape()


def _window_sort_on_host(plan, digits):
    """msm_sort.cu's window sort, pass by pass as its kernels index (tiles inside one window,
    the counts matrix by gpu.msm_sort's entry order, scanned, each tile's bins written from
    their entries in the stable order): (keys, vals) of the whole list. digits: W x n signed
    digits (0 for a zero digit)."""
    import numpy as np
    from gpu.msm_sort import WINDOW_TILE
    W, n, c = plan.W, plan.n, plan.c
    B, K = 1 << (c - 1), W << (c - 1)
    keys = np.where(digits != 0, np.abs(digits) - 1, plan.zero).astype(np.int64).reshape(-1)
    vals = np.tile(np.arange(n, dtype=np.int64), W)
    for p in plan.passes:
        entries = plan.entries(p)
        count = np.zeros(entries, dtype=np.int64)
        mask = (1 << p.bits) - 1

        def entry(b, w, t):
            if p.last and b == p.bins:
                return (W * p.bins + w) * plan.tiles + t
            return (w * p.bins + b) * plan.tiles + t
        tiles = []
        for w in range(W):
            for t in range(plan.tiles):
                lo = w * n + t * WINDOW_TILE
                idx = np.arange(lo, min(lo + WINDOW_TILE, (w + 1) * n))
                bins = (keys[idx] >> p.shift) & mask
                used = p.bins + 1 if p.last else p.bins
                assert bins.max() < used
                for b, k in zip(*np.unique(bins, return_counts=True)):
                    count[entry(int(b), w, t)] += k
                tiles.append((w, t, idx, bins))
        offs = np.concatenate([[0], np.cumsum(count)[:-1]])
        out_k, out_v = np.full(n * W, -1), np.full(n * W, -1)
        for w, t, idx, bins in tiles:
            order = np.argsort(bins, kind="stable")     # the block's stable sort
            for rank, i in enumerate(order):
                b = int(bins[i])
                start = int(np.sum(bins < b))
                pos = offs[entry(b, w, t)] + rank - start
                k = keys[idx[i]]
                out_k[pos] = k if not p.last else K if b == p.bins else w * B + k
                out_v[pos] = vals[idx[i]]
        assert (out_k >= 0).all()                        # every place written once
        keys, vals = out_k, out_v
    return keys, vals


@pytest.mark.parametrize("c,n", [(4, 100), (9, 8192), (13, 8192 + 77), (16, 2 * 8192 + 5),
                                 (20, 8192 + 3)])
def test_window_sort_leaves_the_8_bit_passes_list(c, n):
    """The window sort's plan (passes, bins, the counts matrix's order with the zero digits'
    entries last), run on the host as the kernels index it, leaves exactly the list of a stable
    sort by the accumulation's key w 2^(c-1) + |d| - 1 (a zero digit: K, after all of them):
    what the 8-bit passes leave. Zero digits in every window, one window all zero."""
    import numpy as np
    from gpu.msm_input import windows
    from gpu.msm_sort import window_sort_plan
    W = min(windows(c), 4)
    plan = window_sort_plan(n, W, c)
    rng = np.random.default_rng(c)
    B = 1 << (c - 1)
    digits = rng.integers(-B, B + 1, size=(W, n))
    digits[rng.random((W, n)) < 0.05] = 0
    digits[1] = 0
    assert len(plan.passes) == (1 if c <= 10 else 2)
    keys, vals = _window_sort_on_host(plan, digits)
    real = np.where(digits != 0, np.arange(W)[:, None] * B + np.abs(digits) - 1,
                    W * B).reshape(-1)
    order = np.argsort(real, kind="stable")
    assert np.array_equal(keys, real[order])
    assert np.array_equal(vals, np.tile(np.arange(n), W)[order])


def test_window_sort_plan_bounds_and_bytes(monkeypatch):
    """Two passes at c = 20 (10 + 10 bits: the digit's 19 and the zero bit), one at c <= 10;
    none where a digit would need a third pass; at the H query's 2^25 chunks its counts take
    the bytes the 8-bit passes' counts and offsets take; ZKHIVE_MSM_RADIX is checked."""
    from gpu.msm_sort import radix_count_words, radix_plan, window_sort_plan
    p = window_sort_plan(1 << 25, 13, 20)
    assert [(q.shift, q.bits, q.bins, q.last) for q in p.passes] == \
        [(0, 10, 1024, False), (10, 10, 512, True)]
    assert p.tiles == 4096 and p.count_words == 13 * 1024 * 4096
    assert radix_count_words(1 << 25, 13, 20) == radix_count_words(1 << 25, 13) == p.count_words
    assert [(q.bits, q.bins) for q in window_sort_plan(100, 26, 10).passes] == [(10, 512)]
    assert window_sort_plan(100, 12, 21) is None and window_sort_plan(0, 13, 20) is None
    # a small MSM's matrix (tiles of 8192 for 100 scalars) outgrows the 8-bit passes' counts
    assert radix_count_words(100, 13, 20) == 13 * 1024 > radix_count_words(100, 13)
    monkeypatch.delenv("ZKHIVE_MSM_RADIX", raising=False)
    assert radix_plan() == "window"
    monkeypatch.setenv("ZKHIVE_MSM_RADIX", "lsd")
    assert radix_plan() == "lsd"
    monkeypatch.setenv("ZKHIVE_MSM_RADIX", "msd")
    with pytest.raises(GpuError, match="ZKHIVE_MSM_RADIX='msd'"):
        radix_plan()
