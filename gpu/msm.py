"""Multi-scalar multiplication over BLS12-381 G1 and G2, one API over the CPU and CUDA backends.

A prover loads each proving-key query once as a *base set* and then runs many MSMs against it::

    from gpu import msm
    with msm.load_bases(pk.h_query, "g1", backend="cuda") as h_bases:   # uploaded once
        H = h_bases.msm(h)              # h: Fr vector (n, 4) uint64 (pinned or not), or a
                                        # gpu.cuda.memory.DeviceBuffer that already holds it

``backend="cpu"`` keeps the points on the host and runs arkworks' MSM (py_arkworks_bls12381
``multiexp_unchecked``) with the same API. Results are arkworks points (G1Point/G2Point).

Points travel in the xy encoding: (n, 24) uint32 for G1 and (n, 48) for G2, the limbs of
arkworks' ``to_xy_bytes_le`` (canonical little-endian x then y, G2 coordinates c0 then c1,
the identity all zero). ``encode_points`` converts arkworks points (10 us each); key files can
keep the encoding and skip that.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from gpu.errors import MsmInputError
from synthesis.field import check_vec

__all__ = ["G1", "G2", "Group", "group_of", "encode_points", "decode_point", "window_bits",
           "windows", "load_bases", "msm", "CpuBases", "MsmInputError"]



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


class CpuBases:
    """A base set on the host; MSMs through arkworks (zero scalars skipped, as the PoRep witness
    is mostly zeros and ones)."""

    backend = "cpu"

    def __init__(self, points: list, group):
        self.group = group_of(group)
        self.points = list(points)
        if not self.points:
            raise MsmInputError(f"{self.group.name} bases: empty")
        self.n = len(self.points)

    def msm(self, scalars: np.ndarray):
        from gpu.groth16 import curve
        scalars = check_scalars(scalars, self.n)
        return curve.msm(self.points, scalars, self.group.point)

    def close(self) -> None:
        self.points = []

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load_bases(points, group="g1", *, backend: str = "cpu", **kw):
    """A resident base set: ``points`` is a list of arkworks points or an xy limb array.

    backend "cpu" -> CpuBases; "cuda" -> gpu.cuda.msm.DeviceBases (needs a current CUDA
    context: gpu.cuda.loader.init_context()), keyword arguments go to it.
    """
    g = group_of(group)
    if backend == "cpu":
        if isinstance(points, np.ndarray):
            bases = check_bases(points, g)
            points = [decode_point(row, g) for row in bases]
        return CpuBases(points, g)
    if backend == "cuda":
        from gpu.cuda.msm import DeviceBases
        if not isinstance(points, np.ndarray):
            points = encode_points(points, g)
        return DeviceBases(points, g, **kw)
    raise ValueError(f"unknown MSM backend {backend!r}: expected 'cpu' or 'cuda'")


def msm(points, scalars: np.ndarray, group="g1", *, backend: str = "cpu"):
    """One-shot sum_i scalars[i] * points[i] (loads the bases, runs, frees)."""
    with load_bases(points, group, backend=backend) as bases:
        return bases.msm(scalars)
