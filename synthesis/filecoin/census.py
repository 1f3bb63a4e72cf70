"""A census of Filecoin's StackedDRG PoRep circuit: constraints, auxiliary variables, inputs and
nonzeros, gadget by gadget, counted the way bellperson synthesizes them.

This is not the circuit (``synthesis.filecoin.circuit`` is): it replays rust-fil-proofs'
``StackedCircuit::synthesize`` (storage-proofs-porep/src/stacked/circuit/{proof,params}.rs) over a
counting constraint system that keeps only what the four numbers need: a variable counter and, per
constraint, the A, B and C linear combinations with bellpepper's semantics (repeated variables
merge, coefficients mod r, zero coefficients are not stored: curio's cuzk-pce RecordingCS skips
them). The gadgets are replayed from their Rust sources, constant folding included:

- bellpepper-core ``Boolean`` (Constant / Is / Not; xor, and, sha256_ch, sha256_maj fold constants),
  ``AllocatedBit::alloc`` (one booleanity constraint), ``AllocatedNum::to_bits_le`` (255 bits and one
  unpacking constraint), ``inputize``;
- bellperson ``UInt32`` (rotr, shr, xor, addmany with its result bits and ``MultiEq``: packing
  equations share a constraint until 254 bits are used), ``sha256`` (padding as constant bits,
  compression from the constant IV), ``multipack::pack_bits`` / ``pack_into_inputs``;
- storage-proofs-core ``PoRCircuit`` (index bits, path elements, ``insert_2/4/8`` with ``pick``,
  ``hash_multi_leaf_circuit``, the packed path input, the root equality), ``UInt64``, ``encode``;
- neptune ``circuit::poseidon_hash`` (the optimized constants' structure: the first round's
  pre-added keys and constant domain tag, every S-box input allocated, the pre-sparse matrix and
  the sparse partial rounds). Its coefficients are stand-ins with the real zero pattern (the MDS
  matrix and the pre-sparse matrix M x M' (neptune mds.rs factor_to_sparse_matrices) are dense,
  the sparse matrices are w_hat and v_rest around an identity): a sum of them cancels only by
  accident, so the counts are exact unless neptune's real constants cancel somewhere.

Every SHA-256 compression is counted once per pattern (which input and state bits are constants,
which repeat) and replayed; a 32 GiB partition counts in seconds. The bellperson prover's input
rows (``input_i * 0 = 0``, one per input, ONE included) are added at the end: Filecoin's published
numbers (curio ``cuzk-pce`` ``disk.rs``: 328 inputs, 130,169,893 aux, 130,278,869 constraints,
722,388,891 nonzeros for a 32 GiB partition) include them.
"""
from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass, field as dc_field

import numpy as np

from .. import field
from ..sha256_spec import IV, K
from . import params as fparams

R = field.MODULUS
CAPACITY = 254  # Fr::CAPACITY
NUM_BITS = 255  # Fr::NUM_BITS
ONE = 0  # variable 0 is ONE; Boolean encoding below: FALSE, TRUE, v (Is), -v (Not), v >= 2

FALSE, TRUE = 0, 1


@dataclass
class Tally:
    constraints: int = 0
    aux: int = 0
    inputs: int = 0
    nnz_a: int = 0
    nnz_b: int = 0
    nnz_c: int = 0

    @property
    def nnz(self) -> int:
        return self.nnz_a + self.nnz_b + self.nnz_c

    def add(self, o: "Tally", k: int = 1) -> None:
        self.constraints += k * o.constraints
        self.aux += k * o.aux
        self.inputs += k * o.inputs
        self.nnz_a += k * o.nnz_a
        self.nnz_b += k * o.nnz_b
        self.nnz_c += k * o.nnz_c

    def minus(self, o: "Tally") -> "Tally":
        return Tally(self.constraints - o.constraints, self.aux - o.aux, self.inputs - o.inputs,
                     self.nnz_a - o.nnz_a, self.nnz_b - o.nnz_b, self.nnz_c - o.nnz_c)

    def copy(self) -> "Tally":
        return Tally(**self.__dict__)

    def with_input_rows(self) -> "Tally":
        """Plus bellperson's prover rows ``input_i * 0 = 0`` (one A nonzero each): the counts
        Filecoin publishes (and cuzk-pce records) include them."""
        t = self.copy()
        t.constraints += t.inputs
        t.nnz_a += t.inputs
        return t

    def row(self) -> dict[str, int]:
        return {"constraints": self.constraints, "aux": self.aux, "inputs": self.inputs,
                "nonzeros": self.nnz}


