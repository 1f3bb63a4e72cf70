"""Fr: the reference definitions, and the host library's vector operations against them."""
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from arith import native
from synthesis import field as F

R = F.MODULUS
elements = st.one_of(st.sampled_from([0, 1, 2, R - 1, R - 2, (R - 1) // 2]), st.integers(0, R - 1))


def test_roots_of_unity_have_exact_order():
    for log_n in (1, 2, 10, 32):
        n = 1 << log_n
        w = F.root_of_unity(n)
        assert pow(w, n, R) == 1
        assert pow(w, n // 2, R) == R - 1  # primitive: the half power is -1, not 1


def test_root_of_unity_rejects_bad_sizes():
    with pytest.raises(F.FieldError, match="not a power of two"):
        F.root_of_unity(12)
    with pytest.raises(F.FieldError, match="two-adicity"):
        F.root_of_unity(1 << 33)


def test_vector_round_trip_and_canonical_check():
    vals = [0, 1, R - 1, 12345678901234567890123]
    v = F.vec_from_ints(vals)
    assert v.shape == (4, 4) and F.vec_to_ints(v) == vals
    bad = v.copy()
    bad[2] = np.frombuffer(R.to_bytes(32, "little"), dtype="<u8")  # exactly r: not canonical
    with pytest.raises(F.FieldError, match="element 2"):
        F.check_vec(bad, what="assignment")
    assert F.check_vec(v, what="ok") is not None


def test_random_vectors_are_canonical_and_distinct():
    v = F.vec_random(1000)
    assert F.vec_is_canonical(v).all()
    assert len({tuple(row) for row in v.tolist()}) == 1000


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(elements, elements), min_size=1, max_size=40))
def test_vector_ops_match_python_integers(pairs):
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    va, vb = F.vec_from_ints(a), F.vec_from_ints(b)
    assert F.vec_to_ints(native.add(va, vb)) == [(x + y) % R for x, y in pairs]
    assert F.vec_to_ints(native.sub(va, vb)) == [(x - y) % R for x, y in pairs]
    assert F.vec_to_ints(native.mul(va, vb)) == [x * y % R for x, y in pairs]
    assert F.vec_to_ints(native.pow(va, 5)) == [pow(x, 5, R) for x in a]


def test_batch_inverse_and_zero():
    a = [random.randrange(1, R) for _ in range(100)]
    assert F.vec_to_ints(native.inv(F.vec_from_ints(a))) == [pow(x, -1, R) for x in a]
    with pytest.raises(ZeroDivisionError, match="element 3"):
        native.inv(F.vec_from_ints([1, 2, 3, 0, 5]))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 6), st.data())
def test_ntt_matches_the_naive_dft(log_n, data):
    n = 1 << log_n
    vals = data.draw(st.lists(elements, min_size=n, max_size=n))
    w = F.root_of_unity(n)
    out = native.ntt(F.vec_from_ints(vals))
    assert F.vec_to_ints(out) == F.naive_dft(vals, w)
    assert F.vec_to_ints(native.ntt(out, inverse=True)) == vals
    # coset: evaluations of the same polynomial at g * w^k
    cos = native.ntt(F.vec_from_ints(vals), coset=True)
    g = F.GENERATOR
    assert F.vec_to_ints(cos) == [sum(c * pow(g * pow(w, k, R), j, R) for j, c in enumerate(vals)) % R
                                  for k in range(n)]
    assert F.vec_to_ints(native.ntt(cos, inverse=True, coset=True)) == vals


def test_ntt_rejects_a_size_that_is_not_a_power_of_two():
    with pytest.raises(ValueError, match="not a power of two"):
        native.ntt(F.vec_random(12))


def test_compute_h_is_the_exact_quotient():
    # a, b, c from random polynomials A, B of degree < n/2 and C = A B - H Z for random H
    n = 16
    A = [random.randrange(R) for _ in range(n // 2)] + [0] * (n // 2)
    B = [random.randrange(R) for _ in range(n // 2)] + [0] * (n // 2)
    a, b = native.ntt(F.vec_from_ints(A)), native.ntt(F.vec_from_ints(B))
    c = native.mul(a, b)  # C(w^k) = A B at the domain points: H = (AB - C)/Z is A B's quotient
    h = F.vec_to_ints(native.compute_h(a, b, c))
    # check H(x) Z(x) = A(x) B(x) - C(x) at a random point, with C the interpolant of c
    Cc = F.vec_to_ints(native.ntt(c, inverse=True))
    x = random.randrange(R)
    ev = lambda p: sum(co * pow(x, i, R) for i, co in enumerate(p)) % R  # noqa: E731
    assert ev(h) * (pow(x, n, R) - 1) % R == (ev(A) * ev(B) - ev(Cc)) % R
    assert h[-1] == 0  # deg H <= n - 2
    # a wrong c gives a non-zero top coefficient or a wrong quotient
    c2 = c.copy()
    c2[3] = F.vec_from_ints([F.vec_to_ints(c[3:4])[0] + 1])
    h2 = F.vec_to_ints(native.compute_h(a, b, c2))
    assert ev(h2) * (pow(x, n, R) - 1) % R != (ev(A) * ev(B) - ev(Cc)) % R


def test_compute_h_equals_the_seven_ntt_witness_map_on_any_input():
    # arkworks' and bellperson's witness_map, step by step through native.ntt: a, b and c each
    # to the coset, (a b - c) / Z(g) there, back by the inverse coset NTT. compute_h skips c's
    # coset round trip (6 NTTs): the same vector to the bit, satisfied or not (random c here).
    for log_n in (1, 2, 5, 9):
        n = 1 << log_n
        a, b, c = F.vec_random(n), F.vec_random(n), F.vec_random(n)
        on_coset = [F.vec_to_ints(native.ntt(native.ntt(v, inverse=True), coset=True))
                    for v in (a, b, c)]
        z_inv = pow((pow(7, n, R) - 1) % R, R - 2, R)
        q = [(x * y - w) * z_inv % R for x, y, w in zip(*on_coset)]
        want = F.vec_to_ints(native.ntt(F.vec_from_ints(q), inverse=True, coset=True))
        assert F.vec_to_ints(native.compute_h(a, b, c)) == want, log_n
        # and c counts: one element changed changes H
        c2 = c.copy()
        c2[n - 1] = F.vec_from_ints([(F.vec_to_ints(c[n - 1:])[0] + 1) % R])
        assert F.vec_to_ints(native.compute_h(a, b, c2)) != want


def test_spmv_matches_a_dense_product():
    from synthesis.r1cs import SparseMatrix
    rows = [{0: 1, 3: 5}, {}, {1: R - 1, 2: 1, 3: 7}]
    m = SparseMatrix.from_rows(rows)
    z = [random.randrange(R) for _ in range(4)]
    out = F.vec_to_ints(native.spmv(m.indptr, m.indices, m.coeffs, F.vec_from_ints(z)))
    assert out == [sum(c * z[k] for k, c in row.items()) % R for row in rows]
    with pytest.raises(ValueError, match="variable 3"):
        native.spmv(m.indptr, m.indices, m.coeffs, F.vec_from_ints(z[:3]))
