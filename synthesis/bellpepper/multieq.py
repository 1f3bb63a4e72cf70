"""bellperson's ``gadgets/multieq.rs``: packs many "lhs == rhs" checks of few bits each into one
constraint lhs' * ONE = rhs' (``"multieq {ops}"``), lhs' = sum 2^offset_k lhs_k, rhs' likewise.

``enforce_equal(num_bits, lhs, rhs)`` first emits the pending constraint when the new check would
not fit below CAPACITY = 254 bits (Fr holds every 254-bit integer, so equality of the packed sums
is equality of every check), then adds the check at the current offset. ``finish`` (Rust's
``Drop``) emits what is pending. The pending constraint comes out after whatever the gadget
enforced in between (addmany's booleanity constraints): the order is part of the R1CS.
"""
from __future__ import annotations

from ..builder import LinearCombination
from .core import Synth

CAPACITY = 254


class MultiEq:
    def __init__(self, s: Synth):
        self.s = s
        self.ops = 0
        self.bits_used = 0
        self.lhs = LinearCombination()
        self.rhs = LinearCombination()

    def _accumulate(self) -> None:
        if self.s.shape:
            self.s.cs.enforce(self.lhs, LinearCombination({0: 1}), self.rhs, f"multieq {self.ops}")
        self.lhs = LinearCombination()
        self.rhs = LinearCombination()
        self.bits_used = 0
        self.ops += 1

    def enforce_equal(self, num_bits: int, lhs: LinearCombination | None,
                      rhs: LinearCombination | None) -> None:
        if CAPACITY <= self.bits_used + num_bits:
            self._accumulate()
        if not CAPACITY > self.bits_used + num_bits:
            raise ValueError(f"MultiEq: {num_bits} bits do not fit in one constraint")
        if self.s.shape:
            coeff = 1 << self.bits_used
            self.lhs = self.lhs + lhs * coeff
            self.rhs = self.rhs + rhs * coeff
        self.bits_used += num_bits

    def finish(self) -> None:
        if self.bits_used > 0:
            self._accumulate()
