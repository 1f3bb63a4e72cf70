"""neptune's Poseidon circuit (v11 ``src/circuit.rs`` ``poseidon_hash``, the "Legacy" circuit that
filecoin-hashers' ``hash_multi_leaf_circuit`` / ``hash2_circuit`` and storage-proofs-porep's
``hash_single_column`` call), with neptune's preprocessed constants.

Constants (``src/preprocessing.rs``, ``src/mds.rs``): the round constants pushed backwards
through M^-1 (``compress_round_constants`` with every partial round preprocessed), the MDS
matrix factored into ``pre_sparse_matrix`` and one sparse matrix per partial round
(``factor_to_sparse_matrixes``: w_hat = first column, v_rest = first row's tail).
``neptune_params`` (round numbers, Grain constants, Cauchy MDS) feeds them.

The circuit, for a preimage of ``arity`` allocated numbers (state (tag, x_1..x_a), t = a + 1):
  first full round: the tag's S-box folds to a constant; for each input l:
      (l + k)^2 = q ("squared sum constraint"), q * q = q2, (l + k) * q2 = r - k' ("mul sum")
  other full rounds (R_F - 1), for every element:
      [a linear combination is first allocated: lc * ONE = x ("enforce num allocation
      preserves lc")], x * x = x2, x2 * x2 = x4, x * x4 = r - k ("mul sum"; the terminal round
      has no k)
  partial rounds: the same S-box on element 0 only
  MDS products are linear combinations (no constraint): M for the first three full rounds and
  the last four, pre_sparse after the fourth, the sparse matrices after the partial rounds;
  finally element 1 is allocated ("hash result").
Constraints = variables = 3a + 4t(R_F - 1) + 4 R_P + 1: 311 (t = 3), 377 (t = 5), 505 (t = 9),
598 (t = 12), neptune's test_poseidon_hash counts.

Values: ``trace_ints`` (Python ints, the definition) and neptune_host.cpp's ``neptune_trace``
(batched, used by the gadget's values mode) give every allocated value in allocation order;
``hash_native`` (neptune_host.cpp's ``neptune_hash``) is the one native Poseidon hash of zkhive:
the trees, labels and columns of every family's sealing side.
"""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import field
from ..builder import LinearCombination
from . import neptune_params as ps
from .core import FeBlock, Num, Synth

P = field.MODULUS


def _inv_matrix(a):
    return ps._matinv([list(r) for r in a])


def _apply(m, v):
    """neptune's ``apply_matrix``: result[j] = sum_i m[i][j] v[i]."""
    n = len(v)
    return [sum(m[i][j] * v[i] for i in range(n)) % P for j in range(n)]


def _mat_mul(a, b):
    return ps._matmul(a, b)


def _derive(m):
    """(m_prime, m_double_prime) of ``derive_mds_matrices``."""
    t = len(m)
    m_hat = [row[1:] for row in m[1:]]
    m_hat_inv = _inv_matrix(m_hat)
    prime = [[1] + [0] * (t - 1)] + [[0] + list(m[i][1:]) for i in range(1, t)]
    v = list(m[0][1:])
    w = [m[i][0] for i in range(1, t)]
    w_hat = _apply(m_hat_inv, w)
    dprime = [[m[0][0]] + v]
    for i in range(1, t):
        row = [0] * t
        row[0] = w_hat[i - 1]
        row[i] = 1
        dprime.append(row)
    return prime, dprime


@dataclass(frozen=True)
class Constants:
    """neptune's ``PoseidonConstants`` for one arity (standard strength, MerkleTree tag)."""
    arity: int
    t: int
    full_rounds: int
    partial_rounds: int
    tag: int
    m: tuple
    crc: tuple                 # compressed_round_constants: R_F t + R_P
    pre_sparse: tuple          # t x t
    w_hat: tuple               # R_P x t
    v_rest: tuple              # R_P x (t - 1)

    @property
    def num_constraints(self) -> int:
        return 3 * self.arity + 4 * self.t * (self.full_rounds - 1) + 4 * self.partial_rounds + 1

    @functools.cached_property
    def packed_vec(self) -> np.ndarray:
        """crc, m, pre_sparse, w_hat, v_rest as one Fr vector for neptune_trace."""
        flat = [*self.crc, *(x for r in self.m for x in r), *(x for r in self.pre_sparse for x in r),
                *(x for r in self.w_hat for x in r), *(x for r in self.v_rest for x in r)]
        return field.vec_from_ints(flat)


