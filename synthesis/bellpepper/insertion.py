"""storage-proofs-core ``gadgets/insertion.rs``: ``pick`` and ``insert`` (arity 2, 4, 8), the
selection a Merkle path's level needs: the running hash goes into the slot the index bits name,
the siblings fill the others. Shared by Filecoin's PoR (``filecoin/stacked.py``, ``update.py``)
and porep-lite's paths (``porep/gadget.py``).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .core import Num, Synth
from .boolean import AllocatedBit, Boolean


def pick(s: Synth, cond: Boolean, a: Num, b: Num) -> Num:
    """insertion.rs ``pick``: c = cond ? a : b, (b - a) * cond = b - c."""
    val = None
    if s.computing:
        val = np.where(cond.value(s.batch)[:, None] == 1, a.val, b.val)
    c = s.alloc(lambda: val)
    if s.shape:
        s.cs.enforce(b.lc - a.lc, cond.lc(), b.lc - c.lc, "pick")
    return c


def insert(s: Synth, element: Num, bits: Sequence[Boolean], elements: Sequence[Num]) -> list[Num]:
    """insertion.rs ``insert`` for arity 2, 4, 8 (``insert_2/4/8``): ``element`` at position
    sum 2^i bits[i] among ``elements``; the picks in the Rust order."""
    size = len(elements) + 1
    if 1 << len(bits) != size:
        raise ValueError(f"insert: {len(bits)} bits for {size} slots")
    a = element
    if size == 2:
        return [pick(s, bits[0], elements[0], a), pick(s, bits[0], a, elements[0])]
    if size == 4:
        b0, b1 = bits
        b, c, d = elements
        p0 = pick(s, b1, b, pick(s, b0, b, a))
        p1 = pick(s, b1, c, pick(s, b0, a, b))
        p2 = pick(s, b1, pick(s, b0, d, a), c)
        p3 = pick(s, b1, pick(s, b0, a, d), d)
        return [p0, p1, p2, p3]
    if size == 8:
        b0, b1, b2 = bits
        if b0.is_constant or b1.is_constant or b0.neg or b1.neg:
            raise ValueError("insert_8: bits must be allocated and unnegated")
        b, c, d, e, f, g, h = elements
        nor = Boolean.is_(AllocatedBit.nor(s, b0.bit, b1.bit))
        and_ = Boolean.is_(AllocatedBit.and_(s, b0.bit, b1.bit))
        p0 = pick(s, b2, b, pick(s, nor, a, b))
        p1 = pick(s, b2, c, pick(s, b1, c, pick(s, b0, a, b)))
        p2 = pick(s, b2, d, pick(s, b1, pick(s, b0, d, a), c))
        p3 = pick(s, b2, e, pick(s, and_, a, d))
        p4 = pick(s, b2, pick(s, nor, a, f), e)
        p5 = pick(s, b2, pick(s, b1, g, pick(s, b0, a, f)), f)
        p6 = pick(s, b2, pick(s, b1, pick(s, b0, h, a), g), g)
        p7 = pick(s, b2, pick(s, and_, a, h), h)
        return [p0, p1, p2, p3, p4, p5, p6, p7]
    raise ValueError(f"insert: arity {size} (the generic select path is not used by Filecoin)")