class CountCS:
    """Counts; variables are integers (0 = ONE, inputs and aux share one id space). The
    variables with a nonzero coefficient in A and in B are kept too (the densities bellperson's
    prover and cuzk-pce's ``PreComputedDensity`` count): named ones in ``in_a``/``in_b``, a
    replayed compression's own variables as arrays in ``fresh_a``/``fresh_b``."""

    def __init__(self, track: bool = False):
        self.total = Tally(inputs=1)  # ONE
        self.track = track  # keep the densities (5x the CPU time at 32 GiB: 17.7 s, not 3.7 s)
        self.next_var = 2
        self.sections: dict[str, Tally] = {}
        self._stack: list[str] = []
        self.input_ids: set[int] = {ONE}
        self.in_a: set[int] = set()
        self.in_b: set[int] = set()
        self.fresh_a: list = []
        self.fresh_b: list = []

    def alloc(self) -> int:
        v = self.next_var
        self.next_var += 1
        self.total.aux += 1
        return v

    def alloc_input(self) -> int:
        v = self.next_var
        self.next_var += 1
        self.total.inputs += 1
        self.input_ids.add(v)
        return v

    def enforce(self, a: dict, b: dict, c: dict) -> None:
        t = self.total
        t.constraints += 1
        if self.track:
            self.in_a.update(v for v, x in a.items() if x % R)
            self.in_b.update(v for v, x in b.items() if x % R)
        t.nnz_a += sum(1 for x in a.values() if x % R)
        t.nnz_b += sum(1 for x in b.values() if x % R)
        t.nnz_c += sum(1 for x in c.values() if x % R)

    @contextmanager
    def section(self, name: str):
        """Attribute what the body adds to ``name`` (nested sections count in each)."""
        before = self.total.copy()
        yield
        self.sections.setdefault(name, Tally()).add(self.total.minus(before))


# --- linear combinations (dict var -> coeff mod r) -------------------------------------------

def lc_add(acc: dict, other: dict, k: int = 1) -> dict:
    for v, c in other.items():
        acc[v] = (acc.get(v, 0) + k * c) % R
    return acc


def blc(b: int, k: int = 1) -> dict:
    """Boolean::lc(one, k)."""
    if b == FALSE:
        return {}
    if b == TRUE:
        return {ONE: k % R}
    if b > 0:
        return {b: k % R}
    return {ONE: k % R, -b: (-k) % R}


def bnot(b: int) -> int:
    return 1 - b if b in (FALSE, TRUE) else -b


def is_const(b: int) -> bool:
    return b in (FALSE, TRUE)


# --- bellpepper-core Boolean / AllocatedBit ----------------------------------------------------

def alloc_bit(cs: CountCS) -> int:
    v = cs.alloc()
    cs.enforce({ONE: 1, v: R - 1}, {v: 1}, {})
    return v


def _abit_xor(cs: CountCS, a: int, b: int) -> int:
    r = cs.alloc()
    cs.enforce(lc_add({a: 1}, {a: 1}), {b: 1}, lc_add(lc_add({a: 1}, {b: 1}), {r: 1}, -1))
    return r


def bxor(cs: CountCS, a: int, b: int) -> int:
    if a == FALSE:
        return b
    if b == FALSE:
        return a
    if a == TRUE:
        return bnot(b)
    if b == TRUE:
        return bnot(a)
    if (a > 0) != (b > 0):  # Is ^ Not = not(Is ^ Is)
        is_, not_ = (a, b) if a > 0 else (b, a)
        return bnot(bxor(cs, is_, -not_))
    return _abit_xor(cs, abs(a), abs(b))


def band(cs: CountCS, a: int, b: int) -> int:
    if a == FALSE or b == FALSE:
        return FALSE
    if a == TRUE:
        return b
    if b == TRUE:
        return a
    r = cs.alloc()
    if a > 0 and b > 0:
        cs.enforce({a: 1}, {b: 1}, {r: 1})
    elif a < 0 and b < 0:  # nor
        cs.enforce({ONE: 1, -a: R - 1}, {ONE: 1, -b: R - 1}, {r: 1})
    else:  # and_not(is, not)
        is_, not_ = (a, -b) if a > 0 else (b, -a)
        cs.enforce({is_: 1}, {ONE: 1, not_: R - 1}, {r: 1})
    return r


