"""bellpepper-core AllocatedNum, bellperson UInt32 / MultiEq / multipack and storage-proofs-core
UInt64 / constraint::equal (synthesis.bellpepper): values in both modes, the constraint shapes,
and wrong values refused by the constraint's name."""
import random

import numpy as np
import pytest

from synthesis import field as F
from synthesis.builder import ConstraintSystem
from synthesis.bellpepper.core import Synth
from synthesis.r1cs import UnsatisfiedConstraint
from synthesis.bellpepper import check as ck
from synthesis.bellpepper import multipack as mp
from synthesis.bellpepper import num
from synthesis.bellpepper.boolean import AllocatedBit, Boolean
from synthesis.bellpepper.multieq import MultiEq
from synthesis.bellpepper.uint32 import UInt32
from synthesis.bellpepper.uint64 import UInt64

P = F.MODULUS


def both(batch=1):
    return Synth(cs=ConstraintSystem(with_values=False), batch=batch)


def zi(s, key):
    return s.cs._index(key)


def fe(ints):
    return F.vec_from_ints(list(ints))


@pytest.mark.parametrize("strict", [False, True])
def test_to_bits_le_values_and_tampering(strict):
    rng = random.Random(7)
    xs = [rng.randrange(P) for _ in range(3)] + [P - 1, 0]
    s = both(len(xs))
    x = num.alloc_num(s, lambda: fe(xs))
    bits = (num.to_bits_le_strict if strict else num.to_bits_le)(s, x)
    assert len(bits) == 255
    got = [sum(int(b.value(s.batch)[r]) << i for i, b in enumerate(bits)) for r in range(len(xs))]
    assert got == xs
    assert s.cs.num_aux == sum(v.bits.shape[1] if hasattr(v, "bits") else 1 for v in s.values)
    for row in range(len(xs)):
        ck.check(s, row)
    z = ck.assignments(s)[0]
    # another number against the same bits: the unpacking constraint
    with pytest.raises(UnsatisfiedConstraint, match="unpacking constraint"):
        ck.check(s, z=ck.set_value(z, zi(s, next(iter(x.lc.terms))), xs[0] + 1))
    # a 2 where a bit belongs: its booleanity constraint, even with the number adjusted to match
    b0 = bits[0].bit.key
    z2 = ck.set_value(z, zi(s, b0), int(bits[0].value(s.batch)[0]) + 2)
    z2 = ck.set_value(z2, zi(s, next(iter(x.lc.terms))), xs[0] + 2)
    with pytest.raises(UnsatisfiedConstraint, match="boolean constraint"):
        ck.check(s, z=z2)


def test_to_bits_le_accepts_the_representation_of_x_plus_r_and_strict_refuses_it():
    """bellpepper's to_bits_le fixes the integer only mod r (what Filecoin's circuit inherits):
    the bits of x + r (< 2^255) satisfy it; to_bits_le_strict refuses them by its conditional
    booleanity constraints."""
    x = 5
    alt = x + P
    assert alt < 1 << 255
    # the witness generator computes every variable from x + r's limbs (so the strict gadget's
    # run ANDs agree with the bits); x itself is then set to its canonical value
    limbs = np.array([[(alt >> (64 * i)) & (2**64 - 1) for i in range(4)]], dtype=np.uint64)
    for strict in (False, True):
        s = both()
        xn = num.alloc_num(s, lambda: limbs)
        bits = (num.to_bits_le_strict if strict else num.to_bits_le)(s, xn)
        assert sum(int(b.value(1)[0]) << i for i, b in enumerate(bits)) == alt
        z = ck.set_value(ck.assignments(s)[0], zi(s, next(iter(xn.lc.terms))), x)
        if strict:
            with pytest.raises(UnsatisfiedConstraint, match="boolean constraint") as e:
                ck.check(s, z=z)
            # the refusing row is a conditional one: (ONE - last_run - bit) * bit = 0
            assert len(s.cs._rows[e.value.index][0]) == 3
        else:
            ck.check(s, z=z)


def test_to_bits_le_strict_refuses_the_characteristic():
    """bellpepper's test_into_bits_strict: -1's bits with the lowest set give r: refused by the
    lowest bit's conditional booleanity constraint (the last bit allocated)."""
    s = both()
    x = num.alloc_num(s, lambda: fe([P - 1]))
    bits = num.to_bits_le_strict(s, x)
    ck.check(s)
    z = ck.set_value(ck.assignments(s)[0], zi(s, bits[0].bit.key), 1)
    with pytest.raises(UnsatisfiedConstraint, match="boolean constraint") as e:
        ck.check(s, z=z)
    assert s.cs._rows[e.value.index][1] == bits[0].bit.lc.terms  # B side: the bit itself


