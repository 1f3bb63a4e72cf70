"""The labeling graph and the challenge derivation of porep-lite (both public, deterministic):
the synthetic families' SplitMix64 graph and seeded challenges (``synthesis.family.graph``) under
porep-lite's own tags, and the (layer, node) input of its Poseidon labels.
"""
from __future__ import annotations

import numpy as np

from .. import field
from ..family import graph as family_graph
from .params import PorepParams

GRAPH_TAG = b"porep-lite graph\0"
CHALLENGE_TAG = b"porep-lite challenge\0"


def parents(prm: PorepParams, nodes: np.ndarray | None = None) -> np.ndarray:
    """(len(nodes), base_degree + exp_degree) int64 parent indices (all nodes by default)."""
    return family_graph.parents_of(GRAPH_TAG, prm, nodes)


def layer_tag(layer: int, node: int) -> int:
    """The (layer, node) input of a label hash: node + layer * 2^32 (a linear combination of
    the challenge in the circuit, so it costs no constraint)."""
    return node + (layer << 32)


def challenge(prm: PorepParams, seed: bytes, replica_id: int, partition: int, index: int) -> int:
    """Challenge ``index`` of ``partition``: 1 + SHA-256(seed, replica id, k, i) mod (nodes - 1)."""
    return family_graph.challenge(CHALLENGE_TAG, prm.nodes, seed, field.to_bytes(replica_id),
                                  partition, index)


def challenges(prm: PorepParams, seed: bytes, replica_id: int, partition: int) -> list[int]:
    return [challenge(prm, seed, replica_id, partition, i) for i in range(prm.challenges)]
