"""Bits and selection: boolean constraints, bit decomposition, conditional swap, insertion.

Selection is what a Merkle path needs: at each level the running hash goes into the slot given
by the index bits, and the siblings fill the others.
"""
from __future__ import annotations

from itertools import combinations
from typing import Sequence

import numpy as np

from .core import Num, Synth, small_ints_vec


def boolean(s: Synth, b: Num, name: str | None = None) -> None:
    """b * (1 - b) = 0."""
    s.enforce(b, s.lc_only([(-1, b)], const=1), s.lc_only([]), name)


def to_bits(s: Synth, x: Num, nbits: int, name: str = "bits") -> list[Num]:
    """Little-endian bits of x (x < 2^nbits < 2^63): nbits boolean constraints and one packing
    constraint sum_i 2^i b_i = x, so the bits are bound to x."""
    if not 0 < nbits < 63:
        raise ValueError(f"to_bits supports 1..62 bits, not {nbits}")
    ints = x.val[:, 0].astype(np.int64) if s.computing else None
    bits = []
    for i in range(nbits):
        b = s.alloc(lambda i=i: small_ints_vec((ints >> i) & 1))
        boolean(s, b, f"{name}[{i}] is boolean")
        bits.append(b)
    s.enforce_equal(s.lc_only([(1 << i, b) for i, b in enumerate(bits)]), x, f"{name} pack")
    return bits


def _select(mask: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.where(mask[:, None], x, np.uint64(0))


def cond_swap(s: Synth, bit: Num, a: Num, b: Num) -> tuple[Num, Num]:
    """(a, b) if bit == 0 else (b, a), with one constraint: bit * (b - a) = d; left = a + d,
    right = b - d."""
    diff = s.sub(b, a)
    d = s.alloc(lambda: _select(bit.val[:, 0] == 1, diff.val))
    s.enforce(bit, diff, d, "swap")
    return s.add(a, d), s.sub(b, d)


def _bit_ints(bits: Sequence[Num]) -> np.ndarray:
    return sum((b.val[:, 0].astype(np.int64) << i) for i, b in enumerate(bits))


def insert(s: Synth, bits: Sequence[Num], cur: Num, siblings: Sequence[Num]) -> list[Num]:
    """Place ``cur`` at position p = sum 2^i bits[i] among 2^m slots, siblings in order around it:
    out_j = sib_j (j < p), cur (j == p), sib_{j-1} (j > p).

    With eq_j = [p == j] (a multilinear polynomial in the bits: one constraint per monomial of
    degree >= 2) and lt_j = [p < j] = sum_{q<j} eq_q:
        out_j = sib_j + lt_j (sib_{j-1} - sib_j) + eq_j (cur - sib_j),
    one constraint per product; the first and last slot need only the eq term.
    """
    m = len(bits)
    arity = 1 << m
    if len(siblings) != arity - 1:
        raise ValueError(f"insert into {arity} slots needs {arity - 1} siblings, got {len(siblings)}")
    if m == 1:
        left, right = cond_swap(s, bits[0], cur, siblings[0])
        return [left, right]
    pos = _bit_ints(bits) if s.computing else None

    # monomials prod_{i in S} b_i for |S| >= 2, allocated by increasing size
    mono: dict[tuple[int, ...], Num] = {(): s.one()}
    for i in range(m):
        mono[(i,)] = bits[i]
    for size in range(2, m + 1):
        for subset in combinations(range(m), size):
            head, last = mono[subset[:-1]], bits[subset[-1]]
            v = s.alloc(lambda subset=subset: small_ints_vec(
                np.bitwise_and.reduce([(pos >> i) & 1 for i in subset], axis=0)))
            s.enforce(head, last, v, "insert monomial")
            mono[subset] = v

    def eq(j: int) -> Num:
        # prod_i (b_i if bit i of j else 1 - b_i), expanded over the monomials
        terms: list[tuple[int, Num]] = []
        for size in range(m + 1):
            for subset in combinations(range(m), size):
                # coefficient: prod over i in subset of (+1 if bit set else -1), zero if any
                # set bit of j is missing from the subset
                if any((j >> i) & 1 and i not in subset for i in range(m)):
                    continue
                sign = (-1) ** sum(1 for i in subset if not (j >> i) & 1)
                terms.append((sign, mono[subset]))
        return s.lc_only(terms)

    eqs = [eq(j) for j in range(arity)]
    out = []
    for j in range(arity):
        base = siblings[j] if j < arity - 1 else siblings[j - 1]
        acc = base
        if 0 < j < arity - 1:
            lt = s.lc_only([(1, e) for e in eqs[:j]])
            diff = s.sub(siblings[j - 1], siblings[j])
            u = s.alloc(lambda j=j, diff=diff: _select(pos < j, diff.val))
            s.enforce(lt, diff, u, "insert shift")
            acc = s.add(acc, u)
        diff = s.sub(cur, base)
        v = s.alloc(lambda j=j, diff=diff: _select(pos == j, diff.val))
        s.enforce(eqs[j], diff, v, "insert place")
        out.append(s.add(acc, v))
    return out
