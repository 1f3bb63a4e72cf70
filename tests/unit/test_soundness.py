"""Soundness of gadgets: ``synthesis.audit`` on its constraints and honest witnesses (no
variable outside the constraints, every bit bound to {0, 1}, no variable that can change alone),
and per variable class a wrong value that keeps its neighbours' types, refused by the constraint
that is there for it: a 2 where a bit belongs, a swapped pair of siblings.

Here: the audit tool itself, porep-lite's index bits, neptune's Poseidon circuit and porep-lite's
Merkle path (on ``synthesis.bellpepper``, the one gadget library since issue 36); bellperson's
SHA-256 in tests/unit/test_bellpepper_sha256.py, Filecoin's PoR and the circuits in
tests/unit/test_soundness_circuits.py. A new gadget is checked by one call,
``assert_sound(r1cs, witnesses)``, on its R1CS and a few witnesses from random inputs."""
from __future__ import annotations


import numpy as np
import pytest

from synthesis import field as F
from synthesis.audit import Audit, assert_sound, audit, refused_by
from synthesis.builder import ONE, ConstraintSystem
from synthesis.assignment import values_array
from synthesis.bellpepper.core import Synth
from synthesis.bellpepper.neptune import poseidon_hash
from synthesis.porep import trees
from synthesis.porep.gadget import root_from_path, to_bits
from synthesis.r1cs import UnsatisfiedConstraint

B = 6  # witnesses per gadget: enough that every bit is 1 in one of them


class Harness:
    """Shape and values in one Synth; public inputs first, each with B values."""

    def __init__(self, batch: int = B):
        self.batch = batch
        self.cs = ConstraintSystem(with_values=False)
        self.s = Synth(cs=self.cs, batch=batch)
        self.publics: list[np.ndarray] = []

    def public(self, values: np.ndarray):
        self.publics.append(values)
        return self.s.input(self.cs.alloc_input(), values)

    def z(self, b: int) -> np.ndarray:
        return np.concatenate([F.vec_from_ints([1])] + [v[b:b + 1] for v in self.publics]
                              + [values_array(self.s.values, self.batch)[b]])

    def build(self):
        r1cs = self.cs.to_r1cs()
        zs = [self.z(b) for b in range(self.batch)]
        for z in zs:
            r1cs.check(z)
        return r1cs, zs


def small(values):
    return F.vec_from_ints(values)


def _var_of(r1cs, name: str, k: int = 0) -> int:
    """The variable of the k-th booleanity row called ``name``."""
    rows = [i for i, n in enumerate(r1cs.names) if n == name]
    return int(r1cs.a.row(rows[k])[0][0])


def _set(z: np.ndarray, v: int, value: int) -> np.ndarray:
    z = z.copy()
    z[v] = F.vec_from_ints([value])[0]
    return z


# --- the tool itself, on systems built to be wrong ---------------------------------------------

def _toy(values: dict[str, int], *, sound: bool):
    """y = x^2; b boolean; p = b AND c (c boolean); when not sound: u in no constraint, f only
    multiplied by zero (free), and e = b + w - y - 2 (always b, but the row binds it through
    field elements: e = 2, w = y + 3 would do)."""
    cs = ConstraintSystem()
    x = cs.alloc_input(values["x"])
    y = cs.alloc(values["x"] ** 2)
    cs.enforce(x, x, y, "y = x^2")
    b = cs.alloc(values["b"])
    cs.enforce(b, ONE - b, 0, "b is boolean")
    c = cs.alloc(values["c"])
    cs.enforce(ONE - c, c, 0, "c is boolean (the other way round)")
    p = cs.alloc(values["b"] * values["c"])
    cs.enforce(b, c, p, "p = b and c")
    if not sound:
        cs.alloc(5)  # u
        f = cs.alloc(values["b"])
        cs.enforce(f, 0, 0, "f times zero")
        w = cs.alloc(values["x"] ** 2 + 2)
        cs.enforce(w, ONE, y + 2, "w = y + 2")
        e = cs.alloc(values["b"])
        cs.enforce(e, ONE, b + w - y - 2, "e = b + w - y - 2")
    return cs.to_r1cs(), cs.assignment()


