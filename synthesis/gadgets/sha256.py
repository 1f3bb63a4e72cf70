"""SHA-256 over bits (FIPS 180-4), written once for constraint shape and witness values, and the
SHA-254 truncation Filecoin uses to turn a digest into a field element.

Bit strings are ``Bits``: per bit a LinearCombination (shape mode) and/or a (B, n) uint8 array
(values mode), in SHA's order (byte after byte, most significant bit first), plus a structural
mask of which bits are constants (the same in both modes, so both allocate the same variables).

Constraints of one compression (``compress``), every input bit a variable or a constant:
  message schedule, 48 words: sigma0 61 + sigma1 54 + the 4-term sum's 34 result bits   7,152
  64 rounds: Sigma1 64 + ch 32 + Sigma0 64 + maj 64                                   14,336
  63 materialized e and a (35 result bits each; round 0 takes them from the state)     4,410
  final state addition (35 + 33 x 6 + 35 bits)                                           268
  packing equations of the 182 additions, 7 to a constraint (MultiEq)                     26
  total                                                                               26,192
  (a block whose message is constant, SHA's padding block after a 64-byte message: the
  schedule is computed natively and folded into the round constants: 19,040)
Why these: a 2-input XOR is one constraint ((2a) * b = a + b - x, x determined, no booleanity
needed), a 3-input XOR two (it is cubic on the cube); ch(e, f, g) = e (f - g) + g is one;
maj(a, b, c) = bc + a (b + c - 2bc) two (bc, then the rest); additions never allocate the sum,
only its bits (booleanity each), and the linear "bits pack to the sum" equations of up to 7
additions share one constraint (each side < 2^35, 7 x 35 < 253 bits, so equality mod r is
equality of every 35-bit digit). Sums are deferred as bellman does: e and a are materialized
where first used, the last round's go straight into the final addition. bellman's
``sha256_compression_function`` counts 25,840 with a constant IV (its first rounds fold the
constant state); with a variable state, as every chained block here has, it is ~26.2k as ours.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import field
from ..builder import ONE, ConstraintSystem, LinearCombination
from ..sha256_spec import IV, K
from .core import Num, Synth

M32 = 0xFFFFFFFF
#: MultiEq: additions whose packing equations share one constraint (each spans <= 35 bits)
PACK_BITS = 245


# --- plain SHA-256 pieces (the definition the gadget is tested against, with hashlib) ---------

def _rotr(x: int, n: int) -> int:
    return ((x >> n) | (x << (32 - n))) & M32


def schedule(words: Sequence[int]) -> list[int]:
    """The 64 message-schedule words of one block of 16 words."""
    w = list(words)
    for t in range(16, 64):
        s0 = _rotr(w[t - 15], 7) ^ _rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
        s1 = _rotr(w[t - 2], 17) ^ _rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
        w.append((w[t - 16] + s0 + w[t - 7] + s1) & M32)
    return w


def pad(nbytes: int) -> bytes:
    """SHA-256's padding after a message of ``nbytes`` bytes: 0x80, zeros, the bit length (u64 BE)."""
    return b"\x80" + b"\0" * ((55 - nbytes) % 64) + (8 * nbytes).to_bytes(8, "big")


def sha254(data: bytes) -> bytes:
    """SHA-256 with the top two bits of the last byte cleared (Filecoin's ``trim_bytes_to_fr_safe``):
    read little-endian, the digest is then below 2^254 < r, a field element."""
    d = bytearray(hashlib.sha256(data).digest())
    d[31] &= 0x3F
    return bytes(d)


def fr_from_digest(d: bytes) -> int:
    return int.from_bytes(d, "little")


# --- Bits -------------------------------------------------------------------------------------

