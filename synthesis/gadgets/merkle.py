"""Merkle-path inclusion for Poseidon trees of arity 2^m (binary TreeD, 8-ary TreeC/TreeR).

A node's index bits, least significant first, choose the slot at each level: level l uses bits
[m l, m l + m). The gadget returns the computed root; the caller enforces it equal to the
public (or shared) root, so one gadget serves both.
"""
from __future__ import annotations

from typing import Sequence

from .boolean import insert
from .core import Num, Synth
from .poseidon import hash_nums


def root_from_path(s: Synth, leaf: Num, bits: Sequence[Num], path: Sequence[Sequence[Num]],
                   arity: int) -> Num:
    """Fold ``leaf`` up ``path`` (per level: arity - 1 siblings in index order)."""
    m = arity.bit_length() - 1
    if arity < 2 or arity != 1 << m:
        raise ValueError(f"tree arity {arity} is not a power of two >= 2")
    if len(bits) != m * len(path):
        raise ValueError(f"{len(path)} levels of arity {arity} need {m * len(path)} index bits, "
                         f"got {len(bits)}")
    cur = leaf
    for level, siblings in enumerate(path):
        slots = insert(s, bits[m * level:m * (level + 1)], cur, siblings)
        cur = hash_nums(s, slots)
    return cur
