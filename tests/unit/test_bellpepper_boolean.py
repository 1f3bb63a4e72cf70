"""bellpepper-core's Boolean / AllocatedBit gadgets (synthesis.bellpepper.boolean): constraints,
constant folding arm by arm, values in both modes, and wrong values refused by name."""
import itertools

import numpy as np
import pytest

from synthesis.builder import ConstraintSystem
from synthesis.bellpepper.core import Synth
from synthesis.r1cs import UnsatisfiedConstraint
from synthesis.bellpepper import check as ck
from synthesis.bellpepper.boolean import AllocatedBit, Boolean, Unsatisfiable

# bellpepper's test OperandType: constants, allocated bits, negated allocated bits
OPERANDS = ["True", "False", "AllocTrue", "AllocFalse", "NotAllocTrue", "NotAllocFalse"]


def both(batch=1):
    return Synth(cs=ConstraintSystem(with_values=False), batch=batch)


def make(s, kind):
    if kind == "True":
        return Boolean.constant(1)
    if kind == "False":
        return Boolean.constant(0)
    v = 1 if kind.endswith("True") else 0
    b = Boolean.is_(AllocatedBit.alloc(s, lambda: np.full(s.batch, v, np.uint8)))
    return b.not_op() if kind.startswith("Not") else b


def value(kind):
    return {"True": 1, "False": 0, "AllocTrue": 1, "AllocFalse": 0, "NotAllocTrue": 0, "NotAllocFalse": 1}[kind]


def zi(s, key):
    return s.cs._index(key)


def tamper(s, key, v):
    """z of row 0 with variable ``key`` set to v."""
    return ck.set_value(ck.assignments(s)[0], zi(s, key), v)


def test_allocated_bit_refuses_two_naming_its_constraint():
    s = both()
    b = AllocatedBit.alloc(s, lambda: np.ones(1, np.uint8))
    ck.check(s)
    ck.check(s, z=tamper(s, b.key, 0))  # 0 is a bit too
    with pytest.raises(UnsatisfiedConstraint, match="boolean constraint") as e:
        ck.check(s, z=tamper(s, b.key, 2))
    assert e.value.index == 0


@pytest.mark.parametrize("op, fn, name", [
    (AllocatedBit.xor, lambda a, b: a ^ b, "xor constraint"),
    (AllocatedBit.and_, lambda a, b: a & b, "and constraint"),
    (AllocatedBit.and_not, lambda a, b: a & (1 - b), "and not constraint"),
    (AllocatedBit.nor, lambda a, b: (1 - a) & (1 - b), "nor constraint"),
])
def test_allocated_bit_ops_truth_table_and_a_wrong_result_refused(op, fn, name):
    s = both(4)
    av, bv = np.array([0, 0, 1, 1], np.uint8), np.array([0, 1, 0, 1], np.uint8)
    a, b = AllocatedBit.alloc(s, lambda: av), AllocatedBit.alloc(s, lambda: bv)
    r = op(s, a, b)
    assert r.val.tolist() == fn(av, bv).tolist()
    assert s.cs.num_constraints == 3 and s.cs.num_aux == 3
    for row in range(4):
        ck.check(s, row)
    z = ck.assignments(s)
    for row in range(4):
        wrong = ck.set_value(z[row], zi(s, r.key), 1 - int(r.val[row]))
        with pytest.raises(UnsatisfiedConstraint, match=name):
            ck.check(s, z=wrong)


def test_xor_refuses_a_two_in_an_operand_with_the_booleanity_constraint():
    s = both()
    a = AllocatedBit.alloc(s, lambda: np.ones(1, np.uint8))
    b = AllocatedBit.alloc(s, lambda: np.zeros(1, np.uint8))
    AllocatedBit.xor(s, a, b)
    with pytest.raises(UnsatisfiedConstraint, match="boolean constraint"):
        ck.check(s, z=tamper(s, b.key, 2))