def _toys(sound: bool):
    vals = [dict(x=3, b=1, c=1), dict(x=5, b=0, c=1), dict(x=2, b=1, c=0)]
    built = [_toy(v, sound=sound) for v in vals]
    return built[0][0], [z for _, z in built]


def test_audit_passes_a_sound_system_and_says_why():
    r1cs, zs = _toys(sound=True)
    rep = assert_sound(r1cs, zs)
    assert rep.problems == []
    # aux: y 2, b 3, c 4, p 5
    assert rep.bits == [3, 4, 5]
    assert rep.booleanity == {3: 1, 4: 2} and rep.determined == {5: 3}
    assert rep.refused["bit set to 2"][0] == (3, ["constraint 1 (b is boolean)", "constraint 3 (p = b and c)"])
    assert rep.refused["field element off by one"] == [(2, ["constraint 0 (y = x^2)"])]


def test_audit_names_unconstrained_free_and_unbound_variables():
    r1cs, zs = _toys(sound=False)
    rep = audit(r1cs, zs)
    # aux: y 2, b 3, c 4, p 5, u 6, f 7, w 8, e 9
    assert rep.unconstrained == [6]
    assert rep.unbound_bits == [7, 9]
    assert rep.problems == [
        "variable 6 appears in no constraint",
        "bit variable 7 has no booleanity constraint and is not determined by bound bits "
        "(it appears in constraint 4 (f times zero))",
        "bit variable 9 has no booleanity constraint and is not determined by bound bits "
        "(it appears in constraint 6 (e = b + w - y - 2))",
        "variable 7 can be changed alone (bit set to 2: 2) and every constraint still holds",
        "variable 7 can be changed alone (bit flipped: 0) and every constraint still holds",
    ]
    with pytest.raises(AssertionError, match=r"^unsound constraint system: .*\nvariable 6 appears in no constraint\n"):
        assert_sound(r1cs, zs)


def test_audit_refuses_witnesses_that_do_not_satisfy():
    r1cs, zs = _toys(sound=True)
    with pytest.raises(ValueError, match=r"^witness 1 does not satisfy constraint 0 \(y = x\^2\)$"):
        Audit(r1cs, [zs[0], _set(zs[1], 2, 26)])
    assert refused_by(r1cs, zs[0], {2: 10}) == ["constraint 0 (y = x^2)"]
    assert refused_by(r1cs, zs[0], {}) == []


# --- boolean.py: bits, swap, insert ----------------------------------------------------------

def test_to_bits_is_sound_and_each_wrong_value_is_named():
    h = Harness()
    x = h.public(small([5, 0, 1023, 512, 77, 1000]))
    to_bits(h.s, x, 10, "x bits")
    r1cs, zs = h.build()
    rep = assert_sound(r1cs, zs)
    assert sorted(rep.booleanity) == list(range(2, 12))  # every bit by its own row
    z = zs[0]  # x = 5: bits 1, 0, 1, 0...
    with pytest.raises(UnsatisfiedConstraint, match=r"^constraint 1 \(x bits\[1\] is boolean\)"):
        r1cs.check(_set(z, 3, 2))  # 2 where bit 1 belongs: its booleanity row comes first
    # bits of x + 1 (all boolean): the packing refuses them
    assert refused_by(r1cs, z, {2: 0, 3: 1}) == ["constraint 10 (unpacking constraint)"]
    # bits of x + r would need more than 10 bits: the modulus cannot be added
    assert rep.refused["bit set to 2"]


# --- neptune's Poseidon and porep-lite's Merkle path (bellpepper's insert) ---------------------

@pytest.mark.parametrize("arity", [2, 8])
def test_poseidon_is_sound_and_an_sbox_off_by_one_is_named(arity):
    h = Harness(3)
    poseidon_hash(h.s, [h.public(F.vec_random(3)) for _ in range(arity)])
    r1cs, zs = h.build()
    rep = assert_sound(r1cs, zs, sample=400)
    assert rep.bits == []  # field elements only
    first = 1 + arity  # the first input's (x + k)^2
    with pytest.raises(UnsatisfiedConstraint, match=r"^constraint 0 \(squared sum constraint\)"):
        r1cs.check(_set(zs[0], first, F.vec_to_ints(zs[0][first:first + 1])[0] + 1))


