"""bellpepper-core's ``gadgets/num.rs`` (v0.2.1) ``AllocatedNum`` and storage-proofs-core's
``gadgets/constraint.rs``, over ``synthesis.bellpepper.core.Num`` (lc of one variable / (B, 4) Fr
values).

  inputize            a new public input u; u * ONE = x                  "enforce input is correct"
  to_bits_le          255 allocated bits, LE, each boolean; 0 * 0 = sum 2^i b_i - x
                      ("unpacking constraint"; it fixes the integer only mod r)
  to_bits_le_strict   the same bits, also forced below r: bits under a 1 of r - 1 are plain
                      booleans, a run of them is AND-ed (kary_and) and each bit under a 0 of
                      r - 1 is ``alloc_conditionally`` against the last run's AND
  equal               a * ONE = b
  sum / add / sub     (a + b) * ONE = s; (d + b) * ONE = a
Filecoin's PoRep uses ``to_bits_le`` (replica id, parent labels, TreeD leaves via
filecoin-hashers' sha256 ``hash2_circuit``/``hash_multi_leaf_circuit``) and never
``to_bits_le_strict`` (rust-fil-proofs storage-proofs-porep/src/stacked/circuit/{proof,params}.rs).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import field
from ..builder import LinearCombination
from .core import Num, Synth
from .boolean import AllocatedBit, Boolean

P = field.MODULUS
NUM_BITS = 255

AllocatedNum = Num


def alloc_num(s: Synth, value: Callable[[], np.ndarray] | None = None) -> Num:
    """A fresh auxiliary variable (``AllocatedNum::alloc``), no constraint."""
    return s.alloc(value)


def alloc_input(s: Synth, value: Callable[[], np.ndarray] | None = None) -> Num:
    """A fresh public input (``AllocatedNum::alloc_input``). Values mode: its (B, 4) values are
    appended to ``s.public`` (created on first use), in allocation order."""
    lc = s.cs.alloc_input().lc() if s.shape else None
    val = None
    if s.computing:
        val = np.ascontiguousarray(value(), dtype=np.uint64)
        s.__dict__.setdefault("public", []).append(val)
    return Num(lc, val)


def inputize(s: Synth, x: Num) -> Num:
    """``AllocatedNum::inputize``: a public input equal to x."""
    u = alloc_input(s, (lambda: x.val) if s.computing else None)
    if s.shape:
        s.cs.enforce(u.lc, LinearCombination({0: 1}), x.lc, "enforce input is correct")
    return u


def fr_bits_le(val: np.ndarray, n: int = NUM_BITS) -> np.ndarray:
    """(B, 4) canonical Fr -> (B, n) uint8 bits, least significant first."""
    b = np.ascontiguousarray(val, dtype="<u8").view(np.uint8)
    return np.unpackbits(b, axis=1, bitorder="little")[:, :n]


def _unpacking(s: Synth, bits: list[AllocatedBit], x: Num) -> None:
    """0 * 0 = sum 2^i bits[i] - x (bits least significant first)."""
    if s.shape:
        terms = {}
        for i, b in enumerate(bits):
            terms[b.key] = (terms.get(b.key, 0) + (1 << i)) % P
        lc = LinearCombination({k: c for k, c in terms.items() if c}) - x.lc
        s.cs.enforce(LinearCombination(), LinearCombination(), lc, "unpacking constraint")


def to_bits_le(s: Synth, x: Num) -> list[Boolean]:
    """``AllocatedNum::to_bits_le``: 255 bits (``field_into_allocated_bits_le``), LE."""
    vals = fr_bits_le(x.val) if s.computing else None
    lcs, v = s.alloc_bits(NUM_BITS, lambda: vals)
    bits = []
    for i in range(NUM_BITS):
        b = AllocatedBit(next(iter(lcs[i].terms)) if s.shape else None,
                         None if v is None else v[:, i])
        if s.shape:
            s.cs.enforce(LinearCombination({0: 1, b.key: P - 1}), b.lc, LinearCombination(),
                         "boolean constraint")
        ops = getattr(s, "ops", None)
        if ops is not None:
            ops.append((5, (), b.key))
        bits.append(b)
    _unpacking(s, bits, x)
    return [Boolean.is_(b) for b in bits]


#: r - 1 most significant bit first, from its highest one (255 bits)
_RM1 = [int(c) for c in format(P - 1, "b")]


def to_bits_le_strict(s: Synth, x: Num) -> list[Boolean]:
    """``AllocatedNum::to_bits_le_strict``: 255 bits, LE, and x's integer below r."""
    vals = fr_bits_le(x.val) if s.computing else None
    result: list[AllocatedBit] = []
    last_run: AllocatedBit | None = None
    run: list[AllocatedBit] = []
    for i, bb in enumerate(_RM1):
        pos = NUM_BITS - 1 - i
        value = (lambda pos=pos: vals[:, pos]) if s.computing else None
        if bb:
            a = AllocatedBit.alloc(s, value)
            run.append(a)
            result.append(a)
        else:
            if run:
                if last_run is not None:
                    run.append(last_run)
                cur = run[0]
                for v in run[1:]:
                    cur = AllocatedBit.and_(s, cur, v)
                last_run = cur
                run = []
            result.append(AllocatedBit.alloc_conditionally(s, value, last_run))
    assert not run
    bits_le = result[::-1]
    _unpacking(s, bits_le, x)
    return [Boolean.is_(b) for b in bits_le]


def equal(s: Synth, a: Num, b: Num, name: str = "equal") -> None:
    """storage-proofs-core ``constraint::equal``: a * ONE = b."""
    if s.shape:
        s.cs.enforce(a.lc, LinearCombination({0: 1}), b.lc, name)


def sum_(s: Synth, a: Num, b: Num, total: Num, name: str = "sum constraint") -> None:
    """``constraint::sum``: (a + b) * ONE = total."""
    if s.shape:
        s.cs.enforce(a.lc + b.lc, LinearCombination({0: 1}), total.lc, name)


def add(s: Synth, a: Num, b: Num) -> Num:
    """``constraint::add``: a fresh a + b and its sum constraint."""
    from arith import native
    r = s.alloc((lambda: native.add(a.val, b.val)) if s.computing else None)
    sum_(s, a, b, r)
    return r


def sub(s: Synth, a: Num, b: Num) -> Num:
    """``constraint::sub``: a fresh d = a - b, (d + b) * ONE = a."""
    from arith import native
    d = s.alloc((lambda: native.sub(a.val, b.val)) if s.computing else None)
    if s.shape:
        s.cs.enforce(d.lc + b.lc, LinearCombination({0: 1}), a.lc, "subtraction constraint")
    return d


def mul(s: Synth, a: Num, b: Num) -> Num:
    """``AllocatedNum::mul``: a * b = r."""
    from arith import native
    r = s.alloc((lambda: native.mul(a.val, b.val)) if s.computing else None)
    if s.shape:
        s.cs.enforce(a.lc, b.lc, r.lc, "multiplication constraint")
    return r


def square(s: Synth, a: Num) -> Num:
    """``AllocatedNum::square``: a * a = r."""
    from arith import native
    r = s.alloc((lambda: native.mul(a.val, a.val)) if s.computing else None)
    if s.shape:
        s.cs.enforce(a.lc, a.lc, r.lc, "squaring constraint")
    return r