@pytest.mark.parametrize("gadget", ["xor", "and_"])
def test_boolean_binary_ops_fold_constants_as_bellpepper(gadget):
    for ka, kb in itertools.product(OPERANDS, repeat=2):
        s = both()
        a, b = make(s, ka), make(s, kb)
        before = (s.cs.num_constraints, s.cs.num_aux)
        r = getattr(Boolean, gadget)(s, a, b)
        want = value(ka) ^ value(kb) if gadget == "xor" else value(ka) & value(kb)
        assert int(r.value(1)[0]) == want, (ka, kb)
        ck.check(s)
        added = (s.cs.num_constraints - before[0], s.cs.num_aux - before[1])
        folded = ka in ("True", "False") or kb in ("True", "False")
        assert added == ((0, 0) if folded else (1, 1)), (ka, kb, added)
        if gadget == "xor" and not folded:
            # (Is, Not) or (Not, Is) gives Not(xor); (Is, Is) and (Not, Not) give Is(xor)
            assert r.neg == (ka.startswith("Not") != kb.startswith("Not"))
        if gadget == "and_" and folded and r.const is None:
            assert r.bit is (a.bit if kb in ("True",) else b.bit)


@pytest.mark.parametrize("gadget, fn, name", [
    ("sha256_ch", lambda a, b, c: (a & b) ^ ((1 - a) & c), "ch computation"),
    ("sha256_maj", lambda a, b, c: (a & b) ^ (a & c) ^ (b & c), "maj computation"),
])
def test_ch_and_maj_all_operand_kinds(gadget, fn, name):
    """bellpepper's test_boolean_sha256_{ch,maj}: every combination of six operand kinds, the
    value, satisfaction, 0 constraints for three constants, and a flipped result refused by name
    when all three are variables."""
    for ks in itertools.product(OPERANDS, repeat=3):
        s = both()
        ops = [make(s, k) for k in ks]
        n0 = s.cs.num_constraints
        r = getattr(Boolean, gadget)(s, *ops)
        assert int(r.value(1)[0]) == fn(*(value(k) for k in ks)), ks
        ck.check(s)
        consts = [k in ("True", "False") for k in ks]
        if all(consts):
            assert s.cs.num_constraints == n0 == 0
        if not any(consts):
            assert s.cs.num_constraints - n0 == (1 if gadget == "sha256_ch" else 2)
            with pytest.raises(UnsatisfiedConstraint, match=name):
                ck.check(s, z=tamper(s, r.bit.key, 1 - int(r.value(1)[0])))


def test_ch_with_a_constant_true_allocates_and_maj_folds_it():
    s = both()
    b, c = make(s, "AllocTrue"), make(s, "AllocFalse")
    Boolean.sha256_ch(s, Boolean.constant(1), b, c)  # (Constant(true), _, _) falls through
    assert s.cs.num_constraints == 3 and s.cs.num_aux == 3
    s2 = both()
    b, c = make(s2, "AllocTrue"), make(s2, "AllocFalse")
    r = Boolean.sha256_maj(s2, Boolean.constant(1), b, c)  # NOT(NOT b AND NOT c): one nor
    assert s2.cs.num_constraints == 3 and r.neg
    ck.check(s2)


def test_enforce_equal_cases_and_refusals():
    for ka, kb in itertools.product(OPERANDS, repeat=2):
        s = both()
        a, b = make(s, ka), make(s, kb)
        equal = value(ka) == value(kb)
        if ka in ("True", "False") and kb in ("True", "False"):
            if equal:
                Boolean.enforce_equal(s, a, b)
                assert s.cs.num_constraints == 0
            else:
                with pytest.raises(Unsatisfiable):
                    Boolean.enforce_equal(s, a, b)
            continue
        Boolean.enforce_equal(s, a, b)
        if equal:
            ck.check(s)
        else:
            with pytest.raises(UnsatisfiedConstraint, match="enforce equal"):
                ck.check(s)


def test_both_modes_allocate_the_same_variables():
    shape = Synth(cs=ConstraintSystem(with_values=False))
    vals = Synth(batch=2)
    for s in (shape, vals):
        a = make(s, "AllocTrue")
        b = make(s, "NotAllocFalse")
        c = make(s, "AllocFalse")
        Boolean.sha256_maj(s, a, b, c)
        Boolean.xor(s, a, c)
    assert shape.cs.num_aux == sum(v.bits.shape[1] for v in vals.values) == 6
