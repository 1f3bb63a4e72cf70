"""The curve and MSM kernel code (curve.cuh, msm_core.cuh) through its host build, against
arkworks (py_arkworks_bls12381) on random points and scalars and on the edge cases; plus the
CPU fallback of gpu.msm. The device runs these same per-thread bodies (tests/gpu/test_msm.py)."""
from __future__ import annotations

import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from gpu import msm as M
from gpu.native import curve
from synthesis.field import MODULUS, FieldError, vec_from_ints

GROUPS = [("g1", G1Point), ("g2", G2Point)]
rng = random.Random(0x5eed)


def rand_points(P, n: int) -> list:
    """n distinct random points: A_j + B_l from two small tables (one scalar multiplication per
    table entry, cheap additions after)."""
    m = max(2, int(n ** 0.5) + 1)
    a = [P() * Scalar(rng.randrange(1, MODULUS)) for _ in range(m)]
    b = [P() * Scalar(rng.randrange(1, MODULUS)) for _ in range(m)]
    return [a[i // m] + b[i % m] for i in range(n)]


def reference(P, points, ints):
    return P.multiexp_unchecked(points, [Scalar(x % MODULUS) for x in ints])


@pytest.fixture(scope="module", params=GROUPS, ids=[g for g, _ in GROUPS])
def group(request):
    return request.param


# -- point arithmetic ----------------------------------------------------------------------------

def test_point_ops_match_arkworks(group):
    g, P = group
    for _ in range(4):
        a, b = rand_points(P, 2)
        assert curve.point_op(g, "add_mixed", a, b) == a + b
        assert curve.point_op(g, "add", a, b) == a + b
        assert curve.point_op(g, "dbl", a) == a + a
        assert curve.point_op(g, "dbl_add_mixed", a, b) == a + a + b
        assert curve.point_op(g, "dbl_add_dbl", a, b) == a + a + b + b
        k = rng.randrange(2**32)
        assert curve.point_op(g, "mul_small", a, k=k) == a * Scalar(k)
        assert curve.point_op(g, "neg", a) == -a
        assert curve.point_op(g, "add_mixed", a, b) != a + a  # a wrong answer is caught


def test_point_ops_equal_negated_and_identity(group):
    g, P = group
    a, b = rand_points(P, 2)
    zero = P.identity()
    # equal points: the addition formulas divide by zero there, the code must double
    assert curve.point_op(g, "add_mixed", a, a) == a + a
    assert curve.point_op(g, "add", a, a) == a + a
    assert curve.point_op(g, "dbl_add_mixed", a, a + a) == a * Scalar(4)
    assert curve.point_op(g, "dbl_add_dbl", a, a) == a * Scalar(4)
    # a + (-a) = infinity, in both formulas and with non-trivial Z
    assert curve.point_op(g, "add_mixed", a, -a) == zero
    assert curve.point_op(g, "add", a, -a) == zero
    assert curve.point_op(g, "dbl_add_dbl", a, -a) == zero
    # the identity on either side
    for op in ("add_mixed", "add"):
        assert curve.point_op(g, op, a, zero) == a
        assert curve.point_op(g, op, zero, b) == b
        assert curve.point_op(g, op, zero, zero) == zero
    assert curve.point_op(g, "dbl", zero) == zero
    assert curve.point_op(g, "mul_small", a, k=0) == zero
    assert curve.point_op(g, "neg", zero) == zero


def test_on_curve_accepts_points_and_rejects_others(group):
    g, P = group
    a = rand_points(P, 1)[0]
    raw = M.encode_points([a], g)[0]
    assert curve.point_op_raw(g, "on_curve", raw, raw)
    assert curve.point_op_raw(g, "on_curve", np.zeros_like(raw), raw)  # the identity encoding
    bad = raw.copy()
    bad[0] ^= 1                                                          # y^2 != x^3 + b now
    assert not curve.point_op_raw(g, "on_curve", bad, raw)


# -- signed digits -------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [1, 2, 5, 13, 16, 20])
def test_signed_digits_recombine_and_stay_in_range(c):
    values = [0, 1, 2, MODULUS - 1, 2**c - 1, 2**(c - 1), 2**(c - 1) + 1,
              int("10" * 127, 2) % MODULUS] + [rng.randrange(MODULUS) for _ in range(20)]
    for s in values:
        d = curve.digits(s, c)
        assert len(d) == M.windows(c)
        assert all(-(2**(c - 1)) <= x <= 2**(c - 1) for x in d), (s, c, d)
        assert sum(x << (c * w) for w, x in enumerate(d)) == s
    # a digit is wrong if it recombines to something else
    assert sum(x << (c * w) for w, x in enumerate(curve.digits(5, c))) != 6


def test_window_bits_follow_the_cost_model():
    assert M.window_bits(1) >= 1
    assert M.window_bits(2**20) == 16
    assert M.window_bits(2**24) == 20
    sizes = [2**k for k in range(0, 25)]
    bits = [M.window_bits(n) for n in sizes]
    assert bits == sorted(bits)


# -- the MSM algorithm (host build) ----------------------------------------------------------------

# -- the lean mixed addition (add_affine_lean: G2's level-1 kernel variant, ZKHIVE_MSM_G2_LEAN) --

def fresh_points(P, n: int):
    """n random points from a fresh seed (returned for the failure message), never the identity."""
    seed = random.SystemRandom().randrange(2**63)
    r = random.Random(seed)
    return seed, [P() * Scalar(r.randrange(2, MODULUS)) for _ in range(n)]


def test_lean_addition_matches_arkworks(group):
    g, P = group
    for _ in range(4):
        seed, (a, b) = fresh_points(P, 2)
        assert curve.point_op(g, "add_mixed_lean", a, b) == a + b, seed          # Z = 1
        assert curve.point_op(g, "dbl_add_mixed_lean", a, b) == a + a + b, seed  # Z != 1
        assert curve.point_op(g, "dbl_sub_mixed_lean", a, b) == a + a - b, seed  # the sign bit
        assert curve.point_op(g, "add_mixed_lean", a, b) != a + a, seed  # a wrong answer is caught
        assert curve.point_op(g, "dbl_sub_mixed_lean", a, b) != a + a + b, seed


def test_lean_addition_doubles_cancels_and_meets_the_identity(group):
    g, P = group
    seed, (a, b) = fresh_points(P, 2)
    zero = P.identity()
    # P == Q: equal x and y, with Z = 1 and Z != 1, and through the sign bit (2a - (-2a))
    assert curve.point_op(g, "add_mixed_lean", a, a) == a + a, seed
    assert curve.point_op(g, "dbl_add_mixed_lean", a, a + a) == a * Scalar(4), seed
    assert curve.point_op(g, "dbl_sub_mixed_lean", a, -(a + a)) == a * Scalar(4), seed
    # P == -Q: equal x, opposite y: infinity
    assert curve.point_op(g, "add_mixed_lean", a, -a) == zero, seed
    assert curve.point_op(g, "dbl_add_mixed_lean", a, -(a + a)) == zero, seed
    assert curve.point_op(g, "dbl_sub_mixed_lean", a, a + a) == zero, seed
    # the accumulator at infinity (with and without the sign), the base the identity
    assert curve.point_op(g, "add_mixed_lean", zero, b) == b, seed
    assert curve.point_op(g, "dbl_sub_mixed_lean", zero, b) == -b, seed
    assert curve.point_op(g, "add_mixed_lean", a, zero) == a, seed
    assert curve.point_op(g, "dbl_sub_mixed_lean", a, zero) == a + a, seed
    assert curve.point_op(g, "add_mixed_lean", zero, zero) == zero, seed
    # equal x alone is not equal points: a + (-a) is not 2a
    assert curve.point_op(g, "add_mixed_lean", a, -a) != a + a, seed


# launch shapes: (level-1 ranges, partials per range later, buckets per reduction segment,
# first-level segments per second-level one);
# many small ranges make runs cross range boundaries and partial levels stack up
SHAPES = [dict(), dict(ranges=1), dict(ranges=7, level_width=4, segment=1, segment2=2),
          dict(ranges=333, level_width=5, segment=4, segment2=32), dict(window=3, ranges=50)]


@pytest.mark.parametrize("n", [1, 2, 3, 31, 32, 255, 256])
def test_host_msm_matches_arkworks(group, n):
    g, P = group
    pts = rand_points(P, n)
    ints = [rng.randrange(MODULUS) for _ in range(n)]
    ref = reference(P, pts, ints)
    xy, s = M.encode_points(pts, g), vec_from_ints(ints)
    for shape in SHAPES if n <= 32 or g == "g1" else SHAPES[:3]:
        assert curve.msm(g, xy, s, **shape) == ref, shape
    # a changed scalar changes the result
    ints[0] = (ints[0] + 1) % MODULUS
    assert curve.msm(g, xy, vec_from_ints(ints)) != ref


def edge_cases(n: int):
    """Scalar vectors the bucket phase must survive: empty buckets everywhere, one bucket with
    every point, long runs of 0 and 1 (the PoRep witness), the largest scalar."""
    r1 = MODULUS - 1
    yield "zeros", [0] * n
    yield "ones", [1] * n
    yield "r-1", [r1] * n
    yield "all equal", [rng.randrange(MODULUS)] * n
    yield "runs of 0 and 1", [0] * (n // 3) + [1] * (n // 3) + [rng.randrange(MODULUS)
                                                                for _ in range(n - 2 * (n // 3))]
    yield "0/1/r-1 mixed", [rng.choice([0, 1, r1]) for _ in range(n)]
    yield "small", [rng.randrange(4) for _ in range(n)]


@pytest.mark.parametrize("shape", SHAPES[:4], ids=["default", "one-range", "tiny", "odd"])
def test_host_msm_edge_scalars(group, shape):
    g, P = group
    n = 64 if g == "g1" else 24
    pts = rand_points(P, n)
    xy = M.encode_points(pts, g)
    for name, ints in edge_cases(n):
        assert curve.msm(g, xy, vec_from_ints(ints), **shape) == reference(P, pts, ints), name


@pytest.mark.parametrize("shape", SHAPES, ids=["default", "one-range", "tiny", "odd", "w3"])
def test_host_lean_level1_matches_arkworks(group, shape):
    """accumulate_range_lean (the first partial stored when its run ends, the base read at its
    addition) == arkworks on fresh random and edge scalars: runs crossing range ends at both
    ends, a range inside one run, empty ranges (ranges > digits), repeated and negated bases."""
    g, P = group
    n = 48 if g == "g1" else 20
    seed, pts = fresh_points(P, n - 4)
    pts = pts + [pts[0], -pts[1], pts[2] + pts[2], P.identity()]
    xy = M.encode_points(pts, g)
    r = random.Random(seed)
    cases = [("random", [r.randrange(1, MODULUS) for _ in range(n)])] + list(edge_cases(n))
    for name, ints in cases:
        ref = reference(P, pts, ints)
        assert curve.msm(g, xy, vec_from_ints(ints), lean=True, **shape) == ref, (name, seed)
    ints = list(cases[0][1])
    ints[-2] = (ints[-2] + 1) % MODULUS  # a changed scalar changes the lean result
    assert curve.msm(g, xy, vec_from_ints(ints), lean=True, **shape) != \
        reference(P, pts, cases[0][1]), seed


@pytest.mark.parametrize("chunk", [1, 7, 32, 100])
def test_host_chunked_msm_shares_buckets_across_chunks(group, chunk):
    """The device's chunked dense MSM (DenseEngine: chunks sorted one after the other, each
    chunk's runs added into one set of buckets, one reduction without counts) == arkworks, for
    chunk sizes that do and do not divide n, random and edge scalars; a changed scalar in the
    last chunk changes the result."""
    g, P = group
    n = 70 if g == "g1" else 24
    pts = rand_points(P, n)
    xy = M.encode_points(pts, g)
    cases = [("random", [rng.randrange(MODULUS) for _ in range(n)])] + list(edge_cases(n))[:5]
    for name, ints in cases:
        ref = reference(P, pts, ints)
        for shape in (dict(), dict(ranges=7, level_width=4, segment=1)):
            assert curve.msm(g, xy, vec_from_ints(ints), chunk=chunk, **shape) == ref, (name, shape)
    ints = list(cases[0][1])
    ints[-1] = (ints[-1] + 1) % MODULUS
    assert curve.msm(g, xy, vec_from_ints(ints), chunk=chunk) != reference(P, pts, cases[0][1])


def test_host_msm_repeated_and_identity_bases(group):
    g, P = group
    a, b = rand_points(P, 2)
    zero = P.identity()
    pts = [a] * 10 + [b, -a, zero, a, zero] + [a + b] * 5   # repeated, negated, identity bases
    for ints in ([rng.randrange(MODULUS) for _ in pts], [1] * len(pts), [MODULUS - 1] * len(pts)):
        xy = M.encode_points(pts, g)
        for shape in SHAPES[:3]:
            assert curve.msm(g, xy, vec_from_ints(ints), **shape) == reference(P, pts, ints)
    # all bases the identity
    xy = M.encode_points([zero] * 5, g)
    assert curve.msm(g, xy, vec_from_ints([3, 1, 4, 1, 5])) == zero


# (rounds, K pairs a thread, K2 values a thread at the inversion's levels): one round; many
# rounds with one pair a thread (every thread's product a level up, levels stacked); a round
# count past the longest run (runs of one carried through)
AFFINE = [(1, 16, 32), (6, 1, 2), (12, 3, 5)]


@pytest.mark.parametrize("affine", AFFINE, ids=["one-round", "deep-levels", "past-the-runs"])
@pytest.mark.parametrize("apply_lean", [False, True], ids=["whole", "lean"])
def test_host_affine_buckets_match_arkworks(group, affine, apply_lean):
    """Bucket sums by rounds of batched affine additions (msm_affine.cuh, the steps of
    gpu/cuda/affine_acc.py; the apply by pair_apply, whole or lean) == arkworks, for random
    and edge scalars: long runs in one bucket, empty buckets, odd run lengths carried, small
    windows with many rounds."""
    g, P = group
    lean = dict(apply_lean=apply_lean)
    n = 96 if g == "g1" else 24
    pts = rand_points(P, n)
    xy = M.encode_points(pts, g)
    cases = [("random", [rng.randrange(MODULUS) for _ in range(n)])] + list(edge_cases(n))
    for name, ints in cases:
        ref = reference(P, pts, ints)
        for window in (None, 3):
            assert curve.msm(g, xy, vec_from_ints(ints), window=window, affine=affine,
                             **lean) == ref, (name, window)
        # the buckets a few windows at a time (slices of 1 and 3 of window 3's 86 windows)
        for slice_ in (1, 3):
            assert curve.msm(g, xy, vec_from_ints(ints), window=3, affine=affine,
                             affine_slice=slice_, **lean) == ref, (name, slice_)
    ints = list(cases[0][1])
    ints[5] = (ints[5] + 1) % MODULUS
    assert curve.msm(g, xy, vec_from_ints(ints), affine=affine, **lean) != \
        reference(P, pts, cases[0][1])


@pytest.mark.parametrize("slice_range,final_into", [(True, False), (False, True), (True, True)],
                         ids=["slice-range", "final-into", "both"])
def test_host_dense_chunks_with_slice_ranges_and_the_tail_into_the_running_buckets(
        group, slice_range, final_into):
    """The dense engine's two opt-in steps (ZKHIVE_MSM_AFFINE_SLICE_RANGE: each slice's round 0
    over its own stretch of the sorted items and the halvings over its own buckets, the other
    buckets' lengths left stale; ZKHIVE_MSM_DENSE_FINAL_INTO: each chunk's affine tail added into
    the running buckets, no merge) == arkworks, over chunks that do and do not divide n, slices
    of 1 and 3 windows and all at once, random, skewed and edge scalars; a changed scalar changes
    the sum."""
    g, P = group
    n = 96 if g == "g1" else 24
    pts = rand_points(P, n)
    xy = M.encode_points(pts, g)
    opts = dict(slice_range=slice_range, final_into=final_into)
    cases = [("random", [rng.randrange(MODULUS) for _ in range(n)])] + list(edge_cases(n))
    for name, ints in cases:
        ref = reference(P, pts, ints)
        for chunk in (n // 4, n // 3 + 1, n):
            for slice_ in (0, 1, 3):
                assert curve.msm(g, xy, vec_from_ints(ints), window=3, chunk=chunk,
                                 affine=AFFINE[0], affine_slice=slice_, **opts) == ref, \
                    (name, chunk, slice_)
        assert curve.msm(g, xy, vec_from_ints(ints), chunk=n // 2, affine=AFFINE[2],
                         affine_slice=1, **opts) == ref, name
    ints = list(cases[0][1])
    ints[n - 1] = (ints[n - 1] + 1) % MODULUS
    assert curve.msm(g, xy, vec_from_ints(ints), window=3, chunk=n // 4, affine=AFFINE[0],
                     affine_slice=1, **opts) != reference(P, pts, cases[0][1])
    with pytest.raises(ValueError, match="steps of the affine rounds"):
        curve.msm(g, xy, vec_from_ints(ints), chunk=n // 4, **opts)


# the inversion's top in one block (ZKHIVE_MSM_INV_BLOCK): two threads and chains of one
# (every level of K2 before it), a small block with uneven chains, the device's 512 x 32 (the
# whole inversion in the block at these sizes)
@pytest.mark.parametrize("inv_block", [(1, 1), (2, 3), (9, 32)],
                         ids=["block-2x1", "block-4x3", "block-512x32"])
def test_host_affine_inversion_in_one_block(group, inv_block):
    """ZKHIVE_MSM_INV_BLOCK (the inversion's levels stop at the block's size, its threads'
    chains, a product tree, the root, back down) == arkworks through the dense chunks and
    slices with both other steps, and through one MSM with many levels above the block (two
    rounds, K2 = 2), random, skewed and edge scalars; a changed scalar changes the sum; a block
    of no threads is refused by name."""
    g, P = group
    n = 96 if g == "g1" else 24
    pts = rand_points(P, n)
    xy = M.encode_points(pts, g)
    opts = dict(slice_range=True, final_into=True, inv_block=inv_block)
    cases = [("random", [rng.randrange(MODULUS) for _ in range(n)])] + list(edge_cases(n))
    for name, ints in cases:
        ref = reference(P, pts, ints)
        for chunk, slice_ in ((n // 3 + 1, 1), (n, 0), (n // 2, 3)):
            assert curve.msm(g, xy, vec_from_ints(ints), window=3, chunk=chunk, affine=(2, 2, 2),
                             affine_slice=slice_, **opts) == ref, (name, chunk, slice_)
        assert curve.msm(g, xy, vec_from_ints(ints), affine=AFFINE[0],
                         inv_block=inv_block) == ref, name
    ints = list(cases[0][1])
    ints[n // 2] = (ints[n // 2] + 1) % MODULUS
    assert curve.msm(g, xy, vec_from_ints(ints), window=3, chunk=n // 4, affine=(2, 2, 2),
                     affine_slice=1, **opts) != reference(P, pts, cases[0][1])
    with pytest.raises(ValueError, match="inv_block"):
        curve.msm(g, xy, vec_from_ints(ints), affine=AFFINE[0], inv_block=(0, 4))
    with pytest.raises(ValueError, match="steps of the affine rounds"):
        curve.msm(g, xy, vec_from_ints(ints), inv_block=inv_block)


@pytest.mark.parametrize("apply_lean", [False, True], ids=["whole", "lean"])
def test_host_affine_pairs_that_double_cancel_or_meet_the_identity(group, apply_lean):
    """The pairs that are not chords: equal points (the doubling, denominator 2y), a point and
    its negation (zero sum, carried as the identity into later rounds), identity bases on
    either side; all in one bucket (scalars all equal) and mixed with random ones, with the
    doubling's and the zero's results paired again in later rounds; the apply by pair_apply and
    by the lean pair_apply."""
    g, P = group
    lean = dict(apply_lean=apply_lean)
    a, b = rand_points(P, 2)
    zero = P.identity()
    pts = [a, a, b, -b, zero, a, a + a, -(a + a), a, zero, zero, b, b, b, b, a] * 2
    xy = M.encode_points(pts, g)
    for ints in ([7] * len(pts), [1] * len(pts), [MODULUS - 1] * len(pts),
                 [rng.randrange(MODULUS) for _ in pts]):
        ref = reference(P, pts, ints)
        for affine in AFFINE:
            assert curve.msm(g, xy, vec_from_ints(ints), window=4, affine=affine,
                             **lean) == ref, affine
            # the inversion's tree over the doublings' and zero sums' denominators (1s)
            assert curve.msm(g, xy, vec_from_ints(ints), window=4, affine=affine,
                             inv_block=(2, 2), **lean) == ref, affine
    xy = M.encode_points([zero] * 5, g)
    assert curve.msm(g, xy, vec_from_ints([3, 1, 4, 1, 5]), affine=AFFINE[1], **lean) == zero
    with pytest.raises(ValueError, match="steps of the affine rounds"):
        curve.msm(g, xy, vec_from_ints([3, 1, 4, 1, 5]), **lean) if apply_lean else \
            curve.msm(g, xy, vec_from_ints([3, 1, 4, 1, 5]), slice_range=True)
    with pytest.raises(ValueError, match="rounds, K, K2"):
        curve.msm(g, xy, vec_from_ints([3, 1, 4, 1, 5]), affine=(0, 16, 32))


# the split MSM's 1s by affine chains (ones_affine.cu): one step (fewer points than
# accumulators), many steps with a ragged last one, chains of one, a tree of one thread
@pytest.mark.parametrize("shape", [(2, 4, 3), (1, 2, 2), (3, 1, 1), (1, 8, 1)],
                         ids=["2x4x3", "1x2x2", "3x1x1", "1x8x1"])
@pytest.mark.parametrize("lean", [False, True], ids=["whole", "lean"])
def test_host_ones_by_affine_chains_match_arkworks(group, shape, lean):
    """curve.sum_ones_affine (the device's ones_affine.cu bodies: a block's step sharing one
    inversion by a product tree over its threads' chains; each step's additions by
    ones_apply, whole or lean) == arkworks' sum of the listed bases, for random lists and
    for lists whose additions double (a base listed twice in one accumulator's steps), cancel
    (P and -P), and meet the identity (identity bases, sums that went to zero and go on); a
    changed list changes the sum; bad shapes and indices are refused by name."""
    g, P = group
    blocks, threads, chains = shape
    An = blocks * threads * chains
    pts = rand_points(P, 40 if g == "g1" else 16)
    a = pts[0]
    pts += [-a, P.identity(), a + a, -(a + a)]
    xy = M.encode_points(pts, g)
    n = len(pts)
    cases = {
        "random": [rng.randrange(n) for _ in range(5 * An + 3)],
        "one step": [rng.randrange(n) for _ in range(max(1, An - 1))],
        # accumulator 0's points a, a, -a, ...: a doubling, then 2a - a, then the identity's
        "edges": [0] + [rng.randrange(n) for _ in range(An - 1)]
                 + [0] + [rng.randrange(n) for _ in range(An - 1)]
                 + [n - 4] + [n - 3] * (An - 1)
                 + [n - 2] + [rng.randrange(n) for _ in range(An - 1)]
                 + [n - 1, n - 3, n - 4],
        "cancel": [0, n - 4] * (3 * An),
    }
    for name, lists in cases.items():
        ref = P.identity()
        for i in lists:
            ref = ref + pts[i]
        assert curve.sum_ones_affine(g, xy, lists, blocks=blocks, threads=threads,
                                     chains=chains, lean=lean) == ref, name
    lists = cases["random"]
    changed = list(lists)
    changed[-1] = (changed[-1] + 1) % (n - 4)  # never onto the identity or a point it cancels
    ref = P.identity()
    for i in lists:
        ref = ref + pts[i]
    assert curve.sum_ones_affine(g, xy, changed, blocks=blocks, threads=threads,
                                 chains=chains, lean=lean) != ref
    with pytest.raises(ValueError, match="threads a power of two"):
        curve.sum_ones_affine(g, xy, lists, blocks=1, threads=3, chains=2)
    with pytest.raises(ValueError, match=f"one of the {n} bases"):
        curve.sum_ones_affine(g, xy, [0, n], blocks=1, threads=2, chains=2)


def test_host_msm_rejects_bad_input(group):
    g, P = group
    pts = rand_points(P, 4)
    xy = M.encode_points(pts, g)
    s = vec_from_ints([1, 2, 3, 4])
    bad = xy.copy()
    bad[2, 1] ^= 0x10                       # base 2 off the curve
    with pytest.raises(M.MsmInputError, match="base 2 ") as e:
        curve.msm(g, bad, s)
    assert e.value.index == 2
    big = xy.copy()
    big[1, :12] = 0xFFFFFFFF                # x >= p
    with pytest.raises(M.MsmInputError, match="base 1 "):
        curve.msm(g, big, s)
    high = s.copy()
    high[3] = np.frombuffer(MODULUS.to_bytes(32, "little"), dtype=np.uint64)  # scalar = r
    with pytest.raises(FieldError, match="element 3"):
        curve.msm(g, xy, high)
    with pytest.raises(M.MsmInputError, match="4 bases but 3 scalars"):
        curve.msm(g, xy, s[:3])
    with pytest.raises(M.MsmInputError, match="shape"):
        curve.msm(g, xy[:, :10], s)


# -- the CPU fallback (same API as the CUDA base sets) -------------------------------------------

def test_cpu_bases_match_arkworks_and_accept_xy(group):
    g, P = group
    pts = rand_points(P, 40)
    ints = [rng.randrange(MODULUS) for _ in pts]
    ints[5:15] = [0] * 10
    ref = reference(P, pts, ints)
    with M.load_bases(pts, g, backend="cpu") as bases:
        assert bases.msm(vec_from_ints(ints)) == ref
        assert bases.msm(vec_from_ints([0] * 40)) == P.identity()
        with pytest.raises(M.MsmInputError, match="40 bases but 39"):
            bases.msm(vec_from_ints(ints[:39]))
    assert M.msm(M.encode_points(pts, g), vec_from_ints(ints), g) == ref
    with pytest.raises(ValueError, match="unknown MSM backend"):
        M.load_bases(pts, g, backend="tpu")
    with pytest.raises(ValueError, match="unknown group"):
        M.load_bases(pts, "g3")


def test_decode_point_is_checked(group):
    g, P = group
    raw = M.encode_points(rand_points(P, 1), g)[0].copy()
    assert M.decode_point(raw, g) is not None
    raw[3] ^= 1
    with pytest.raises(ValueError, match=rf"^point is not on the {g.upper()} curve$"):
        M.decode_point(raw, g)


# -- the device MSM's last step on the CPU (gpu.cuda.msm uses it) --------------------------------

FQ = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB


def xyzz_limbs(g, point, z: int) -> np.ndarray:
    """One point in the device's XYZZ layout (Montgomery limbs) with ZZ = z^2, ZZZ = z^3, z in Fq
    (the identity: all zero)."""
    coords = M.encode_points([point], g)[0]
    k = 12
    R = 1 << 384
    parts = [int.from_bytes(coords[i:i + k].tobytes(), "little") for i in range(0, len(coords), k)]
    d = len(parts) // 2  # Fq components per coordinate: 1 (G1) or 2 (G2)
    if not any(parts):
        return np.zeros(4 * k * d, dtype=np.uint32)
    z2, z3 = z * z % FQ, z * z * z % FQ
    x, y = parts[:d], parts[d:]
    out = [v * z2 for v in x] + [v * z3 for v in y] + [z2] + [0] * (d - 1) + [z3] + [0] * (d - 1)
    return np.concatenate([np.frombuffer((v * R % FQ).to_bytes(48, "little"), dtype="<u4")
                           for v in out])


def test_combine_matches_arkworks(group):
    g, P = group
    for c, W in ((13, 20), (20, 13), (3, 5), (16, 1)):
        pts = rand_points(P, W)
        if W > 2:
            pts[1] = P.identity()  # an empty window
        win = np.stack([xyzz_limbs(g, p, rng.randrange(1, FQ)) for p in pts])
        got = M.decode_point(curve.combine(g, win, c), g)
        want = P.identity()
        for w, p in enumerate(pts):
            want = want + p * Scalar(pow(2, c * w, MODULUS))
        assert got == want
        assert got != want + pts[0] or pts[0] == P.identity()  # a wrong sum is caught


def test_combine_rejects_bad_shapes(group):
    g, _ = group
    with pytest.raises(ValueError, match="window sums"):
        curve.combine(g, np.zeros((3, 5), dtype=np.uint32), 13)
