"""Groth16 verification: the pairing-product equation of Groth 2016, section 3.2,

    e(A, B) = e(alpha, beta) * e(IC, gamma) * e(C, delta),  IC = gamma_abc_0 + sum_i x_i gamma_abc_i

checked as one multi-pairing e(-A, B) e(alpha, beta) e(IC, gamma) e(C, delta) == 1.
"""
from __future__ import annotations

import numpy as np

from synthesis import field

from . import curve
from .errors import CircuitMismatch
from .keys import VerifyingKey
from .proof import Proof


def public_input_vector(public_inputs, expected: int) -> np.ndarray:
    values = list(public_inputs)
    if len(values) != expected:
        raise CircuitMismatch(f"the verifying key takes {expected} public inputs, got {len(values)}")
    for i, x in enumerate(values):
        if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < field.MODULUS:
            raise ValueError(f"public input {i} is not a canonical Fr element: {x!r}")
    return field.vec_from_ints(values)  # (n, 4), (0, 4) when there are none


def verify(vk: VerifyingKey, public_inputs, proof: Proof) -> bool:
    x = public_input_vector(public_inputs, vk.num_public)
    ic = vk.gamma_abc_g1[0] + curve.msm(vk.gamma_abc_g1[1:], x)  # the MSM of no inputs is 0
    return curve.pairing_check([-proof.a, vk.alpha_g1, ic, proof.c],
                               [proof.b, vk.beta_g2, vk.gamma_g2, vk.delta_g2])
