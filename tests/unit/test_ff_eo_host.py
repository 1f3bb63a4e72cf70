"""The device's even/odd Montgomery product (arith/include/ff_ptx.cuh, ff_eo::mont_mul) run on
the CPU with its carry flag emulated (arith/ff_eo_host.cpp): the same instruction sequence the
GPU runs, against Python integers, inside its contract (a <= R - p, b < R) and at its edges."""
from __future__ import annotations

import ctypes
import random
from pathlib import Path

import numpy as np
import pytest

from arith.native import build

FR = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
FQ = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB
FIELDS = {"fr": (0, FR, 8), "fq": (1, FQ, 12)}
rng = random.Random(0xE0)


@pytest.fixture(scope="module")
def lib():
    so = build(Path(__file__).resolve().parents[2] / "arith" / "ff_eo_host.cpp", stem="ff_eo",
               flags=["-O2", "-std=c++17", "-shared", "-fPIC", "-Wno-unknown-pragmas"])
    L = ctypes.CDLL(str(so))
    L.eo_mul.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    L.eo_mul.restype = ctypes.c_int
    L.eo_sqr.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    L.eo_sqr.restype = ctypes.c_int
    return L


def limbs(x: int, n: int) -> np.ndarray:
    return np.array([(x >> (32 * i)) & 0xFFFFFFFF for i in range(n)], dtype=np.uint32)


def mul(lib, field: str, a: int, b: int) -> tuple[int, int]:
    code, _, n = FIELDS[field]
    out = np.zeros(n, dtype=np.uint32)
    la, lb = limbs(a, n), limbs(b, n)  # kept alive across the call
    lost = lib.eo_mul(code, la.ctypes.data, lb.ctypes.data, out.ctypes.data)
    return sum(int(v) << (32 * i) for i, v in enumerate(out)), lost


def sqr(lib, field: str, a: int) -> tuple[int, int]:
    code, _, n = FIELDS[field]
    out = np.zeros(n, dtype=np.uint32)
    la = limbs(a, n)
    lost = lib.eo_sqr(code, la.ctypes.data, out.ctypes.data)
    return sum(int(v) << (32 * i) for i, v in enumerate(out)), lost


@pytest.mark.parametrize("field", list(FIELDS))
def test_even_odd_product_matches_integers(lib, field):
    _, p, n = FIELDS[field]
    R = 1 << (32 * n)
    rinv = pow(R, -1, p)
    edge = [0, 1, 2, p - 1, p - 2, R - p]
    pairs = [(a, b) for a in edge for b in edge + [R - 1, p, p + 1]]
    pairs += [(rng.randrange(p), rng.randrange(p)) for _ in range(3000)]
    pairs += [(rng.randrange(R - p + 1), rng.randrange(R)) for _ in range(1000)]
    pairs += [(rng.randrange(1 << (32 * n - 33)), (1 << 32) - 1 + rng.randrange(R - 2**32))
              for _ in range(200)]
    for a, b in pairs:
        r, lost = mul(lib, field, a, b)
        assert not lost, (hex(a), hex(b))
        assert r % p == a * b * rinv % p, (hex(a), hex(b))
        if a < p:
            assert r < p, (hex(a), hex(b))
        # the CIOS result bit for bit: (a b + M p) / R, minus p once when >= p
        assert r < a + p


def test_even_odd_product_reports_wrong_answers(lib):
    """The check of test_even_odd_product_matches_integers can fail: inside the contract the
    product is exactly 2 * 3 (Montgomery form), and outside it (a = b = R - 1 > R - p) the same
    instruction sequence gives a wrong product, which the comparison with Python integers
    reports (the carry flag does not: the contract is what keeps the device's product right)."""
    for field in FIELDS:
        _, p, n = FIELDS[field]
        R = 1 << (32 * n)
        rinv = pow(R, -1, p)
        r, lost = mul(lib, field, 2 * R % p, 3 * R % p)
        assert (r, lost) == (6 * R % p, 0)
        a = b = R - 1
        r, lost = mul(lib, field, a, b)
        assert r % p != a * b * rinv % p, field  # a wrong answer, and the comparison says so
        assert lost == 0, field