@functools.lru_cache(maxsize=None)
def constants(arity: int) -> Constants:
    prm = ps.params(arity + 1)
    t, rf, rp = prm.t, prm.full_rounds, prm.partial_rounds
    m = [list(r) for r in prm.mds]
    m_inv = _inv_matrix(m)
    rk = lambda r: list(prm.round_constants(r))  # noqa: E731
    half = rf // 2
    # compress_round_constants(width, rf, rp, rc, mds, partial_preprocessed = rp)
    res = rk(0)
    for i in range(half - 1):
        res += _apply(m_inv, rk(i + 1))
    final_round = half + rp
    acc = rk(final_round)
    partial_keys = []
    for i in range(rp):
        prev = rk(final_round - i - 1)
        inverted = _apply(m_inv, acc)
        partial_keys.append(inverted[0])
        inverted[0] = 0
        acc = [(a + b) % P for a, b in zip(prev, inverted)]
    res += _apply(m_inv, acc)
    res += partial_keys[::-1]
    for i in range(1, half):
        res += _apply(m_inv, rk(i + half + rp))
    assert len(res) == rf * t + rp
    # factor_to_sparse_matrixes(m, rp)
    curr, sparse = m, []
    for _ in range(rp):
        prime, dprime = _derive(curr)
        sparse.append(dprime)
        curr = _mat_mul(m, prime)
    sparse.reverse()
    w_hat = [tuple(d[i][0] for i in range(t)) for d in sparse]
    v_rest = [tuple(d[0][1:]) for d in sparse]
    return Constants(arity, t, rf, rp, ps.domain_tag(arity), tuple(map(tuple, m)), tuple(res),
                     tuple(map(tuple, curr)), tuple(w_hat), tuple(v_rest))


# --- the circuit's arithmetic on Python ints (the definition of its values) -------------------

def trace_ints(inputs: Sequence[int], c: Constants | None = None) -> tuple[int, list[int]]:
    """(hash, every allocated value in allocation order) for one preimage."""
    c = c or constants(len(inputs))
    t, half, crc = c.t, c.full_rounds // 2, c.crc
    out: list[int] = []
    off = 0

    def mds(el, rnd):
        if rnd == half - 1:
            return _apply(c.pre_sparse, el)
        if half - 1 < rnd < half + c.partial_rounds:
            i = rnd - half
            w, v = c.w_hat[i], c.v_rest[i]
            return [sum(e * x for e, x in zip(el, w)) % P] + \
                [(el[j] + el[0] * v[j - 1]) % P for j in range(1, t)]
        return _apply(c.m, el)

    def sbox(x, post, first_ensure=True):
        out.append(x)
        x2 = x * x % P
        x4 = x2 * x2 % P
        out.extend([x2, x4])
        r = (x4 * x + (post or 0)) % P
        out.append(r)
        return r

    el = [c.tag % P] + [int(x) % P for x in inputs]
    rnd = 0
    # first full round
    pre, post = crc[0:t], crc[t:2 * t]
    off = 2 * t
    new = [(pow((el[0] + pre[0]) % P, 5, P) + post[0]) % P]
    for i in range(1, t):
        y = (el[i] + pre[i]) % P
        q = y * y % P
        q2 = q * q % P
        r = (q2 * y + post[i]) % P
        out.extend([q, q2, r])
        new.append(r)
    el = _later_rounds(c, crc, off, mds(new, rnd), rnd + 1, mds, sbox)
    out.append(el[1])
    return el[1], out


def _later_rounds(c: "Constants", crc, off: int, el: list, rnd: int, mds, sbox) -> list:
    """Every round after the first, in neptune's order (full rounds, the partial rounds, full
    rounds, the last full round without constants): ``sbox(x, constant)`` on each element of a
    full round and on element 0 of a partial one, then ``mds(el, round)``; ``crc`` the
    compressed round constants from ``off``. The one schedule of the trace and the gadget."""
    t, half = c.t, c.full_rounds // 2
    for _ in range(1, half):
        post = crc[off:off + t]
        off += t
        el = mds([sbox(el[i], post[i]) for i in range(t)], rnd)
        rnd += 1
    for _ in range(c.partial_rounds):
        k = crc[off]
        off += 1
        el = mds([sbox(el[0], k)] + el[1:], rnd)
        rnd += 1
    for _ in range(half - 1):
        post = crc[off:off + t]
        off += t
        el = mds([sbox(el[i], post[i]) for i in range(t)], rnd)
        rnd += 1
    assert off == len(crc)
    return mds([sbox(el[i], None) for i in range(t)], rnd)


