"""bellperson's ``sha256_compression_function`` gadget call by gadget call (``compression_direct``)
and SHA-256's constants: the definition that sha256.py's fast paths (template.py) record and are
tested against; below both (sha256.py module docstring: the method)."""
from __future__ import annotations

from typing import Sequence

from ..gadgets.core import Synth
from .boolean import Boolean
from .multieq import MultiEq
from .uint32 import UInt32

ROUND_CONSTANTS = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2]
IV = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]


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