@pytest.mark.parametrize("arity,depth", [(2, 3), (8, 2)])
def test_merkle_path_is_sound_and_a_swapped_pair_of_siblings_is_refused(arity, depth):
    leaves = F.vec_random(arity ** depth)
    levels = trees.build(leaves, arity)
    idx = np.array([0, 5, arity ** depth - 1, 3, 1, 2])
    h = Harness()
    m = arity.bit_length() - 1
    node = h.public(small(idx.tolist()))
    leaf = h.public(leaves[idx])
    root_in = h.public(np.repeat(levels[-1], B, axis=0))
    bits = to_bits(h.s, node, m * depth)
    paths = np.stack([trees.path(levels, int(i), arity) for i in idx])
    sib = [[h.s.alloc(lambda lv=lv, q=q: paths[:, lv, q]) for q in range(arity - 1)]
           for lv in range(depth)]
    h.s.enforce_equal(root_from_path(h.s, leaf, bits, sib, arity), root_in, "root")
    r1cs, zs = h.build()
    assert_sound(r1cs, zs, sample=300)
    # the first level's first two siblings swapped (each still a tree node)
    s0 = 1 + 3 + m * depth
    z = zs[1]
    v0, v1 = F.vec_to_ints(z[s0:s0 + 2])
    if arity == 2:  # one sibling a level: swap the two levels' siblings
        v1 = F.vec_to_ints(z[s0 + 2:s0 + 3])[0]
        got = refused_by(r1cs, z, {s0: v1, s0 + 2: v0})
    else:
        got = refused_by(r1cs, z, {s0: v1, s0 + 1: v0})
    assert got, "a swapped pair of siblings satisfies the circuit"


@pytest.mark.parametrize("nbits,wraps", [(253, False), (254, False), (256, True)])
def test_audit_flags_a_packing_of_bits_that_wraps_the_modulus(nbits, wraps):
    """sum 2^i b_i = x over 256 bits: some x mod r have two bit patterns, so the bits no
    longer say what x is; 254 bits sum to at most 2^254 - 1 < r. (Coefficients are read signed:
    2^254 > r/2 alone reads as 2^254 - r, so 255 bits are not flagged: a known limit.)"""
    def build(x: int):
        cs = ConstraintSystem()
        xv = cs.alloc_input(x)
        bits = [cs.alloc((x >> i) & 1) for i in range(nbits)]
        for i, b in enumerate(bits):
            cs.enforce(b, ONE - b, 0, f"bit {i} is boolean")
        cs.enforce(sum((b * (1 << i) for i, b in enumerate(bits)), ONE - ONE), ONE, xv, "pack")
        return cs.to_r1cs(), cs.assignment()
    xs = [(1 << (nbits - 1)) - 1, (1 << (nbits - 2)) + 5, 3]
    built = [build(x % F.MODULUS) for x in xs]
    rep = audit(built[0][0], [z for _, z in built], sample=10)
    want = [f"constraint {nbits} (pack) sums bits with coefficients up to 2^255 in all, past "
            "the modulus: it does not fix their integer sum"] if wraps else []
    assert rep.problems == want


def test_to_bits_takes_1_to_62_bits():
    """The values path shifts int64 values: 62 bits at most (x < 2^62), and at least one."""
    for n, x in ((1, 1), (62, (1 << 62) - 1)):
        h = Harness(1)
        bits = to_bits(h.s, h.public(small([x])), n)
        assert len(bits) == n and sum(int(b.value(1)[0]) << i for i, b in enumerate(bits)) == x
        h.build()
    for n in (0, 63):
        with pytest.raises(ValueError, match=rf"^to_bits supports 1\.\.62 bits, not {n}$"):
            to_bits(Harness(1).s, Harness(1).public(small([1])), n)