def hash_ints(inputs: Sequence[int]) -> int:
    return trace_ints(inputs)[0]


# --- native trace --------------------------------------------------------------------------------

def _lib() -> ctypes.CDLL:
    """neptune_host.cpp, compiled on first use into the host library's cache."""
    from pathlib import Path

    from arith import native
    sig = ([ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 4,
           ctypes.c_int64)
    return native.load(Path(__file__).with_name("neptune_host.cpp"), stem="neptune",
                       signatures={"neptune_trace": sig, "neptune_hash": sig})


def hash_native(inputs: np.ndarray) -> np.ndarray:
    """(B, 4) hashes of a (B, arity, 4) batch of canonical preimages: neptune's optimized
    permutation (sparse partial rounds) in 4 x 64-bit Montgomery arithmetic, no trace."""
    inputs = np.ascontiguousarray(inputs, dtype=np.uint64)
    if inputs.ndim != 3 or inputs.shape[2] != 4:
        raise ValueError(f"expected a (B, arity, 4) batch of preimages, got shape {inputs.shape}")
    c = constants(inputs.shape[1])
    out = np.empty((len(inputs), 4), dtype=np.uint64)
    tag = field.vec_from_ints([c.tag])
    n = _lib().neptune_hash(len(inputs), c.t, c.full_rounds, c.partial_rounds, c.packed_vec.ctypes.data,
                            tag.ctypes.data, inputs.ctypes.data, out.ctypes.data)
    if n != c.num_constraints:
        raise AssertionError("neptune_host.cpp's neptune_hash: unsupported width")
    return out


def trace_native(inputs: np.ndarray, c: Constants | None = None) -> np.ndarray:
    """(B, num_constraints, 4) Fr: every allocated value for a (B, arity, 4) batch of preimages;
    the hash is the last column."""
    inputs = np.ascontiguousarray(inputs, dtype=np.uint64)
    if inputs.ndim != 3 or inputs.shape[2] != 4:
        raise ValueError(f"expected a (B, arity, 4) batch of preimages, got shape {inputs.shape}")
    c = c or constants(inputs.shape[1])
    if inputs.shape[1] != c.arity:
        raise ValueError(f"preimages of {inputs.shape[1]} elements for arity {c.arity}")
    lib = _lib()
    b = len(inputs)
    out = np.empty((b, c.num_constraints, 4), dtype=np.uint64)
    tag = field.vec_from_ints([c.tag])
    consts = c.packed_vec
    n = lib.neptune_trace(b, c.t, c.full_rounds, c.partial_rounds, consts.ctypes.data,
                          tag.ctypes.data, inputs.ctypes.data, out.ctypes.data)
    if n != c.num_constraints:
        raise AssertionError("neptune_host.cpp's neptune_trace and the gadget disagree on its length")
    return out


# --- the gadget (shape and values) -----------------------------------------------------------------

def _lc(terms: dict) -> LinearCombination:
    return LinearCombination({k: v for k, v in terms.items() if v % P})


def _scaled(lc_terms: dict, k: int) -> dict:
    return {v: c * k % P for v, c in lc_terms.items()}


def _add_into(acc: dict, terms: dict) -> None:
    for v, c in terms.items():
        acc[v] = (acc.get(v, 0) + c) % P


def poseidon_hash(s: Synth, preimage: Sequence[Num], arity: int | None = None,
                  consts: Constants | None = None) -> Num:
    """neptune's ``circuit::poseidon_hash`` over allocated numbers: the hash as an allocated Num.
    Values mode: the whole trace natively, appended to ``s.values`` as one FeBlock when
    ``s.blocks`` (else one (B, 4) array a variable). ``consts``: other constants of the arity
    (a custom domain tag, e.g. storage-proofs-update's GenRandomness), else the Merkle-tree ones."""
    c = consts or constants(arity or len(preimage))
    if len(preimage) != c.arity:
        raise ValueError(f"a preimage of {len(preimage)} for arity {c.arity}")
    trace = None
    if s.computing:
        trace = trace_native(np.stack([x.val for x in preimage], axis=1), c)
    shape = s.shape
    cs = s.cs
    keys = []  # keys of the allocated variables, in order
    if shape and consts is None and hasattr(cs, "instantiate"):  # TemplatingCS: one instance per arity
        tmpl = template(c.arity)
        start = len(cs._aux)
        cs.instantiate(tmpl, [x.lc for x in preimage])
        shape, keys = False, [-(start + tmpl.num_aux - 1) - 1]

    def alloc() -> int:
        if shape:
            k = cs.alloc()._key
            keys.append(k)
            return k
        return 0

    one = LinearCombination({0: 1})
    t, half = c.t, c.full_rounds // 2
    crc = c.crc
    if shape:
        el = [{0: 0}]  # element lcs as dicts (the tag's S-box result set below)
        el += [dict(x.lc.terms) for x in preimage]
        pre, post = crc[0:t], crc[t:2 * t]
        tag_out = (pow((c.tag + pre[0]) % P, 5, P) + post[0]) % P
        new = [{0: tag_out}]
        for i in range(1, t):
            (lv, lc1), = el[i].items() if len(el[i]) == 1 else [(None, None)]
            if lv is None or lc1 != 1:
                raise ValueError("poseidon_hash takes allocated numbers (one variable each)")
            a = _lc({lv: 1, 0: pre[i]})
            q = alloc()
            cs.enforce(a, a, LinearCombination({q: 1}), "squared sum constraint")
            q2 = alloc()
            cs.enforce(LinearCombination({q: 1}), LinearCombination({q: 1}), LinearCombination({q2: 1}),
                       "squaring constraint")
            r = alloc()
            cs.enforce(a, LinearCombination({q2: 1}), _lc({r: 1, 0: -post[i]}),
                       "mul sum constraint pre-post-add")
            new.append({r: 1})
        off = 2 * t
        rnd = 0

        def mds(el, rnd):
            if rnd == half - 1:
                mat = c.pre_sparse
            elif half - 1 < rnd < half + c.partial_rounds:
                i = rnd - half
                w, v = c.w_hat[i], c.v_rest[i]
                first: dict = {}
                for e, x in zip(el, w):
                    _add_into(first, _scaled(e, x))
                rest = []
                for j in range(1, t):
                    d = dict(el[j])
                    _add_into(d, _scaled(el[0], v[j - 1]))
                    rest.append(d)
                return [first] + rest
            else:
                mat = c.m
            res = []
            for j in range(t):
                acc: dict = {}
                for i in range(t):
                    _add_into(acc, _scaled(el[i], mat[i][j]))
                res.append(acc)
            return res

        def sbox(e: dict, k) -> dict:
            x = alloc()
            cs.enforce(_lc(e), one, LinearCombination({x: 1}), "enforce num allocation preserves lc")
            x2 = alloc()
            cs.enforce(LinearCombination({x: 1}), LinearCombination({x: 1}), LinearCombination({x2: 1}),
                       "squaring constraint")
            x4 = alloc()
            cs.enforce(LinearCombination({x2: 1}), LinearCombination({x2: 1}), LinearCombination({x4: 1}),
                       "squaring constraint")
            r = alloc()
            if k is None:
                cs.enforce(LinearCombination({x: 1}), LinearCombination({x4: 1}), LinearCombination({r: 1}),
                           "mul sum constraint")
            else:
                cs.enforce(LinearCombination({x: 1}), LinearCombination({x4: 1}), _lc({r: 1, 0: -k}),
                           "mul sum constraint post-add")
            return {r: 1}

        el = _later_rounds(c, crc, off, mds(new, rnd), rnd + 1, mds, sbox)
        h = alloc()
        cs.enforce(_lc(el[1]), one, LinearCombination({h: 1}), "enforce num allocation preserves lc")
        if len(keys) != c.num_constraints:
            raise AssertionError("neptune circuit: variable count")
    shape = s.shape
    if s.computing:
        if s.blocks:
            s.values.append(FeBlock(trace))
        else:
            s.values.extend(np.ascontiguousarray(trace[:, j]) for j in range(trace.shape[1]))
    return Num(LinearCombination({keys[-1]: 1}) if shape else None,
               np.ascontiguousarray(trace[:, -1]) if trace is not None else None)


class Template:
    """``poseidon_hash`` for one arity recorded once (slots: the preimage), for ``TemplatingCS``."""

    def __init__(self, arity: int):
        from ..builder import ConstraintSystem
        cs = ConstraintSystem(with_values=False)
        s = Synth(cs=cs)
        ins = [Num(cs.alloc_input().lc(), None) for _ in range(arity)]
        poseidon_hash(s, ins, arity)
        self.arity, self.slots, self.num_aux = arity, arity, cs.num_aux
        self.rows, self.names = cs._rows, cs._names
        self.outputs = np.array([self.num_aux - 1], dtype=np.int64)

    @property
    def num_constraints(self) -> int:
        return len(self.rows)


@functools.lru_cache(maxsize=None)
def template(arity: int) -> Template:
    return Template(arity)