def sha256_ch(cs: CountCS, a: int, b: int, c: int) -> int:
    if is_const(a) and is_const(b) and is_const(c):
        return TRUE if (a & b) ^ ((1 - a) & c) else FALSE
    if a == FALSE:
        return c
    if b == FALSE:
        return band(cs, bnot(a), c)
    if c == FALSE:
        return band(cs, a, b)
    if c == TRUE:
        return bnot(band(cs, a, bnot(b)))
    if b == TRUE:
        return bnot(band(cs, bnot(a), bnot(c)))
    ch = cs.alloc()
    cs.enforce(lc_add(blc(b), blc(c), -1), blc(a), lc_add({ch: 1}, blc(c), -1))
    return ch


def sha256_maj(cs: CountCS, a: int, b: int, c: int) -> int:
    if is_const(a) and is_const(b) and is_const(c):
        return TRUE if (a & b) ^ (a & c) ^ (b & c) else FALSE
    if a == FALSE:
        return band(cs, b, c)
    if b == FALSE:
        return band(cs, a, c)
    if c == FALSE:
        return band(cs, a, b)
    if c == TRUE:
        return bnot(band(cs, bnot(a), bnot(b)))
    if b == TRUE:
        return bnot(band(cs, bnot(a), bnot(c)))
    if a == TRUE:
        return bnot(band(cs, bnot(b), bnot(c)))
    maj = cs.alloc()
    bc = band(cs, b, c)
    lhs = lc_add(lc_add(lc_add(blc(bc), blc(bc)), blc(b), -1), blc(c), -1)
    cs.enforce(lhs, blc(a), lc_add(blc(bc), {maj: 1}, -1))
    return maj


# --- bellperson UInt32 / MultiEq ---------------------------------------------------------------

class MultiEq:
    def __init__(self, cs: CountCS):
        self.cs, self.bits_used, self.lhs, self.rhs = cs, 0, {}, {}

    def enforce_equal(self, num_bits: int, lhs: dict, rhs: dict) -> None:
        if CAPACITY <= self.bits_used + num_bits:
            self.flush()
        k = pow(2, self.bits_used, R)
        lc_add(self.lhs, lhs, k)
        lc_add(self.rhs, rhs, k)
        self.bits_used += num_bits

    def flush(self) -> None:
        if self.bits_used:
            self.cs.enforce(self.lhs, {ONE: 1}, self.rhs)
        self.bits_used, self.lhs, self.rhs = 0, {}, {}


def u32_const(x: int) -> list[int]:
    return [TRUE if (x >> i) & 1 else FALSE for i in range(32)]


def rotr(w: list[int], n: int) -> list[int]:
    return w[n:] + w[:n]


def shr(w: list[int], n: int) -> list[int]:
    return w[n:] + [FALSE] * n


def u32_xor(cs: CountCS, a: list[int], b: list[int]) -> list[int]:
    return [bxor(cs, x, y) for x, y in zip(a, b)]


def addmany(me: MultiEq, ops: list[list[int]]) -> list[int]:
    cs = me.cs
    lc: dict = {}
    all_const = True
    value = 0
    for op in ops:
        coeff = 1
        for i, bit in enumerate(op):
            lc_add(lc, blc(bit, coeff))
            all_const &= is_const(bit)
            coeff = coeff * 2
        if all_const:
            value += sum(1 << i for i, bit in enumerate(op) if bit == TRUE)
    if all_const:
        return u32_const(value & 0xFFFFFFFF)
    max_value = len(ops) * 0xFFFFFFFF
    bits, res = [], {}
    coeff = 1
    while max_value:
        b = alloc_bit(cs)
        res[b] = coeff % R
        bits.append(b)
        max_value >>= 1
        coeff *= 2
    me.enforce_equal(len(bits), lc, res)
    return bits[:32]




