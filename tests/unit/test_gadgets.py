"""Gadgets: every constraint system built in shape mode is satisfied by the values mode's
witness, row by row, and rejects a tampered one; results equal the plain (Python-int) code."""
import numpy as np
import pytest

from synthesis import field as F
from synthesis import poseidon as ps
from synthesis.builder import ConstraintSystem
from synthesis.gadgets import Synth, cond_swap, hash_nums, insert, root_from_path, to_bits
from synthesis.gadgets import poseidon as gp
from synthesis.porep import trees
from synthesis.r1cs import UnsatisfiedConstraint

B = 3


class Harness:
    """Shape and values in one Synth; public inputs are allocated first, each with B values."""

    def __init__(self):
        self.cs = ConstraintSystem(with_values=False)
        self.s = Synth(cs=self.cs, batch=B)
        self.publics: list[np.ndarray] = []

    def public(self, values: np.ndarray):
        self.publics.append(values)
        return self.s.input(self.cs.alloc_input(), values)

    def z(self, b: int) -> np.ndarray:
        pub = [F.vec_to_ints(v[b:b + 1])[0] for v in self.publics]
        aux = [F.vec_to_ints(v[b:b + 1])[0] for v in self.s.values]
        return F.vec_from_ints([1, *pub, *aux])

    def check_all_rows(self):
        r1cs = self.cs.to_r1cs()
        for b in range(B):
            r1cs.check(self.z(b))
        return r1cs


def small(values):
    return F.vec_from_ints(values)


@pytest.mark.parametrize("arity", [2, 8])
def test_poseidon_gadget_equals_plain_hash_and_rejects_a_wrong_witness(arity):
    h = Harness()
    xs = [F.vec_random(B) for _ in range(arity)]
    out = hash_nums(h.s, [h.public(x) for x in xs])
    assert F.vec_to_ints(out.val) == [ps.hash_ints([F.vec_to_ints(x)[b] for x in xs]) for b in range(B)]
    r1cs = h.check_all_rows()
    assert r1cs.num_constraints == 3 * ps.params(arity + 1).sboxes + ps.params(arity + 1).partial_rounds + arity + 1
    z = h.z(0)
    z[len(xs) + 5] = F.vec_from_ints([12345])[0]  # one S-box value
    with pytest.raises(UnsatisfiedConstraint):
        r1cs.check(z)


def test_permutation_template_equals_direct_construction():
    """Shape mode instantiates a recorded per-width template; it must equal the gadget built
    symbolically from scratch, constraint for constraint."""
    def build(fn):
        cs = ConstraintSystem(with_values=False)
        s = Synth(cs=cs)
        state = [s.input(cs.alloc_input(), None) for _ in range(3)]
        state[1] = s.add_const(s.add(state[1], state[2]), 5)  # inputs that are combinations
        outs = fn(s, state)
        cs.enforce(outs[0].lc, outs[1].lc, outs[2].lc)
        return cs.to_r1cs()
    a, b = build(gp.permute), build(gp._permute_direct)
    for ma, mb in ((a.a, b.a), (a.b, b.b), (a.c, b.c)):
        assert np.array_equal(ma.indptr, mb.indptr) and np.array_equal(ma.indices, mb.indices)
        assert np.array_equal(ma.coeffs, mb.coeffs)


def test_bits_bind_the_value():
    h = Harness()
    x = h.public(small([5, 0, 1023]))
    bits = to_bits(h.s, x, 10)
    assert [F.vec_to_ints(b.val) for b in bits[:3]] == [[1, 0, 1], [0, 0, 1], [1, 0, 1]]
    r1cs = h.check_all_rows()
    z = h.z(0)
    z[2] = F.vec_from_ints([0])[0]  # bit 0 of 5 set to 0: packing fails
    with pytest.raises(UnsatisfiedConstraint, match="pack"):
        r1cs.check(z)
    z = h.z(1)
    z[2] = F.vec_from_ints([2])[0]  # not a bit
    with pytest.raises(UnsatisfiedConstraint, match="boolean"):
        r1cs.check(z)


