"""bellperson's ``gadgets/uint32.rs``: 32 ``Boolean``s, least significant first.

``rotr``/``shr`` only re-index (shr fills with Constant(false)); ``xor``, ``sha256_ch``,
``sha256_maj`` go bit by bit through ``Boolean``'s folding gadgets; ``addmany`` of 2..10 operands:
if every operand bit is a constant the result is a constant (no variable, no constraint);
otherwise it allocates the bits of the full sum, bit_length(n * (2^32 - 1)) of them, each with its
booleanity constraint, and hands "sum of operands' lcs == sum 2^i result_i" to the MultiEq; the
result is the low 32 bits.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .. import field
from ..builder import LinearCombination
from .core import Synth
from .boolean import OP_SUM, AllocatedBit, Boolean
from .multieq import MultiEq

P = field.MODULUS
M32 = 0xFFFFFFFF


def add_terms(terms: dict, b: Boolean, coeff: int) -> None:
    """terms += b.lc(coeff), in place (bellpepper's ``lc + &bit.lc(one, coeff)``)."""
    if b.const is not None:
        if b.const:
            terms[0] = (terms.get(0, 0) + coeff) % P
        return
    k = b.bit.key
    if b.neg:
        terms[0] = (terms.get(0, 0) + coeff) % P
        terms[k] = (terms.get(k, 0) - coeff) % P
    else:
        terms[k] = (terms.get(k, 0) + coeff) % P


def lc_of(terms: dict) -> LinearCombination:
    return LinearCombination({k: c for k, c in terms.items() if c})


class UInt32:
    __slots__ = ("bits",)

    def __init__(self, bits: Sequence[Boolean]):
        if len(bits) != 32:
            raise ValueError(f"UInt32 takes 32 bits, not {len(bits)}")
        self.bits = list(bits)

    @staticmethod
    def constant(v: int) -> "UInt32":
        return UInt32([Boolean.constant((v >> i) & 1) for i in range(32)])

    @staticmethod
    def alloc(s: Synth, value: Callable[[], np.ndarray] | None = None) -> "UInt32":
        """32 allocated bits (``value``: () -> (B,) uint32), least significant first."""
        v = np.asarray(value(), dtype=np.uint64) if s.computing else None
        return UInt32([Boolean.is_(AllocatedBit.alloc(
            s, (lambda i=i: ((v >> np.uint64(i)) & np.uint64(1)).astype(np.uint8)) if s.computing else None))
            for i in range(32)])

    def into_bits_be(self) -> list[Boolean]:
        return self.bits[::-1]

    @staticmethod
    def from_bits_be(bits: Sequence[Boolean]) -> "UInt32":
        return UInt32(list(bits)[::-1])

    def into_bits(self) -> list[Boolean]:
        return list(self.bits)

    @staticmethod
    def from_bits(bits: Sequence[Boolean]) -> "UInt32":
        return UInt32(list(bits))

    @property
    def is_constant(self) -> bool:
        return all(b.const is not None for b in self.bits)

    def const_value(self) -> int:
        return sum(b.const << i for i, b in enumerate(self.bits))

    def value(self, batch: int) -> np.ndarray:
        """(B,) uint64 values."""
        out = np.zeros(batch, dtype=np.uint64)
        for i, b in enumerate(self.bits):
            out |= b.value(batch).astype(np.uint64) << np.uint64(i)
        return out

    def rotr(self, by: int) -> "UInt32":
        by %= 32
        return UInt32(self.bits[by:] + self.bits[:by])

    def shr(self, by: int) -> "UInt32":
        by %= 32
        return UInt32(self.bits[by:] + [Boolean.constant(0)] * by)

    def xor(self, s: Synth, other: "UInt32") -> "UInt32":
        return UInt32([Boolean.xor(s, a, b) for a, b in zip(self.bits, other.bits)])

    @staticmethod
    def sha256_ch(s: Synth, a: "UInt32", b: "UInt32", c: "UInt32") -> "UInt32":
        return UInt32([Boolean.sha256_ch(s, x, y, z) for x, y, z in zip(a.bits, b.bits, c.bits)])

    @staticmethod
    def sha256_maj(s: Synth, a: "UInt32", b: "UInt32", c: "UInt32") -> "UInt32":
        return UInt32([Boolean.sha256_maj(s, x, y, z) for x, y, z in zip(a.bits, b.bits, c.bits)])

    @staticmethod
    def addmany(s: Synth, meq: MultiEq, operands: Sequence["UInt32"]) -> "UInt32":
        if not 2 <= len(operands) <= 10:
            raise ValueError(f"addmany takes 2..10 operands, not {len(operands)}")
        max_value = len(operands) * M32
        all_constants = all(op.is_constant for op in operands)
        if all_constants:
            return UInt32.constant(sum(op.const_value() for op in operands) & M32)
        total = None
        if s.computing:
            total = np.zeros(s.batch, dtype=np.uint64)
            for op in operands:
                total += op.value(s.batch)
        nbits = max_value.bit_length()
        ops = getattr(s, "ops", None)
        if ops is not None:
            s.ops = None  # one SUM op for all the result bits, not one op per bit
        try:
            res = [AllocatedBit.alloc(
                s, (lambda i=i: ((total >> np.uint64(i)) & np.uint64(1)).astype(np.uint8))
                if s.computing else None) for i in range(nbits)]
        finally:
            if ops is not None:
                s.ops = ops
        if ops is not None:
            ops.append((OP_SUM, tuple(op.bits for op in operands), tuple(b.key for b in res)))
        lhs = rhs = None
        if s.shape:
            terms: dict = {}
            for op in operands:
                for i, b in enumerate(op.bits):
                    add_terms(terms, b, 1 << i)
            lhs = lc_of(terms)
            rhs = LinearCombination({b.key: (1 << i) for i, b in enumerate(res)})
        meq.enforce_equal(nbits, lhs, rhs)
        return UInt32([Boolean.is_(b) for b in res[:32]])