class Bits:
    """A bit string in SHA order. ``cmask[i]`` is -1 for a variable bit, 0/1 for a constant."""

    __slots__ = ("lcs", "val", "cmask")

    def __init__(self, lcs: list | None, val: np.ndarray | None, cmask: np.ndarray):
        self.lcs, self.val, self.cmask = lcs, val, np.asarray(cmask, dtype=np.int8)

    def __len__(self) -> int:
        return len(self.cmask)

    def __getitem__(self, sl: slice) -> "Bits":
        return Bits(self.lcs[sl] if self.lcs is not None else None,
                    self.val[:, sl] if self.val is not None else None, self.cmask[sl])

    @staticmethod
    def concat(parts: Sequence["Bits"]) -> "Bits":
        lcs = [x for p in parts for x in p.lcs] if parts[0].lcs is not None else None
        val = np.concatenate([p.val for p in parts], axis=1) if parts[0].val is not None else None
        return Bits(lcs, val, np.concatenate([p.cmask for p in parts]))

    @staticmethod
    def const(s: Synth, bits: Sequence[int]) -> "Bits":
        bits = np.asarray(bits, dtype=np.int8)
        lcs = [LinearCombination.of(int(b)) for b in bits] if s.shape else None
        val = np.ascontiguousarray(np.broadcast_to(bits.astype(np.uint8), (s.batch, len(bits)))) \
            if s.computing else None
        return Bits(lcs, val, bits)

    @staticmethod
    def of_bytes(s: Synth, data: bytes) -> "Bits":
        return Bits.const(s, np.unpackbits(np.frombuffer(data, dtype=np.uint8)))


def alloc_bits(s: Synth, n: int, value, name: str = "bit") -> Bits:
    """n fresh boolean-constrained variables (values: ``value()`` (B, n) uint8)."""
    lcs, val = s.alloc_bits(n, value)
    if s.shape:
        for lc in lcs:
            s.cs.enforce(lc, ONE - lc, 0, f"{name} is boolean")
    return Bits(lcs, val, np.full(n, -1, dtype=np.int8))


def bits_to_num(s: Synth, bits: Bits) -> Num:
    """The field element whose 32-byte little-endian encoding is ``bits`` (SHA order: byte i,
    most significant bit first): a linear combination, no constraint."""
    if len(bits) != 256:
        raise ValueError("bits_to_num takes 256 bits")
    lc = val = None
    if s.shape:
        lc = LinearCombination()
        for i, b in enumerate(bits.lcs):
            byte, j = divmod(i, 8)
            lc = lc + b * (1 << (8 * byte + 7 - j))
    if s.computing:
        val = np.packbits(bits.val, axis=1).view("<u8").reshape(-1, 4).copy()
    return Num(lc, val)


def num_to_bits(s: Synth, x: Num, name: str = "fr bits") -> Bits:
    """The 256 bits (SHA order) of x's little-endian encoding, for x < 2^254 (labels, TreeD nodes,
    replica ids and data are SHA-254 outputs or Fr32-safe): 254 booleans and one packing
    constraint; the top two bits are constant zeros. A value >= 2^254 cannot satisfy it."""
    val = None
    if s.computing:
        if np.any(x.val[:, 3] >> np.uint64(62)):
            raise ValueError("num_to_bits: value is not below 2^254")
        val = np.unpackbits(np.ascontiguousarray(x.val, dtype="<u8").view(np.uint8), axis=1)
    var = np.ones(256, dtype=bool)
    var[[248, 249]] = False  # byte 31's two most significant bits
    idx = np.flatnonzero(var)
    b = alloc_bits(s, len(idx), lambda: val[:, idx], name)
    lcs = None
    if s.shape:
        lcs = [LinearCombination()] * 256
        for k, i in enumerate(idx):
            lcs[i] = b.lcs[k]
    cmask = np.where(var, -1, 0).astype(np.int8)
    out = Bits(lcs, None if val is None else np.where(var, val, 0).astype(np.uint8), cmask)
    if s.shape:
        s.cs.enforce(bits_to_num(s, out).lc, ONE, x.lc, f"{name} pack")
    return out


