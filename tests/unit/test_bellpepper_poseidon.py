"""neptune's Poseidon circuit (synthesis.bellpepper.neptune): neptune's constraint counts, its
hash vectors through the circuit, native trace == Python trace == gadget values, templates ==
plain recording, and wrong values refused by the constraint's name."""
import random

import numpy as np
import pytest

from arith import native
from synthesis import field as F
from synthesis.bellpepper import neptune_params as ps
from synthesis.builder import ConstraintSystem
from synthesis.compact import TemplatingCS, compact_matrices
from synthesis.bellpepper.core import FeBlock, Synth
from synthesis.r1cs import UnsatisfiedConstraint
from synthesis.bellpepper import check as ck
from synthesis.bellpepper import neptune as nep

P = F.MODULUS
#: neptune v11 circuit.rs test_poseidon_hash (standard strength); 11 is the issue's figure and
#: neptune's own formula: 3 (t R_F + R_P - 1) + t R_F + R_P - arity
COUNTS = {2: 311, 4: 377, 8: 505, 11: 598}
#: neptune v11 poseidon.rs hash_values: H(0, 1, ..., arity - 1), limbs little-endian
VECTORS = {
    2: [0x2e203c369a02e7ff, 0xa6fba9339d05a69d, 0x739e0fd902efe161, 0x396508d75e76a56b],
    4: [0x019814ff6662075d, 0xfb6b4605bf1327ec, 0x00db3c6579229399, 0x58a54b10a9e5848a],
    8: [0x2a9934f56d38a5e6, 0x4b682e9d9cc4aed9, 0x1201004211677077, 0x2394611da3a5de55],
    11: [0xcee3bbc32b693163, 0x09f3dcd8ccb08fc1, 0x6ca537e232ebe87a, 0x0c0fc1b2e5227f28],
}


def limbs(parts):
    return sum(p << (64 * i) for i, p in enumerate(parts))


def run(arity, rows, batch_blocks=False):
    s = Synth(cs=ConstraintSystem(with_values=False), batch=len(rows), blocks=batch_blocks)
    vals = F.vec_from_ints([x for r in rows for x in r]).reshape(len(rows), arity, 4)
    xs = [s.alloc(lambda j=j: vals[:, j]) for j in range(arity)]
    out = nep.poseidon_hash(s, xs)
    return s, xs, out


@pytest.mark.parametrize("arity", sorted(COUNTS))
def test_counts_and_neptunes_vectors_through_the_circuit(arity):
    c = nep.constants(arity)
    t = arity + 1
    formula = 3 * (t * c.full_rounds + c.partial_rounds - 1) + t * c.full_rounds + c.partial_rounds - arity
    assert c.num_constraints == formula == COUNTS[arity]
    rng = random.Random(arity)
    rows = [list(range(arity)), [rng.randrange(P) for _ in range(arity)]]
    s, xs, out = run(arity, rows)
    assert s.cs.num_constraints == COUNTS[arity] and s.cs.num_aux == arity + COUNTS[arity]
    got = F.vec_to_ints(out.val)
    assert got[0] == limbs(VECTORS[arity])
    assert got[1] == ps.hash_ints(rows[1]) != got[0]
    for row in range(2):
        ck.check(s, row)


@pytest.mark.parametrize("arity", [2, 8, 11])
def test_native_trace_equals_the_python_definition(arity):
    batch = F.vec_random(9 * arity).reshape(9, arity, 4)  # 9 rows: the threaded path
    tr = nep.trace_native(batch)
    for b in range(9):
        h, want = nep.trace_ints(F.vec_to_ints(batch[b]))
        assert F.vec_to_ints(tr[b]) == want and want[-1] == h


def test_preprocessed_constants_reproduce_the_plain_permutation():
    """compressed round constants and the sparse factors are neptune's optimisation of the same
    permutation: the circuit's result is state[1] of the plain rounds for every arity."""
    for arity in (2, 4, 8, 11):
        c = nep.constants(arity)
        assert len(c.crc) == c.full_rounds * c.t + c.partial_rounds
        assert len(c.w_hat) == c.partial_rounds and all(len(v) == c.t - 1 for v in c.v_rest)
        xs = [random.Random(arity).randrange(P) for _ in range(arity)]
        assert nep.hash_ints(xs) == ps.permute([ps.domain_tag(arity), *xs])[1]


