"""Poseidon: our parameters and outputs against the paper's reference implementation
(the ``poseidon-hash`` package) and Neptune's published constants; batched == plain."""
import contextlib
import io
import math
import os
import random
import types

import numpy as np
import pytest

from synthesis import field as F
from synthesis import poseidon as ps

if os.environ.get("CI"):  # in CI the cross-check must run, never skip
    import poseidon as poseidon_ref  # noqa: F401
else:
    poseidon_ref = pytest.importorskip(
        "poseidon", reason="poseidon-hash not installed (./test installs it: tests/requirements-nodeps.txt)")


@pytest.fixture(scope="module")
def reference():
    """poseidon-hash's Poseidon for width t. Two shims, neither touching its math: its
    constructor's gcd check hands a 255-bit int to numpy (overflows on numpy 2), and galois
    would spend ~90 s proving r prime and searching a primitive element we already know (7)."""
    import galois
    import poseidon.hash as ph

    class _NumpyWithIntGcd:
        def __getattr__(self, k):
            return getattr(np, k)

        @staticmethod
        def gcd(a, b):
            return math.gcd(int(a), int(b))

    saved = ph.np, ph.galois
    ph.np = _NumpyWithIntGcd()
    ph.galois = types.SimpleNamespace(GF=lambda p: galois.GF(p, primitive_element=7, verify=False))
    made = {}

    def make(t):
        if t not in made:
            with contextlib.redirect_stdout(io.StringIO()):  # it prints progress
                made[t] = poseidon_ref.Poseidon(F.MODULUS, 128, 5, t - 1, t)
        return made[t]
    yield make
    ph.np, ph.galois = saved


@pytest.mark.parametrize("t", [3, 9])
def test_parameters_equal_the_reference(reference, t):
    ref, ours = reference(t), ps.params(t)
    assert (ref.full_round, ref.partial_round) == (ours.full_rounds, ours.partial_rounds)
    assert [int(x) for x in ref.rc_field] == list(ours.constants)
    assert [[int(x) for x in row] for row in ref.mds_matrix] == [list(r) for r in ours.mds]


@pytest.mark.parametrize("t", [3, 9])
def test_permutation_and_hash_equal_the_reference(reference, t):
    ref = reference(t)
    rng = random.Random(t)
    for _ in range(3):
        inputs = [rng.randrange(F.MODULUS) for _ in range(t - 1)]
        state = [ps.domain_tag(t - 1), *inputs]
        out = ref.run_hash(list(state))
        assert [int(x) for x in ref.state] == ps.permute(state)
        assert int(out) == ps.hash_ints(inputs)
    # and a different input gives a different output (the comparison can fail)
    assert ps.hash_ints([1] * (t - 1)) != ps.hash_ints([1] * (t - 2) + [2])


def test_grain_constants_equal_neptunes_published_ones():
    """Neptune (Filecoin's Poseidon) arity-3 constants, as shipped with poseidon-hash."""
    from poseidon import parameters
    assert ps.params(4).partial_rounds == 56
    assert [int(x, 16) for x in parameters.round_constants_neptune] == list(ps.params(4).constants)
    assert [[int(x, 16) for x in row] for row in parameters.matrix_neptune] == \
        [list(r) for r in ps.params(4).mds]


def test_round_numbers_are_minimal_and_secure():
    for t in (3, 9):
        rf, rp = ps.round_numbers(t)
        assert rf == 8
        # the search's bound before the margin: secure at R_P, not at R_P - 1
        raw_rp = next(p for p in range(1, 200) if ps._secure(math.log2(F.MODULUS), t, rf - 2, p))
        assert rp == math.ceil(raw_rp * 1.075)
        assert not ps._secure(math.log2(F.MODULUS), t, rf - 2, raw_rp - 1)


def test_mds_is_cauchy_and_invertible():
    m = ps.params(3).mds
    assert all(m[i][j] * (i + 3 + j) % F.MODULUS == 1 for i in range(3) for j in range(3))
    det = (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
           + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])) % F.MODULUS
    assert det != 0


@pytest.mark.parametrize("t", [2, 3, 9])
def test_batched_permutation_equals_the_plain_one(t):
    batch = F.vec_random(5 * t).reshape(5, t, 4)
    out = ps.permute_vec(batch)
    for b in range(5):
        assert F.vec_to_ints(out[b]) == ps.permute(F.vec_to_ints(batch[b]))
    h = ps.hash_vec(batch[:, 1:])
    assert F.vec_to_ints(h) == [ps.hash_ints(F.vec_to_ints(batch[b, 1:])) for b in range(5)]


def test_batched_mds_in_chunks(monkeypatch):
    monkeypatch.setattr(ps, "MAX_BATCH", 2)
    batch = F.vec_random(5 * 3).reshape(5, 3, 4)
    out = ps.mds_vec(batch)
    for b in range(5):
        s = F.vec_to_ints(batch[b])
        assert F.vec_to_ints(out[b]) == [sum(m * x for m, x in zip(row, s)) % F.MODULUS
                                         for row in ps.params(3).mds]


def test_bad_shapes_and_widths_are_rejected():
    with pytest.raises(ValueError, match="width"):
        ps.params(17)
    with pytest.raises(ValueError, match="state has 2 elements"):
        ps.permute([1, 2], ps.params(3))
    with pytest.raises(ValueError, match=r"\(B, t, 4\)"):
        ps.permute_vec(np.zeros((3, 4), dtype=np.uint64))


@pytest.mark.parametrize("t", [2, 3, 9, 16])
def test_native_kernel_equals_the_plain_permutation(t):
    batch = F.vec_random(9 * t).reshape(9, t, 4)  # 9 instances: the kernel's threaded path
    out, trace = ps.permute_native(batch, trace=True)
    for b in range(9):
        assert F.vec_to_ints(out[b]) == ps.permute(F.vec_to_ints(batch[b]))
    assert trace.shape == (9, ps.trace_len(ps.params(t)), 4)
    one, none = ps.permute_native(batch[:1])
    assert none is None and np.array_equal(one, out[:1])
    assert not np.array_equal(ps.permute_native(batch[1:2])[0], out[:1])


def test_sparse_partial_round_form_is_consistent():
    prm = ps.params(9)
    sp = ps.sparse_partial_rounds(prm)
    m11 = [list(row[1:]) for row in prm.mds[1:]]
    inv = ps._matinv(m11)
    assert ps._matmul(m11, inv) == [[int(i == j) for j in range(8)] for i in range(8)]
    assert len(sp["e"]) == len(sp["v"]) == len(sp["w"]) == prm.partial_rounds
    assert sp["e"][0] == prm.round_constants(prm.full_rounds // 2)[0]
    with pytest.raises(ValueError, match="singular"):
        ps._matinv([[1, 2], [2, 4]])