def test_lazy_operands_below_2p_give_a_reduced_product(lib):
    """fq2_t::mul_lean / sqr_lean feed the device product unreduced sums (add_lazy a + b,
    sub_lazy a - b + p: both in [0, 2p)) and rely on the product coming out reduced: it is
    < (2p)^2 / R + p < 1.5p before its one subtraction (fq2.cuh). On Fq, with fresh random
    operands in [p, 2p) and the edges 2p - 1, 2p - 2: reduced, no lost carry, right value;
    operands far past 2p (a near R - p, b near R, still inside the product's contract) come out
    congruent but not reduced, which the check reports."""
    seed = random.SystemRandom().randrange(2**63)
    r = random.Random(seed)
    _, p, n = FIELDS["fq"]
    R = 1 << (32 * n)
    rinv = pow(R, -1, p)
    edge = [0, 1, p - 1, p, p + 1, 2 * p - 2, 2 * p - 1]
    pairs = [(a, b) for a in edge for b in edge]
    pairs += [(p + r.randrange(p), p + r.randrange(p)) for _ in range(2000)]
    pairs += [(r.randrange(2 * p), r.randrange(2 * p)) for _ in range(2000)]
    for a, b in pairs:
        got, lost = mul(lib, "fq", a, b)
        assert not lost, (hex(a), hex(b), seed)
        assert got < p and got == a * b * rinv % p, (hex(a), hex(b), seed)
    wide = [(R - p - r.randrange(2**32), R - 1 - r.randrange(2**32)) for _ in range(50)]
    got = [mul(lib, "fq", a, b)[0] for a, b in wide]
    assert all(g % p == a * b * rinv % p for g, (a, b) in zip(got, wide)), seed
    assert any(g >= p for g in got), seed  # not reduced: the < 2p bound is what reduces


@pytest.mark.parametrize("field", list(FIELDS))
def test_the_square_is_the_product_of_a_value_with_itself(lib, field):
    """ff_eo::mont_sqr (cross products once, doubled, then reduced) == mont_mul(a, a) word for
    word, == a^2 R^-1 mod p, inside the product's contract (a <= R - p: the lazy operands in
    [0, 2p) among them) and at its edges: all-ones limbs, one limb set, p - 1, R - p; no step the
    bounds rule out carries out; fully reduced when a < 2p (the lazy operands' bound)."""
    _, p, n = FIELDS[field]
    R = 1 << (32 * n)
    rinv = pow(R, -1, p)
    edge = [0, 1, 2, p - 1, p - 2, p, p + 1, 2 * p - 1, R - p, R - p - 1, (1 << 32) - 1]
    edge += [((1 << 32) - 1) << (32 * k) for k in range(n - 1)]
    edge += [int("ff" * 4 * k or "0", 16) for k in range(1, n)]  # low k limbs all ones
    vals = [a for a in edge if a <= R - p] + [rng.randrange(p) for _ in range(3000)] + \
        [rng.randrange(R - p + 1) for _ in range(1000)] + \
        [rng.randrange(min(2 * p, R - p + 1)) for _ in range(500)]
    assert len(vals) > 4500 + len(edge) - 4
    for a in vals:
        r, lost = sqr(lib, field, a)
        assert not lost, hex(a)
        assert (r, 0) == mul(lib, field, a, a), hex(a)
        assert r % p == a * a * rinv % p, hex(a)
        assert r < a + p, hex(a)
        if a < 2 * p:
            assert r < p, hex(a)


def test_the_square_reports_wrong_answers(lib):
    """The square's check can fail: 3 R squared is exactly 9 R, and outside the contract
    (a = R - 1) the sequence gives a wrong square, which the comparison says."""
    for field in FIELDS:
        _, p, n = FIELDS[field]
        R = 1 << (32 * n)
        rinv = pow(R, -1, p)
        assert sqr(lib, field, 3 * R % p) == (9 * R % p, 0)
        r, _ = sqr(lib, field, R - 1)
        assert r % p != (R - 1) ** 2 * rinv % p or r >= R - 1 + p, field
