"""bellperson's ``gadgets/multipack.rs``.

``pack_into_inputs``: the bits in chunks of CAPACITY = 254, each chunk a new public input u_i and
(sum_j 2^j bit_j) * ONE = u_i ("packing constraint {i}"; constant bits fold into ONE's
coefficient). ``pack_bits``: the first 254 bits as one new auxiliary variable, the same
constraint ("packing constraint"). ``compute_multipacking``: the public inputs a verifier forms
from plain bits. ``bytes_to_bits`` / ``bytes_to_bits_le``: each byte MSB first / LSB first.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import field
from ..builder import LinearCombination
from .core import Num, Synth
from .boolean import Boolean
from .num import alloc_input
from .uint32 import add_terms, lc_of

P = field.MODULUS
CAPACITY = 254


def bytes_to_bits(data: bytes) -> list[bool]:
    return [bool((v >> i) & 1) for v in data for i in range(7, -1, -1)]


def bytes_to_bits_le(data: bytes) -> list[bool]:
    return [bool((v >> i) & 1) for v in data for i in range(8)]


def compute_multipacking(bits: Sequence[bool]) -> list[int]:
    return [sum(1 << j for j, b in enumerate(bits[lo:lo + CAPACITY]) if b)
            for lo in range(0, len(bits), CAPACITY)]


def _packed(s: Synth, bits: Sequence[Boolean]) -> tuple[LinearCombination | None, np.ndarray | None]:
    lc = val = None
    if s.shape:
        terms: dict = {}
        for j, b in enumerate(bits):
            add_terms(terms, b, 1 << j)
        lc = lc_of(terms)
    if s.computing:
        val = bits_to_fr(np.stack([b.value(s.batch) for b in bits], axis=1) if bits else
                         np.zeros((s.batch, 0), np.uint8))
    return lc, val


def bits_to_fr(bits: np.ndarray) -> np.ndarray:
    """(B, n <= 254) bits, least significant first -> (B, 4) canonical Fr."""
    b, n = bits.shape
    if n > CAPACITY:
        raise ValueError(f"{n} bits do not fit below r")
    full = np.zeros((b, 256), dtype=np.uint8)
    full[:, :n] = bits
    return np.packbits(full, axis=1, bitorder="little").view("<u8").astype(np.uint64).reshape(b, 4)


def pack_into_inputs(s: Synth, bits: Sequence[Boolean]) -> list[Num]:
    out = []
    for i, lo in enumerate(range(0, len(bits), CAPACITY)):
        lc, val = _packed(s, bits[lo:lo + CAPACITY])
        u = alloc_input(s, lambda val=val: val)
        if s.shape:
            s.cs.enforce(lc, LinearCombination({0: 1}), u.lc, f"packing constraint {i}")
        out.append(u)
    return out


def pack_bits(s: Synth, bits: Sequence[Boolean]) -> Num:
    lc, val = _packed(s, bits[:CAPACITY])
    x = s.alloc(lambda: val)
    if s.shape:
        s.cs.enforce(lc, LinearCombination({0: 1}), x.lc, "packing constraint")
    return x
