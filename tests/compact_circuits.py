"""A small replicated compact circuit for the tests of the compact product, the device setup and
the compact assignment path (the shape of filecoin's: a header block over shared columns, then
``copies`` copies of one block whose local columns map to base + j * stride).

Variables: z0 = 1, z1 = p (public), s (shared aux), then per copy j: x_j, y_j, t_j.
  header:  p * 1 = s
  block j: x_j * x_j = y_j ;  (y_j + 3 s) * (1 + x_j) = t_j ;  (2 x_j - p) * 1 = 2 x_j - p
"""
from __future__ import annotations

import numpy as np

from synthesis import field
from synthesis.compact import CompactMatrix, Replicated
from synthesis.compact import CompactR1CS

P = field.MODULUS
# local columns: 0 one, 1 p, 2 s (stride 0), 3 x, 4 y, 5 t (stride 3 from base 3, 4, 5)
BASE = np.array([0, 1, 2, 3, 4, 5], np.int64)
STRIDE = np.array([0, 0, 0, 3, 3, 3], np.int64)


def _cm(rows: list[list[tuple[int, int]]]) -> CompactMatrix:
    coefs = sorted({c % P for r in rows for _, c in r})
    index = {c: i for i, c in enumerate(coefs)}
    indptr = np.zeros(len(rows) + 1, np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    cols = np.array([k for r in rows for k, _ in r], np.int32)
    coef = np.array([index[c % P] for r in rows for _, c in r], np.uint16)
    table = field.vec_from_ints(coefs) if coefs else np.zeros((0, 4), np.uint64)
    return CompactMatrix(indptr, cols, coef, table)


def toy(copies: int = 5) -> CompactR1CS:
    # header rows over global columns; block rows over local columns
    ha, hb, hc = [[(1, 1)]], [[(0, 1)]], [[(2, 1)]]
    ba = [[(3, 1)], [(4, 1), (2, 3)], [(3, 2), (1, P - 1)]]
    bb = [[(3, 1)], [(0, 1), (3, 1)], [(0, 1)]]
    bc = [[(4, 1)], [(5, 1)], [(3, 2), (1, P - 1)]]
    mats = [Replicated(_cm(h), _cm(b), BASE, STRIDE, copies) for h, b in ((ha, ba), (hb, bb), (hc, bc))]
    return CompactR1CS(1, 1 + 3 * copies, *mats, segments=np.zeros((0, 4), np.int64))


def witness(copies: int = 5, seed: int = 1, *, ones: bool = True) -> np.ndarray:
    """A satisfying z; with ``ones`` some x_j are 0 or 1 (so the compact encoding has all kinds)."""
    rng = np.random.default_rng(seed)
    p = int(rng.integers(2, 2**62))
    z = [1, p, p]
    for j in range(copies):
        x = int(rng.integers(0, 2)) if ones and j % 2 else int(rng.integers(2, 2**62)) * 2**190 % P
        y = x * x % P
        t = (y + 3 * p) * (1 + x) % P
        z += [x, y, t]
    return field.vec_from_ints(z)


def random_z(n, rng):
    """A fresh random Fr vector of length n with z0 = 1 and the witness's mix of zeros, ones and
    other values (not a satisfying assignment: for comparing products, never on zeros only)."""
    z = field.vec_from_ints([int(x) for x in rng.integers(0, 2**62, n)])
    z[rng.random(n) < 0.4] = 0
    z[rng.random(n) < 0.3] = [1, 0, 0, 0]
    z[0] = [1, 0, 0, 0]
    return z
