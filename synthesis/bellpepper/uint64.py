"""storage-proofs-core's ``gadgets/uint64.rs``: 64 ``Boolean``s, least significant first.

``alloc``: 64 ``AllocatedBit::alloc`` (bit 0 first, each with its booleanity constraint);
``pack_into_input``: bellperson's ``multipack::pack_into_inputs`` of the 64 LE bits (one public
input, one packing constraint); ``to_bits_be`` the bits most significant first (what
``create_label`` hashes for the node index).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .core import Synth
from .boolean import AllocatedBit, Boolean


class UInt64:
    __slots__ = ("bits",)

    def __init__(self, bits: Sequence[Boolean]):
        if len(bits) != 64:
            raise ValueError(f"UInt64 takes 64 bits, not {len(bits)}")
        self.bits = list(bits)

    @staticmethod
    def constant(v: int) -> "UInt64":
        return UInt64([Boolean.constant((v >> i) & 1) for i in range(64)])

    @staticmethod
    def alloc(s: Synth, value: Callable[[], np.ndarray] | None = None) -> "UInt64":
        """``value``: () -> (B,) uint64."""
        v = np.asarray(value(), dtype=np.uint64) if s.computing else None
        lcs, vals = s.alloc_bits(64, lambda: ((v[:, None] >> np.arange(64, dtype=np.uint64))
                                              & np.uint64(1)).astype(np.uint8))
        bits = []
        for i in range(64):
            b = AllocatedBit(next(iter(lcs[i].terms)) if s.shape else None,
                             None if vals is None else vals[:, i])
            if s.shape:
                from ..builder import LinearCombination
                from .boolean import P
                s.cs.enforce(LinearCombination({0: 1, b.key: P - 1}), b.lc, LinearCombination(),
                             "boolean constraint")
            bits.append(Boolean.is_(b))
        return UInt64(bits)

    def pack_into_input(self, s: Synth) -> None:
        from .multipack import pack_into_inputs
        pack_into_inputs(s, self.bits)

    def to_bits_be(self) -> list[Boolean]:
        return self.bits[::-1]

    def to_bits_le(self) -> list[Boolean]:
        return list(self.bits)

    @staticmethod
    def from_bits_be(bits: Sequence[Boolean]) -> "UInt64":
        return UInt64(list(bits)[::-1])

    @staticmethod
    def from_bits(bits: Sequence[Boolean]) -> "UInt64":
        return UInt64(list(bits))