def test_templating_cs_records_the_same_matrices():
    for arity in (2, 11):
        cs = ConstraintSystem(with_values=False)
        s = Synth(cs=cs)
        xs = [s.alloc(None) for _ in range(arity)]
        nep.poseidon_hash(s, xs)
        nep.poseidon_hash(s, xs[::-1])  # the same variables in other slots
        ref = cs.to_r1cs()
        tcs = TemplatingCS()
        st = Synth(cs=tcs)
        xt = [st.alloc(None) for _ in range(arity)]
        nep.poseidon_hash(st, xt)
        h = nep.poseidon_hash(st, xt[::-1])
        assert tcs.num_constraints == ref.num_constraints and len(tcs._aux) == ref.num_aux
        assert h.lc.terms == {-ref.num_aux: 1}  # the hash is the last variable
        z = F.vec_random(ref.num_variables)
        for m1, m2 in zip((ref.a, ref.b, ref.c), compact_matrices(tcs)):
            sp = m2.to_sparse()
            assert sp.nnz == m1.nnz
            assert np.array_equal(native.spmv(m1.indptr, m1.indices, m1.coeffs, z),
                                  native.spmv(sp.indptr, sp.indices, sp.coeffs, z))


def test_values_as_one_feblock_and_shape_only_agree():
    rows = [[1, 2], [3, 4]]
    s, _, out = run(2, rows, batch_blocks=True)
    assert isinstance(s.values[-1], FeBlock) and s.values[-1].vals.shape == (2, 311, 4)
    for row in range(2):
        ck.check(s, row)
    shape = Synth(cs=ConstraintSystem(with_values=False))
    nep.poseidon_hash(shape, [shape.alloc(None), shape.alloc(None)])
    assert shape.cs.to_r1cs().digest() == s.cs.to_r1cs().digest()


def test_wrong_values_are_refused_by_name():
    """Each variable class of the circuit set wrong: a first-round square (squared sum), a later
    square, an S-box output (mul sum), an allocated linear combination (off by one; off by the
    modulus is the same field element and passes), the hash; a swapped pair x2 <-> x4."""
    s, xs, out = run(2, [[5, 6]])
    z = ck.assignments(s)[0]
    base = s.cs.num_public + 1 + 2  # first circuit variable (after the two inputs)
    val = lambda i: F.vec_to_ints(z[i:i + 1])[0]  # noqa: E731
    cases = [
        (base + 0, "squared sum constraint"),            # (x1 + k)^2
        (base + 1, "squaring constraint"),               # its square
        (base + 2, "mul sum constraint pre-post-add"),   # first round S-box output
        (base + 6, "enforce num allocation preserves lc"),  # round 2, element 0's allocated lc
        (base + 7, "squaring constraint"),
        (base + 9, "mul sum constraint post-add"),
        (base + 310, "enforce num allocation preserves lc"),  # the hash result
    ]
    for idx, name in cases:
        with pytest.raises(UnsatisfiedConstraint, match=name):
            ck.check(s, z=ck.set_value(z, idx, val(idx) + 1))
    ck.check(s, z=ck.set_value(z, base + 6, val(base + 6) + P))  # the same field element
    zs = ck.set_value(z, base + 7, val(base + 8))
    zs = ck.set_value(zs, base + 8, val(base + 7))
    with pytest.raises(UnsatisfiedConstraint, match="squaring constraint"):
        ck.check(s, z=zs)


def test_every_variable_appears_in_a_constraint_and_bad_input_is_refused():
    s = Synth(cs=ConstraintSystem(with_values=False))
    xs = [s.alloc(None) for _ in range(8)]
    nep.poseidon_hash(s, xs)
    r1 = s.cs.to_r1cs()
    used = np.zeros(r1.num_variables, bool)
    for m in (r1.a, r1.b, r1.c):
        used[m.indices] = True
    assert used[1:].all()
    with pytest.raises(ValueError, match="arity"):
        nep.poseidon_hash(s, xs[:3], 4)
    with pytest.raises(ValueError, match="allocated numbers"):
        nep.poseidon_hash(s, [s.alloc(None), s.alloc(None)][:1] + [s.add_const(xs[0], 1)], 2)
    with pytest.raises(ValueError, match=r"\(B, arity, 4\)"):
        nep.trace_native(np.zeros((3, 4), np.uint64))