def test_to_bits_le_constraint_shape():
    s = Synth(cs=ConstraintSystem(with_values=False))
    x = num.alloc_num(s)
    num.to_bits_le(s, x)
    r1 = s.cs.to_r1cs()
    assert r1.num_constraints == 256 and r1.num_aux == 256
    # the unpacking row: 0 * 0 = sum 2^i b_i - x
    assert r1.a.row(255) == [] and r1.b.row(255) == []
    c = dict(r1.c.row(255))
    assert c[1] == P - 1 and c[2] == 1 and c[256] == 1 << 254


def test_inputize_and_equal_refuse_a_mismatch():
    s = both()
    a = num.alloc_num(s, lambda: fe([11]))
    b = num.alloc_num(s, lambda: fe([11]))
    u = num.inputize(s, a)
    num.equal(s, a, b, "enforce a equals b")
    assert s.cs.num_public == 1 and F.vec_to_ints(s.public[0]) == [11]
    ck.check(s)
    z = ck.assignments(s)[0]
    with pytest.raises(UnsatisfiedConstraint, match="enforce input is correct"):
        ck.check(s, z=ck.set_value(z, zi(s, next(iter(u.lc.terms))), 12))
    with pytest.raises(UnsatisfiedConstraint, match="enforce a equals b"):
        ck.check(s, z=ck.set_value(z, zi(s, next(iter(b.lc.terms))), 11 + P + 1))


def test_add_sub_mul_square():
    s = both(2)
    a = num.alloc_num(s, lambda: fe([3, P - 1]))
    b = num.alloc_num(s, lambda: fe([4, 5]))
    outs = [num.add(s, a, b), num.sub(s, a, b), num.mul(s, a, b), num.square(s, a)]
    assert [F.vec_to_ints(o.val) for o in outs] == [[7, 4], [P - 1, P - 6], [12, P - 5], [9, 1]]
    for row in range(2):
        ck.check(s, row)
    z = ck.assignments(s)[0]
    with pytest.raises(UnsatisfiedConstraint, match="multiplication constraint"):
        ck.check(s, z=ck.set_value(z, zi(s, next(iter(outs[2].lc.terms))), 13))


def test_uint32_addmany_as_bellperson_test():
    """test_uint32_addmany: (a xor b) + c + d with b, c constant: value, satisfied, and a flipped
    result bit refused (by the MultiEq constraint); a 2 in it by its booleanity constraint."""
    rng = random.Random(3)
    for _ in range(20):
        a, b, c, d = (rng.getrandbits(32) for _ in range(4))
        s = both()
        av = UInt32.alloc(s, lambda: np.array([a], np.uint32))
        dv = UInt32.alloc(s, lambda: np.array([d], np.uint32))
        meq = MultiEq(s)
        r = av.xor(s, UInt32.constant(b))
        r = UInt32.addmany(s, meq, [r, UInt32.constant(c), dv])
        meq.finish()
        want = ((a ^ b) + c + d) & 0xFFFFFFFF
        assert int(r.value(1)[0]) == want
        assert all(x.const is None for x in r.bits)
        ck.check(s)
        z = ck.assignments(s)[0]
        bit0 = r.bits[0]
        with pytest.raises(UnsatisfiedConstraint, match="multieq 0"):
            ck.check(s, z=ck.set_value(z, zi(s, bit0.bit.key), 1 - int(bit0.value(1)[0])))
        with pytest.raises(UnsatisfiedConstraint, match="boolean constraint"):
            ck.check(s, z=ck.set_value(z, zi(s, bit0.bit.key), 2))


def test_uint32_addmany_of_constants_is_a_constant():
    s = both()
    meq = MultiEq(s)
    r = UInt32.addmany(s, meq, [UInt32.constant(0xFFFFFFFF), UInt32.constant(2), UInt32.constant(7)])
    meq.finish()
    assert r.is_constant and r.const_value() == 8 and s.cs.num_constraints == 0


def test_uint32_sum_bits_and_the_multieq_packing():
    """addmany of n operands allocates bit_length(n (2^32 - 1)) bits; MultiEq packs checks while
    the total stays below 254 bits: seven 34-bit sums fit one (238 bits), an eighth starts another."""
    s = both()
    meq = MultiEq(s)
    words = [UInt32.alloc(s, lambda i=i: np.array([i * 0x11111111], np.uint32)) for i in range(4)]
    n0 = s.cs.num_constraints
    for _ in range(8):
        UInt32.addmany(s, meq, words)  # 4 operands: 34 bits
    meq.finish()
    assert s.cs.num_constraints - n0 == 8 * 34 + 2
    names = [n for n in s.cs._names if n and n.startswith("multieq")]
    assert names == ["multieq 0", "multieq 1"]
    ck.check(s)
    with pytest.raises(ValueError, match="2..10 operands"):
        UInt32.addmany(s, MultiEq(s), words[:1])


