"""The labeling graph and the challenge derivation of porep-lite (both public, deterministic).

Parents (as StackedDRG: the same for every layer): base parent 0 is v - 1, so each layer must be
labeled node after node; the other base parents are pseudo-random earlier nodes, the expander
parents pseudo-random nodes of the previous layer. Node 0 has no earlier node: its base parents
are recorded as 0 and contribute the label 0, and it is never challenged (challenges are drawn
from 1..nodes-1, as rust-fil-proofs draws them).
"""
from __future__ import annotations

import hashlib
import struct

import numpy as np

from .. import field
from .params import PorepParams

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer (Steele, Lea, Flood 2014): a fixed, portable integer mixer."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
        return x ^ (x >> np.uint64(31))


def graph_seed(prm: PorepParams) -> int:
    return int.from_bytes(hashlib.sha256(b"porep-lite graph\0" + prm.name.encode()).digest()[:8],
                          "little")


def parents(prm: PorepParams, nodes: np.ndarray | None = None) -> np.ndarray:
    """(len(nodes), base_degree + exp_degree) int64 parent indices (all nodes by default)."""
    v = np.arange(prm.nodes, dtype=np.uint64) if nodes is None else np.asarray(nodes, np.uint64)
    seed = np.uint64(graph_seed(prm))
    out = np.zeros((len(v), prm.parents), dtype=np.int64)
    with np.errstate(over="ignore"):
        for i in range(prm.parents):
            h = _splitmix64(seed ^ _splitmix64(v * np.uint64(prm.parents) + np.uint64(i)))
            if i == 0:
                col = v.astype(np.int64) - 1
            elif i < prm.base_degree:
                col = (h % np.maximum(v, np.uint64(1))).astype(np.int64)
            else:
                col = (h % np.uint64(prm.nodes)).astype(np.int64)
            out[:, i] = col
    out[v == 0, :prm.base_degree] = 0
    return out


def layer_tag(layer: int, node: int) -> int:
    """The (layer, node) input of a label hash: node + layer * 2^32 (a linear combination of
    the challenge in the circuit, so it costs no constraint)."""
    return node + (layer << 32)


def challenge(prm: PorepParams, seed: bytes, replica_id: int, partition: int, index: int) -> int:
    """Challenge ``index`` of ``partition``: 1 + SHA-256(seed, replica id, k, i) mod (nodes - 1)."""
    h = hashlib.sha256(b"porep-lite challenge\0" + seed + field.to_bytes(replica_id)
                       + struct.pack("<QQ", partition, index)).digest()
    return 1 + int.from_bytes(h, "little") % (prm.nodes - 1)


def challenges(prm: PorepParams, seed: bytes, replica_id: int, partition: int) -> list[int]:
    return [challenge(prm, seed, replica_id, partition, i) for i in range(prm.challenges)]
