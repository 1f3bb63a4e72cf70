"""The MSM's input contract, shared by every MSM engine (host, CUDA, split): the two groups, the
xy point encoding, the checks of bases and scalars, and the window size choice.

Its own module so the engines (gpu/cuda/msm.py, gpu/native/curve.py) and the one API over them
(gpu/msm.py) all import it, and none of them imports another to get it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from gpu.errors import MsmInputError
from synthesis.field import check_vec


@dataclass(frozen=True)
class Group:
    name: str          # "g1" | "g2"
    point: type        # G1Point | G2Point
    limbs: int         # 32-bit limbs of one encoded point (x || y)

    @property
    def xy_bytes(self) -> int:
        return 4 * self.limbs


G1 = Group("g1", G1Point, 24)
G2 = Group("g2", G2Point, 48)


def group_of(group) -> Group:
    """"g1"/"g2", G1Point/G2Point, or a Group -> the Group."""
    if isinstance(group, Group):
        return group
    for g in (G1, G2):
        if group in (g.name, g.name.upper(), g.point):
            return g
    raise ValueError(f"unknown group {group!r}: expected 'g1' or 'g2'")


def encode_points(points, group) -> np.ndarray:
    """arkworks points -> xy limbs (n, limbs) uint32."""
    g = group_of(group)
    raw = b"".join(p.to_xy_bytes_le() for p in points)
    return np.frombuffer(raw, dtype="<u4").reshape(-1, g.limbs).copy()


def decode_point(limbs: np.ndarray, group):
    """xy limbs of one point -> arkworks point, checked (on the curve, in the subgroup): a wrong
    device result fails here instead of travelling on as garbage."""
    g = group_of(group)
    raw = np.ascontiguousarray(limbs, dtype="<u4").tobytes()
    if len(raw) != g.xy_bytes:
        raise ValueError(f"{g.name} point: {len(raw)} bytes, expected {g.xy_bytes}")
    if not any(raw):
        return g.point.identity()
    return g.point.from_xy_bytes_le(raw)


def check_bases(bases: np.ndarray, group) -> np.ndarray:
    g = group_of(group)
    if not isinstance(bases, np.ndarray) or bases.ndim != 2 or bases.shape[1] != g.limbs:
        raise MsmInputError(f"{g.name} bases: expected an xy array of shape (n, {g.limbs}), got "
                            f"{getattr(bases, 'shape', type(bases))}")
    if len(bases) == 0 or len(bases) >= 2**31:
        raise MsmInputError(f"{g.name} bases: {len(bases)} points (need 1 .. 2^31 - 1)")
    return np.ascontiguousarray(bases, dtype=np.uint32)


def check_scalars(scalars: np.ndarray, n: int) -> np.ndarray:
    """A canonical Fr vector of length n (FieldError names a non-canonical element)."""
    scalars = check_vec(scalars, what="MSM scalars")
    if len(scalars) != n:
        raise MsmInputError(f"MSM: {n} bases but {len(scalars)} scalars")
    return scalars


def windows(c: int) -> int:
    """Windows of c-bit signed digits for a 255-bit scalar (c W >= 256: room for the carry)."""
    return -(-256 // c)


def window_bits(n: int, max_bits: int = 20) -> int:
    """Window size c for n points, from the cost in Fq products: W(c) (10 n + 28 B) for
    B = 2^(c-1) buckets (a mixed addition per point and window; two full additions per bucket
    in the reduction). 16 at 2^20, 20 at 2^24."""
    return min(range(1, max_bits + 1), key=lambda c: (windows(c) * (10 * n + 28 * 2**(c - 1)), c))
