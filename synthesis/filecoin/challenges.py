"""Interactive PoRep challenges, as storage-proofs-porep/src/stacked/vanilla/challenges.rs derives them.

``InteractiveChallenges::derive``: challenge i of partition k is, with j = challenges * k + i,
``SHA-256(replica_id (32 bytes) | seed (32 bytes) | j as u32 LE)`` read as a little-endian
integer, reduced mod (nodes - 1), plus 1 (node 0 is never challenged). The same rule for every
api version (1.0.0 .. 1.2.0) without the SyntheticPoRep / NonInteractivePoRep features.

rust-fil-proofs' tests hold no fixed interactive challenges (they check count, duplicates and
that k partitions give the same list as one partition of k times the challenges); ours check
those properties and the rule on hand-computed values.
"""
from __future__ import annotations

import hashlib

import numpy as np


def challenge(replica_id: bytes, seed: bytes, j: int, nodes: int) -> int:
    h = hashlib.sha256(replica_id + seed + j.to_bytes(4, "little")).digest()
    return int.from_bytes(h, "little") % (nodes - 1) + 1


def partition_challenges(replica_id: bytes, seed: bytes, k: int, challenges: int, nodes: int) -> np.ndarray:
    """Partition k's challenged nodes: (challenges,) uint64."""
    if len(replica_id) != 32 or len(seed) != 32:
        raise ValueError("replica_id and seed are 32 bytes each")
    return np.array([challenge(replica_id, seed, challenges * k + i, nodes) for i in range(challenges)],
                    dtype=np.uint64)


def all_challenges(replica_id: bytes, seed: bytes, partitions: int, challenges: int, nodes: int) -> np.ndarray:
    """(partitions, challenges) uint64."""
    return np.stack([partition_challenges(replica_id, seed, k, challenges, nodes) for k in range(partitions)])