def test_uint32_rotr_shr_and_bits_order():
    w = UInt32.constant(0x80000001)
    assert w.rotr(1).const_value() == 0xC0000000
    assert w.shr(1).const_value() == 0x40000000
    assert [b.const for b in w.into_bits_be()][:2] == [1, 0]
    assert UInt32.from_bits_be(w.into_bits_be()).const_value() == 0x80000001


def test_uint64_alloc_pack_into_input_and_bits():
    vals = np.array([0, 1, 2**63 + 5, 2**64 - 1], dtype=np.uint64)
    s = both(len(vals))
    u = UInt64.alloc(s, lambda: vals)
    u.pack_into_input(s)
    assert s.cs.num_constraints == 65 and s.cs.num_public == 1
    pub = F.vec_to_ints(s.public[0])
    assert pub == [int(v) for v in vals]
    assert pub == [mp.compute_multipacking([bool((int(v) >> i) & 1) for i in range(64)])[0] for v in vals]
    be = u.to_bits_be()
    assert [int(b.value(len(vals))[2]) for b in be] == [int(c) for c in format(2**63 + 5, "064b")]
    for row in range(len(vals)):
        ck.check(s, row)
    z = ck.assignments(s)[2]
    with pytest.raises(UnsatisfiedConstraint, match="packing constraint 0"):
        ck.check(s, z=ck.set_value(z, 1, pub[2] + 1))
    with pytest.raises(UnsatisfiedConstraint, match="boolean constraint"):  # a 2 for the top bit
        z2 = ck.set_value(z, zi(s, be[0].bit.key), 2)
        ck.check(s, z=ck.set_value(z2, 1, pub[2] + (1 << 63)))
    c = UInt64.constant(6)
    assert [b.const for b in c.to_bits_le()[:4]] == [0, 1, 1, 0]


@pytest.mark.parametrize("nbits", [0, 1, 253, 254, 255, 600])
def test_pack_into_inputs_equals_compute_multipacking(nbits):
    rng = random.Random(nbits)
    bits = [bool(rng.getrandbits(1)) for _ in range(nbits)]
    s = both()
    bs = [Boolean.is_(AllocatedBit.alloc(s, lambda b=b: np.array([int(b)], np.uint8))) for b in bits]
    # a constant and a negated bit fold into ONE's coefficient of the same packing row
    bs += [Boolean.constant(1), bs[0].not_op()] if bits else []
    bits += [True, not bits[0]] if bits else []
    mp.pack_into_inputs(s, bs)
    want = mp.compute_multipacking(bits)
    assert [F.vec_to_ints(v)[0] for v in getattr(s, "public", [])] == want
    assert s.cs.num_public == len(want)
    ck.check(s)
    if want:
        with pytest.raises(UnsatisfiedConstraint, match="packing constraint"):
            ck.check(s, z=ck.set_value(ck.assignments(s)[0], 1, want[0] + 1))


def test_pack_bits_and_bytes_to_bits():
    assert mp.bytes_to_bits(b"\x80\x01") == [True] + [False] * 14 + [True]
    assert mp.bytes_to_bits_le(b"\x80\x01") == [False] * 7 + [True, True] + [False] * 7
    s = both()
    bs = [Boolean.is_(AllocatedBit.alloc(s, lambda: np.ones(1, np.uint8))) for _ in range(300)]
    x = mp.pack_bits(s, bs)  # the first 254 bits
    assert F.vec_to_ints(x.val) == [(1 << 254) - 1]
    ck.check(s)
    with pytest.raises(UnsatisfiedConstraint, match="packing constraint"):
        ck.check(s, z=ck.set_value(ck.assignments(s)[0], zi(s, next(iter(x.lc.terms))), 0))


def test_analysis_finds_an_unconstrained_variable_and_the_booleanity_rows():
    s = Synth(cs=ConstraintSystem(with_values=False))
    x = num.alloc_num(s)
    bits = num.to_bits_le(s, x)
    u = UInt64.alloc(s)
    unused, boolean = ck.analyse(s.cs)
    assert unused == []
    assert {s.cs._index(b.bit.key) for b in bits + u.bits} <= boolean
    assert s.cs._index(next(iter(x.lc.terms))) not in boolean
    stray = num.alloc_num(s)  # allocated, never constrained: a soundness bug the analysis names
    unused, _ = ck.analyse(s.cs)
    assert unused == [s.cs._index(next(iter(stray.lc.terms)))]
    s2 = Synth(cs=ConstraintSystem(with_values=False))
    n = num.alloc_num(s2)
    strict = num.to_bits_le_strict(s2, n)  # conditional booleanity rows count too
    assert {s2.cs._index(b.bit.key) for b in strict} <= ck.analyse(s2.cs)[1]
