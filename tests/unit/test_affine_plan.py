"""The batched affine accumulation's sizes (gpu/affine_plan.py): its rounds, the bound each round
puts on the points it leaves (the grids and buffers are sized by it, so an undercount would
write past a buffer), the inversion's levels, the bytes the ledger books, and the settings'
errors. The accumulation itself: tests/unit/test_curve_host.py (host build) and
tests/gpu/test_msm.py, test_split_msm.py (device)."""
from __future__ import annotations

import numpy as np
import pytest

from gpu import affine_plan as A
from gpu.errors import GpuError


def test_rounds_leave_a_few_points_a_bucket():
    assert A.default_rounds(12 << 24, 1 << 21) == 5      # G1 2^24 over precomputed tables: 96
    assert A.default_rounds(13 << 24, 13 << 19) == 4     # a plain 2^24 chunk at c = 20: 32
    assert A.default_rounds(4 * 100, 100) == 1
    assert A.default_rounds(3 * 100, 100) == 0           # runs too short for a round
    assert A.default_rounds(0, 100) == 0


@pytest.mark.parametrize("buckets,mean", [(1000, 96.0), (1000, 3.0), (50, 0.5), (1, 300.0)])
def test_round_bounds_hold_for_any_run_lengths(buckets, mean):
    """Random and extreme run lengths: each round's points (sum of ceil(c / 2)) never exceed
    the bound the buffers are sized by, and the bound is not loose by more than the odd runs."""
    rng = np.random.default_rng(7)
    for counts in (rng.poisson(mean, buckets), np.zeros(buckets, dtype=np.int64),
                   np.full(buckets, int(mean * 2) | 1), np.eye(1, buckets, 0)[0] * int(mean * buckets)):
        counts = counts.astype(np.int64)
        m = int(counts.sum())
        bounds = A.round_bounds(m, buckets, 8)
        for r in range(8):
            counts = (counts + 1) // 2
            assert counts.sum() <= bounds[r], (r, counts.sum(), bounds[r])
            assert bounds[r] - counts.sum() <= buckets


def test_round_bounds_reject_an_undercount():
    # one run of 3 points leaves 2, not 1: the bound must say 2
    assert A.round_bounds(3, 1, 2) == [2, 1]
    assert A.round_bounds(3, 1, 2)[0] != 1