def _compression(cs: CountCS, block: list[int], state: list[list[int]]) -> list[list[int]]:
    """bellperson sha256_compression_function (block: 512 Booleans in SHA order)."""
    w = [block[32 * i:32 * i + 32][::-1] for i in range(16)]  # from_bits_be -> LE bits
    me = MultiEq(cs)
    for i in range(16, 64):
        s0 = u32_xor(cs, rotr(w[i - 15], 7), rotr(w[i - 15], 18))
        s0 = u32_xor(cs, s0, shr(w[i - 15], 3))
        s1 = u32_xor(cs, rotr(w[i - 2], 17), rotr(w[i - 2], 19))
        s1 = u32_xor(cs, s1, shr(w[i - 2], 10))
        w.append(addmany(me, [w[i - 16], s0, w[i - 7], s1]))

    def compute(m):
        return m[1] if m[0] == "c" else addmany(me, m[1])

    a, b, c, d = ("c", state[0]), state[1], state[2], state[3]
    e, f, g, h = ("c", state[4]), state[5], state[6], state[7]
    for i in range(64):
        ne = compute(e)
        s1 = u32_xor(cs, rotr(ne, 6), rotr(ne, 11))
        s1 = u32_xor(cs, s1, rotr(ne, 25))
        ch = [sha256_ch(cs, x, y, z) for x, y, z in zip(ne, f, g)]
        temp1 = [h, s1, ch, u32_const(K[i]), w[i]]
        na = compute(a)
        s0 = u32_xor(cs, rotr(na, 2), rotr(na, 13))
        s0 = u32_xor(cs, s0, rotr(na, 22))
        maj = [sha256_maj(cs, x, y, z) for x, y, z in zip(na, b, c)]
        h, g, f = g, f, ne
        e = ("d", temp1 + [d])
        d, c, b = c, b, na
        a = ("d", temp1 + [s0, maj])
    out = [addmany(me, a[1] + [state[0]]), addmany(me, [state[1], b]), addmany(me, [state[2], c]),
           addmany(me, [state[3], d]), addmany(me, e[1] + [state[4]]), addmany(me, [state[5], f]),
           addmany(me, [state[6], g]), addmany(me, [state[7], h])]
    me.flush()
    return out


def _pattern(bits: list[int]) -> tuple:
    """Bits with variables renamed by first occurrence (sign kept): the memo key."""
    names: dict[int, int] = {}
    out = []
    for b in bits:
        if is_const(b):
            out.append(b)
        else:
            k = names.setdefault(abs(b), len(names) + 2)
            out.append(k if b > 0 else -k)
    return tuple(out)


def _pattern_names(bits: list[int]) -> dict[int, int]:
    """``_pattern``'s name -> the variable it stands for."""
    real: dict[int, int] = {}
    names: dict[int, int] = {}
    for b in bits:
        if not is_const(b) and abs(b) not in names:
            names[abs(b)] = k = len(names) + 2
            real[k] = abs(b)
    return real


_MEMO: dict[tuple, tuple] = {}


def compression(cs: CountCS, block: list[int], state: list[list[int]]) -> list[list[int]]:
    """``_compression`` counted once per pattern: the tally is replayed and the output bits (all
    freshly allocated or constant) renamed to fresh variables."""
    key_bits = [b for word in state for b in word] + list(block)
    key = _pattern(key_bits)
    hit = _MEMO.get(key)
    if hit is None:
        sub = CountCS(track=True)  # memoized once, whoever asks first
        first = sub.next_var = max([abs(b) for b in key] + [1]) + 1
        before = sub.total.copy()
        out = _compression(sub, list(key[256:]), [list(key[32 * i:32 * i + 32]) for i in range(8)])
        flat = [b for word in out for b in word]
        if any(not is_const(b) and (b < 0 or b < first) for b in flat):
            raise AssertionError("a compression output is not a fresh variable")
        # densities: the pattern's names (inputs to the compression) and the fresh offsets in A, B
        dens = tuple((sorted(v for v in vs if v < first),
                      np.array(sorted(v - first for v in vs if v >= first), dtype=np.int64))
                     for vs in (sub.in_a, sub.in_b))
        # outputs: constants as they are, fresh variables as ("offset from the first fresh" + 2)
        hit = _MEMO[key] = (sub.total.minus(before), [b if is_const(b) else b - first + 2 for b in flat],
                            sub.next_var - first, dens)
    t, rel, span, dens = hit
    cs.total.add(t)
    base = cs.next_var
    cs.next_var += span
    if cs.track:
        real = _pattern_names(list(key_bits))
        for (named, fresh), into, arrays in zip(dens, (cs.in_a, cs.in_b), (cs.fresh_a, cs.fresh_b)):
            into.update(real[k] if k >= 2 else k for k in named)
            if len(fresh):
                arrays.append(fresh + base)
    flat = [b if is_const(b) else base + b - 2 for b in rel]
    return [flat[32 * i:32 * i + 32] for i in range(8)]


