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

import numpy as np

from gpu.errors import MsmInputError
from gpu.msm_input import (G1, G2, Group, check_bases, check_scalars, decode_point,  # noqa: F401
                           encode_points, group_of, window_bits, windows)

__all__ = ["G1", "G2", "Group", "group_of", "encode_points", "decode_point", "window_bits",
           "windows", "load_bases", "msm", "CpuBases", "MsmInputError"]


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
