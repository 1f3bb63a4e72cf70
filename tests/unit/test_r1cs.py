"""The constraint-system builder and the satisfiability check."""
import pytest

from synthesis import field as F
from synthesis.builder import ONE, ConstraintSystem, LinearCombination
from synthesis.r1cs import R1CSError, UnsatisfiedConstraint


def cubic(x: int):
    """x^3 + x + 5 = out, the classic example, with inputs interleaved with aux allocations."""
    cs = ConstraintSystem()
    xv = cs.alloc(x)
    sq = cs.alloc(x * x)
    out = cs.alloc_input(x ** 3 + x + 5)
    cs.enforce(xv, xv, sq, "x*x")
    cube = cs.alloc(x ** 3)
    cs.enforce(sq, xv, cube, "sq*x")
    cs.enforce(cube + xv + 5 * ONE, ONE, out, "out")
    return cs


def test_builder_numbers_inputs_before_aux_and_is_satisfied():
    cs = cubic(3)
    r1cs, z = cs.to_r1cs(), cs.assignment()
    assert (r1cs.num_public, r1cs.num_aux, r1cs.num_constraints) == (1, 3, 3)
    assert F.vec_to_ints(z) == [1, 35, 3, 9, 27]
    cs.check()
    r1cs.check(z)
    assert r1cs.is_satisfied(z)


def test_unsatisfied_assignment_names_the_constraint():
    cs = cubic(3)
    r1cs, z = cs.to_r1cs(), cs.assignment()
    bad = F.vec_to_ints(z)
    bad[4] = 28  # cube is wrong: constraint 1 (sq*x) fails first
    with pytest.raises(UnsatisfiedConstraint) as e:
        r1cs.check(F.vec_from_ints(bad))
    assert e.value.index == 1 and "constraint 1 (sq*x)" in str(e.value)
    assert not r1cs.is_satisfied(F.vec_from_ints(bad))


def test_builder_check_names_the_constraint_too():
    cs = ConstraintSystem()
    a = cs.alloc(2)
    b = cs.alloc(5)
    cs.enforce(a, a, 4)
    cs.enforce(a, b, 11, "a*b")
    with pytest.raises(UnsatisfiedConstraint, match="constraint 1 \\(a\\*b\\)"):
        cs.check()


def test_assignment_shape_is_validated():
    cs = cubic(3)
    r1cs, z = cs.to_r1cs(), cs.assignment()
    with pytest.raises(R1CSError, match="5 variables"):
        r1cs.check(z[:4])
    z2 = z.copy()
    z2[0] = F.vec_from_ints([2])
    with pytest.raises(R1CSError, match="constant 1"):
        r1cs.check(z2)


def test_linear_combinations_reduce_and_cancel():
    cs = ConstraintSystem(with_values=False)
    x = cs.alloc()
    lc = (x * 3 + 2) - x * 3
    assert lc.terms == {0: 2}
    assert (x * F.MODULUS).terms == {}
    assert LinearCombination.of(-1).terms == {0: F.MODULUS - 1}
    with pytest.raises(TypeError, match="constraint"):
        x.lc() * x  # noqa: B018 - a product of variables needs enforce


def test_shape_only_system_matches_the_valued_one():
    shaped = ConstraintSystem(with_values=False)
    xv = shaped.alloc()
    sq = shaped.alloc()
    out = shaped.alloc_input()
    shaped.enforce(xv, xv, sq, "x*x")
    cube = shaped.alloc()
    shaped.enforce(sq, xv, cube, "sq*x")
    shaped.enforce(cube + xv + 5 * ONE, ONE, out, "out")
    assert shaped.to_r1cs().digest() == cubic(3).to_r1cs().digest()
    assert cubic(3).to_r1cs().digest() == cubic(4).to_r1cs().digest()  # the shape, not the values
    with pytest.raises(ValueError, match="records no values"):
        shaped.assignment()
