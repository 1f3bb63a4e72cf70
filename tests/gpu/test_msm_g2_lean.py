"""G2's lean kernels (msm_g2_lean.cu, the default; ZKHIVE_MSM_G2_LEAN=0 the others) == the others.

The level-1 accumulation g2_accumulate_bases_lean and the split MSM's ones-sum g2_sum_ones_lean
against the default kernels (g2_accumulate_bases_np, g2_sum_ones) and the known-discrete-log
identity, on fresh random bases and scalars each run, and on the inputs that reach the lean
addition's edges: repeated bases (a run adding P to P: the doubling), a base and its negation
(P + (-P): infinity), identity bases, all-equal and 0/1-heavy scalars (one bucket, runs that
cross every range). Timing: bench/gpu_msm.py (variant "lean") and bench/gpu_split_msm.py
--g2-lean (docs/gpu.md).
"""
from __future__ import annotations

import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G2Point, Scalar

from gpu import msm as M
from synthesis.field import MODULUS, vec_from_ints

pytestmark = pytest.mark.gpu

rng = np.random.default_rng()       # fresh inputs every run
prng = random.Random(int(rng.integers(2**63)))
R = np.frombuffer(MODULUS.to_bytes(32, "little"), dtype=np.uint64)


def random_scalars(n: int) -> np.ndarray:
    s = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    s[:, 3] %= R[3]  # below r's top limb: canonical
    return s


