"""bellpepper-core's ``gadgets/boolean.rs`` (v0.2.1): ``AllocatedBit`` and ``Boolean``.

Constraints (z the assignment, ONE the constant variable), each right after its variable:
  alloc              (ONE - x) * x = 0                        "boolean constraint"
  alloc_conditionally (ONE - m - x) * x = 0                   (m must be false when x is true)
  xor                (2a) * b = a + b - r
  and                a * b = r
  and_not            a * (ONE - b) = r
  nor                (ONE - a) * (ONE - b) = r
  sha256_ch          (b - c) * a = ch - c                     (over the Booleans' lcs)
  sha256_maj         (2bc - b - c) * a = bc - maj             (maj allocated before bc = b AND c)
  enforce_equal      0 * 0 = a - b  (or ONE - a, or a, against a constant)
and the constant folding of ``Boolean::{xor, and, sha256_ch, sha256_maj}`` arm by arm, in
bellpepper's match order.

Template recording: when the Synth carries an ``ops`` list (``sha256.Template`` sets one), every
allocation appends (opcode, operand Booleans, the new variable's key), which ``bits_host.cpp``
replays to compute a template instance's values natively.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import field
from ..builder import LinearCombination
from .core import BitBlock, Synth

P = field.MODULUS

# opcodes of the native replay (bits_host.cpp)
OP_XOR, OP_AND, OP_CH, OP_MAJ, OP_SUM, OP_BIT = 0, 1, 2, 3, 4, 5


class Unsatisfiable(ValueError):
    """bellpepper's SynthesisError::Unsatisfiable: two constants enforced equal differ."""


class AllocatedBit:
    """One allocated variable constrained (or determined) to be 0 or 1: its key in the shape's
    ConstraintSystem (None in values mode) and its (B,) uint8 values (None in shape mode)."""

    __slots__ = ("key", "val")

    def __init__(self, key: int | None, val: np.ndarray | None):
        self.key, self.val = key, val

    @property
    def lc(self) -> LinearCombination:
        return LinearCombination({self.key: 1})

    # -- allocation -------------------------------------------------------------------------
    @staticmethod
    def _new(s: Synth, value: Callable[[], np.ndarray] | None, op: int, args: tuple) -> "AllocatedBit":
        """One fresh variable (what ``Synth.alloc_bits(1, ...)`` does, without its lists)."""
        key = s.cs.alloc()._key if s.cs is not None else None
        val = None
        if s.batch is not None:
            val = np.ascontiguousarray(value(), dtype=np.uint8)
            if val.shape != (s.batch,):
                raise ValueError(f"a bit's values have shape {val.shape}, expected ({s.batch},)")
            s.values.append(BitBlock(val[:, None]))
        ops = getattr(s, "ops", None)
        if ops is not None:
            ops.append((op, args, key))
        return AllocatedBit(key, val)

    @staticmethod
    def alloc(s: Synth, value: Callable[[], np.ndarray] | None = None,
              name: str = "boolean constraint") -> "AllocatedBit":
        """A fresh bit, (ONE - x) * x = 0. ``value``: () -> (B,) 0/1 (values mode)."""
        x = AllocatedBit._new(s, value, OP_BIT, ())
        if s.shape:
            s.cs.enforce(LinearCombination({0: 1, x.key: P - 1}), x.lc, LinearCombination(), name)
        return x

    @staticmethod
    def alloc_conditionally(s: Synth, value, must_be_false: "AllocatedBit") -> "AllocatedBit":
        """(ONE - must_be_false - x) * x = 0: x is boolean, and 0 when must_be_false is 1."""
        x = AllocatedBit._new(s, value, OP_BIT, ())
        if s.shape:
            a = LinearCombination({0: 1}) - must_be_false.lc - x.lc
            s.cs.enforce(a, x.lc, LinearCombination(), "boolean constraint")
        return x

    @staticmethod
    def xor(s: Synth, a: "AllocatedBit", b: "AllocatedBit") -> "AllocatedBit":
        r = AllocatedBit._new(s, (lambda: a.val ^ b.val) if s.computing else None,
                              OP_XOR, (Boolean.is_(a), Boolean.is_(b)))
        if s.shape:
            c = {a.key: 1}
            c[b.key] = c.get(b.key, 0) + 1
            c[r.key] = P - 1
            s.cs.enforce(LinearCombination({a.key: 2}), b.lc, LinearCombination(c), "xor constraint")
        return r

    @staticmethod
    def and_(s: Synth, a: "AllocatedBit", b: "AllocatedBit") -> "AllocatedBit":
        r = AllocatedBit._new(s, (lambda: a.val & b.val) if s.computing else None,
                              OP_AND, (Boolean.is_(a), Boolean.is_(b)))
        if s.shape:
            s.cs.enforce(a.lc, b.lc, r.lc, "and constraint")
        return r

    @staticmethod
    def and_not(s: Synth, a: "AllocatedBit", b: "AllocatedBit") -> "AllocatedBit":
        r = AllocatedBit._new(s, (lambda: a.val & (1 - b.val)) if s.computing else None,
                              OP_AND, (Boolean.is_(a), Boolean.not_(b)))
        if s.shape:
            s.cs.enforce(a.lc, LinearCombination({0: 1}) - b.lc, r.lc, "and not constraint")
        return r

    @staticmethod
    def nor(s: Synth, a: "AllocatedBit", b: "AllocatedBit") -> "AllocatedBit":
        r = AllocatedBit._new(s, (lambda: (1 - a.val) & (1 - b.val)) if s.computing else None,
                              OP_AND, (Boolean.not_(a), Boolean.not_(b)))
        if s.shape:
            one = LinearCombination({0: 1})
            s.cs.enforce(one - a.lc, one - b.lc, r.lc, "nor constraint")
        return r


