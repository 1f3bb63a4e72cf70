"""Device MSM (gpu.cuda.msm) == arkworks' MSM (the CPU library) on fresh random inputs.

Sizes 1, 2, 3, 2^k - 1, 2^k for k up to TEST_NPOW (default 20) on G1 and G2, every one against
the known-discrete-log identity MSM(P, s) = (sum s_i k_i) G for bases P_i = k_i G made on the
device (known_log_bases), and those up to 2^ARK_NPOW (16) also against ``multiexp_unchecked``.
One G1 2^24 check by that identity (``ZKHIVE_TEST_BIG=1`` or TEST_NPOW >= 24). Edge inputs: zero
scalars, 1, r - 1, all-equal scalars, runs of 0 and 1, repeated and identity bases; and the
rejections (a base off the curve, a scalar >= r on the host and on the device).
"""
from __future__ import annotations

import os
import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from gpu import msm as M
from synthesis.field import MODULUS, FieldError, vec_from_ints

pytestmark = pytest.mark.gpu

NPOW = int(os.environ.get("TEST_NPOW", "20"))
BIG = os.environ.get("ZKHIVE_TEST_BIG") == "1" or NPOW >= 24
SIZES = sorted({1, 2, 3} | {(1 << k) - d for k in range(2, min(NPOW, 20) + 1) for d in (1, 0)})
#: The arkworks references stop here: above it the known-log identity checks alone (the host
#: MSMs and the Python conversion of 2^20 points took ~75 s of a 205 s device suite, for sizes
#: the identity already covers with the same kernels).
ARK_NPOW = 16
GROUPS = {"g1": G1Point, "g2": G2Point}
rng = np.random.default_rng()       # fresh inputs every run
prng = random.Random(int(rng.integers(2**63)))


def random_scalars(n: int) -> np.ndarray:
    """Uniform canonical Fr vector (rejection on the top limb)."""
    s = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    s[:, 3] &= np.uint64((1 << 63) - 1)
    r = np.frombuffer(MODULUS.to_bytes(32, "little"), dtype=np.uint64)
    for _ in range(64):
        big = (s[:, 3] > r[3]) | ((s[:, 3] == r[3]) & (s[:, 2] >= r[2]))
        if not big.any():
            break
        s[big, 3] = rng.integers(0, int(r[3]), size=int(big.sum()), dtype=np.uint64)
    return s


def fr_dot_mod(s: np.ndarray, m1: int, m2: int, a: list[int], b: list[int]) -> int:
    """sum_i s_i (a[i // m2] + b[i % m2]) mod r for len(s) = n <= m1 m2, in numpy: 16-bit
    chunks summed per row and per column cannot overflow uint64 below 2^48 terms."""
    n = len(s)
    pad = np.zeros((m1 * m2, 4), dtype=np.uint64)
    pad[:n] = s
    chunks = pad.view(np.uint16).reshape(m1, m2, 16).astype(np.uint64)
    rows, cols = chunks.sum(axis=1), chunks.sum(axis=0)
    w = [1 << (16 * k) for k in range(16)]

    def val(v):
        return sum(int(x) * wk for x, wk in zip(v, w))
    return (sum(a[j] * val(rows[j]) for j in range(m1))
            + sum(b[l] * val(cols[l]) for l in range(m2))) % MODULUS


class Tables:
    """Bases with known discrete logs: P_i = (a_{i // m2} + b_{i % m2}) G."""

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
        return GROUPS[self.group]() * Scalar(fr_dot_mod(s, self.m, self.m, self.a, self.b))


def arkworks_points(group: str, xy: np.ndarray) -> list:
    P = GROUPS[group]
    raw, step = xy.tobytes(), 4 * xy.shape[1]
    return [P.from_xy_bytes_unchecked_le(raw[i:i + step]) for i in range(0, len(raw), step)]


def arkworks(group: str, xy_or_points, s: np.ndarray):
    """The CPU library's MSM (multiexp_unchecked) on the same bases and scalars."""
    pts = (arkworks_points(group, xy_or_points) if isinstance(xy_or_points, np.ndarray)
           else xy_or_points)
    sb = np.ascontiguousarray(s).tobytes()
    return GROUPS[group].multiexp_unchecked(pts, [Scalar.from_le_bytes(sb[i:i + 32])
                                                  for i in range(0, len(sb), 32)])


@pytest.fixture(scope="module", params=list(GROUPS))
def setup(request, cuda_ctx):
    group = request.param
    t = Tables(group, 1 << 10)
    return group, t, t.bases(max(SIZES))


