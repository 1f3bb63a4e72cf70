"""BLS12-381 points through py_arkworks_bls12381 (arkworks' curve code, pairings and MSM).

Why that library: it wraps arkworks' audited BLS12-381 (the same curve code arkworks' Groth16
uses), encodes points in the ZCash format Filecoin uses, and its MSM releases the GIL (two MSMs on
two threads run in parallel here); py_ecc is pure Python (seconds per pairing), and pymcl lacks a
multi-scalar multiplication. Measured here for 0.5.0: G1 MSM 0.29 s at 2^14, one fixed-base G1
scalar multiplication 0.21 ms, G2 0.63 ms, checked compressed decoding 80 us.
"""
from __future__ import annotations

import numpy as np
from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

from .points import WIDTH, PointArray

G1_BYTES = 96      # uncompressed x || y, little-endian, as stored in key files
G2_BYTES = 192
G1_COMPRESSED = 48
G2_COMPRESSED = 96


def g1() -> G1Point:
    return G1Point()


def g2() -> G2Point:
    return G2Point()


def scalar(x: int) -> Scalar:
    return Scalar.from_le_bytes(int(x).to_bytes(32, "little"))


def scalars(vec: np.ndarray) -> list[Scalar]:
    """An Fr vector (n, 4) uint64 -> arkworks scalars (from_le_bytes: 0.1 us each)."""
    raw = np.ascontiguousarray(vec, dtype="<u8").tobytes()
    return [Scalar.from_le_bytes(raw[i:i + 32]) for i in range(0, len(raw), 32)]


def msm(points: list, vec: np.ndarray, kind=G1Point):
    """sum_i vec[i] * points[i], skipping zero scalars (the PoRep witness is mostly 0s and 1s,
    and arkworks' MSM still pays a bucket pass for every zero)."""
    if len(points) != len(vec):
        raise ValueError(f"MSM: {len(points)} points but {len(vec)} scalars")
    nonzero = np.flatnonzero(np.any(vec != 0, axis=1))
    if len(nonzero) == 0:
        return kind.identity()
    objs = points.objects() if isinstance(points, PointArray) else points
    pts = [objs[i] for i in nonzero.tolist()]
    return kind.multiexp_unchecked(pts, scalars(vec[nonzero]))


def fixed_base(base, vec: np.ndarray) -> PointArray:
    """[vec[i] * base for i]: the queries of the proving key (setup); zeros give the identity."""
    kind = type(base)
    ident = kind.identity().to_xy_bytes_le()
    data = b"".join(ident if s.is_zero() else (base * s).to_xy_bytes_le() for s in scalars(vec))
    return PointArray(kind, np.frombuffer(data, dtype=np.uint8).reshape(len(vec), WIDTH[kind]))


def pairing_check(g1s: list[G1Point], g2s: list[G2Point]) -> bool:
    """prod e(g1s[i], g2s[i]) == 1."""
    return GT.pairing_check(g1s, g2s)
