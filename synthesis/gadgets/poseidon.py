"""The Poseidon permutation and hash as a gadget (same rounds and constants as
``synthesis.poseidon``).

Constraints per S-box x^5: x2 = x * x, x4 = x2 * x2, x5 = x4 * x. Round constants and the MDS
layer are linear, so they stay inside linear combinations. In the partial rounds only state[0]
goes through an S-box and the other elements accumulate ever longer combinations of earlier
S-box outputs; so the S-box inputs of the partial rounds and of the first full round after them
are allocated first (one more constraint each, x = lc) and that long combination appears once
instead of three times. Measured for t = 9: 453 constraints and 5,547 nonzeros a permutation,
against 387 and 10,755 without the extra variables (t = 3: 299 / 2,953 against 240 / 6,546).
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from .. import poseidon as plain
from ..builder import ConstraintSystem, LinearCombination
from .core import Num, Synth


def _sbox(s: Synth, x: Num) -> Num:
    """x^5 on one batch column (values: (B, 4))."""
    from arith import native

    x2 = s.alloc(lambda: native.mul(x.val, x.val))
    s.enforce(x, x, x2, "poseidon x^2")
    x4 = s.alloc(lambda: native.mul(x2.val, x2.val))
    s.enforce(x2, x2, x4, "poseidon x^4")
    x5 = s.alloc(lambda: native.mul(x4.val, x.val))
    s.enforce(x4, x, x5, "poseidon x^5")
    return x5


def permute(s: Synth, state: Sequence[Num]) -> list[Num]:
    """The permutation of a width-t state of Nums; returns the output state.

    Shape: the permutation's constraints are recorded once per width (``_template``) and
    instantiated by substituting the input combinations (~100x faster than re-deriving the MDS
    combinations symbolically, 0.7 s per t = 9 hash). Values: the C++ kernel permutes the whole
    batch and returns every allocated value in the template's order (``_permute_direct`` in
    values mode computes the same from vector operations; the tests hold them equal)."""
    t = len(state)
    outs = None
    if s.computing:
        out, trace = plain.permute_native(np.stack([x.val for x in state], axis=1), trace=True)
        if s.blocks:
            from .core import FeBlock
            s.values.append(FeBlock(trace))
        else:
            s.values.extend(trace[:, i] for i in range(trace.shape[1]))
        outs = [out[:, i] for i in range(t)]
    lcs = _instantiate(s.cs, _template(t), [x.lc for x in state]) if s.shape else None
    return [Num(lcs[i] if s.shape else None, outs[i] if s.computing else None)
            for i in range(t)]


@functools.lru_cache(maxsize=None)
def _template(t: int):
    """(rows, outputs, num_aux) of one permutation over input slots. Keys in rows: 0 = one,
    1..t = input slot (key - 1), t + 1 + j = the permutation's j-th auxiliary variable."""
    cs = ConstraintSystem(with_values=False)
    inputs = [Num(cs.alloc_input().lc(), None) for _ in range(t)]
    outs = _permute_direct(Synth(cs=cs), inputs)

    def key(k: int) -> int:
        return k if k >= 0 else t - k  # aux -(j+1) -> t + 1 + j
    rows = [tuple({key(k): c for k, c in side.items()} for side in row) for row in cs._rows]
    outputs = [{key(k): c for k, c in o.lc.terms.items()} for o in outs]
    return rows, outputs, cs.num_aux, tuple(cs._names)


def _instantiate(cs: ConstraintSystem, template, inputs: Sequence[LinearCombination]):
    rows, outputs, num_aux, names = template
    t = len(inputs)
    p = plain.P
    aux = [cs.alloc().lc() for _ in range(num_aux)]
    keymap = [0] + [None] * t + [next(iter(a.terms)) for a in aux]

    def subst(side: dict[int, int]) -> LinearCombination:
        out: dict[int, int] = {}
        for k, c in side.items():
            if 1 <= k <= t:
                for k2, c2 in inputs[k - 1].terms.items():
                    out[k2] = (out.get(k2, 0) + c * c2) % p
            else:
                k2 = keymap[k]
                out[k2] = (out.get(k2, 0) + c) % p
        return LinearCombination({k: c for k, c in out.items() if c})

    for (a, b, c), name in zip(rows, names):
        cs.enforce(subst(a), subst(b), subst(c), name)
    return [subst(o) for o in outputs]


def _permute_direct(s: Synth, state: Sequence[Num]) -> list[Num]:
    from arith import native

    prm = plain.params(len(state))
    t = prm.t
    lcs = [x.lc for x in state] if s.shape else None
    vals = np.stack([x.val for x in state], axis=1) if s.computing else None  # (B, t, 4)
    after_partial = prm.full_rounds // 2 + prm.partial_rounds
    for r in range(prm.rounds):
        rc = prm.round_constants(r)
        if s.shape:
            lcs = [lc + c for lc, c in zip(lcs, rc)]
        if s.computing:
            vals = plain.add_constants_vec(vals, prm, r)
        if prm.is_full(r):
            if s.computing:
                # all t S-boxes of the round in three host calls, then handed out per variable
                flat = vals.reshape(-1, 4)
                x2 = native.mul(flat, flat)
                x4 = native.mul(x2, x2)
                x5 = native.mul(x4, flat)
                x2, x4, x5 = (a.reshape(-1, t, 4) for a in (x2, x4, x5))
            outs = []
            for i in range(t):
                xi = Num(lcs[i] if s.shape else None, vals[:, i] if s.computing else None)
                if r == after_partial:
                    # inputs here combine every partial-round S-box: allocate them once
                    xv = s.alloc(lambda: xi.val)
                    s.enforce_equal(xi, xv, "poseidon full-round input")
                    xi = xv
                a2 = s.alloc(lambda: x2[:, i])
                s.enforce(xi, xi, a2, "poseidon x^2")
                a4 = s.alloc(lambda: x4[:, i])
                s.enforce(a2, a2, a4, "poseidon x^4")
                a5 = s.alloc(lambda: x5[:, i])
                s.enforce(a4, xi, a5, "poseidon x^5")
                outs.append(a5)
            if s.shape:
                lcs = [o.lc for o in outs]
            if s.computing:
                vals = x5
        else:
            x0 = Num(lcs[0] if s.shape else None, vals[:, 0] if s.computing else None)
            x = s.alloc(lambda: x0.val)
            s.enforce_equal(x0, x, "poseidon partial-round input")
            y = _sbox(s, x)
            if s.shape:
                lcs = [y.lc] + lcs[1:]
            if s.computing:
                vals = vals.copy()
                vals[:, 0] = y.val
        if s.shape:
            lcs = [_dot(row, lcs) for row in prm.mds]
        if s.computing:
            vals = plain.mds_vec(vals)
    return [Num(lcs[i] if s.shape else None, vals[:, i] if s.computing else None)
            for i in range(t)]


def _dot(row: Sequence[int], lcs: Sequence[LinearCombination]) -> LinearCombination:
    # merge into one dict: ~3x faster than chaining LinearCombination additions
    p = plain.P
    out: dict[int, int] = {}
    for m, lc in zip(row, lcs):
        for k, c in lc.terms.items():
            out[k] = (out.get(k, 0) + m * c) % p
    return LinearCombination({k: c for k, c in out.items() if c})


def hash_nums(s: Synth, inputs: Sequence[Num]) -> Num:
    """H(inputs) = permute(tag, inputs...)[1], as ``synthesis.poseidon.hash_ints``."""
    tag = s.const(plain.domain_tag(len(inputs)))
    return permute(s, [tag, *inputs])[1]
