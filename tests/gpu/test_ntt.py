"""Device NTT and compute_h == arith.native (the CPU backend) on fresh random inputs.

Sizes 2^1 .. 2^TEST_NPOW (default 20) against the host library, plus one 2^24 check
(``ZKHIVE_TEST_BIG=1`` or TEST_NPOW >= 24): the forward NTT against the host, round trips, and
compute_h by the identity H(tau) Z(tau) = A(tau) B(tau) - C(tau) at a random tau.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from arith import native
from gpu.errors import GpuInputError
from synthesis import field as fr

pytestmark = pytest.mark.gpu

NPOW = int(os.environ.get("TEST_NPOW", "20"))
BIG = os.environ.get("ZKHIVE_TEST_BIG") == "1" or NPOW >= 24
SIZES = list(range(1, min(NPOW, 20) + 1))


@pytest.fixture(scope="module")
def eng(cuda_ctx):
    from gpu.cuda.ntt import NttEngine
    with NttEngine() as e:
        yield e


# ZKHIVE_NTT_TRIM (gpu.cuda.ntt.trimmed): "1" leaves out bit 0's products by 1 and compute_h's
# constant products (the default), "0" runs them: both must be the host's, to the bit.
TRIM = ["1", "0"]


@pytest.mark.parametrize("trim", TRIM)
@pytest.mark.parametrize("log_n", SIZES)
def test_ntt_matches_host(eng, log_n, trim, monkeypatch):
    monkeypatch.setenv("ZKHIVE_NTT_TRIM", trim)
    a = fr.vec_random(1 << log_n)
    for inverse in (False, True):
        for coset in (False, True):
            got = eng.ntt(a, inverse=inverse, coset=coset)
            want = native.ntt(a, inverse=inverse, coset=coset)
            assert np.array_equal(got, want), f"2^{log_n} inverse={inverse} coset={coset}"


@pytest.mark.parametrize("log_n", [1, 2, 7, 10, 11, 14, 17, 20])
def test_round_trips_in_every_order(eng, log_n):
    from gpu.cuda.memory import DeviceBuffer
    a = fr.vec_random(1 << log_n)
    out = np.empty_like(a)
    with DeviceBuffer(a.nbytes) as d:
        for fwd, back in (("NR", "RN"), ("RN", "NR"), ("NN", "NN"), ("RR", "RR")):
            for coset in (False, True):
                d.upload(a)
                eng.transform(d, log_n, coset=coset, order=fwd)
                d.download(out)
                assert not np.array_equal(out, a)
                eng.transform(d, log_n, inverse=True, coset=coset, order=back)
                d.download(out)
                assert np.array_equal(out, a), f"2^{log_n} {fwd}/{back} coset={coset}"


@pytest.mark.parametrize("trim", TRIM)
@pytest.mark.parametrize("log_n", SIZES)
def test_compute_h_matches_host(eng, log_n, trim, monkeypatch):
    monkeypatch.setenv("ZKHIVE_NTT_TRIM", trim)
    n = 1 << log_n
    a, b, c = fr.vec_random(n), fr.vec_random(n), fr.vec_random(n)
    assert np.array_equal(eng.compute_h(a, b, c), native.compute_h(a, b, c))


def satisfied(n):
    a, b = fr.vec_random(n), fr.vec_random(n)
    return a, b, native.mul(a, b)


def test_compute_h_pinned_streams_equal_plain(eng):
    from gpu.cuda.memory import pinned
    n = 1 << 16
    a, b, c = satisfied(n)
    want = native.compute_h(a, b, c)
    with pinned((n, 4)) as pa, pinned((n, 4)) as pb, pinned((n, 4)) as pc, pinned((n, 4)) as out:
        pa[:], pb[:], pc[:] = a, b, c
        out[:] = 0xFFFFFFFFFFFFFFFF  # poisoned
        eng.compute_h(pa, pb, pc, out=out)
        assert np.array_equal(out, want)
    assert not want[-1].any()  # a satisfied witness: H has degree < n - 1


def test_rejects_non_canonical_and_bad_sizes(eng):
    a = fr.vec_random(64)
    bad = a.copy()
    bad[37] = [0xFFFFFFFFFFFFFFFF] * 4
    with pytest.raises(GpuInputError, match="element 37"):
        eng.ntt(bad)
    with pytest.raises(GpuInputError, match="compute_h b: element 37"):
        eng.compute_h(a, bad, a)
    with pytest.raises(GpuInputError, match="not a power of two"):
        eng.ntt(fr.vec_random(48))
    with pytest.raises(GpuInputError, match="lengths differ"):
        eng.compute_h(a, a, fr.vec_random(32))
    with pytest.raises(GpuInputError, match="shape"):
        eng.ntt(a.astype(np.uint32))


def test_tampered_h_fails_the_identity(eng):
    """The 2^24 check's identity really detects a wrong H (run small so it always runs)."""
    log_n = 12
    a, b, c = satisfied(1 << log_n)
    h = eng.compute_h(a, b, c)
    assert identity_holds(eng, a, b, c, h, log_n)
    h2 = h.copy()
    h2[5, 0] ^= 1
    assert not identity_holds(eng, a, b, c, h2, log_n)


def evaluate(coeffs, powers):
    """sum_i coeffs[i] tau^i, via the host library's sparse product (one row)."""
    n = len(coeffs)
    indptr = np.array([0, n], dtype=np.int64)
    return fr.vec_to_ints(native.spmv(indptr, np.arange(n, dtype=np.int64), powers, coeffs))[0]


def identity_holds(eng, a, b, c, h, log_n) -> bool:
    n = 1 << log_n
    tau = fr.random_element()
    pw = native.powers(n, 1, tau)
    A, B, C = (evaluate(eng.ntt(v, inverse=True), pw) for v in (a, b, c))
    H = evaluate(h, pw)
    Z = (pow(tau, n, fr.MODULUS) - 1) % fr.MODULUS
    return H * Z % fr.MODULUS == (A * B - C) % fr.MODULUS


@pytest.mark.skipif(not BIG, reason="2^24 check: set ZKHIVE_TEST_BIG=1 or TEST_NPOW=24")
def test_2_24(eng):
    log_n = 24
    n = 1 << log_n
    a = fr.vec_random(n)
    fwd = eng.ntt(a)
    assert np.array_equal(fwd, native.ntt(a)), "forward NTT 2^24 differs from the host"
    assert np.array_equal(eng.ntt(fwd, inverse=True), a)
    assert np.array_equal(eng.ntt(eng.ntt(a, coset=True), inverse=True, coset=True), a)
    a, b, c = satisfied(n)
    h = eng.compute_h(a, b, c)
    assert not h[-1].any()
    assert identity_holds(eng, a, b, c, h, log_n)