def sha256(cs: CountCS, bits: list[int]) -> list[int]:
    """bellperson sha256: padding as constants, one compression per block; SHA-order output."""
    n = len(bits)
    assert n % 8 == 0
    padded = list(bits) + [TRUE]
    while (len(padded) + 64) % 512:
        padded.append(FALSE)
    padded += [TRUE if (n >> i) & 1 else FALSE for i in range(63, -1, -1)]
    cur = [u32_const(x) for x in IV]
    for k in range(0, len(padded), 512):
        cur = compression(cs, padded[k:k + 512], cur)
    return [b for word in cur for b in word[::-1]]  # into_bits_be


# --- nums, packing ---------------------------------------------------------------------------

def alloc_num(cs: CountCS) -> int:
    return cs.alloc()


def inputize(cs: CountCS, v: int) -> int:
    i = cs.alloc_input()
    cs.enforce({i: 1}, {ONE: 1}, {v: 1})
    return i


def to_bits_le(cs: CountCS, v: int) -> list[int]:
    """AllocatedNum::to_bits_le: 255 allocated bits, one unpacking constraint (A = B = 0)."""
    bits = [alloc_bit(cs) for _ in range(NUM_BITS)]
    lc = {b: pow(2, i, R) for i, b in enumerate(bits)}
    lc_add(lc, {v: 1}, -1)
    cs.enforce({}, {}, lc)
    return bits


def reverse_bit_numbering(bits: list[int]) -> list[int]:
    padded = list(bits) + [FALSE] * (-len(bits) % 8)
    return [b for i in range(0, len(padded), 8) for b in padded[i:i + 8][::-1]]


def pack_bits(cs: CountCS, bits: list[int]) -> int:
    lc: dict = {}
    for i, b in enumerate(bits[:CAPACITY]):
        lc_add(lc, blc(b, pow(2, i, R)))
    v = cs.alloc()
    cs.enforce(lc, {ONE: 1}, {v: 1})
    return v


def pack_into_inputs(cs: CountCS, bits: list[int]) -> None:
    for k in range(0, len(bits), CAPACITY):
        lc: dict = {}
        for i, b in enumerate(bits[k:k + CAPACITY]):
            lc_add(lc, blc(b, pow(2, i, R)))
        inp = cs.alloc_input()
        cs.enforce(lc, {ONE: 1}, {inp: 1})


def equal(cs: CountCS, a: int, b: int) -> None:
    cs.enforce({a: 1}, {ONE: 1}, {b: 1})


# --- neptune Poseidon (circuit.rs), with stand-in constants of the real zero pattern -----------

_RP = {3: 55, 5: 56, 9: 57, 12: 57}


@dataclass
class _PConst:
    t: int
    m: list
    pre_sparse: list
    w_hat: list
    v_rest: list
    rc: list = dc_field(default_factory=list)


_PCONST: dict[int, _PConst] = {}


def _pconst(t: int) -> _PConst:
    c = _PCONST.get(t)
    if c is None:
        rng = random.Random(t)
        rnd = lambda: rng.randrange(1, R)  # noqa: E731
        m = [[rnd() for _ in range(t)] for _ in range(t)]
        pre = [[rnd() for _ in range(t)] for _ in range(t)]  # M x M' of the last factoring: dense
        rp = _RP[t]
        c = _PCONST[t] = _PConst(t, m, pre, [[rnd() for _ in range(t)] for _ in range(rp)],
                                 [[rnd() for _ in range(t - 1)] for _ in range(rp)])
    return c


def _ensure_alloc(cs: CountCS, e: tuple) -> int:
    kind, x = e
    if kind == "a":
        return x
    v = cs.alloc()
    cs.enforce(x, {ONE: 1}, {v: 1})
    return v


def _elt_lc(e: tuple) -> dict:
    return {e[1]: 1} if e[0] == "a" else e[1]


def _scalar_product(elts: list, scalars: list) -> tuple:
    acc: dict = {}
    for e, k in zip(elts, scalars):
        lc_add(acc, _elt_lc(e), k)
    return ("n", {v: c for v, c in acc.items() if c})


def _sbox(cs: CountCS, e: tuple, post: bool) -> tuple:
    x = _ensure_alloc(cs, e)
    x2 = cs.alloc()
    cs.enforce({x: 1}, {x: 1}, {x2: 1})
    x4 = cs.alloc()
    cs.enforce({x2: 1}, {x2: 1}, {x4: 1})
    x5 = cs.alloc()
    cs.enforce({x: 1}, {x4: 1}, {x5: 1, ONE: 7} if post else {x5: 1})
    return ("a", x5)


