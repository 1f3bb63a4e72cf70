"""The benchmark circuit: a chain of multiplications with additions, sized to a power of two.

    public x, y;   v_0 = x;   v_{i+1} = (v_i + c_i) * (v_i + 7)   (i < m - 1);   v_{m-1} * 1 = y

with c_i = i + 1. Every value is a full-size field element (x is random), as in a real witness,
so no MSM gets a zero/one shortcut. With m = ``constraints_for_domain(k)`` = 2^k - 3 constraints
and the num_public + 1 = 3 input rows that both our prover (gpu/groth16/qap.py) and snarkjs
append, the evaluation domain is exactly 2^k for both.
"""
from __future__ import annotations

import numpy as np

from synthesis import field
from synthesis.r1cs import R1CS, SparseMatrix

NUM_PUBLIC = 2
B_CONSTANT = 7


def constraints_for_domain(k: int) -> int:
    return (1 << k) - NUM_PUBLIC - 1


def _rows(cols: list[np.ndarray], coeffs: list[np.ndarray]) -> tuple:
    """CSR parts of rows with len(cols) terms each: term t of row i is (cols[t][i], coeffs[t][i])."""
    per_row, m = len(cols), len(cols[0])
    indices = np.stack(cols, axis=1).reshape(-1).astype(np.int64)
    vals = np.stack(coeffs, axis=1).reshape(-1, 4)
    return np.arange(0, m * per_row + 1, per_row, dtype=np.int64), indices, vals


def _with_last_row(parts: tuple, var: int) -> SparseMatrix:
    """Append one row holding 1 * var (the output constraint)."""
    indptr, indices, vals = parts
    return SparseMatrix(np.append(indptr, indptr[-1] + 1).astype(np.int64),
                        np.append(indices, var).astype(np.int64),
                        np.ascontiguousarray(np.concatenate((vals, field.vec_from_ints([1])))))


def mul_chain(m: int, x: int | None = None) -> tuple[R1CS, np.ndarray, list[int]]:
    """(r1cs, z, public inputs [x, y]) for the chain with m >= 2 constraints. The matrices are
    built as arrays: the builder's per-term dicts would take seconds at 2^16."""
    if m < 2:
        raise ValueError("the chain needs at least 2 constraints")
    p = field.MODULUS
    x = field.random_element() if x is None else x % p
    vals = [x]
    for i in range(m - 1):
        vals.append((vals[-1] + i + 1) * (vals[-1] + B_CONSTANT) % p)
    # variables: 0 = one, 1 = x, 2 = y, 2 + j = v_j for j = 1 .. m - 1
    steps = m - 1
    v_in = np.concatenate(([1], 3 + np.arange(steps - 1))).astype(np.int64)
    v_out = 3 + np.arange(steps, dtype=np.int64)
    one = np.zeros(steps, dtype=np.int64)
    ones = np.tile(field.vec_from_ints([1]), (steps, 1))
    a = _with_last_row(_rows([one, v_in], [field.vec_from_ints(range(1, steps + 1)), ones]),
                       int(v_out[-1]))
    b = _with_last_row(_rows([one, v_in], [np.tile(field.vec_from_ints([B_CONSTANT]), (steps, 1)),
                                           ones]), 0)
    c = _with_last_row(_rows([v_out], [ones]), 2)
    r1cs = R1CS(NUM_PUBLIC, steps, a, b, c)
    r1cs.validate()
    z = field.vec_from_ints([1, x, vals[-1], *vals[1:]])
    return r1cs, z, [x, vals[-1]]
