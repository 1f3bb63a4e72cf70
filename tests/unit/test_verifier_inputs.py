"""The verifier's public inputs: canonical Fr elements only (0 and r - 1 accepted, -1, r, a bool
and a float refused, each naming its position), the count checked against the key, and a circuit
without public inputs (IC is gamma_abc_0 alone) verified and its wrong proof refused."""
from __future__ import annotations

import random

import pytest

from gpu import prove, setup, verify
from gpu.groth16 import CircuitMismatch, Proof
from gpu.groth16.verifier import public_input_vector
from synthesis import field as F
from synthesis.builder import ONE, ConstraintSystem

R = F.MODULUS


def test_canonical_inputs_are_accepted_and_others_refused_by_position():
    v = public_input_vector([0, 1, R - 1], 3)
    assert v.shape == (3, 4) and F.vec_to_ints(v) == [0, 1, R - 1]
    assert public_input_vector([], 0).shape == (0, 4)
    for bad, shown in ((-1, "-1"), (R, str(R)), (True, "True"), (1.5, "1.5"), ("7", "'7'")):
        with pytest.raises(ValueError, match=rf"^public input 1 is not a canonical Fr element: {shown}$"):
            public_input_vector([5, bad], 2)
    with pytest.raises(CircuitMismatch, match=r"^the verifying key takes 2 public inputs, got 3$"):
        public_input_vector([1, 2, 3], 2)


def _no_inputs(x: int):
    """x^4 = y with both private: a circuit without public inputs."""
    cs = ConstraintSystem()
    a = cs.alloc(x)
    b = cs.alloc(x * x % R)
    c = cs.alloc(pow(x, 4, R))
    cs.enforce(a, a, b)
    cs.enforce(b, b, c)
    cs.enforce(c, ONE, c)
    return cs


def test_a_circuit_without_public_inputs_verifies_and_its_forgery_does_not():
    cs = _no_inputs(random.randrange(R))
    r1cs = cs.to_r1cs()
    pk, vk = setup(r1cs)
    assert vk.num_public == 0 and len(vk.gamma_abc_g1) == 1
    p = prove(pk, r1cs, cs.assignment())
    assert verify(vk, [], p)
    assert not verify(vk, [], Proof(p.a, p.b, p.a))  # C replaced
    assert not verify(vk, [], Proof(-p.a, p.b, p.c))
    with pytest.raises(CircuitMismatch, match=r"^the verifying key takes 0 public inputs, got 1$"):
        verify(vk, [0], p)


def test_a_zero_public_input_is_a_value_like_any_other():
    """x = 0 as the public input of x * x = y: accepted, and the proof does not verify for 1."""
    cs = ConstraintSystem()
    x = cs.alloc_input(0)
    y = cs.alloc(0)
    cs.enforce(x, x, y)
    cs.enforce(y, ONE, y)
    r1cs = cs.to_r1cs()
    pk, vk = setup(r1cs)
    p = prove(pk, r1cs, cs.assignment())
    assert verify(vk, [0], p)
    assert not verify(vk, [1], p)
