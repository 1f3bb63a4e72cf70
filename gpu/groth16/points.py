"""Arrays of curve points kept in their encoding: what a proving key's queries are.

A query of 2^24 points is 1.6 GB as bytes but many times that as Python point objects, and the
GPU backend wants the bytes anyway (it uploads them as they are). So a ``PointArray`` holds the
uncompressed affine encoding, x || y little-endian (G2 coordinates c0 then c1, the identity as
all zeros: arkworks' ``to_xy_bytes_le``), as an (n, width) uint8 array, and decodes to
py_arkworks objects only when the CPU backend asks, once, cached.
"""
from __future__ import annotations

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

WIDTH = {G1Point: 96, G2Point: 192}


class PointArray:
    __slots__ = ("kind", "raw", "_objects")

    def __init__(self, kind: type, raw: np.ndarray):
        if kind not in WIDTH:
            raise TypeError("a PointArray holds G1Point or G2Point encodings")
        raw = np.ascontiguousarray(raw, dtype=np.uint8)
        if raw.ndim != 2 or raw.shape[1] != WIDTH[kind]:
            raise ValueError(f"expected (n, {WIDTH[kind]}) bytes, got {raw.shape}")
        self.kind, self.raw, self._objects = kind, raw, None

    @classmethod
    def from_points(cls, kind: type, points) -> "PointArray":
        data = b"".join(p.to_xy_bytes_le() for p in points)
        return cls(kind, np.frombuffer(data, dtype=np.uint8).reshape(-1, WIDTH[kind]))

    @classmethod
    def empty(cls, kind: type, n: int) -> "PointArray":
        return cls(kind, np.empty((n, WIDTH[kind]), dtype=np.uint8))

    @property
    def width(self) -> int:
        return WIDTH[self.kind]

    @property
    def nbytes(self) -> int:
        return self.raw.nbytes

    def limbs(self) -> np.ndarray:
        """The encoding as 32-bit little-endian limbs, (n, 24) for G1 and (n, 48) for G2."""
        return self.raw.view("<u4")

    def objects(self) -> list:
        """The points as py_arkworks objects (decoded unchecked: key files are hashed)."""
        if self._objects is None:
            dec = self.kind.from_xy_bytes_unchecked_le
            flat = self.raw.tobytes()
            w = self.width
            self._objects = [dec(flat[i:i + w]) for i in range(0, len(flat), w)]
        return self._objects

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i):
        if isinstance(i, slice):
            out = PointArray(self.kind, self.raw[i])
            if self._objects is not None:
                out._objects = self._objects[i]
            return out
        if self._objects is not None:
            return self._objects[i]
        return self.kind.from_xy_bytes_unchecked_le(self.raw[i].tobytes())

    def __iter__(self):
        return iter(self.objects())

    def __eq__(self, other) -> bool:
        # affine coordinates are unique, so equal points <=> equal encodings
        if isinstance(other, PointArray):
            return self.kind is other.kind and np.array_equal(self.raw, other.raw)
        if isinstance(other, list):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"PointArray({self.kind.__name__}, n={len(self)})"