def cond_swap_bits(s: Synth, bit: Num, a: Bits, b: Bits) -> tuple[Bits, Bits]:
    """(a, b) if bit == 0 else (b, a), bit by bit: left = a + bit (b - a), right = b + bit (a - b),
    one constraint each; bits constant in both stay constant (they must agree)."""
    if not np.array_equal(a.cmask >= 0, b.cmask >= 0) or np.any(a.cmask[a.cmask >= 0] != b.cmask[a.cmask >= 0]):
        raise ValueError("cond_swap_bits: constant bits must agree")
    var = np.flatnonzero(a.cmask < 0)
    sel = (bit.val[:, 0] == 1)[:, None] if s.computing else None
    lv = rv = None
    if s.computing:
        lv = np.where(sel, b.val, a.val).astype(np.uint8)
        rv = np.where(sel, a.val, b.val).astype(np.uint8)
    llcs, _ = s.alloc_bits(len(var), lambda: lv[:, var])
    rlcs, _ = s.alloc_bits(len(var), lambda: rv[:, var])
    left_l = right_l = None
    if s.shape:
        left_l, right_l = list(a.lcs), list(b.lcs)
        for k, i in enumerate(var):
            s.cs.enforce(bit.lc, b.lcs[i] - a.lcs[i], llcs[k] - a.lcs[i], "swap left")
            s.cs.enforce(bit.lc, a.lcs[i] - b.lcs[i], rlcs[k] - b.lcs[i], "swap right")
            left_l[i], right_l[i] = llcs[k], rlcs[k]
    return Bits(left_l, lv, a.cmask), Bits(right_l, rv, a.cmask)


# --- the compression function, directly (both modes; the definition of the template) --------

class _Word:
    """32 bits, bit i of weight 2^i: LCs (shape) and/or a (B,) uint32 array (values). ``zero``
    marks bits that are structurally 0 (a right shift's top bits)."""

    __slots__ = ("lcs", "val", "zero")

    def __init__(self, lcs, val, zero=None):
        self.lcs, self.val, self.zero = lcs, val, zero if zero is not None else np.zeros(32, bool)


