"""A compact encoding of an assignment z: bits as bits, other values as 32-byte elements.

Most of a SHA-256 circuit's variables are 0 or 1 (a 32 GiB-shaped SDR partition: ~98%), so
32 bytes a value wastes ~30x. ``Compact`` keeps one kind per variable (0, 1, or 2 = "the next
row of ``fes``") and the other values in order. The wire form (``encode``/``decode``):

    b"ZKA1" | u64 n | u64 m | is_other bit plane (ceil(n/8) bytes) | value bit plane
    (ceil(n/8) bytes) | m x 32-byte little-endian canonical elements

so a partition of n variables with m "other" values takes n/4 + 32 m + 20 bytes.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import field

MAGIC = b"ZKA1"
_HEADER = struct.Struct("<4sQQ")


class AssignmentError(ValueError):
    """A compact assignment blob is malformed (names what and where)."""


@dataclass
class Compact:
    kinds: np.ndarray   # (n,) uint8: 0, 1, or 2 (other)
    fes: np.ndarray     # (m, 4) uint64: the "other" values, in order

    def __len__(self) -> int:
        return len(self.kinds)

    def to_vec(self) -> np.ndarray:
        z = np.zeros((len(self.kinds), 4), dtype=np.uint64)
        z[self.kinds == 1, 0] = 1
        z[self.kinds == 2] = self.fes
        return z

    def stats(self) -> dict[str, int]:
        c = np.bincount(self.kinds, minlength=3)
        return {"variables": len(self.kinds), "zeros": int(c[0]), "ones": int(c[1]), "other": int(c[2])}


def from_blocks(head: np.ndarray, header_values, challenge_values, batch: int) -> "Compact":
    """A partition's assignment from its parts (the compact-matrix family: filecoin): the
    ``head`` Fr vector (ONE, the public inputs, the shared auxiliaries), then the header block's
    values (one instance), then the challenge block's (``batch`` instances, instance-major)."""
    hk, hf, _ = from_values(header_values, 1)
    ck, cf, _ = from_values(challenge_values, batch)
    pre = from_vec(head)
    return Compact(np.concatenate([pre.kinds, hk.reshape(-1), ck.reshape(-1)]),
                   np.concatenate([pre.fes, hf, cf]))


def from_vec(z: np.ndarray) -> Compact:
    z = np.ascontiguousarray(z, dtype=np.uint64)
    high = np.any(z[:, 1:] != 0, axis=1)
    low = z[:, 0]
    kinds = np.where(high | (low > 1), 2, low).astype(np.uint8)
    return Compact(kinds, z[kinds == 2])


def encode(z: np.ndarray | Compact) -> bytes:
    """The wire form of an assignment (an (n, 4) Fr vector or a Compact)."""
    c = z if isinstance(z, Compact) else from_vec(z)
    n, m = len(c.kinds), len(c.fes)
    other = np.packbits(c.kinds == 2, bitorder="little")
    value = np.packbits(c.kinds == 1, bitorder="little")
    return b"".join([_HEADER.pack(MAGIC, n, m), other.tobytes(), value.tobytes(),
                     np.ascontiguousarray(c.fes, dtype="<u8").tobytes()])


def read_header(blob: bytes, n: int | None = None) -> tuple[int, int, int]:
    """(count, m, plane bytes) of a blob from ``encode``, its header and length checked (and the
    count against ``n`` when given); AssignmentError naming what is wrong."""
    if len(blob) < _HEADER.size:
        raise AssignmentError(f"assignment blob of {len(blob)} bytes is shorter than its header")
    magic, count, m = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise AssignmentError(f"assignment blob starts with {magic!r}, not {MAGIC!r}")
    if n is not None and count != n:
        raise AssignmentError(f"assignment has {count} values, the circuit has {n} variables")
    plane = (count + 7) // 8
    want = _HEADER.size + 2 * plane + 32 * m
    if len(blob) != want:
        raise AssignmentError(f"assignment blob is {len(blob)} bytes, its header says {want}")
    return count, m, plane