class Boolean:
    """bellpepper's ``Boolean``: ``Is(bit)``, ``Not(bit)`` or ``Constant(c)``."""

    __slots__ = ("bit", "neg", "const")

    def __init__(self, bit: AllocatedBit | None, neg: bool = False, const: int | None = None):
        self.bit, self.neg, self.const = bit, neg, const

    @staticmethod
    def constant(c) -> "Boolean":
        return Boolean(None, False, int(bool(c)))

    @staticmethod
    def is_(bit: AllocatedBit) -> "Boolean":
        return Boolean(bit, False)

    @staticmethod
    def not_(bit: AllocatedBit) -> "Boolean":
        return Boolean(bit, True)

    @property
    def is_constant(self) -> bool:
        return self.const is not None

    def kind(self) -> str:
        return "const" if self.const is not None else ("not" if self.neg else "is")

    def __repr__(self) -> str:
        if self.const is not None:
            return f"Constant({self.const})"
        return f"{'Not' if self.neg else 'Is'}({self.bit.key})"

    def not_op(self) -> "Boolean":
        """bellpepper's ``Boolean::not``."""
        if self.const is not None:
            return Boolean.constant(1 - self.const)
        return Boolean(self.bit, not self.neg)

    def lc(self, coeff: int = 1) -> LinearCombination:
        """bellpepper's ``Boolean::lc(one, coeff)``: coeff ONE, coeff x, or coeff ONE - coeff x."""
        coeff %= P
        if self.const is not None:
            return LinearCombination({0: coeff} if self.const and coeff else {})
        if not self.neg:
            return LinearCombination({self.bit.key: coeff})
        return LinearCombination({0: coeff, self.bit.key: (-coeff) % P})

    def value(self, batch: int) -> np.ndarray:
        """(B,) uint8 values."""
        if self.const is not None:
            return np.full(batch, self.const, dtype=np.uint8)
        return (1 - self.bit.val).astype(np.uint8) if self.neg else self.bit.val

    # -- gadgets ----------------------------------------------------------------------------
    @staticmethod
    def enforce_equal(s: Synth, a: "Boolean", b: "Boolean") -> None:
        if a.const is not None and b.const is not None:
            if a.const != b.const:
                raise Unsatisfiable("Boolean.enforce_equal: two different constants")
            return
        if not s.shape:
            return
        zero = LinearCombination()
        if a.const == 1 or b.const == 1:
            x = b if a.const == 1 else a
            s.cs.enforce(zero, zero, LinearCombination({0: 1}) - x.lc(), "enforce equal to one")
        elif a.const == 0 or b.const == 0:
            x = b if a.const == 0 else a
            s.cs.enforce(zero, zero, x.lc(), "enforce equal to zero")
        else:
            s.cs.enforce(zero, zero, a.lc() - b.lc(), "enforce equal")

    @staticmethod
    def xor(s: Synth, a: "Boolean", b: "Boolean") -> "Boolean":
        if a.const == 0:
            return b
        if b.const == 0:
            return a
        if a.const == 1:
            return b.not_op()
        if b.const == 1:
            return a.not_op()
        if a.neg != b.neg:  # (Is, Not) | (Not, Is): xor(is, not.not()).not()
            is_, not_ = (a, b) if not a.neg else (b, a)
            return Boolean.xor(s, is_, not_.not_op()).not_op()
        # (Is a, Is b) | (Not a, Not b)
        return Boolean.is_(AllocatedBit.xor(s, a.bit, b.bit))

    @staticmethod
    def and_(s: Synth, a: "Boolean", b: "Boolean") -> "Boolean":
        if a.const == 0 or b.const == 0:
            return Boolean.constant(0)
        if a.const == 1:
            return b
        if b.const == 1:
            return a
        if a.neg != b.neg:
            is_, not_ = (a, b) if not a.neg else (b, a)
            return Boolean.is_(AllocatedBit.and_not(s, is_.bit, not_.bit))
        if a.neg:
            return Boolean.is_(AllocatedBit.nor(s, a.bit, b.bit))
        return Boolean.is_(AllocatedBit.and_(s, a.bit, b.bit))

    @staticmethod
    def sha256_ch(s: Synth, a: "Boolean", b: "Boolean", c: "Boolean") -> "Boolean":
        """ch(a, b, c) = (a AND b) XOR (NOT a AND c), with bellpepper's folding."""
        if a.is_constant and b.is_constant and c.is_constant:
            return Boolean.constant((a.const & b.const) ^ ((1 - a.const) & c.const))
        if a.const == 0:
            return c
        if b.const == 0:
            return Boolean.and_(s, a.not_op(), c)
        if c.const == 0:
            return Boolean.and_(s, a, b)
        if c.const == 1:
            return Boolean.and_(s, a, b.not_op()).not_op()
        if b.const == 1:
            return Boolean.and_(s, a.not_op(), c.not_op()).not_op()
        # a Constant(true) or all three variables: allocate
        val = None
        if s.computing:
            av, bv, cv = (x.value(s.batch) for x in (a, b, c))
            val = (av & bv) ^ ((1 - av) & cv)
        ch = AllocatedBit._new(s, (lambda: val) if s.computing else None, OP_CH, (a, b, c))
        if s.shape:
            s.cs.enforce(comb((1, b), (-1, c)), a.lc(), comb((-1, c), key=ch.key),
                         "ch computation")
        return Boolean.is_(ch)

    @staticmethod
    def sha256_maj(s: Synth, a: "Boolean", b: "Boolean", c: "Boolean") -> "Boolean":
        """maj(a, b, c) = (a AND b) XOR (a AND c) XOR (b AND c), with bellpepper's folding."""
        if a.is_constant and b.is_constant and c.is_constant:
            return Boolean.constant((a.const & b.const) ^ (a.const & c.const) ^ (b.const & c.const))
        if a.const == 0:
            return Boolean.and_(s, b, c)
        if b.const == 0:
            return Boolean.and_(s, a, c)
        if c.const == 0:
            return Boolean.and_(s, a, b)
        if c.const == 1:
            return Boolean.and_(s, a.not_op(), b.not_op()).not_op()
        if b.const == 1:
            return Boolean.and_(s, a.not_op(), c.not_op()).not_op()
        if a.const == 1:
            return Boolean.and_(s, b.not_op(), c.not_op()).not_op()
        val = None
        if s.computing:
            av, bv, cv = (x.value(s.batch) for x in (a, b, c))
            val = (av & bv) ^ (av & cv) ^ (bv & cv)
        maj = AllocatedBit._new(s, (lambda: val) if s.computing else None, OP_MAJ, (a, b, c))
        bc = Boolean.and_(s, b, c)
        if s.shape:
            s.cs.enforce(comb((2, bc), (-1, b), (-1, c)), a.lc(), comb((1, bc), key=maj.key, kc=-1),
                         "maj computation")
        return Boolean.is_(maj)