class Tables:
    """Bases P_i = (a_{i // m} + b_{i % m}) G with the a, b known."""

    def __init__(self, m: int):
        self.m = m
        self.a = [prng.randrange(1, MODULUS) for _ in range(m)]
        self.b = [prng.randrange(1, MODULUS) for _ in range(m)]
        self.pa = [G2Point() * Scalar(x) for x in self.a]
        self.pb = [G2Point() * Scalar(x) for x in self.b]

    def bases(self, n: int) -> np.ndarray:
        from gpu.cuda.msm import known_log_bases
        return known_log_bases("g2", self.pa, self.pb, n)

    def expected(self, s: np.ndarray):
        ints = [int.from_bytes(row.tobytes(), "little") for row in s]
        k = sum(x * (self.a[i // self.m] + self.b[i % self.m]) for i, x in enumerate(ints) if x)
        return G2Point() * Scalar(k % MODULUS)


def scalar_sets(n: int):
    r1 = MODULUS - 1
    yield "random", random_scalars(n)
    yield "ones", vec_from_ints([1] * n)
    yield "r-1", vec_from_ints([r1] * n)
    yield "all equal", vec_from_ints([prng.randrange(1, MODULUS)] * n)
    yield "runs of 0 and 1", vec_from_ints([0] * (n // 2) + [1] * (n // 4) + [
        prng.randrange(1, MODULUS) for _ in range(n - n // 2 - n // 4)])


@pytest.fixture(scope="module")
def tables(cuda_ctx):
    return Tables(257)  # m^2 = 66,049 known-log bases: the largest size below


@pytest.mark.parametrize("n", [1, 3, 1000, 1 << 14, (1 << 16) + 3])
def test_lean_level1_equals_the_default(tables, n, monkeypatch):
    from gpu.cuda.msm import DeviceBases
    xy = tables.bases(n)
    monkeypatch.setenv("ZKHIVE_MSM_G2_LEAN", "0")
    with DeviceBases(xy, "g2") as plain:
        monkeypatch.setenv("ZKHIVE_MSM_G2_LEAN", "1")
        with DeviceBases(xy, "g2") as lean:
            # the variant is really the kernel bound (less local memory a thread than the default)
            f, g = lean._f["accumulate_bases"], plain._f["accumulate_bases"]
            assert f.local_size_bytes < g.local_size_bytes, (f.local_size_bytes, g.local_size_bytes)
            for name, s in scalar_sets(n):
                want = tables.expected(s)
                assert lean.msm(s) == want, f"lean 2^{n.bit_length() - 1} {name}"
                assert plain.msm(s) == want, f"default {name}"
            wrong = s.copy()
            wrong[0, 0] ^= 1
            assert lean.msm(wrong) != want  # a changed scalar changes the lean result


def test_lean_level1_doubles_cancels_and_skips_identities(tables, monkeypatch):
    """A bucket's run adding a base to itself (the doubling), to its negation (infinity), and
    identity bases between them, with 1 and r - 1 (the sign bit) as scalars."""
    from gpu.cuda.msm import DeviceBases
    a, b = (G2Point() * Scalar(prng.randrange(2, MODULUS)) for _ in range(2))
    pts = [a] * 900 + [b, -a, G2Point.identity()] * 300 + [a + b] * 100
    enc = M.encode_points(pts, "g2")
    monkeypatch.setenv("ZKHIVE_MSM_G2_LEAN", "1")
    with DeviceBases(enc, "g2") as lean:
        monkeypatch.setenv("ZKHIVE_MSM_G2_LEAN", "0")
        with DeviceBases(enc, "g2") as plain:
            for ints in ([1] * len(pts), [MODULUS - 1] * len(pts),
                         [prng.randrange(1, MODULUS) for _ in pts]):
                s = vec_from_ints(ints)
                assert lean.msm(s) == plain.msm(s)
            # the last set by hand: a at 0..899, then (b, -a, identity) 300 times, a + b 100 times
            def part(sl, p):
                return p * Scalar(sum(ints[sl]) % MODULUS)
            want = (part(slice(0, 900), a) + part(slice(900, 1800, 3), b)
                    + -part(slice(901, 1800, 3), a) + part(slice(1800, None), a + b))
            assert lean.msm(vec_from_ints(ints)) == want


def test_lean_ones_sum_equals_the_default(tables, monkeypatch):
    """The split MSM (ones summed by g2_sum_ones_lean, the tail by the lean level 1) against the
    default SplitMsm and the known logs, on a PoRep-like mix and on all ones."""
    from gpu.cuda.memory import DeviceBuffer
    from gpu.cuda.msm import DeviceBases
    from gpu.cuda.split_msm import SplitMsm
    n = 3000
    xy = tables.bases(n)
    monkeypatch.setenv("ZKHIVE_SPLIT_MSM", "on")
    s = random_scalars(n)
    u = rng.random(n)
    s[u < 0.45] = 0
    one = (u >= 0.45) & (u < 0.9)
    s[one] = 0
    s[one, 0] = 1
    results, local = {}, {}
    for lean in ("0", "1"):
        monkeypatch.setenv("ZKHIVE_MSM_G2_LEAN", lean)
        split = SplitMsm()
        local[lean] = split._f["g2_sum_ones"].local_size_bytes
        try:
            with DeviceBases(xy, "g2") as bases:
                for name, sc in (("porep-like", s), ("all one", vec_from_ints([1] * n))):
                    with DeviceBuffer(32 * n, what="scalars") as sb, \
                            DeviceBuffer(4 * n, what="lists") as lb:
                        sb.upload(np.ascontiguousarray(sc))
                        cls = split.classify(sb, n, lb)
                        results[lean, name] = split.msm(bases, cls, name="b_g2")
                    assert results[lean, name] == tables.expected(sc), (lean, name)
        finally:
            split.close()
    assert local["1"] < local["0"], local  # the lean ones-sum was the kernel bound
    assert results["1", "porep-like"] == results["0", "porep-like"]
    assert results["1", "porep-like"] != results["1", "all one"]


def test_a_bad_lean_setting_is_rejected(tables, monkeypatch):
    from gpu.cuda.msm import DeviceBases
    from gpu.errors import GpuError
    monkeypatch.setenv("ZKHIVE_MSM_G2_LEAN", "yes")
    with pytest.raises(GpuError, match="ZKHIVE_MSM_G2_LEAN='yes': expected 0 or 1"):
        DeviceBases(tables.bases(4), "g2")