def decode_compact(blob: bytes, *, n: int | None = None) -> Compact:
    count, m, plane = read_header(blob, n)
    buf = np.frombuffer(blob, dtype=np.uint8, offset=_HEADER.size, count=2 * plane)
    other = np.unpackbits(buf[:plane], count=count, bitorder="little").astype(bool)
    one = np.unpackbits(buf[plane:], count=count, bitorder="little").astype(bool)
    if int(other.sum()) != m:
        raise AssignmentError(f"assignment marks {int(other.sum())} values as field elements, "
                              f"its header says {m}")
    if np.any(other & one):
        raise AssignmentError(f"assignment value {int(np.flatnonzero(other & one)[0])} is marked "
                              "both one and a field element")
    fes = np.frombuffer(blob, dtype="<u8", offset=_HEADER.size + 2 * plane, count=4 * m)
    fes = field.check_vec(fes.reshape(m, 4).astype(np.uint64), what="assignment field elements")
    kinds = np.where(other, 2, one).astype(np.uint8)
    return Compact(kinds, fes)


def decode(blob: bytes, *, n: int | None = None) -> np.ndarray:
    """The (n, 4) Fr vector of a blob from ``encode``; AssignmentError if malformed."""
    return decode_compact(blob, n=n).to_vec()


def _kinds(v: np.ndarray) -> np.ndarray:
    """(..., 4) Fr -> 0, 1 or 2 (other) per element."""
    high = np.any(v[..., 1:] != 0, axis=-1)
    low = v[..., 0]
    return np.where(high | (low > 1), 2, low).astype(np.uint8)


def values_array(values: Sequence, batch: int) -> np.ndarray:
    """A Synth's values (per-variable (B, 4) arrays, BitBlocks, FeBlocks) as one (B, n, 4) array."""
    from .bellpepper.core import BitBlock, FeBlock

    parts, run = [], []
    for v in values:
        if isinstance(v, FeBlock):
            if run:
                parts.append(np.stack(run, axis=1))
                run = []
            parts.append(v.vals)
        elif isinstance(v, BitBlock):
            bits = np.zeros(v.bits.shape + (4,), dtype=np.uint64)
            bits[..., 0] = v.bits
            if run:
                parts.append(np.stack(run, axis=1))
                run = []
            parts.append(bits)
        else:
            run.append(v)
    if run:
        parts.append(np.stack(run, axis=1))
    return np.concatenate(parts, axis=1) if parts else np.zeros((batch, 0, 4), np.uint64)


def from_values(values: Sequence, batch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A Synth's values (per-variable (B, 4) arrays, BitBlocks, FeBlocks) as (kinds (B, n)
    uint8, the "other" values in row-major order (m, 4), per-row counts of them)."""
    from .bellpepper.core import BitBlock, FeBlock

    kinds_parts, fe_cols, fe_vals = [], [], []
    col = 0
    run: list[np.ndarray] = []

    def close_run():
        nonlocal run, col
        if run:
            v = np.stack(run, axis=1)  # (B, k, 4)
            add_fe(v)
            run = []

    def add_fe(v: np.ndarray):
        nonlocal col
        k = _kinds(v)
        kinds_parts.append(k)
        other = np.flatnonzero(np.any(k == 2, axis=0))  # columns with a value to keep in some row
        fe_cols.append(col + other)
        fe_vals.append(v[:, other])
        col += v.shape[1]

    for v in values:
        if isinstance(v, BitBlock):
            close_run()
            kinds_parts.append(v.bits)
            col += v.bits.shape[1]
        elif isinstance(v, FeBlock):
            close_run()
            add_fe(v.vals)
        else:
            run.append(v)
    close_run()
    kinds = np.concatenate(kinds_parts, axis=1) if kinds_parts else np.zeros((batch, 0), np.uint8)
    if fe_vals:
        F = np.concatenate(fe_vals, axis=1)
        cols = np.concatenate(fe_cols)
        mask = kinds[:, cols] == 2
        fes = F[mask]
        per_row = mask.sum(axis=1)
    else:
        fes, per_row = np.zeros((0, 4), np.uint64), np.zeros(batch, np.int64)
    return kinds, fes, per_row