def _sbox_pre_add(cs: CountCS, e: tuple) -> tuple:
    x = _ensure_alloc(cs, e)
    x2 = cs.alloc()
    cs.enforce({x: 1, ONE: 5}, {x: 1, ONE: 5}, {x2: 1})
    x4 = cs.alloc()
    cs.enforce({x2: 1}, {x2: 1}, {x4: 1})
    x5 = cs.alloc()
    cs.enforce({x: 1, ONE: 5}, {x4: 1}, {x5: 1, ONE: 7})
    return ("a", x5)


def poseidon_hash(cs: CountCS, inputs: list[int]) -> int:
    """neptune circuit::poseidon_hash(preimage, constants) for arity len(inputs)."""
    t = len(inputs) + 1
    c = _pconst(t)
    rp = _RP[t]
    elts: list = [("n", {ONE: 3})] + [("a", x) for x in inputs]
    rnd = 0

    def mds():
        nonlocal elts, rnd
        if rnd == 3:
            mat = c.pre_sparse
            elts = [_scalar_product(elts, [mat[i][j] for i in range(t)]) for j in range(t)]
        elif 3 < rnd < 4 + rp:
            k = rnd - 4
            first = _scalar_product(elts, c.w_hat[k])
            e0 = _elt_lc(elts[0])
            rest = []
            for j in range(1, t):
                acc = dict(_elt_lc(elts[j]))
                lc_add(acc, e0, c.v_rest[k][j - 1])
                rest.append(("n", {v: x for v, x in acc.items() if x}))
            elts = [first] + rest
        else:
            elts = [_scalar_product(elts, [c.m[i][j] for i in range(t)]) for j in range(t)]
        rnd += 1

    # first round: element 0 (the domain tag) is computed natively, the inputs pre-add their key
    elts = [("n", {ONE: 11})] + [_sbox_pre_add(cs, e) for e in elts[1:]]
    mds()
    for _ in range(3):
        elts = [_sbox(cs, e, True) for e in elts]
        mds()
    for _ in range(rp):
        elts[0] = _sbox(cs, elts[0], True)
        mds()
    for _ in range(3):
        elts = [_sbox(cs, e, True) for e in elts]
        mds()
    elts = [_sbox(cs, e, False) for e in elts]
    mds()
    return _ensure_alloc(cs, elts[1])


# --- storage-proofs-core gadgets ---------------------------------------------------------------

def pick(cs: CountCS, cond: int, a: int, b: int) -> int:
    """insertion.rs pick: c = cond ? a : b; (b - a) * cond = b - c."""
    c = cs.alloc()
    cs.enforce(lc_add({b: 1}, {a: 1}, -1), blc(cond), lc_add({b: 1}, {c: 1}, -1))
    return c


def insert(cs: CountCS, element: int, bits: list[int], elements: list[int]) -> list[int]:
    size = len(elements) + 1
    a = element
    if size == 2:
        return [pick(cs, bits[0], elements[0], a), pick(cs, bits[0], a, elements[0])]
    if size == 4:
        b0, b1 = bits
        b, c, d = elements
        p0 = pick(cs, b1, b, pick(cs, b0, b, a))
        p1 = pick(cs, b1, c, pick(cs, b0, a, b))
        p2 = pick(cs, b1, pick(cs, b0, d, a), c)
        p3 = pick(cs, b1, pick(cs, b0, a, d), d)
        return [p0, p1, p2, p3]
    if size == 8:
        b0, b1, b2 = bits
        b, c, d, e, f, g, h = elements
        nor = band(cs, -b0, -b1)  # AllocatedBit::nor: (1 - b0)(1 - b1) = r
        and_ = band(cs, b0, b1)
        p0 = pick(cs, b2, b, pick(cs, nor, a, b))
        p1 = pick(cs, b2, c, pick(cs, b1, c, pick(cs, b0, a, b)))
        p2 = pick(cs, b2, d, pick(cs, b1, pick(cs, b0, d, a), c))
        p3 = pick(cs, b2, e, pick(cs, and_, a, d))
        p4 = pick(cs, b2, pick(cs, nor, a, f), e)
        p5 = pick(cs, b2, pick(cs, b1, g, pick(cs, b0, a, f)), f)
        p6 = pick(cs, b2, pick(cs, b1, pick(cs, b0, h, a), g), g)
        p7 = pick(cs, b2, pick(cs, and_, a, h), h)
        return [p0, p1, p2, p3, p4, p5, p6, p7]
    raise ValueError(f"insert: arity {size} is not 2, 4 or 8")


