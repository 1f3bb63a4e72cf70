"""bellperson's ``gadgets/sha256.rs``: ``sha256`` (padding as constants, IV as constants, one
compression per 512-bit block) and ``sha256_compression_function``, exactly: message schedule
(rotr/shr re-indexing, two ``xor``s per sigma, 4-operand ``addmany``), 64 rounds with e and a
*deferred* (each is an addmany computed where first used: 5 operands for e, 7 for a), the final
additions (h0 and h4 from the deferred sums plus the old state: 6 and 8 operands), all additions
sharing one MultiEq per compression. Constants fold all the way: bellperson's counts are 0 for a
constant block with constant state, 25,840 for a variable block under the IV, 44,874 for a
64-byte message (25,840 + 19,034 for the padding block with a variable state).

Fast paths (``compress``): shape mode records one ``Template`` per pattern of constant / variable
/ negated inputs and instantiates it (a ``TemplatingCS`` keeps the instance compact; a plain
ConstraintSystem gets the rows substituted); values mode replays the template's operations in
``bits_host.cpp`` for the whole batch. ``compression_direct`` (compression.py, below template.py)
is the definition both are tested against.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .core import Synth
from .boolean import Boolean
# the gadget-by-gadget compression and its constants (tests and benches read them here too)
from .compression import IV, ROUND_CONSTANTS, compression_direct, get_sha256_iv  # noqa: F401
from .template import compress
from .uint32 import UInt32

def sha256_compression_function(s: Synth, inp: Sequence[Boolean], current: Sequence[UInt32]) -> list[UInt32]:
    """The compression through the fast paths (templates / native replay) when they apply."""
    return compress(s, inp, current)


def padded(inp: Sequence[Boolean]) -> list[Boolean]:
    """``sha256``'s padding: a 1, zeros to 448 mod 512, the bit length as a u64 BE, constants."""
    if len(inp) % 8:
        raise ValueError(f"sha256 takes whole bytes, not {len(inp)} bits")
    out = list(inp)
    n = len(inp)
    out.append(Boolean.constant(1))
    while (len(out) + 64) % 512:
        out.append(Boolean.constant(0))
    out.extend(Boolean.constant((n >> i) & 1) for i in range(63, -1, -1))
    return out


def sha256(s: Synth, inp: Sequence[Boolean], *, direct: bool = False) -> list[Boolean]:
    """SHA-256 of whole bytes (bits in message order, each byte most significant bit first):
    the 256 digest bits in the same order."""
    blocks = padded(inp)
    cur = get_sha256_iv()
    for j in range(len(blocks) // 512):
        blk = blocks[512 * j:512 * (j + 1)]
        cur = compression_direct(s, blk, cur) if direct else sha256_compression_function(s, blk, cur)
    return [b for word in cur for b in word.into_bits_be()]


def sha256_block_no_padding(s: Synth, inp: Sequence[Boolean]) -> list[Boolean]:
    if len(inp) != 512:
        raise ValueError("sha256_block_no_padding takes 512 bits")
    return [b for word in sha256_compression_function(s, inp, get_sha256_iv()) for b in word.into_bits_be()]


def bits_of_bytes(data: bytes) -> np.ndarray:
    """bellperson's ``multipack::bytes_to_bits``: each byte most significant bit first."""
    return np.unpackbits(np.frombuffer(data, dtype=np.uint8))
