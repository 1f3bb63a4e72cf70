"""bellperson's ``sha256_compression_function`` gadget call by gadget call (``compression_direct``)
and SHA-256's constants: the definition that sha256.py's fast paths (template.py) record and are
tested against; below both (sha256.py module docstring: the method)."""
from __future__ import annotations

from typing import Sequence

from .core import Synth
from ..sha256_spec import IV
from ..sha256_spec import K as ROUND_CONSTANTS
from .boolean import Boolean
from .multieq import MultiEq
from .uint32 import UInt32


def get_sha256_iv() -> list[UInt32]:
    return [UInt32.constant(v) for v in IV]


def compression_direct(s: Synth, inp: Sequence[Boolean], current: Sequence[UInt32]) -> list[UInt32]:
    """``sha256_compression_function``, gadget call by gadget call."""
    if len(inp) != 512 or len(current) != 8:
        raise ValueError("sha256 compression takes 512 input bits and 8 state words")
    w = [UInt32.from_bits_be(inp[32 * i:32 * i + 32]) for i in range(16)]
    meq = MultiEq(s)
    for i in range(16, 64):
        s0 = w[i - 15].rotr(7)
        s0 = s0.xor(s, w[i - 15].rotr(18))
        s0 = s0.xor(s, w[i - 15].shr(3))
        s1 = w[i - 2].rotr(17)
        s1 = s1.xor(s, w[i - 2].rotr(19))
        s1 = s1.xor(s, w[i - 2].shr(10))
        w.append(UInt32.addmany(s, meq, [w[i - 16], s0, w[i - 7], s1]))

    def compute(maybe, others=()):
        kind, v = maybe
        if kind == "concrete":
            return v
        return UInt32.addmany(s, meq, list(v) + list(others))

    a = ("concrete", current[0])
    b, c, d = current[1], current[2], current[3]
    e = ("concrete", current[4])
    f, g, h = current[5], current[6], current[7]
    for i in range(64):
        new_e = compute(e)
        s1 = new_e.rotr(6)
        s1 = s1.xor(s, new_e.rotr(11))
        s1 = s1.xor(s, new_e.rotr(25))
        ch = UInt32.sha256_ch(s, new_e, f, g)
        temp1 = [h, s1, ch, UInt32.constant(ROUND_CONSTANTS[i]), w[i]]
        new_a = compute(a)
        s0 = new_a.rotr(2)
        s0 = s0.xor(s, new_a.rotr(13))
        s0 = s0.xor(s, new_a.rotr(22))
        maj = UInt32.sha256_maj(s, new_a, b, c)
        temp2 = [s0, maj]
        h, g, f = g, f, new_e
        e = ("deferred", temp1 + [d])
        d, c, b = c, b, new_a
        a = ("deferred", temp1 + temp2)
    h0 = compute(a, [current[0]])
    h1 = UInt32.addmany(s, meq, [current[1], b])
    h2 = UInt32.addmany(s, meq, [current[2], c])
    h3 = UInt32.addmany(s, meq, [current[3], d])
    h4 = compute(e, [current[4]])
    h5 = UInt32.addmany(s, meq, [current[5], f])
    h6 = UInt32.addmany(s, meq, [current[6], g])
    h7 = UInt32.addmany(s, meq, [current[7], h])
    meq.finish()
    return [h0, h1, h2, h3, h4, h5, h6, h7]
