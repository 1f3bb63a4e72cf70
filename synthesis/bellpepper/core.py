"""One gadget code path for both halves of synthesis: the constraint shape and the witness.

A gadget is written once against ``Synth``. In *shape* mode (``cs`` set, built once per parameter
set) each allocation and ``enforce`` is recorded in a ``ConstraintSystem(with_values=False)``; in
*values* mode (``batch`` set, once per proof) nothing symbolic is built and every allocated
variable's value is computed for a whole batch at once: a ``(B, 4)`` Fr vector, one row per
instance (per challenge of a partition), through the host library. Both modes allocate the same
variables in the same order, so the values of template variable i are ``synth.values[i]``.

A ``Num`` carries whichever tracks are live: ``lc`` (a LinearCombination) in shape mode, ``val``
(a ``(B, 4)`` array) in values mode.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .. import field
from ..builder import ONE, ConstraintSystem, LinearCombination

Value = Callable[[], np.ndarray]


class Num:
    """A field element of the circuit: a linear combination and/or its batch of values."""

    __slots__ = ("lc", "val")

    def __init__(self, lc: LinearCombination | None, val: np.ndarray | None):
        self.lc, self.val = lc, val


def const_vec(k: int, batch: int) -> np.ndarray:
    return np.ascontiguousarray(np.broadcast_to(field.vec_from_ints([k]), (batch, 4)))


def small_ints_vec(x: np.ndarray) -> np.ndarray:
    """Non-negative int64 values (< 2^63) as a (B, 4) Fr vector."""
    out = np.zeros((len(x), 4), dtype=np.uint64)
    out[:, 0] = np.asarray(x, dtype=np.uint64)
    return out


class BitBlock:
    """``n`` consecutive auxiliary variables whose values are bits, one (B, n) uint8 array: how
    bit-heavy gadgets (SHA-256) hand over their values without one (B, 4) array per variable."""

    __slots__ = ("bits",)

    def __init__(self, bits: np.ndarray):
        self.bits = bits

    def __len__(self) -> int:
        return self.bits.shape[1]


class FeBlock:
    """``n`` consecutive auxiliary variables as one (B, n, 4) Fr array (a Poseidon trace), for
    a ``Synth(blocks=True)``: one list entry instead of n."""

    __slots__ = ("vals",)

    def __init__(self, vals: np.ndarray):
        self.vals = vals

    def __len__(self) -> int:
        return self.vals.shape[1]


class Synth:
    """Records constraints (``cs``), computes batched values (``batch``), or both (tests)."""

    def __init__(self, *, cs: ConstraintSystem | None = None, batch: int | None = None,
                 blocks: bool = False):
        if cs is None and batch is None:
            raise ValueError("Synth needs a constraint system, a batch size, or both")
        if cs is not None and cs.with_values:
            raise ValueError("Synth records shape into a ConstraintSystem(with_values=False)")
        self.cs, self.batch = cs, batch
        #: values mode: gadgets may append FeBlocks (callers that np.stack ``values`` leave it off)
        self.blocks = blocks
        self.values: list[np.ndarray] = []  # values of the aux variables, in allocation order

    @property
    def shape(self) -> bool:
        return self.cs is not None

    @property
    def computing(self) -> bool:
        return self.batch is not None

    # -- variables ----------------------------------------------------------------------------
    def alloc(self, value: Value) -> Num:
        """A fresh auxiliary variable; ``value`` is called only in values mode."""
        lc = self.cs.alloc().lc() if self.cs is not None else None
        val = None
        if self.batch is not None:
            val = np.ascontiguousarray(value(), dtype=np.uint64)
            if val.shape != (self.batch, 4):
                raise ValueError(f"gadget produced values of shape {val.shape}, "
                                 f"expected ({self.batch}, 4)")
            self.values.append(val)
        return Num(lc, val)

    def alloc_bits(self, n: int, value: Callable[[], np.ndarray]) -> tuple[list | None, np.ndarray | None]:
        """n fresh auxiliary variables holding bits: (their LinearCombinations in shape mode,
        their (B, n) uint8 values in values mode, appended to ``values`` as one BitBlock)."""
        lcs = [self.cs.alloc().lc() for _ in range(n)] if self.cs is not None else None
        val = None
        if self.batch is not None:
            val = np.ascontiguousarray(value(), dtype=np.uint8)
            if val.shape != (self.batch, n):
                raise ValueError(f"gadget produced bits of shape {val.shape}, expected ({self.batch}, {n})")
            self.values.append(BitBlock(val))
        return lcs, val

    def input(self, variable, value: np.ndarray | None) -> Num:
        """Wrap an already allocated variable (public input or shared aux) with its values."""
        return Num(variable.lc() if self.cs is not None else None, value)

    def const(self, k: int) -> Num:
        return Num(LinearCombination.of(k) if self.cs is not None else None,
                   const_vec(k, self.batch) if self.batch is not None else None)

    def one(self) -> Num:
        return self.const(1)

    def enforce(self, a: Num, b: Num, c: Num, name: str | None = None) -> None:
        """<a> * <b> = <c>; values are not checked here (the R1CS check is the backstop and the
        circuit's native checks name what is wrong)."""
        if self.cs is not None:
            self.cs.enforce(a.lc, b.lc, c.lc, name)

    def enforce_equal(self, a: Num, b: Num, name: str | None = None) -> None:
        self.enforce(a, Num(ONE.lc() if self.cs is not None else None, None), b, name)

    # -- linear combinations (free: no constraint) --------------------------------------------
    def add(self, a: Num, b: Num) -> Num:
        from arith import native
        return Num(a.lc + b.lc if self.cs is not None else None,
                   native.add(a.val, b.val) if self.batch is not None else None)

    def sub(self, a: Num, b: Num) -> Num:
        from arith import native
        return Num(a.lc - b.lc if self.cs is not None else None,
                   native.sub(a.val, b.val) if self.batch is not None else None)

    def add_const(self, a: Num, k: int) -> Num:
        from arith import native
        return Num(a.lc + k if self.cs is not None else None,
                   native.add(a.val, field.vec_from_ints([k])) if self.batch is not None else None)

    def lc_only(self, terms: Sequence[tuple[int, Num]], const: int = 0) -> Num:
        """sum of coeff * num + const, symbolic only: for sides of constraints whose values the
        witness never needs (saves the host-library calls in values mode)."""
        if self.cs is None:
            return Num(None, None)
        lc = LinearCombination.of(const)
        for k, x in terms:
            lc = lc + x.lc * k
        return Num(lc, None)