def sha256_hash_multi_leaf(cs: CountCS, leaves: list[int]) -> int:
    """filecoin-hashers Sha256Function::hash_multi_leaf_circuit (TreeD): each leaf's 255 bits,
    padded to 256, bytes reversed to SHA order; SHA-256; the first 254 bits (LE bytes) packed."""
    bits: list[int] = []
    for leaf in leaves:
        le = to_bits_le(cs, leaf) + [FALSE]
        bits += [b for i in range(0, 256, 8) for b in le[i:i + 8][::-1]]
    be = sha256(cs, bits)
    le = [b for i in range(0, 256, 8) for b in be[i:i + 8][::-1]]
    return pack_bits(cs, le[:CAPACITY])


def por(cs: CountCS, leaf: int, root: int, arities: tuple[int, ...], sha: bool) -> None:
    """PoRCircuit::synthesize with Root::Var leaf and root, private: base/sub/top levels, each
    index bits then path elements, insert, hash; the index bits packed into inputs; root equal."""
    cur, path_bits = leaf, []
    for arity in arities:
        with cs.section("por: index bits"):
            bits = [alloc_bit(cs) for _ in range(arity.bit_length() - 1)]
        path_bits += bits
        sibs = [alloc_num(cs) for _ in range(arity - 1)]
        with cs.section(f"por: insert {arity}"):
            ins = insert(cs, cur, bits, sibs)
        if sha:
            with cs.section("TreeD: SHA-256 node hash"):
                cur = sha256_hash_multi_leaf(cs, ins)
        else:
            with cs.section(f"Poseidon arity {arity}"):
                cur = poseidon_hash(cs, ins)
    with cs.section("por: packed path input"):
        pack_into_inputs(cs, path_bits)
    equal(cs, cur, root)


# --- create_label and the stacked circuit --------------------------------------------------------

def u64_alloc(cs: CountCS) -> list[int]:
    return [alloc_bit(cs) for _ in range(64)]  # LE


def create_label(cs: CountCS, replica_id_bits: list[int], parents: list[list[int]], layer: int,
                 node_le: list[int]) -> int:
    """create_label_circuit: replica id | layer u32 BE | node u64 BE | zeros to 512 | each parent's
    256 bits; SHA-256; the first 254 bits (bit order reversed per byte) packed."""
    assert len(parents) == fparams.TOTAL_PARENTS
    msg = list(replica_id_bits) + [FALSE] * (256 - len(replica_id_bits))
    msg += [TRUE if (layer >> i) & 1 else FALSE for i in range(31, -1, -1)]
    msg += node_le[::-1]
    msg += [FALSE] * (512 - len(msg))
    for p in parents:
        msg += p
        msg += [FALSE] * (-len(msg) % 256)
    assert len(msg) == (2 + fparams.TOTAL_PARENTS) * 256
    with cs.section("label: SHA-256"):
        be = sha256(cs, msg)
    bits = reverse_bit_numbering(be)
    with cs.section("label: pack"):
        return pack_bits(cs, bits[:CAPACITY])


def expand_parents(parents: list, layer: int) -> list:
    if layer > 1:
        return parents + parents + parents[:9]
    return parents * 6 + [parents[0]]


def column_hash(cs: CountCS, rows: list[int]) -> int:
    with cs.section(f"column hash (Poseidon arity {len(rows)})"):
        return poseidon_hash(cs, rows)


def challenge_block(cs: CountCS, prm: fparams.FilecoinParams, comm_d: int, comm_c: int,
                    comm_r_last: int, replica_id_bits: list[int]) -> None:
    """stacked/circuit/params.rs Proof::synthesize, one challenge."""
    L = prm.layers
    data_leaf = alloc_num(cs)
    with cs.section("TreeD inclusion"):
        por(cs, data_leaf, comm_d, (2,) * prm.tree_d_depth, sha=True)
    cols = []
    for _ in range(prm.drg_parents + prm.exp_parents):
        with cs.section("parent columns"):
            col = [alloc_num(cs) for _ in range(L)]
        h = column_hash(cs, col)
        with cs.section("parent TreeC inclusion"):
            por(cs, h, comm_c, prm.tree_c_arities, sha=False)
        cols.append(col)
    drg, exp = cols[:prm.drg_parents], cols[prm.drg_parents:]
    with cs.section("challenge UInt64 + input"):
        node = u64_alloc(cs)
        pack_into_inputs(cs, node)
    labels = []
    for layer in range(1, L + 1):
        parents = []
        with cs.section("parent label bits"):
            for col in drg:
                parents.append(reverse_bit_numbering(to_bits_le(cs, col[layer - 1])))
            if layer > 1:
                for col in exp:
                    parents.append(reverse_bit_numbering(to_bits_le(cs, col[layer - 2])))
        labels.append(create_label(cs, replica_id_bits, expand_parents(parents, layer), layer, node))
    with cs.section("encode"):
        key, enc = labels[-1], cs.alloc()
        cs.enforce({key: 1, data_leaf: 1}, {ONE: 1}, {enc: 1})
    with cs.section("TreeR inclusion"):
        por(cs, enc, comm_r_last, prm.tree_r_arities, sha=False)
    h = column_hash(cs, labels)
    with cs.section("own TreeC inclusion"):
        por(cs, h, comm_c, prm.tree_c_arities, sha=False)


