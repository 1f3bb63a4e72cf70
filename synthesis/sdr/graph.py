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

import numpy as np

from ..family import graph as family_graph
from .params import SdrParams

GRAPH_TAG = b"zkhive sdr graph\0"
CHALLENGE_TAG = b"zkhive sdr challenge\0"


def parents(prm: SdrParams, nodes: np.ndarray | None = None) -> np.ndarray:
    """(len(nodes), base_degree + exp_degree) int64 parent indices (all nodes by default)."""
    return family_graph.parents_of(GRAPH_TAG, prm, nodes)


def preimage_parents(prm: SdrParams, layer: int) -> list[int]:
    """Which parent (0..parents-1) fills each of the total_parents label slots of a layer:
    layer 1 repeats the base parents, later layers all parents (Filecoin's order)."""
    n = prm.base_degree if layer == 1 else prm.parents
    return [i % n for i in range(prm.total_parents)]


def challenge(prm: SdrParams, seed: bytes, replica_id: int, partition: int, index: int) -> int:
    """1 + SHA-256("zkhive sdr challenge", seed, replica id, k, i) mod (nodes - 1)."""
    return family_graph.challenge(CHALLENGE_TAG, prm.nodes, seed, replica_id.to_bytes(32, "little"),
                                  partition, index)


def challenges(prm: SdrParams, seed: bytes, replica_id: int, partition: int) -> list[int]:
    return [challenge(prm, seed, replica_id, partition, i) for i in range(prm.challenges)]
