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
