"""Interactive PoRep challenges, as storage-proofs-porep/src/stacked/vanilla/challenges.rs derives them.

``InteractiveChallenges::derive``: challenge i of partition k is, with j = challenges * k + i,
``SHA-256(replica_id (32 bytes) | seed (32 bytes) | j as u32 LE)`` read as a little-endian
integer, reduced mod (nodes - 1), plus 1 (node 0 is never challenged). The same rule for every
api version (1.0.0 .. 1.2.0) without the SyntheticPoRep / NonInteractivePoRep features.

rust-fil-proofs' tests hold no fixed interactive challenges (they check count, duplicates and
that k partitions give the same list as one partition of k times the challenges); ours check
those properties and the rule on hand-computed values. They do hold fixed *synthetic* PoRep
challenges (``test_synth_challenges_against_hardcoded``), which reduce a 32-byte value with the
same ``bigint_to_challenge``: ``SynthChallenges`` below reproduces them (the V1_1_Feat_
SyntheticPoRep proofs; our sealing uses the interactive ones).
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


# --- synthetic PoRep (challenges.rs mod synthetic), for the fixed values Rust's tests hold ------

_SYNTH_NONCE = b"synth-porep\x00"


def _chacha20_stream(key: bytes, start: int, n: int) -> bytes:
    """n keystream bytes of RFC 8439 ChaCha20 (nonce "synth-porep\\0") from byte ``start``."""
    from .graph import chacha_blocks
    first, last = start // 64, (start + n + 63) // 64
    words = chacha_blocks(np.frombuffer(key, dtype=np.uint8), range(first, last), 20, nonce=_SYNTH_NONCE)
    return words.astype("<u4").tobytes()[start - 64 * first:start - 64 * first + n]


def _blake2b_key(tag: bytes, a: bytes, b: bytes) -> bytes:
    return hashlib.blake2b(a + b, digest_size=32, key=tag).digest()


class SynthChallenges:
    """SynthChallengeGenerator: synthetic challenge i is 32 ChaCha20 bytes at offset 32 i (key
    BLAKE2b-256 keyed "filecoin.io|PoRep|1|Synthetic|1|Generation" over replica_id | comm_r) as an
    LE integer mod (nodes - 1) + 1; porep challenge j of partition k picks synthetic index
    u32 LE at 4 (k n + j) of the "Selection" stream (replica_id | rand) mod the count."""

    def __init__(self, nodes: int, replica_id: bytes, comm_r: bytes, count: int | None = None):
        self.nodes, self.replica_id = nodes, replica_id
        self.count = min(nodes, 1 << 18) if count is None else count
        self.key = _blake2b_key(b"filecoin.io|PoRep|1|Synthetic|1|Generation", replica_id, comm_r)

    def challenge(self, i: int) -> int:
        raw = _chacha20_stream(self.key, 32 * i, 32)
        return int.from_bytes(raw, "little") % (self.nodes - 1) + 1

    def all(self) -> list[int]:
        raw = _chacha20_stream(self.key, 0, 32 * self.count)
        return [int.from_bytes(raw[32 * i:32 * i + 32], "little") % (self.nodes - 1) + 1 for i in range(self.count)]

    def porep_partition(self, n: int, rand: bytes, k: int) -> list[int]:
        key = _blake2b_key(b"filecoin.io|PoRep|1|Synthetic|1|Selection", self.replica_id, rand)
        raw = _chacha20_stream(key, 4 * k * n, 4 * n)
        return [self.challenge(int.from_bytes(raw[4 * j:4 * j + 4], "little") % self.count) for j in range(n)]


def porep_partition(registered_proof: str, nodes: int, challenges: int, replica_id: bytes, seed: bytes,
                    comm_r: bytes, k: int) -> np.ndarray:
    """Partition k's challenged nodes for ``registered_proof``: the interactive rule, or for the
    SyntheticPoRep kinds ``SynthChallenges(...).porep_partition`` with the seed as ``rand``
    (PublicInputs::challenges, Challenges::Synth; comm_r is tau's)."""
    from .params import is_synthetic
    if is_synthetic(registered_proof):
        return np.array(SynthChallenges(nodes, replica_id, comm_r).porep_partition(challenges, seed, k),
                        dtype=np.uint64)
    return partition_challenges(replica_id, seed, k, challenges, nodes)
