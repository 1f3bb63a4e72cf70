"""The R1CS-to-QAP reduction (arkworks' r1cs_to_qap, Groth 2016 section 2.2).

The domain H has size n = the next power of two >= m + num_public + 1, m the constraint count.
As arkworks and bellperson do, rows m .. m + num_public hold one extra constraint per input
(the constant one included): z_i * 0 = 0. Their A-polynomials make the input polynomials
linearly independent, which the security proof needs for the split into gamma and delta terms.
"""
from __future__ import annotations

import numpy as np

from synthesis.r1cs import R1CS


def domain_size(r1cs: R1CS) -> int:
    need = r1cs.num_constraints + r1cs.num_public + 1
    return 1 << max(1, (need - 1).bit_length())


def evaluations(r1cs: R1CS, z: np.ndarray, n: int, az, bz, cz):
    """A z, B z, C z over H, padded to n, with the input rows appended to A."""
    m, inputs = r1cs.num_constraints, r1cs.num_public + 1
    a = np.zeros((n, 4), dtype=np.uint64)
    b = np.zeros((n, 4), dtype=np.uint64)
    c = np.zeros((n, 4), dtype=np.uint64)
    a[:m], b[:m], c[:m] = az, bz, cz
    a[m:m + inputs] = z[:inputs]
    return a, b, c