def comb(*terms: tuple[int, "Boolean"], key: int | None = None, kc: int = 1) -> LinearCombination:
    """sum of coeff * b.lc() (+ kc * variable ``key``), merged as bellpepper's lc.rs merges, zero
    terms dropped (what every recorder keeps)."""
    d: dict[int, int] = {}
    for coeff, b in terms:
        if b.const is not None:
            if b.const:
                d[0] = (d.get(0, 0) + coeff) % P
        elif b.neg:
            d[0] = (d.get(0, 0) + coeff) % P
            d[b.bit.key] = (d.get(b.bit.key, 0) - coeff) % P
        else:
            d[b.bit.key] = (d.get(b.bit.key, 0) + coeff) % P
    if key is not None:
        d[key] = (d.get(key, 0) + kc) % P
    return LinearCombination({k: c for k, c in d.items() if c})


def u64_into_boolean_vec_le(s: Synth, value: Callable[[], np.ndarray] | None) -> list[Boolean]:
    """64 allocated bits of a u64, least significant first (``value``: () -> (B,) uint64)."""
    v = value() if s.computing else None
    return [Boolean.is_(AllocatedBit.alloc(
        s, (lambda i=i: ((v >> np.uint64(i)) & np.uint64(1)).astype(np.uint8)) if s.computing else None))
        for i in range(64)]
