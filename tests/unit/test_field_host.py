"""The host build of ff.cuh / fq2.cuh against Python integers: Fr, Fq and Fq2.

Every operation on random values and on the edges 0, 1, p-1, and the documented tolerance for
values at or above p (docs/gpu.md, "Input contracts"): inside the contract the result is fully
reduced; just outside it the result is still congruent but not reduced, which shows the
contract is the real boundary and not a loose one.
"""
from __future__ import annotations

import random

import secrets

import pytest

from arith import native

FR = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
FQ = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB
FIELDS = {"fr": (FR, 256), "fq": (FQ, 384)}
ROUNDS = 200


def rand_below(x: int) -> int:
    return secrets.randbelow(x)


def edges(p: int) -> list[int]:
    return [0, 1, 2, p - 1, p - 2, (p - 1) // 2, (p + 1) // 2]


@pytest.fixture(params=sorted(FIELDS))
def field(request):
    name = request.param
    p, bits = FIELDS[name]
    return name, p, 1 << bits


def op(name, o, a, b=0):
    return native.field_op(name, o, a, b)


def test_add_sub_neg_random_and_edges(field):
    name, p, _ = field
    values = edges(p) + [rand_below(p) for _ in range(ROUNDS)]
    for a in values:
        b = values[rand_below(len(values))]
        assert op(name, "add", a, b) == (a + b) % p
        assert op(name, "sub", a, b) == (a - b) % p
        assert op(name, "neg", a) == (-a) % p
    for a in edges(p):
        for b in edges(p):
            assert op(name, "add", a, b) == (a + b) % p
            assert op(name, "sub", a, b) == (a - b) % p


def test_mul_sqr_inv_random_and_edges(field):
    name, p, _ = field
    values = edges(p) + [rand_below(p) for _ in range(ROUNDS)]
    for a in values:
        b = values[rand_below(len(values))]
        assert op(name, "mul", a, b) == a * b % p
        assert op(name, "sqr", a) == a * a % p
        assert op(name, "inv", a) == (pow(a, -1, p) if a else 0)
    for a in edges(p):
        for b in edges(p):
            assert op(name, "mul", a, b) == a * b % p


def test_montgomery_conversions(field):
    name, p, R = field
    for a in edges(p) + [rand_below(p) for _ in range(ROUNDS)]:
        m = op(name, "to_mont", a)
        assert m == a * R % p
        assert op(name, "from_mont", m) == a
        b = rand_below(p)
        assert op(name, "mont_mul", m, b * R % p) == a * b * R % p


def test_wrong_results_are_detected(field):
    # the checks above can fail: a perturbed input gives a different product
    name, p, _ = field
    a, b = rand_below(p - 1) + 1, rand_below(p - 1) + 1
    assert op(name, "mul", a + 1, b) != a * b % p
    assert op(name, "inv", a) * a % p == 1
    assert op(name, "inv", a + 1) * a % p != 1


# --- non-canonical inputs: what each operation tolerates --------------------------------------

def test_add_accepts_sums_below_2p(field):
    name, p, _ = field
    for k in range(1, 50):
        a = p + k  # just above p
        b = rand_below(p - k)  # a + b < 2p
        assert op(name, "add", a, b) == (a + b) % p
    assert op(name, "add", p, 0) == 0


def test_add_outside_contract_is_congruent_but_not_reduced(field):
    name, p, _ = field
    a, b = p + 5, p - 1  # a + b >= 2p: one conditional subtraction is not enough
    r = op(name, "add", a, b)
    assert r % p == (a + b) % p and r >= p


def test_sub_accepts_difference_in_minus_p_to_p(field):
    name, p, _ = field
    for k in range(1, 50):
        b = p + k  # minuend below, subtrahend just above p
        a = rand_below(p)
        if -p <= a - b < p:
            assert op(name, "sub", a, b) == (a - b) % p
    assert op(name, "sub", 0, p) == 0
    assert op(name, "neg", p) == 0


def test_sub_outside_contract_is_congruent_but_not_reduced(field):
    name, p, _ = field
    a, b = p + 7, 1  # a - b >= p
    r = op(name, "sub", a, b)
    assert r % p == (a - b) % p and r >= p


def test_conversions_and_products_reduce_any_limb_value(field):
    # to_mont multiplies by R^2 mod p < p, so any value below 2^bits is reduced on the way in;
    # from_mont multiplies by plain 1.
    name, p, R = field
    for x in [p, p + 1, p + 12345, 2 * p - 1, R - 1] + [p + rand_below(R - p) for _ in range(50)]:
        assert op(name, "to_mont", x) == x * R % p
        assert op(name, "from_mont", x) == x * pow(R, -1, p) % p
        y = rand_below(R)
        assert op(name, "mul", x, y) == x * y % p
        assert op(name, "sqr", x) == x * x % p
        assert op(name, "inv", x) == (pow(x, -1, p) if x % p else 0)
        # raw Montgomery product: reduced whenever a * b < p R
        b = rand_below(p)
        assert op(name, "mont_mul", x, b) == x * b * pow(R, -1, p) % p


def test_mont_mul_outside_contract_is_congruent_but_not_reduced(field):
    name, p, R = field
    a = b = R - 1  # a * b >= p R
    r = op(name, "mont_mul", a, b)
    assert r % p == a * b * pow(R, -1, p) % p and p <= r < R


# --- Fq2 = Fq[u]/(u^2 + 1) ------------------------------------------------------------------

B = 1 << 384


def f2(c0: int, c1: int) -> int:
    return c0 + c1 * B


def split(x: int) -> tuple[int, int]:
    return x % B, x >> 384


def f2_mul(a, b):
    (a0, a1), (b0, b1) = a, b
    return ((a0 * b0 - a1 * b1) % FQ, (a0 * b1 + a1 * b0) % FQ)


def f2_inv(a):
    a0, a1 = a
    t = pow((a0 * a0 + a1 * a1) % FQ, -1, FQ)
    return (a0 * t % FQ, -a1 * t % FQ)


def fq2_values():
    e = edges(FQ)
    vals = [(x, y) for x in e[:4] for y in e[:4]]
    return vals + [(rand_below(FQ), rand_below(FQ)) for _ in range(ROUNDS)]


def op2(o, a, b=(0, 0)):
    return split(native.field_op("fq2", o, f2(*a), f2(*b)))


def test_fq2_every_operation():
    vals = fq2_values()
    for a in vals:
        b = vals[rand_below(len(vals))]
        assert op2("add", a, b) == ((a[0] + b[0]) % FQ, (a[1] + b[1]) % FQ)
        assert op2("sub", a, b) == ((a[0] - b[0]) % FQ, (a[1] - b[1]) % FQ)
        assert op2("neg", a) == (-a[0] % FQ, -a[1] % FQ)
        assert op2("dbl", a) == (2 * a[0] % FQ, 2 * a[1] % FQ)
        assert op2("conj", a) == (a[0], -a[1] % FQ)
        assert op2("mul", a, b) == f2_mul(a, b)
        assert op2("sqr", a) == f2_mul(a, a)
        assert op2("mul_by_xi", a) == f2_mul(a, (1, 1))
        assert op2("inv", a) == (f2_inv(a) if a != (0, 0) else (0, 0))


def test_fq2_lean_products_match_the_reference():
    """mul_lean / sqr_lean (the lean G2 addition's ordered Karatsuba) on fresh random values
    and the edges: the same products as f2_mul; a changed operand changes them."""
    seed = random.SystemRandom().randrange(2**63)
    r = random.Random(seed)
    vals = fq2_values()[:16] + [(r.randrange(1, FQ), r.randrange(1, FQ)) for _ in range(ROUNDS)]
    for a in vals:
        b = vals[r.randrange(len(vals))]
        assert op2("mul_lean", a, b) == f2_mul(a, b), (a, b, seed)
        assert op2("sqr_lean", a) == f2_mul(a, a), (a, seed)
    a, b = vals[-1], vals[-2]
    assert op2("mul_lean", a, b) != f2_mul(a, ((b[0] + 1) % FQ, b[1])), seed
    assert op2("sqr_lean", a) != f2_mul(a, b) or a == b, seed


def test_fq2_montgomery_and_identities():
    R = 1 << 384
    for a in fq2_values()[:60]:
        m = op2("to_mont", a)
        assert m == (a[0] * R % FQ, a[1] * R % FQ)
        assert op2("from_mont", m) == a
        if a != (0, 0):
            assert f2_mul(op2("inv", a), a) == (1, 0)
    # u^2 = -1
    assert op2("sqr", (0, 1)) == (FQ - 1, 0)


def test_fq2_wrong_inputs_change_results():
    a = (rand_below(FQ), rand_below(FQ))
    b = (rand_below(FQ), rand_below(FQ))
    assert op2("mul", a, b) != f2_mul(a, ((b[0] + 1) % FQ, b[1]))
    # the Karatsuba cross term really is used: swapping components changes the product
    assert op2("mul", a, b) != f2_mul((a[1], a[0]), b) or a[0] == a[1]


def test_fq2_non_canonical_coordinates_reduce_through_conversions():
    for k in (1, 2, 99):
        a = (FQ + k, rand_below(FQ))
        b = (rand_below(FQ), FQ + k)
        ra = (a[0] % FQ, a[1] % FQ)
        rb = (b[0] % FQ, b[1] % FQ)
        assert op2("mul", a, b) == f2_mul(ra, rb)
        assert op2("sqr", a) == f2_mul(ra, ra)
        assert op2("inv", a) == f2_inv(ra)
