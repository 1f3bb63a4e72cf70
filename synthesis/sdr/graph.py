"""The SDR labeling graph and challenge derivation (public, deterministic).

Parents are the same for every layer (as Filecoin's SDR). Base parent 0 is v - 1, so a layer is
labeled node after node; the other base parents are pseudo-random earlier nodes, the expander
parents pseudo-random nodes of the whole sector (read in the previous layer). Filecoin draws base
parents from a DRG (Bucket Sample) and expanders from a Feistel-permuted bipartite expander
graph; ours draw from SplitMix64 on a per-set seed: the circuit checks parents the same way
(they are public inputs), the graph only decides which labels are opened. Node 0 has no earlier
node: its base parents are recorded as 0 and contribute 32 zero bytes; it is never challenged.
"""
from __future__ import annotations

import hashlib
import struct

import numpy as np

from .params import SdrParams

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
        return x ^ (x >> np.uint64(31))


def graph_seed(prm: SdrParams) -> int:
    return int.from_bytes(hashlib.sha256(b"zkhive sdr graph\0" + prm.name.encode()).digest()[:8], "little")


def parents(prm: SdrParams, nodes: np.ndarray | None = None) -> np.ndarray:
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


def preimage_parents(prm: SdrParams, layer: int) -> list[int]:
    """Which parent (0..parents-1) fills each of the total_parents label slots of a layer:
    layer 1 repeats the base parents, later layers all parents (Filecoin's order)."""
    n = prm.base_degree if layer == 1 else prm.parents
    return [i % n for i in range(prm.total_parents)]


def challenge(prm: SdrParams, seed: bytes, replica_id: int, partition: int, index: int) -> int:
    """1 + SHA-256("zkhive sdr challenge", seed, replica id, k, i) mod (nodes - 1)."""
    h = hashlib.sha256(b"zkhive sdr challenge\0" + seed + replica_id.to_bytes(32, "little")
                       + struct.pack("<QQ", partition, index)).digest()
    return 1 + int.from_bytes(h, "little") % (prm.nodes - 1)


def challenges(prm: SdrParams, seed: bytes, replica_id: int, partition: int) -> list[int]:
    return [challenge(prm, seed, replica_id, partition, i) for i in range(prm.challenges)]