def test_inversion_levels_end_at_the_top():
    for n in (1, A.TOP, A.TOP + 1, 6_356_992, 10**8):
        levels = A.level_sizes(n)
        if n <= A.TOP:
            assert levels == []
            continue
        assert levels[0][0] == n
        for (size, t), nxt in zip(levels, levels[1:] + [None]):
            assert t == -(-size // A.LEVEL_WIDTH)
            if nxt:
                assert nxt[0] == t
        assert levels[-1][1] <= A.TOP


def test_bytes_count_every_buffer():
    """estimate_bytes at G1 2^24 over precomputed tables (5 rounds): 19.89 GiB (the device run
    printed the AffineBuckets' nbytes, which this function computes, and the run fitted), and
    nothing without rounds; slices shrink everything but the six per-bucket arrays."""
    b = A.estimate_bytes(12 << 24, 1 << 21, 5)
    assert abs(b / 2**30 - 19.89) < 0.01
    half = A.estimate_bytes(12 << 24, 1 << 21, 5, slice_items=6 << 24, slice_buckets=1 << 20)
    assert 0.45 * b < half < 0.55 * b
    assert A.estimate_bytes(12 << 24, 1 << 21, 0) == 0
    assert A.estimate_bytes(12 << 24, 1 << 21, 1) < b     # one round: no second point buffer


def test_settings_name_what_is_wrong(monkeypatch):
    monkeypatch.setenv("ZKHIVE_MSM_AFFINE_ROUNDS", "five")
    with pytest.raises(GpuError, match="ZKHIVE_MSM_AFFINE_ROUNDS='five'"):
        A.rounds_from_env(100, 10)
    monkeypatch.setenv("ZKHIVE_MSM_AFFINE_ROUNDS", "41")
    with pytest.raises(GpuError, match="expected 0..40"):
        A.rounds_from_env(100, 10)
    monkeypatch.setenv("ZKHIVE_MSM_AFFINE_ROUNDS", "0")
    assert A.rounds_from_env(12 << 24, 1 << 21) == 0
    monkeypatch.delenv("ZKHIVE_MSM_AFFINE_ROUNDS")
    assert A.rounds_from_env(12 << 24, 1 << 21) == 5


def test_the_ledger_books_the_dense_engines_affine_buffers_only_when_on(monkeypatch):
    """With rounds the ledger books the affine buffers less what the engine lends them
    (dense_sharing: at the default 2^25 chunks in 3-window slices, the prefix products in the
    radix sort's second list and the running buckets in the workspace's own); without rounds,
    nothing of theirs and a second set of buckets."""
    from gpu.budget import dense_engine_bytes
    for var in ("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS", "ZKHIVE_MSM_DENSE_AFFINE_ROUNDS",
                "ZKHIVE_MSM_DENSE_FINAL_INTO", "ZKHIVE_MSM_DENSE_SORT"):
        monkeypatch.delenv(var, raising=False)
    K, running = 13 << 19, (13 << 19) * 192
    shape = dict(slice_items=3 << 25, slice_buckets=3 << 19)
    default = dense_engine_bytes("g1", 1 << 25)       # the default: auto
    assert A.dense_affine_rounds(1 << 25, 20) == 5   # runs of 64
    assert A.dense_affine_rounds(1 << 24, 20) == 4   # runs of 32
    assert A.dense_affine_rounds(1000, 9) == 0       # runs of 3.9: no round pays
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", "0")
    off = dense_engine_bytes("g1", 1 << 25)           # XYZZ: nothing booked, no sharing
    assert A.dense_affine_rounds(1 << 25, 20) == 0
    assert A.dense_sharing(1 << 25, 20, radix=True) == (0, False)
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", "auto")
    auto = dense_engine_bytes("g1", 1 << 25)          # 5 rounds, 3-window slices
    assert auto == default
    lent = A.prefix_bytes(13 << 25, K, 5, **shape)
    assert A.dense_sharing(1 << 25, 20, radix=True) == (lent, True)
    assert auto - off == A.estimate_bytes(13 << 25, K, 5, **shape) - lent - running
    assert lent > 2 * 2**30 and lent <= 8 * 13 << 25  # 2.3 GiB in the 3.25 GiB second list
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS", "13")  # a whole chunk at once
    on = dense_engine_bytes("g1", 1 << 25)
    assert A.dense_sharing(1 << 25, 20, radix=True) == (0, True)   # its prefixes: too many
    assert on - off == A.estimate_bytes(13 << 25, K, 5) - running
    assert 40 * 2**30 < on - off < 46 * 2**30
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS", "3")
    assert auto - off < 0.25 * (on - off)
    # the tail merged instead (the chunk's buckets used): a second set of buckets again
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_FINAL_INTO", "0")
    assert dense_engine_bytes("g1", 1 << 25) == auto + running
    # a one-level sort keeps no second list: the prefixes are the accumulation's own
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_FINAL_INTO", "1")
    assert A.dense_sharing(1 << 25, 20, radix=False) == (0, True)


def test_the_dense_setting_names_what_is_wrong(monkeypatch):
    from gpu.budget import dense_engine_bytes
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", "on")
    with pytest.raises(GpuError, match="ZKHIVE_MSM_DENSE_AFFINE_ROUNDS='on': expected auto"):
        dense_engine_bytes("g1", 1 << 24)
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", "-1")
    with pytest.raises(GpuError, match="expected 0..40"):
        A.dense_affine_rounds(1 << 24, 20)
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS", "0")
    with pytest.raises(GpuError, match="ZKHIVE_MSM_DENSE_AFFINE_WINDOWS=0: expected at least 1"):
        A.dense_affine_windows(13)
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS", "99")
    assert A.dense_affine_windows(13) == 13


@pytest.mark.parametrize("var,read", [("ZKHIVE_MSM_AFFINE_SLICE_RANGE", A.affine_slice_range),
                                      ("ZKHIVE_MSM_DENSE_FINAL_INTO", A.dense_final_into),
                                      ("ZKHIVE_MSM_INV_BLOCK", A.inv_block)])
def test_the_dense_steps_read_0_or_1_and_refuse_anything_else(monkeypatch, var, read):
    monkeypatch.delenv(var, raising=False)
    assert read() is True           # on since the device timed them (docs/performance.md)
    for v, want in (("", True), ("0", False), ("1", True)):
        monkeypatch.setenv(var, v)
        assert read() is want
    for bad in ("yes", "2", "on"):
        monkeypatch.setenv(var, bad)
        with pytest.raises(GpuError, match=f"{var}={bad!r}: expected 0 or 1"):
            read()


def test_the_inversion_block_takes_what_its_threads_chain():
    """With the block, the levels stop at BLOCK_THREADS x BLOCK_WIDTH values (a round of 2^26
    pairs: 2^22 thread products, two levels of 16, then the block's 16,384); without it they go
    on to TOP; the block's threads fit an SM at ~70 registers a thread."""
    top = A.BLOCK_THREADS * A.BLOCK_WIDTH
    levels = A.level_sizes(1 << 22, top)
    assert [t for _, t in levels] == [1 << 18, 1 << 14] and levels[-1][1] <= top
    assert len(A.level_sizes(1 << 22)) == 4 and A.level_sizes(1 << 22)[-1][1] <= A.TOP
    assert A.level_sizes(top, top) == [] and len(A.level_sizes(top + 1, top)) == 1
    assert A.BLOCK_THREADS & (A.BLOCK_THREADS - 1) == 0 and A.BLOCK_THREADS * 72 <= 65536


def test_the_ones_chains_plan_fills_the_sms_within_the_room_it_is_lent():
    """The split MSM's 1s by affine chains (ones_affine.cu): filecoin-32g's 61.5 M 1s on 132
    SMs take every resident block and dozens of steps, inside the tail engine's 2^24 compact
    bases; less room, or fewer 1s than ONES_MIN_STEPS steps of one block an SM, leave them to
    the XYZZ sum (None); the kernel's tree is sized for ONES_THREADS."""
    from pathlib import Path
    per_block = A.ONES_THREADS * A.ONES_CHAINS
    G, S = A.ones_plan("g1", 61_541_694, 132, 4, 96 << 24)
    assert G == 528 and S == -(-61_541_694 // (528 * per_block)) and S >= 10
    G2, S2 = A.ones_plan("g2", 61_541_694, 132, 2, 192 << 24)
    assert G2 == 264 and G2 * per_block * A.ONES_ACC_BYTES["g2"] <= 192 << 24
    # room for 200 blocks: fewer blocks, more steps; room for fewer blocks than SMs: none
    G, S = A.ones_plan("g1", 61_541_694, 132, 4, 200 * per_block * A.ONES_ACC_BYTES["g1"])
    assert G == 200 and S == -(-61_541_694 // (200 * per_block))
    assert A.ones_plan("g1", 61_541_694, 132, 4, 131 * per_block * A.ONES_ACC_BYTES["g1"]) is None
    # too few 1s: fewer than ONES_MIN_STEPS steps of one block an SM
    assert A.ones_plan("g1", A.ONES_MIN_STEPS * per_block * 132 - 1, 132, 4, 1 << 40) is None
    assert A.ones_plan("g1", A.ONES_MIN_STEPS * per_block * 132, 132, 4, 1 << 40) == \
        (132, A.ONES_MIN_STEPS)
    src = (Path(A.__file__).parent / "kernels" / "ones_affine.cu").read_text()
    assert f"#define ONES_BT {A.ONES_THREADS}\n" in src


def test_blocks_an_sm_holds():
    """Registers, shared memory or the warp limit bound the resident blocks (the ptxas counts
    of the chains' kernels: G1 114 registers and 12 KiB, G2 254 and 24 KiB)."""
    assert A.blocks_per_sm(114, 12288) == 4
    assert A.blocks_per_sm(254, 24576) == 2
    assert A.blocks_per_sm(32, 0) == 16          # 64 warps / 4 a block
    assert A.blocks_per_sm(32, 100 << 10) == 2   # shared memory
    assert A.blocks_per_sm(255, 0, threads=512) == 1


def test_the_ones_chains_settings(monkeypatch):
    """On by default since the H100 timed it; the chains a thread from the environment, bad
    values refused by name."""
    monkeypatch.delenv("ZKHIVE_MSM_ONES_AFFINE", raising=False)
    assert A.ones_affine() is True
    monkeypatch.setenv("ZKHIVE_MSM_ONES_AFFINE", "0")
    assert A.ones_affine() is False
    monkeypatch.setenv("ZKHIVE_MSM_ONES_AFFINE", "yes")
    with pytest.raises(GpuError, match="ZKHIVE_MSM_ONES_AFFINE='yes'"):
        A.ones_affine()
    monkeypatch.delenv("ZKHIVE_MSM_ONES_CHAINS", raising=False)
    assert A.ones_chains() == A.ONES_CHAINS == 64
    monkeypatch.setenv("ZKHIVE_MSM_ONES_CHAINS", "16")
    assert A.ones_chains() == 16
    for bad in ("0", "x", "2048"):
        monkeypatch.setenv("ZKHIVE_MSM_ONES_CHAINS", bad)
        with pytest.raises(GpuError, match=f"ZKHIVE_MSM_ONES_CHAINS={bad!r}"):
            A.ones_chains()


def test_the_ones_chains_kernel_form(monkeypatch):
    """ZKHIVE_MSM_ONES_KERNEL: "whole" unless set; one form for both groups or one a group;
    a form the group lacks, or a group that is not one, refused by name."""
    monkeypatch.delenv("ZKHIVE_MSM_ONES_KERNEL", raising=False)
    assert A.ones_kernel("g1") == A.ones_kernel("g2") == "whole"
    monkeypatch.setenv("ZKHIVE_MSM_ONES_KERNEL", "lean")
    assert A.ones_kernel("g1") == A.ones_kernel("g2") == "lean"
    monkeypatch.setenv("ZKHIVE_MSM_ONES_KERNEL", "g2=lean3")
    assert (A.ones_kernel("g1"), A.ones_kernel("g2")) == ("whole", "lean3")
    monkeypatch.setenv("ZKHIVE_MSM_ONES_KERNEL", "g1=lean5, g2=whole3")
    assert (A.ones_kernel("g1"), A.ones_kernel("g2")) == ("lean5", "whole3")
    monkeypatch.setenv("ZKHIVE_MSM_ONES_KERNEL", "g1=lean;g2=lean3")
    assert (A.ones_kernel("g1"), A.ones_kernel("g2")) == ("lean", "lean3")
    monkeypatch.setenv("ZKHIVE_MSM_ONES_KERNEL", "lean3")
    assert A.ones_kernel("g2") == "lean3"
    with pytest.raises(GpuError, match="g1's forms are whole, lean, lean5"):
        A.ones_kernel("g1")
    monkeypatch.setenv("ZKHIVE_MSM_ONES_KERNEL", "g3=lean")
    with pytest.raises(GpuError, match="ZKHIVE_MSM_ONES_KERNEL='g3=lean'"):
        A.ones_kernel("g1")



def test_the_apply_kernel_form(monkeypatch):
    """ZKHIVE_MSM_APPLY_KERNEL: "whole" unless set, each form of APPLY_KERNELS read, anything
    else refused by name."""
    monkeypatch.delenv("ZKHIVE_MSM_APPLY_KERNEL", raising=False)
    assert A.apply_kernel() == "whole"
    for form in A.APPLY_KERNELS:
        monkeypatch.setenv("ZKHIVE_MSM_APPLY_KERNEL", form)
        assert A.apply_kernel() == form
    monkeypatch.setenv("ZKHIVE_MSM_APPLY_KERNEL", "lean3")
    with pytest.raises(GpuError, match="ZKHIVE_MSM_APPLY_KERNEL='lean3': use one of whole, lean"):
        A.apply_kernel()
