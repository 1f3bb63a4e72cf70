"""The parent graph and the challenge draw of the synthetic family (porep-lite; sdr's until issue 36).

Parents are the same for every layer (as StackedDRG's). Base parent 0 is v - 1, so a layer is
labeled node after node; the other base parents are pseudo-random earlier nodes, the expander
parents pseudo-random nodes of the whole sector (read in the previous layer). Node 0 has no
earlier node: its base parents are recorded as 0, and it is never challenged (challenges are
drawn from 1..nodes-1, as rust-fil-proofs draws them). Each family seeds both from its own tag,
so two families' graphs differ. (The filecoin family has Filecoin's own graph: ChaCha8 buckets
and the Feistel expander.)
"""
from __future__ import annotations

import hashlib
import struct

import numpy as np

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer (Steele, Lea, Flood 2014): a fixed, portable integer mixer."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
        return x ^ (x >> np.uint64(31))


def graph_seed(tag: bytes, name: str) -> int:
    """The 64-bit graph seed of parameter set ``name`` in the family tagged ``tag``."""
    return int.from_bytes(hashlib.sha256(tag + name.encode()).digest()[:8], "little")


def parents(seed: int, nodes_total: int, base_degree: int, exp_degree: int,
            nodes: np.ndarray | None = None) -> np.ndarray:
    """(len(nodes), base_degree + exp_degree) int64 parent indices (all nodes by default)."""
    degree = base_degree + exp_degree
    v = np.arange(nodes_total, dtype=np.uint64) if nodes is None else np.asarray(nodes, np.uint64)
    s = np.uint64(seed)
    out = np.zeros((len(v), degree), dtype=np.int64)
    with np.errstate(over="ignore"):
        for i in range(degree):
            h = splitmix64(s ^ splitmix64(v * np.uint64(degree) + np.uint64(i)))
            if i == 0:
                col = v.astype(np.int64) - 1
            elif i < base_degree:
                col = (h % np.maximum(v, np.uint64(1))).astype(np.int64)
            else:
                col = (h % np.uint64(nodes_total)).astype(np.int64)
            out[:, i] = col
    out[v == 0, :base_degree] = 0
    return out


def parents_of(tag: bytes, prm, nodes: np.ndarray | None = None) -> np.ndarray:
    """``parents`` of parameter set ``prm`` (its name, nodes, base_degree, exp_degree) in the
    family tagged ``tag``: each family's graph under its own seed."""
    return parents(graph_seed(tag, prm.name), prm.nodes, prm.base_degree, prm.exp_degree, nodes)


def challenge(tag: bytes, nodes_total: int, seed: bytes, replica_id_bytes: bytes, partition: int,
              index: int) -> int:
    """1 + SHA-256(tag, seed, replica id, k, i) mod (nodes - 1): never node 0."""
    h = hashlib.sha256(tag + seed + replica_id_bytes + struct.pack("<QQ", partition, index)).digest()
    return 1 + int.from_bytes(h, "little") % (nodes_total - 1)