def test_cond_swap_both_ways():
    h = Harness()
    bit, a, b = h.public(small([0, 1, 1])), h.public(F.vec_random(B)), h.public(F.vec_random(B))
    left, right = cond_swap(h.s, bit, a, b)
    for i, bv in enumerate([0, 1, 1]):
        want = (a, b) if bv == 0 else (b, a)
        assert np.array_equal(left.val[i], want[0].val[i]) and np.array_equal(right.val[i], want[1].val[i])
    r1cs = h.check_all_rows()
    z = h.z(1)
    z[-1] = F.vec_from_ints([0])[0]  # claim "no swap" with bit 1
    with pytest.raises(UnsatisfiedConstraint):
        r1cs.check(z)


def test_insert_places_the_node_at_every_position():
    for start in (0, 3, 5):
        h = Harness()
        pos = np.array([start, (start + 1) % 8, 7])
        bits = [h.public(small(((pos >> i) & 1).tolist())) for i in range(3)]
        cur = h.public(F.vec_random(B))
        sibs = [h.public(F.vec_random(B)) for _ in range(7)]
        out = insert(h.s, bits, cur, sibs)
        for b in range(B):
            slots = [F.vec_to_ints(o.val[b:b + 1])[0] for o in out]
            want = [F.vec_to_ints(x.val[b:b + 1])[0] for x in sibs]
            want.insert(int(pos[b]), F.vec_to_ints(cur.val[b:b + 1])[0])
            assert slots == want
        r1cs = h.check_all_rows()
    z = h.z(2)
    z[-1] = F.vec_from_ints([1])[0]
    with pytest.raises(UnsatisfiedConstraint):
        r1cs.check(z)


@pytest.mark.parametrize("arity,depth", [(2, 3), (8, 2)])
def test_merkle_path_gadget_reaches_the_tree_root(arity, depth):
    leaves = F.vec_random(arity ** depth)
    levels = trees.build(leaves, arity)
    idx = np.array([0, 5, arity ** depth - 1])
    h = Harness()
    m = arity.bit_length() - 1
    node = h.public(small(idx.tolist()))
    leaf = h.public(leaves[idx])
    bits = to_bits(h.s, node, m * depth)
    paths = np.stack([trees.path(levels, int(i), arity) for i in idx])  # (B, depth, arity-1, 4)
    sib = [[h.s.alloc(lambda lv=lv, q=q: paths[:, lv, q]) for q in range(arity - 1)] for lv in range(depth)]
    root = root_from_path(h.s, leaf, bits, sib, arity)
    assert all(np.array_equal(root.val[b], levels[-1][0]) for b in range(B))
    root_in = h.public(np.repeat(levels[-1], B, axis=0))
    h.s.enforce_equal(root, root_in, "root")
    r1cs = h.check_all_rows()
    # a wrong sibling moves the root: the root constraint fails
    z = h.z(1)
    first_sibling = 1 + len(h.publics) + m * depth
    z[first_sibling] = F.vec_from_ints([7])[0]
    with pytest.raises(UnsatisfiedConstraint):
        r1cs.check(z)


def test_gadget_values_must_match_the_batch():
    s = Synth(batch=2)
    with pytest.raises(ValueError, match=r"expected \(2, 4\)"):
        s.alloc(lambda: F.vec_random(3))
    with pytest.raises(ValueError, match="arity 3"):
        root_from_path(s, None, [], [], 3)


@pytest.mark.parametrize("t", [2, 3, 9])
def test_native_trace_equals_the_vector_operations_reference(t):
    """The C++ kernel's witness trace is the gadget's values path, value for value and in its
    allocation order (``_permute_direct`` computes it from host-library vector operations)."""
    state = F.vec_random(4 * t).reshape(4, t, 4)
    ref = Synth(batch=4)
    ref_out = gp._permute_direct(ref, [ref.input(None, state[:, i].copy()) for i in range(t)])
    fast = Synth(batch=4)
    fast_out = gp.permute(fast, [fast.input(None, state[:, i].copy()) for i in range(t)])
    assert len(fast.values) == len(ref.values) == ps.trace_len(ps.params(t))
    assert all(np.array_equal(a, b) for a, b in zip(fast.values, ref.values))
    assert all(np.array_equal(a.val, b.val) for a, b in zip(fast_out, ref_out))
