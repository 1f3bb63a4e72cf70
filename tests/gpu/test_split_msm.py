"""The split MSM (gpu.cuda.split_msm) == arkworks' MSM, for every mix of 0, 1 and other scalars.

Fresh random bases with known discrete logs (made on the device) and fresh random scalars each
run. Mixes: all 0, all 1, none of either (all random), a PoRep-like mix (mostly 0/1 with a
random tail), and tails longer than one chunk (the chunked Pippenger path). Each result is
checked against the known-log identity and, at the smaller size, against arkworks on the host;
the classification counts against numpy; the path the chooser takes; split and plain Pippenger
give the same point; a scalar >= r is rejected naming its index.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from synthesis.field import MODULUS

pytestmark = pytest.mark.gpu

GROUPS = {"g1": G1Point, "g2": G2Point}
rng = np.random.default_rng()
prng = random.Random(int(rng.integers(2**63)))
R = np.frombuffer(MODULUS.to_bytes(32, "little"), dtype=np.uint64)


def random_scalars(n: int) -> np.ndarray:
    s = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    s[:, 3] %= R[3]  # below r's top limb: canonical
    return s


def mix(n: int, zeros: float, ones: float) -> np.ndarray:
    s = random_scalars(n)
    u = rng.random(n)
    s[u < zeros] = 0
    one = (u >= zeros) & (u < zeros + ones)
    s[one] = 0
    s[one, 0] = 1
    return s


MIXES = {"all zero": (1.0, 0.0), "all one": (0.0, 1.0), "no zero or one": (0.0, 0.0),
         "porep-like": (0.45, 0.45), "ones and zeros only": (0.5, 0.5)}


class Tables:
    """Bases P_i = (a_{i // m} + b_{i % m}) G with the a, b known."""

    def __init__(self, group: str, m: int):
        P = GROUPS[group]
        self.group, self.m = group, m
        self.a = [prng.randrange(1, MODULUS) for _ in range(m)]
        self.b = [prng.randrange(1, MODULUS) for _ in range(m)]
        self.pa = [P() * Scalar(x) for x in self.a]
        self.pb = [P() * Scalar(x) for x in self.b]

    def bases(self, n: int) -> np.ndarray:
        from gpu.cuda.msm import known_log_bases
        return known_log_bases(self.group, self.pa, self.pb, n)

    def expected(self, s: np.ndarray):
        ints = [int.from_bytes(row.tobytes(), "little") for row in s]
        k = sum(x * (self.a[i // self.m] + self.b[i % self.m]) for i, x in enumerate(ints) if x)
        return GROUPS[self.group]() * Scalar(k % MODULUS)


def arkworks(group: str, xy: np.ndarray, s: np.ndarray):
    P = GROUPS[group]
    raw, step = xy.tobytes(), 4 * xy.shape[1]
    pts = [P.from_xy_bytes_unchecked_le(raw[i:i + step]) for i in range(0, len(raw), step)]
    sb = s.tobytes()
    return P.multiexp_unchecked(pts, [Scalar.from_le_bytes(sb[i:i + 32]) for i in range(0, len(sb), 32)])


N = {"g1": 6000, "g2": 2500}


@pytest.fixture(scope="module", params=list(GROUPS))
def resident(request, cuda_ctx):
    from gpu.cuda.msm import DeviceBases
    group = request.param
    t = Tables(group, 80)
    xy = t.bases(N[group])
    with DeviceBases(xy, group) as bases:
        yield group, t, xy, bases


@pytest.fixture(scope="module")
def split(cuda_ctx):
    from gpu.cuda.split_msm import SplitMsm
    s = SplitMsm()
    yield s
    s.close()


def run(split, bases, s: np.ndarray, name="q"):
    from gpu.cuda.memory import DeviceBuffer
    n = len(s)
    with DeviceBuffer(32 * n, what="scalars") as sb, DeviceBuffer(4 * n, what="lists") as lb:
        sb.upload(np.ascontiguousarray(s))
        cls = split.classify(sb, n, lb)
        return cls, split.msm(bases, cls, name=name)


@pytest.mark.parametrize("which", list(MIXES))
def test_split_msm_every_mix(resident, split, which, monkeypatch):
    group, t, xy, bases = resident
    n = len(xy)
    s = mix(n, *MIXES[which])
    want = t.expected(s)
    is0 = ~s.any(axis=1)
    is1 = (s[:, 0] == 1) & ~s[:, 1:].any(axis=1)
    monkeypatch.setenv("ZKHIVE_SPLIT_MSM", "on")
    cls, got = run(split, bases, s)
    assert (cls.zeros, cls.ones, cls.tail) == (int(is0.sum()), int(is1.sum()), int((~is0 & ~is1).sum()))
    assert got == want, f"{group} {which}: split MSM"
    monkeypatch.setenv("ZKHIVE_SPLIT_MSM", "off")
    assert run(split, bases, s)[1] == want, f"{group} {which}: plain Pippenger"


def test_split_msm_matches_arkworks(resident, split, monkeypatch):
    group, t, xy, bases = resident
    n = 700
    s = mix(n, 0.3, 0.5)
    monkeypatch.setenv("ZKHIVE_SPLIT_MSM", "on")
    from gpu.cuda.msm import DeviceBases
    with DeviceBases(xy[:n], group) as small:
        assert run(split, small, s)[1] == arkworks(group, xy[:n], s)
        wrong = s.copy()
        wrong[5] = [2, 0, 0, 0] if s[5, 0] != 2 or s[5, 1:].any() else [3, 0, 0, 0]
        assert run(split, small, wrong)[1] != arkworks(group, xy[:n], s)


#: the 1s' affine chains at test size (the plan needs millions of 1s before it fills the SMs):
#: (blocks, chains a thread), so that each mix takes several steps, the last ragged
ONES_SHAPE = {"g1": (3, 2), "g2": (2, 1)}


@pytest.mark.parametrize("which", ["porep-like", "all one"])
def test_ones_by_affine_chains(resident, which, monkeypatch):
    """ZKHIVE_MSM_ONES_AFFINE=1: the 1s summed by ones_affine.cu's chains (each block's step
    sharing one inversion), the accumulators then by the XYZZ kernels over no list == the
    known-log identity; the XYZZ sum of the listed bases gives the same point; a changed 1
    changes the sum."""
    from gpu.cuda.split_msm import SplitMsm
    group, t, xy, bases = resident
    s = mix(len(xy), *MIXES[which])
    split = SplitMsm(ones_shape=ONES_SHAPE[group])
    try:
        monkeypatch.setenv("ZKHIVE_SPLIT_MSM", "on")
        monkeypatch.setenv("ZKHIVE_MSM_ONES_AFFINE", "1")
        cls, got = run(split, bases, s)
        info = split.last["q"]
        assert info["ones_sum"] == "affine" and info["ones_steps"] >= 4, info
        assert got == t.expected(s)
        one = int(np.flatnonzero((s[:, 0] == 1) & ~s[:, 1:].any(axis=1))[-1])
        changed = s.copy()
        changed[one] = 0
        assert run(split, bases, changed)[1] != got
        monkeypatch.setenv("ZKHIVE_MSM_ONES_AFFINE", "0")
        assert run(split, bases, s)[1] == got and split.last["q"]["ones_sum"] == "xyzz"
    finally:
        split.close()


@pytest.mark.parametrize("form", ["whole", "lean", "held"])
def test_ones_by_affine_chains_double_cancel_and_meet_the_identity(resident, form, monkeypatch):
    """The chains' additions that are not chords, on the device: one point listed hundreds of
    times (doublings), its negation (zero sums, then sums from the identity), identity bases,
    2P and -2P, among random points; all scalars 1 but a few 0s and a random tail == arkworks;
    in each kernel form (ZKHIVE_MSM_ONES_KERNEL: "held" the group's form held to more blocks an
    SM, G1 lean5, G2 lean3), the form the run took reported."""
    from gpu import msm_input as m
    from gpu.cuda.msm import DeviceBases
    from gpu.cuda.split_msm import SplitMsm
    group, t, xy, bases = resident
    form = {"g1": "lean5", "g2": "lean3"}[group] if form == "held" else form
    monkeypatch.setenv("ZKHIVE_MSM_ONES_KERNEL", f"{group}={form}")
    P = GROUPS[group]
    p = t.pa[0]
    pts = [p] * 300 + [-p] * 100 + [P.identity()] * 60 + [p + p] * 40 + [-(p + p)] * 40 + \
        [t.pa[i % t.m] + t.pb[(3 * i) % t.m] for i in range(200)]
    order = rng.permutation(len(pts))
    pts = [pts[i] for i in order]
    xy_e = m.encode_points(pts, group)
    s = mix(len(pts), 0.05, 0.9)
    monkeypatch.setenv("ZKHIVE_SPLIT_MSM", "on")
    monkeypatch.setenv("ZKHIVE_MSM_ONES_AFFINE", "1")
    split = SplitMsm(ones_shape=(1, 1))
    try:
        with DeviceBases(xy_e, group) as eb:
            got = run(split, eb, s)[1]
            assert split.last["q"]["ones_steps"] >= 4
            assert split.last["q"]["ones_kernel"] == form
            assert got == arkworks(group, xy_e, s)
    finally:
        split.close()


@pytest.mark.parametrize("zeros,ones,mode", [(0.0, 0.0, "auto"), (0.2, 0.3, "auto"),
                                            (0.2, 0.3, "dense")])
def test_tail_longer_than_one_chunk(resident, zeros, ones, mode, monkeypatch):
    """Chunks of 512 scalars: the tail goes through Pippenger several times, the parts added;
    a dense G1 query (or any G1 query with ZKHIVE_SPLIT_MSM=dense) through the dense engine."""
    from gpu.cuda.split_msm import SplitMsm
    group, t, xy, bases = resident
    s = mix(len(xy), zeros, ones)
    small = SplitMsm(capacity={"g1": 512, "g2": 512}, dense_chunk=512)
    try:
        monkeypatch.setenv("ZKHIVE_SPLIT_MSM", mode)
        cls, got = run(small, bases, s)
        info = small.last["q"]
        if group == "g1" and (zeros + ones == 0 or mode == "dense"):
            # dense and longer than a chunk: the chunked dense engine, straight over the bases
            assert info["path"] == "dense" and info["chunks"] == -(-len(s) // 512) > 1
        else:
            assert info["path"] == "split" and info["chunks"] == -(-cls.tail // 512) > 1
        assert got == t.expected(s)
    finally:
        small.close()


@pytest.mark.parametrize("chunk", [512, 1000, 6000])
@pytest.mark.parametrize("sort,affine,slice_,opts", [
    ("radix", 0, "", ""), ("plain", 0, "", ""), ("match", 0, "", ""), ("radix", 3, "", ""),
    ("radix", 3, "2", ""), ("plain", 2, "1", ""),
    # the slice's own stretch and buckets, the tail added into the running buckets
    ("radix", 3, "2", "range,into"), ("radix", 3, "", "into"), ("plain", 2, "1", "range"),
    # the inversion's top in one block (the default) and through levels and one thread
    ("radix", 3, "2", "range,into,block"), ("plain", 2, "1", "block"),
    ("radix", 3, "", "range,into"),
    # the apply's other kernel forms (ZKHIVE_MSM_APPLY_KERNEL)
    ("radix", 3, "2", "range,into,block,lean"), ("plain", 2, "1", "block,lean5"),
    # the radix sort within each window (ZKHIVE_MSM_RADIX=window)
    ("radix", 3, "2", "range,into,block,window"), ("radix", 0, "", "window")])
def test_dense_engine_chunks_share_buckets(resident, chunk, sort, affine, slice_, opts,
                                           monkeypatch):
    """gpu.cuda.msm.DenseEngine (the H query's path): chunks of the resident bases into one set
    of buckets, queued on a stream and collected later; == the known-log identity for random,
    skewed and 0/1 scalars, a chunk size that does and does not divide n, either sort, the
    buckets summed in XYZZ or by batched affine rounds (ZKHIVE_MSM_DENSE_AFFINE_ROUNDS), all
    windows at once or a slice of 2 or 1 (ZKHIVE_MSM_DENSE_AFFINE_WINDOWS), each slice over its
    own stretch (ZKHIVE_MSM_AFFINE_SLICE_RANGE) and the tail into the running buckets without a
    merge (ZKHIVE_MSM_DENSE_FINAL_INTO), the inversion's top in one block or through levels and
    one thread (ZKHIVE_MSM_INV_BLOCK), the apply in each kernel form (ZKHIVE_MSM_APPLY_KERNEL);
    a scalar >= r in a later chunk is named by its index
    in the whole vector, and the engine keeps serving."""
    from gpu.cuda import loader
    from gpu.cuda.memory import DeviceBuffer
    from gpu.cuda.msm import DenseEngine
    from gpu.errors import MsmInputError
    group, t, xy, bases = resident
    if group != "g1":
        with pytest.raises(Exception, match="G1 only"):
            DenseEngine(group, chunk)
        return
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_SORT", sort)
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", str(affine))
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_WINDOWS", slice_)
    monkeypatch.setenv("ZKHIVE_MSM_AFFINE_SLICE_RANGE", "1" if "range" in opts else "0")
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_FINAL_INTO", "1" if "into" in opts else "0")
    monkeypatch.setenv("ZKHIVE_MSM_INV_BLOCK", "1" if "block" in opts else "0")
    form = "lean5" if "lean5" in opts else "lean" if "lean" in opts else "whole"
    monkeypatch.setenv("ZKHIVE_MSM_APPLY_KERNEL", form)
    monkeypatch.setenv("ZKHIVE_MSM_RADIX", "window" if "window" in opts else "lsd")
    n = len(xy)
    e = DenseEngine(group, chunk)
    e.warm()
    assert (e.affine is not None) == (affine > 0)
    if slice_:
        assert e.affine.slice_buckets == int(slice_) * e.ws.B < e.affine.B
    stream = loader.driver().Stream()
    try:
        for s in (mix(n, 0.0, 0.0), mix(n, 0.45, 0.45), mix(n, 0.5, 0.5)):
            with DeviceBuffer(32 * n, what="scalars") as sb:
                sb.upload(np.ascontiguousarray(s))
                pending = e.start(bases, sb, n, stream)
                assert pending.chunks == -(-n // chunk)
                assert pending.finish() == t.expected(s)
                assert e.affine is None or e.affine.apply_form == form
                assert e.msm(bases, sb, n - 1) == t.expected(s[: n - 1])
        s = mix(n, 0.0, 0.0)
        s[n - 3] = R
        with DeviceBuffer(32 * n, what="scalars") as sb:
            sb.upload(np.ascontiguousarray(s))
            with pytest.raises(MsmInputError, match=f"scalar {n - 3} ") as err:
                e.msm(bases, sb, n, stream)
            assert err.value.index == n - 3
            s[n - 3] = 7
            sb.upload(np.ascontiguousarray(s))
            assert e.msm(bases, sb, n) == t.expected(s)
    finally:
        e.close()


def test_chooser_takes_the_path_the_statistics_call_for(resident, split, monkeypatch):
    group, t, xy, bases = resident
    monkeypatch.setenv("ZKHIVE_SPLIT_MSM", "auto")
    run(split, bases, mix(len(xy), 0.0, 0.0))
    assert split.last["q"]["path"] == "pippenger"   # dense: nothing to split off
    run(split, bases, mix(len(xy), 0.45, 0.45))
    assert split.last["q"]["path"] == "split"


def test_scalar_not_below_r_is_rejected_with_its_index(resident, split):
    from gpu.errors import MsmInputError
    group, t, xy, bases = resident
    s = mix(len(xy), 0.4, 0.4)
    s[1234] = R
    with pytest.raises(MsmInputError, match="scalar 1234 ") as e:
        run(split, bases, s)
    assert e.value.index == 1234
    # and the engine keeps serving
    s[1234] = 0
    assert run(split, bases, s)[1] == t.expected(s)


def test_the_dense_engine_sums_in_xyzz_once_the_ledger_dropped_its_affine_buffers(resident,
                                                                                  monkeypatch):
    """gpu.budget.admit_shape admits a key without the dense engine's affine buffers where only
    that fits; the backend then sets SplitMsm.dense_affine = False and the engine it hands out
    (a new one: the old one had the buffers) has no rounds, and still sums right."""
    from gpu.cuda.memory import DeviceBuffer
    from gpu.cuda.split_msm import SplitMsm
    group, t, xy, bases = resident
    if group != "g1":
        pytest.skip("the dense engine is G1 only")
    monkeypatch.setenv("ZKHIVE_MSM_DENSE_AFFINE_ROUNDS", "auto")
    n = len(xy)
    small = SplitMsm(capacity={"g1": 512, "g2": 512}, dense_chunk=2048)
    try:
        e = small.dense("g1", n)
        e.warm()
        assert e.affine_rounds == 3 and e.affine is not None     # runs of 2048 / 2^7 = 16
        small.dense_affine = False
        lean = small.dense("g1", n)
        assert lean is not e and lean.affine_rounds == 0
        lean.warm()
        assert lean.affine is None
        s = mix(n, 0.1, 0.1)
        with DeviceBuffer(32 * n, what="scalars") as sb:
            sb.upload(np.ascontiguousarray(s))
            assert lean.msm(bases, sb, n) == t.expected(s)
    finally:
        small.close()