def _u32_bits(x: np.ndarray) -> np.ndarray:
    return ((x[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)


class _Compressor:
    """One compression's gadget state: the MultiEq accumulator and the allocation helpers."""

    def __init__(self, s: Synth):
        self.s = s
        self.pack_lc: LinearCombination | None = LinearCombination() if s.shape else None
        self.pack_used = 0

    def alloc_word_bits(self, value, n: int = 32) -> list:
        lcs, _ = self.s.alloc_bits(n, lambda: _u32_bits(value())[:, :n])
        return lcs

    def rotr(self, w: _Word, n: int) -> _Word:
        lcs = [w.lcs[(i + n) % 32] for i in range(32)] if self.s.shape else None
        val = ((w.val >> np.uint32(n)) | (w.val << np.uint32(32 - n))) if self.s.computing else None
        return _Word(lcs, val, np.roll(w.zero, -n))

    def shr(self, w: _Word, n: int) -> _Word:
        zero = np.zeros(32, bool)
        zero[32 - n:] = True
        lcs = [w.lcs[i + n] if i + n < 32 else LinearCombination() for i in range(32)] if self.s.shape else None
        val = (w.val >> np.uint32(n)) if self.s.computing else None
        return _Word(lcs, val, zero)

    def xor2_bits(self, a: _Word, b: _Word, idx: np.ndarray, val) -> list:
        """x_i = a_i xor b_i for i in idx: (2 a_i) * b_i = a_i + b_i - x_i."""
        lcs, _ = self.s.alloc_bits(len(idx), lambda: _u32_bits(val())[:, idx])
        if self.s.shape:
            for k, i in enumerate(idx):
                self.s.cs.enforce(a.lcs[i] * 2, b.lcs[i], a.lcs[i] + b.lcs[i] - lcs[k], "sha xor")
        return lcs

    def xor3(self, a: _Word, b: _Word, c: _Word) -> _Word:
        """a xor b (32 variables), then xor c where c is not structurally zero."""
        s = self.s
        all_idx = np.arange(32)
        t_val = (lambda: a.val ^ b.val) if s.computing else None
        t = _Word(self.xor2_bits(a, b, all_idx, t_val), a.val ^ b.val if s.computing else None)
        idx = np.flatnonzero(~c.zero)
        x_val = (lambda: t.val ^ c.val) if s.computing else None
        x_lcs = self.xor2_bits(t, c, idx, x_val)
        lcs = None
        if s.shape:
            lcs = list(t.lcs)
            for k, i in enumerate(idx):
                lcs[i] = x_lcs[k]
        return _Word(lcs, t.val ^ c.val if s.computing else None)

    def ch(self, e: _Word, f: _Word, g: _Word) -> _Word:
        s = self.s
        v = ((e.val & f.val) ^ (~e.val & g.val)) if s.computing else None
        lcs = self.alloc_word_bits(lambda: v)
        if s.shape:
            for i in range(32):
                s.cs.enforce(e.lcs[i], f.lcs[i] - g.lcs[i], lcs[i] - g.lcs[i], "sha ch")
        return _Word(lcs, v)

    def maj(self, a: _Word, b: _Word, c: _Word) -> _Word:
        s = self.s
        p = (b.val & c.val) if s.computing else None
        m = ((a.val & b.val) ^ (a.val & c.val) ^ p) if s.computing else None
        plcs = self.alloc_word_bits(lambda: p)
        mlcs = self.alloc_word_bits(lambda: m)
        if s.shape:
            for i in range(32):
                s.cs.enforce(b.lcs[i], c.lcs[i], plcs[i], "sha maj bc")
                s.cs.enforce(plcs[i] * 2 - b.lcs[i] - c.lcs[i], a.lcs[i], plcs[i] - mlcs[i], "sha maj")
        return _Word(mlcs, m)

    def add(self, terms: Sequence) -> _Word:
        """Sum of words and int constants mod 2^32: only the sum's bits are allocated."""
        s = self.s
        words = [t for t in terms if isinstance(t, _Word)]
        const = sum(t for t in terms if isinstance(t, int))
        nbits = (len(words) * M32 + const).bit_length()
        total = None
        if s.computing:
            total = np.full(s.batch, const, dtype=np.uint64)
            for w in words:
                total += w.val.astype(np.uint64)
        lcs, _ = s.alloc_bits(nbits, lambda: ((total[:, None] >> np.arange(nbits, dtype=np.uint64))
                                               & np.uint64(1)).astype(np.uint8))
        if s.shape:
            for lc in lcs:
                s.cs.enforce(lc, ONE - lc, 0, "sha sum bit is boolean")
            diff = LinearCombination()
            for i, lc in enumerate(lcs):
                diff = diff + lc * (1 << i)
            diff = diff - const
            for w in words:
                for i, lc in enumerate(w.lcs):
                    diff = diff - lc * (1 << i)
            if self.pack_used + nbits > PACK_BITS:
                self.flush()
            self.pack_lc = self.pack_lc + diff * (1 << self.pack_used)
            self.pack_used += nbits
        return _Word(lcs[:32] if s.shape else None,
                     (total & np.uint64(M32)).astype(np.uint32) if s.computing else None)

    def flush(self) -> None:
        if self.s.shape and self.pack_used:
            self.s.cs.enforce(self.pack_lc, ONE, 0, "sha additions pack (MultiEq)")
        self.pack_lc = LinearCombination() if self.s.shape else None
        self.pack_used = 0


def _words(s: Synth, bits: Bits) -> list[_Word]:
    """Bits (SHA order, 32 per word, MSB first) as _Words."""
    out = []
    for j in range(len(bits) // 32):
        lcs = [bits.lcs[32 * j + 31 - i] for i in range(32)] if s.shape else None
        val = None
        if s.computing:
            val = np.packbits(bits.val[:, 32 * j:32 * j + 32], axis=1).view(">u4")[:, 0].astype(np.uint32)
        out.append(_Word(lcs, val))
    return out


def _compress_direct(s: Synth, state: Bits, block: Bits | None, const_words=None) -> Bits:
    """The compression gadget itself (see the module docstring for its constraints and the order
    of its variables, which sha256_host.cpp reproduces). ``block`` None: the message is the
    constant ``const_words`` (16 ints)."""
    c = _Compressor(s)
    H = _words(s, state)
    if block is None:
        W = schedule(const_words)
    else:
        W = _words(s, block)
        for t in range(16, 64):
            s0 = c.xor3(c.rotr(W[t - 15], 7), c.rotr(W[t - 15], 18), c.shr(W[t - 15], 3))
            s1 = c.xor3(c.rotr(W[t - 2], 17), c.rotr(W[t - 2], 19), c.shr(W[t - 2], 10))
            W.append(c.add([W[t - 16], s0, W[t - 7], s1]))
    a, b, cc, d, e, f, g, h = H
    a_terms = e_terms = None
    for t in range(64):
        if e_terms is not None:
            e = c.add(e_terms)
        S1 = c.xor3(c.rotr(e, 6), c.rotr(e, 11), c.rotr(e, 25))
        ch = c.ch(e, f, g)
        if a_terms is not None:
            a = c.add(a_terms)
        S0 = c.xor3(c.rotr(a, 2), c.rotr(a, 13), c.rotr(a, 22))
        mj = c.maj(a, b, cc)
        t1 = [h, S1, ch, (K[t] + W[t]) & M32] if block is None else [h, S1, ch, K[t], W[t]]
        h, g, f = g, f, e
        e_terms = t1 + [d]
        d, cc, b = cc, b, a
        a_terms = t1 + [S0, mj]
    out = [c.add(a_terms + [H[0]]), c.add([H[1], b]), c.add([H[2], cc]), c.add([H[3], d]),
           c.add(e_terms + [H[4]]), c.add([H[5], f]), c.add([H[6], g]), c.add([H[7], h])]
    c.flush()
    lcs = [w.lcs[31 - i] for w in out for i in range(32)] if s.shape else None
    val = np.concatenate([_u32_bits(w.val)[:, ::-1] for w in out], axis=1) if s.computing else None
    return Bits(lcs, val, np.full(256, -1, dtype=np.int8))


# --- templates (shape) and the C++ kernel (values) --------------------------------------------

class Template:
    """One compression's constraints over input slots, recorded once. Keys in ``rows``/
    ``outputs``: 0 = one, 1..slots = input slot (key - 1), slots + 1 + j = the j-th own variable.
    ``r1cs`` is the same as a matrix over z = (1, slots, own variables)."""

    def __init__(self, const_words: tuple[int, ...] | None):
        self.const_words = const_words
        cs = ConstraintSystem(with_values=False)
        s = Synth(cs=cs)
        nslots = 256 if const_words is not None else 768
        ins = [cs.alloc_input().lc() for _ in range(nslots)]
        state = Bits(ins[:256], None, np.full(256, -1, np.int8))
        block = None if const_words is not None else Bits(ins[256:], None, np.full(512, -1, np.int8))
        out = _compress_direct(s, state, block, const_words)
        self.slots, self.num_aux = nslots, cs.num_aux
        self.r1cs = cs.to_r1cs()
        # every output bit is one own variable: its index among them
        self.outputs = np.array([next(iter(lc.terms)) for lc in out.lcs], dtype=np.int64)
        self.outputs = -self.outputs - 1  # aux key -(j+1) -> j
        self.rows = cs._rows
        self.names = tuple(cs._names)  # per row, so errors from a substituted instance name it

    @property
    def num_constraints(self) -> int:
        return self.r1cs.num_constraints


@functools.lru_cache(maxsize=None)
def template(const_words: tuple[int, ...] | None = None) -> Template:
    return Template(const_words)


def _instantiate_dicts(cs: ConstraintSystem, tmpl: Template, inputs: Sequence[LinearCombination]):
    """Substitute the slots in a plain ConstraintSystem (small circuits, tests)."""
    p = field.MODULUS
    aux = [cs.alloc().lc() for _ in range(tmpl.num_aux)]
    keys = [next(iter(a.terms)) for a in aux]
    def subst(side):
        out: dict[int, int] = {}
        for k, c in side.items():
            if k == 0:
                out[0] = (out.get(0, 0) + c) % p
            elif k > 0:
                for k2, c2 in inputs[k - 1].terms.items():
                    out[k2] = (out.get(k2, 0) + c * c2) % p
            else:
                k2 = keys[-k - 1]
                out[k2] = (out.get(k2, 0) + c) % p
        return LinearCombination({k: c for k, c in out.items() if c})

    for (a, b, c), name in zip(tmpl.rows, tmpl.names):
        cs.enforce(subst(a), subst(b), subst(c), name)
    return [aux[j] for j in tmpl.outputs]


def kernel() -> ctypes.CDLL:
    """sha256_host.cpp, compiled on first use into the host library's cache."""
    from arith import native
    v = ctypes.c_void_p
    here = Path(__file__).resolve().parent.parent
    return native.load(here / "sha256_host.cpp", stem="sha256", include_dirs=(here,), signatures={
        "sha256_trace_len_for": ([v, ctypes.c_int], ctypes.c_int64),
        "sha256_compress": ([ctypes.c_int64, v, v, v, v, ctypes.c_int64], ctypes.c_int)})


def compress_native(state: np.ndarray, block: np.ndarray | None, const_words=None, *,
                    trace: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """(new state (B, 8) uint32, the gadget's variables (B, trace_len) uint8) for states (B, 8)
    and blocks (B, 16) uint32 (or a constant block of 16 words for all rows)."""
    state = np.ascontiguousarray(state, dtype=np.uint32)
    B = len(state)
    if const_words is not None:
        block = np.ascontiguousarray(np.broadcast_to(np.array(const_words, np.uint32), (B, 16)))
    block = np.ascontiguousarray(block, dtype=np.uint32)
    const = const_words is not None
    lib = kernel()
    n = lib.sha256_trace_len_for(block.ctypes.data, int(const))
    out_state = np.empty((B, 8), dtype=np.uint32)
    tr = np.empty((B, n), dtype=np.uint8) if trace else None
    lib.sha256_compress(B, state.ctypes.data, block.ctypes.data, out_state.ctypes.data,
                        None if tr is None else tr.ctypes.data, int(const))
    return out_state, tr


def _bits_to_words(v: np.ndarray) -> np.ndarray:
    return np.packbits(v, axis=1).view(">u4").astype(np.uint32)


def _words_to_bits(w: np.ndarray) -> np.ndarray:
    return np.unpackbits(w.astype(">u4").view(np.uint8), axis=1)


def compress(s: Synth, state: Bits, block: Bits | None, const_words=None) -> Bits:
    """One compression (state: 256 bits, block: 512 bits or None with ``const_words``).
    Shape: the template for this block kind, instantiated (a ``TemplatingCS`` records the
    instance; a plain ConstraintSystem gets the rows substituted). Values: the C++ kernel, whose
    trace is the template's variables in order (tests hold it equal to ``_compress_direct``)."""
    cw = tuple(const_words) if block is None else None
    tmpl = template(cw) if s.shape else None
    lcs = val = None
    if s.shape:
        inputs = list(state.lcs) + (list(block.lcs) if block is not None else [])
        if hasattr(s.cs, "instantiate"):
            outs = s.cs.instantiate(tmpl, inputs)
        else:
            outs = _instantiate_dicts(s.cs, tmpl, inputs)
        lcs = outs
    if s.computing:
        new, tr = compress_native(_bits_to_words(state.val),
                                  _bits_to_words(block.val) if block is not None else None, cw)
        if tmpl is not None and tr.shape[1] != tmpl.num_aux:
            raise AssertionError("sha256_host.cpp and the gadget disagree on the trace layout")
        from .core import BitBlock
        s.values.append(BitBlock(tr))
        val = _words_to_bits(new)
    return Bits(lcs, val, np.full(256, -1, dtype=np.int8))


def sha256_bits(s: Synth, msg: Bits) -> Bits:
    """SHA-256 of a message of whole bytes: padding as constants, IV as constants; blocks whose
    bits are all constant (the padding block after a 64-byte message) use the constant template."""
    if len(msg) % 8:
        raise ValueError("SHA-256 here hashes whole bytes")
    nbytes = len(msg) // 8
    full = Bits.concat([msg, Bits.of_bytes(s, pad(nbytes))])
    state = Bits.of_bytes(s, b"".join(x.to_bytes(4, "big") for x in IV))
    for j in range(len(full) // 512):
        blk = full[512 * j:512 * (j + 1)]
        if np.all(blk.cmask >= 0):
            words = np.packbits(blk.cmask.astype(np.uint8)).view(">u4").tolist()
            state = compress(s, state, None, words)
        else:
            state = compress(s, state, blk)
    return state


def sha254_bits(s: Synth, msg: Bits) -> Bits:
    """sha256_bits with byte 31's top two bits replaced by constant zeros (the trim)."""
    d = sha256_bits(s, msg)
    mask = d.cmask.copy()
    mask[[248, 249]] = 0
    lcs = None
    if s.shape:
        lcs = list(d.lcs)
        lcs[248] = lcs[249] = LinearCombination()
    val = None
    if s.computing:
        val = d.val.copy()
        val[:, [248, 249]] = 0
    return Bits(lcs, val, mask)
