"""A Groth16 proof (A in G1, B in G2, C in G1) and its 192-byte encoding.

The encoding is compressed A || B || C in the ZCash BLS12-381 format (the three top bits of the
first byte: compressed, infinity, sign of y), exactly as Filecoin's bellperson writes a partition
proof; a C2 output of N partitions is N of these concatenated.
"""
from __future__ import annotations

from dataclasses import dataclass

from py_arkworks_bls12381 import G1Point, G2Point

from .curve import G1_COMPRESSED, G2_COMPRESSED
from .errors import ProofFormatError

PROOF_BYTES = 2 * G1_COMPRESSED + G2_COMPRESSED  # 192


@dataclass(frozen=True)
class Proof:
    a: G1Point
    b: G2Point
    c: G1Point

    def to_bytes(self) -> bytes:
        return self.a.to_compressed_bytes() + self.b.to_compressed_bytes() + self.c.to_compressed_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Proof":
        """Decode with full checks (on the curve, in the prime-order subgroup): proofs are
        untrusted input."""
        if len(data) != PROOF_BYTES:
            raise ProofFormatError(f"a proof is {PROOF_BYTES} bytes, got {len(data)}")
        parts = ((0, G1_COMPRESSED, G1Point, "A"), (G1_COMPRESSED, G2_COMPRESSED, G2Point, "B"),
                 (G1_COMPRESSED + G2_COMPRESSED, G1_COMPRESSED, G1Point, "C"))
        pts = []
        for off, size, kind, name in parts:
            try:
                pts.append(kind.from_compressed_bytes(bytes(data[off:off + size])))
            except Exception as e:
                raise ProofFormatError(f"proof element {name} (bytes {off}..{off + size}) is not a "
                                       f"valid compressed point: {e}") from None
        return cls(*pts)


def split_proofs(data: bytes) -> list[Proof]:
    """A multi-partition proof (N x 192 bytes) -> its partition proofs, in order."""
    if len(data) % PROOF_BYTES:
        raise ProofFormatError(f"{len(data)} bytes is not a whole number of {PROOF_BYTES}-byte proofs")
    return [Proof.from_bytes(data[i:i + PROOF_BYTES]) for i in range(0, len(data), PROOF_BYTES)]