def header(cs: CountCS) -> tuple[int, int, int, list[int]]:
    """StackedCircuit::synthesize before the challenges."""
    with cs.section("header"):
        rid = alloc_num(cs)
        inputize(cs, rid)
        rid_bits = reverse_bit_numbering(to_bits_le(cs, rid))
        comm_d = alloc_num(cs)
        inputize(cs, comm_d)
        comm_r = alloc_num(cs)
        inputize(cs, comm_r)
        comm_r_last = alloc_num(cs)
        comm_c = alloc_num(cs)
        h = poseidon_hash(cs, [comm_c, comm_r_last])
        equal(cs, comm_r, h)
    return comm_d, comm_c, comm_r_last, rid_bits


@dataclass
class Census:
    name: str
    synthesized: Tally       # what StackedCircuit::synthesize allocates and enforces (ONE in inputs)
    header: Tally
    challenge: Tally
    challenges: int
    sections: dict[str, Tally]   # per challenge, gadget by gadget
    #: auxiliary variables with a nonzero coefficient in A, in B; inputs (ONE included) in B
    a_aux: int = 0
    b_aux: int = 0
    b_inputs: int = 0

    @property
    def with_input_rows(self) -> Tally:
        return self.synthesized.with_input_rows()


def census(prm: fparams.FilecoinParams | str, *, densities: bool = False) -> Census:
    """Count one partition: the header and one challenge block (every challenge has the same
    shape), the challenge counted ``challenges`` times; ``densities``: the A/B densities too."""
    prm = fparams.get(prm) if isinstance(prm, str) else prm
    cs = CountCS(track=densities)
    comm_d, comm_c, comm_r_last, rid_bits = header(cs)
    head = cs.total.copy()
    head_next = cs.next_var
    cs.sections.clear()
    challenge_block(cs, prm, comm_d, comm_c, comm_r_last, rid_bits)
    one = cs.total.minus(head)
    total = head.copy()
    total.add(one, prm.challenges)
    out = Census(prm.name, total, head, one, prm.challenges, dict(cs.sections))
    if not densities:
        return out
    # densities: a header variable counts once however many challenges use it, a challenge
    # block's own variables once per challenge (every block has the same shape)
    inputs = np.array(sorted(cs.input_ids), dtype=np.int64)
    for which, named, fresh in (("a", cs.in_a, cs.fresh_a), ("b", cs.in_b, cs.fresh_b)):
        ids = np.unique(np.concatenate([np.fromiter(named, dtype=np.int64, count=len(named))] + fresh))
        if which == "b":
            out.b_inputs = int(np.isin(inputs[inputs < head_next], ids).sum()) + \
                prm.challenges * int(np.isin(inputs[inputs >= head_next], ids).sum())
        aux = ids[~np.isin(ids, inputs)]
        n = int((aux < head_next).sum()) + prm.challenges * int((aux >= head_next).sum())
        setattr(out, f"{which}_aux", n)
    return out


#: curio extern/cuzk/cuzk-pce/src/disk.rs test_header_roundtrip: one 32 GiB partition
FILECOIN_32G = {"inputs": 328, "aux": 130_169_893, "constraints": 130_278_869, "nonzeros": 722_388_891}
#: curio extern/cuzk/cuzk-project.md "PCE Extraction": nonzeros of A (with the 328 input rows), B, C
FILECOIN_32G_MATRICES = (309_405_051, 130_327_340, 282_656_500)
#: the same table: a_aux_density, b_aux_density, b_input_density popcounts
FILECOIN_32G_DENSITIES = (129_753_292, 33_112_281, 1)