def test_msm_sizes_match_arkworks(setup):
    """The arkworks references (sizes up to 2^ARK_NPOW) run on a thread pool (its MSM releases
    the GIL, and the device machine has 16 cores) while the device computes; one conversion of
    the bases serves all sizes (prefixes)."""
    from concurrent.futures import ThreadPoolExecutor

    from gpu.cuda.msm import DeviceBases
    group, t, xy = setup
    small = [n for n in SIZES if n <= 1 << ARK_NPOW]
    pts = arkworks_points(group, xy[:max(small)])
    scalars = {n: random_scalars(n) for n in SIZES}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        refs = {n: pool.submit(arkworks, group, pts[:n], scalars[n]) for n in reversed(small)}
        for n in SIZES:
            with DeviceBases(xy[:n], group) as bases:
                got = bases.msm(scalars[n])
                assert got == t.expected(scalars[n]), f"{group} n={n} (known logs)"
                # the same resident bases, new scalars
                s2 = random_scalars(n)
                assert bases.msm(s2) == t.expected(s2), f"{group} n={n} second MSM"
            if n in refs:
                assert got == refs[n].result(), f"{group} n={n} (arkworks)"


def edge_vectors(n: int):
    r1 = MODULUS - 1
    yield "zeros", [0] * n
    yield "ones", [1] * n
    yield "r-1", [r1] * n
    yield "all equal", [prng.randrange(MODULUS)] * n
    yield "runs of 0 and 1", ([0] * (n // 2) + [1] * (n // 4)
                              + [prng.randrange(MODULUS) for _ in range(n - n // 2 - n // 4)])
    yield "0/1/r-1 mixed", [prng.choice([0, 1, r1]) for _ in range(n)]


@pytest.mark.parametrize("n", [1 << 12, 1 << 16])
def test_msm_edge_scalars(setup, n):
    from gpu.cuda.msm import DeviceBases
    group, t, xy = setup
    with DeviceBases(xy[:n], group) as bases:
        for name, ints in edge_vectors(n):
            s = vec_from_ints(ints)
            got = bases.msm(s)
            assert got == t.expected(s), f"{group} 2^{n.bit_length() - 1} {name}"
        ref = arkworks(group, xy[:n], s)
        assert got == ref


def test_msm_repeated_and_identity_bases(setup):
    from gpu.cuda.msm import DeviceBases
    group, t, xy = setup
    P = GROUPS[group]
    a, b = P() * Scalar(prng.randrange(MODULUS)), P() * Scalar(prng.randrange(MODULUS))
    pts = [a] * 3000 + [b, -a, P.identity()] * 300 + [a + b] * 100
    enc = M.encode_points(pts, group)
    for s in (random_scalars(len(pts)), vec_from_ints([1] * len(pts)),
              vec_from_ints([MODULUS - 1] * len(pts))):
        with DeviceBases(enc, group) as bases:
            assert bases.msm(s) == arkworks(group, enc, s)
    with DeviceBases(M.encode_points([P.identity()] * 7, group), group) as bases:
        assert bases.msm(random_scalars(7)) == P.identity()


def test_msm_windows_and_device_scalars(setup):
    """Other window sizes give the same sum; scalars already on the device (as H from
    compute_h) need no host copy; repeated runs agree (no race in the bucket phase)."""
    from gpu.cuda.memory import DeviceBuffer
    from gpu.cuda.msm import DeviceBases
    group, t, xy = setup
    n = 1 << 14
    s = random_scalars(n)
    want = t.expected(s)
    with DeviceBases(xy[:n], group) as bases, DeviceBuffer(s.nbytes, what="scalars") as d:
        for c in (4, 9, 13, 16, 18):
            assert bases.msm(s, window=c) == want, f"window {c}"
        d.upload(s)
        assert bases.msm(d) == want
        assert all(bases.msm(s) == want for _ in range(3))


def test_msm_rejects_bad_input(setup):
    from gpu.cuda.memory import DeviceBuffer
    from gpu.cuda.msm import DeviceBases
    group, t, xy = setup
    n = 100
    bad = xy[:n].copy()
    bad[37, 2] ^= 1
    with pytest.raises(M.MsmInputError, match="base 37 ") as e:
        DeviceBases(bad, group)
    assert e.value.index == 37
    s = random_scalars(n)
    high = s.copy()
    high[61] = np.frombuffer(MODULUS.to_bytes(32, "little"), dtype=np.uint64)
    with DeviceBases(xy[:n], group) as bases:
        with pytest.raises(FieldError, match="element 61"):
            bases.msm(high)
        with pytest.raises(M.MsmInputError, match="100 bases but 99"):
            bases.msm(s[:99])
        with DeviceBuffer(high.nbytes, what="scalars") as d:
            d.upload(high)
            with pytest.raises(M.MsmInputError, match="scalar 61 ") as e:
                bases.msm(d)
            assert e.value.index == 61
        assert bases.msm(s) == t.expected(s)   # still usable after a rejection


def _sorted_lists(bases, d, n, c, kind, monkeypatch, plan="lsd"):
    """(MSM, keys, values) the MSM's sort left in its workspace with ZKHIVE_MSM_SORT=kind (and
    ZKHIVE_MSM_RADIX=plan): the whole list of n windows(c) entries (radix: the zero digits
    after the M nonzero ones)."""
    from gpu.cuda import loader
    monkeypatch.setenv("ZKHIVE_MSM_SORT", kind)
    monkeypatch.setenv("ZKHIVE_MSM_RADIX", plan)
    got = bases.msm(d, window=c)
    ws = bases._work[c]
    m = np.zeros(2, dtype=np.uint64)
    ws.flags.download(m)
    total = int(m[0]) if kind == "atomic" else n * M.windows(c)
    keys = np.zeros(total, dtype=np.uint32)
    vals = np.zeros(total, dtype=np.uint32)
    if total:
        loader.driver().memcpy_dtoh(keys, ws.keys.ptr)
        loader.driver().memcpy_dtoh(vals, ws.vals.ptr)
    return got, int(m[0]), keys, vals


@pytest.mark.parametrize("c", [4, 9, 13, 16, 20])
def test_radix_sort_gives_the_counting_sorts_lists(setup, c, monkeypatch):
    """msm_sort.cu's radix sort (the dense engine's default) leaves the same M and the same
    sorted keys as msm.cu's counting sort, the same (key, value) pairs (the order inside a
    bucket is free), the zero digits after them under the key K, and the same MSM, for random
    and skewed scalars; a scalar >= r is named by its index. Keys ascending is checked on its
    own: the accumulation relies on it. The window sort (ZKHIVE_MSM_RADIX=window: each
    window's digits in two passes) leaves the 8-bit passes' list word for word (both stable),
    and names a scalar >= r the same way."""
    from gpu.cuda.memory import DeviceBuffer
    from gpu.cuda.msm import DeviceBases
    group, t, xy = setup
    n = (1 << 14) + 77
    r1 = MODULUS - 1
    vectors = {"random": random_scalars(n),
               "runs of 0 and 1": vec_from_ints([0] * (n // 2) + [1] * (n // 4) + [
                   prng.randrange(MODULUS) for _ in range(n - n // 2 - n // 4)]),
               "all equal": vec_from_ints([r1] * n)}
    K = M.windows(c) << (c - 1)
    with DeviceBases(xy[:n], group) as bases, DeviceBuffer(32 * n, what="scalars") as d:
        for name, s in vectors.items():
            d.upload(np.ascontiguousarray(s))
            a_msm, a_m, a_keys, a_vals = _sorted_lists(bases, d, n, c, "atomic", monkeypatch)
            b_msm, b_m, b_keys, b_vals = _sorted_lists(bases, d, n, c, "radix", monkeypatch)
            assert a_msm == b_msm == t.expected(s), f"{name} c={c}"
            assert a_m == b_m and np.all(np.diff(b_keys.astype(np.int64)) >= 0), name
            assert np.array_equal(a_keys, b_keys[:b_m]) and np.all(b_keys[b_m:] == K), name
            pa = np.sort(a_keys.astype(np.uint64) << 32 | a_vals)
            pb = np.sort(b_keys[:b_m].astype(np.uint64) << 32 | b_vals[:b_m])
            assert np.array_equal(pa, pb), f"{name}: the (key, value) pairs differ"
            w_msm, w_m, w_keys, w_vals = _sorted_lists(bases, d, n, c, "radix", monkeypatch,
                                                       plan="window")
            assert w_msm == b_msm and w_m == b_m, f"{name} c={c}: window sort"
            assert np.array_equal(w_keys, b_keys), f"{name} c={c}: the window sort's keys"
            assert np.array_equal(w_vals, b_vals), f"{name} c={c}: the window sort's values"
        high = random_scalars(n)
        high[n - 5] = np.frombuffer(MODULUS.to_bytes(32, "little"), dtype=np.uint64)
        d.upload(high)
        monkeypatch.setenv("ZKHIVE_MSM_SORT", "radix")
        for plan in ("lsd", "window"):
            monkeypatch.setenv("ZKHIVE_MSM_RADIX", plan)
            with pytest.raises(M.MsmInputError, match=f"scalar {n - 5} ") as e:
                bases.msm(d, window=c)
            assert e.value.index == n - 5, plan


@pytest.mark.parametrize("c,rounds,ranged", [(5, None, ""), (5, 0, ""), (13, None, ""),
                                             (13, 0, ""), (22, 2, ""), (13, None, "range"),
                                             (22, 2, "range")])
def test_precomputed_tables_give_the_same_msm(setup, c, rounds, ranged, monkeypatch):
    """gpu.cuda.precomputed: the tables 2^(c w) P_i made on the device and every window's digits
    in one set of buckets == the known-log identity and the plain MSM, for random, skewed and
    all-(r - 1) scalars, host or device scalars, with the buckets summed by batched affine
    rounds (None: the default count, 13 rounds at c = 5, 4 at c = 13; 2 at c = 22, where most
    runs are one point long and pass through) or in XYZZ (0), the rounds' layout over the
    slice's own stretch or not (ZKHIVE_MSM_AFFINE_SLICE_RANGE); a scalar >= r is named by its
    index and the tables keep serving; G2 and a window too large for the sort are refused."""
    monkeypatch.setenv("ZKHIVE_MSM_AFFINE_SLICE_RANGE", "1" if ranged else "0")
    from gpu.cuda.memory import DeviceBuffer
    from gpu.cuda.msm import DeviceBases
    from gpu.cuda.precomputed import PrecomputedBases
    from gpu.errors import GpuError
    group, t, xy = setup
    n = (1 << 13) + 19
    with DeviceBases(xy[:n], group) as bases:
        if group != "g1":
            with pytest.raises(GpuError, match="G1 only"):
                PrecomputedBases(bases, c)
            return
        with PrecomputedBases(bases, c, affine_rounds=rounds) as pre, \
                DeviceBuffer(32 * n, what="scalars") as d:
            assert (pre.affine is None) == (rounds == 0)
            for name, ints in edge_vectors(n):
                s = vec_from_ints(ints)
                assert pre.msm(s) == t.expected(s) == bases.msm(s), f"{name} c={c}"
            s = random_scalars(n)
            d.upload(s)
            assert pre.msm(d) == t.expected(s)
            high = s.copy()
            high[n - 2] = np.frombuffer(MODULUS.to_bytes(32, "little"), dtype=np.uint64)
            d.upload(high)
            with pytest.raises(M.MsmInputError, match=f"scalar {n - 2} ") as e:
                pre.msm(d)
            assert e.value.index == n - 2
            assert pre.msm(s) == t.expected(s)
        with pytest.raises(M.MsmInputError, match="window 25"):
            PrecomputedBases(bases, 25)


@pytest.mark.parametrize("form", ["whole", "lean", "lean5"])
def test_precomputed_affine_rounds_double_cancel_and_pass_identities(setup, form, monkeypatch):
    """The affine rounds' pairs that are not chords, on the device: repeated bases (equal points
    in one bucket: the doubling), a base and its negation (a zero sum, carried as the identity
    into later rounds) and identity bases, with all-equal scalars (every digit of a window in
    one bucket) and random ones == arkworks and the XYZZ accumulation; the apply in each kernel
    form (ZKHIVE_MSM_APPLY_KERNEL)."""
    from gpu.cuda.msm import DeviceBases
    from gpu.cuda.precomputed import PrecomputedBases
    group, t, xy = setup
    if group != "g1":
        pytest.skip("precomputed tables are G1 only")
    monkeypatch.setenv("ZKHIVE_MSM_APPLY_KERNEL", form)
    P = GROUPS[group]
    a, b = P() * Scalar(prng.randrange(MODULUS)), P() * Scalar(prng.randrange(MODULUS))
    pts = [a] * 600 + [b, -b, P.identity(), a, a + a, -(a + a)] * 100 + [a + b] * 200
    enc = M.encode_points(pts, group)
    with DeviceBases(enc, group) as bases, PrecomputedBases(bases, 8) as pre, \
            PrecomputedBases(bases, 8, affine_rounds=0) as xyzz:
        assert pre.affine is not None and pre.affine.rounds >= 4
        for s in (vec_from_ints([5] * len(pts)), vec_from_ints([MODULUS - 1] * len(pts)),
                  random_scalars(len(pts))):
            want = arkworks(group, enc, s)
            assert pre.msm(s) == want == xyzz.msm(s)
            assert pre.affine.apply_form == form


def test_backends_agree_through_the_api(setup):
    group, t, xy = setup
    n = 1000
    s = random_scalars(n)
    with M.load_bases(xy[:n], group, backend="cuda") as dev, \
            M.load_bases(xy[:n], group, backend="cpu") as cpu:
        assert dev.msm(s) == cpu.msm(s) == t.expected(s)


@pytest.mark.skipif(not BIG, reason="set ZKHIVE_TEST_BIG=1 or TEST_NPOW>=24 for the 2^24 MSM")
def test_g1_msm_2_24_known_logs(cuda_ctx):
    from gpu.cuda.msm import DeviceBases
    t = Tables("g1", 1 << 12)
    xy = t.bases(1 << 24)
    with DeviceBases(xy, "g1") as bases:
        del xy
        s = random_scalars(1 << 24)
        assert bases.msm(s) == t.expected(s)
        s[: 1 << 23] = 0                          # PoRep-like: half zeros, a quarter ones
        s[1 << 23: 3 << 22] = vec_from_ints([1])
        assert bases.msm(s) == t.expected(s)
