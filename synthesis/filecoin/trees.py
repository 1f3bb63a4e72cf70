"""Filecoin's sector trees: TreeD (binary SHA-254) and the Poseidon TreeC / TreeR, sparse or full.

As the ``merkletree`` crate and filecoin-hashers build them (rust-fil-proofs 87348a7):
- leaves are stored as they are (``Algorithm::leaf`` is the identity); an inner node of TreeD is
  ``Sha256Domain`` of SHA-256(left | right) with the top two bits of byte 31 cleared
  (``trim_to_fr32``); a node of TreeC/TreeR is neptune's Poseidon over its ``arity`` children
  (``PoseidonFunction::multi_node``: the Merkle-tree domain tag 2^arity - 1);
- TreeC/TreeR have ``base_arity`` levels over each base tree of contiguous leaves, then one level of
  ``sub_arity`` over the base roots, then one of ``top_arity`` (``tree_r_arities``, leaves first);
- a proof's path holds, per level from the leaves, the ``arity - 1`` siblings in child order
  without the node's own position, and that position (``InclusionPath`` / ``PathElement``).

A tree here stores, per level, the sorted indices it holds and their values; every other node at
height h is ``defaults[h]`` (the root of an all-default subtree). A real sector holds every leaf;
a benchmark sector only the leaves it populated, so a depth-30 tree costs its populated leaves.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .. import field
from ..bellpepper.neptune import hash_native


def sha254_pairs(pairs: np.ndarray) -> np.ndarray:
    """(n, 2, 4) -> (n, 4): Sha256Function::node of each (left, right) pair."""
    raw = np.ascontiguousarray(pairs, dtype="<u8").reshape(len(pairs), 8).view(np.uint8)
    out = bytearray(b"".join(hashlib.sha256(raw[i].tobytes()).digest() for i in range(len(raw))))
    out[31::32] = bytes(b & 0x3F for b in out[31::32])
    return np.frombuffer(bytes(out), dtype="<u8").reshape(-1, 4).astype(np.uint64)


def poseidon_groups(groups: np.ndarray) -> np.ndarray:
    return hash_native(np.ascontiguousarray(groups, dtype=np.uint64))


@dataclass
class Tree:
    arities: tuple[int, ...]     # per level from the leaves
    index: list[np.ndarray]      # level h: sorted uint64 node indices held
    values: list[np.ndarray]     # level h: (len(index[h]), 4) uint64
    defaults: list[np.ndarray]   # level h: (4,) value of every node not held
    sha: bool                    # TreeD (SHA-254 pairs) or Poseidon

    @classmethod
    def build(cls, arities, leaf_index, leaf_values, *, sha: bool, default_leaf=None) -> "Tree":
        """A tree over leaves at ``leaf_index`` (sorted, unique) with these values; every other
        leaf is ``default_leaf`` (0 by default)."""
        hash_groups = sha254_pairs if sha else poseidon_groups
        idx = np.asarray(leaf_index, dtype=np.uint64)
        vals = np.ascontiguousarray(leaf_values, dtype=np.uint64).reshape(-1, 4)
        if len(idx) != len(vals) or (len(idx) > 1 and not (np.diff(idx.astype(np.int64)) > 0).all()):
            raise ValueError("leaf indices must be sorted, unique and one per value")
        d = np.zeros(4, np.uint64) if default_leaf is None else np.asarray(default_leaf, np.uint64)
        index, values, defaults = [idx], [vals], [d]
        for a in arities:
            parents = np.unique(idx // np.uint64(a))
            groups = np.broadcast_to(d, (len(parents), a, 4)).copy()
            slot = np.searchsorted(parents, idx // np.uint64(a))
            groups[slot, (idx % np.uint64(a)).astype(np.int64)] = vals
            d = hash_groups(np.broadcast_to(d, (1, a, 4)))[0]
            idx, vals = parents, hash_groups(groups)
            index.append(idx), values.append(vals), defaults.append(d)
        return cls(tuple(arities), index, values, defaults, sha)

    @property
    def depth(self) -> int:
        return len(self.arities)

    @property
    def root_vec(self) -> np.ndarray:
        return self.node(self.depth, 0)

    @property
    def root(self) -> int:
        return field.vec_to_ints(self.root_vec)[0]

    def node(self, h: int, i: int) -> np.ndarray:
        idx = self.index[h]
        k = int(np.searchsorted(idx, np.uint64(i)))
        if k < len(idx) and int(idx[k]) == i:
            return self.values[h][k]
        return self.defaults[h]

    def nodes(self, h: int, positions: np.ndarray) -> np.ndarray:
        """Values at level h of many positions: (n, 4)."""
        positions = np.asarray(positions, dtype=np.uint64).reshape(-1)
        idx = self.index[h]
        k = np.minimum(np.searchsorted(idx, positions), max(len(idx) - 1, 0))
        held = (len(idx) > 0) & (idx[k] == positions) if len(idx) else np.zeros(len(positions), bool)
        out = np.broadcast_to(self.defaults[h], (len(positions), 4)).copy()
        out[held] = self.values[h][k[held]]
        return out

    def path(self, i: int) -> list[tuple[np.ndarray, int]]:
        """[(siblings (arity - 1, 4), position)] per level from the leaves."""
        out = []
        for h, a in enumerate(self.arities):
            pos, first = i % a, i - i % a
            kids = self.nodes(h, np.arange(first, first + a, dtype=np.uint64))
            out.append((np.delete(kids, pos, axis=0), pos))
            i //= a
        return out

    def paths(self, nodes: np.ndarray) -> list[np.ndarray]:
        """Batched siblings: per level, (B, arity - 1, 4), for the leaves ``nodes``."""
        i = np.asarray(nodes, dtype=np.uint64).reshape(-1)
        out = []
        for h, a in enumerate(self.arities):
            au = np.uint64(a)
            pos = (i % au).astype(np.int64)
            first = i - i % au
            kids = self.nodes(h, (first[:, None] + np.arange(a, dtype=np.uint64)[None, :]).reshape(-1))
            kids = kids.reshape(len(i), a, 4)
            keep = np.arange(a)[None, :] != pos[:, None]
            out.append(kids[keep].reshape(len(i), a - 1, 4))
            i = i // au
        return out


def hash_node(children: np.ndarray, *, sha: bool) -> np.ndarray:
    """One inner node from its (arity, 4) children."""
    children = np.ascontiguousarray(children, dtype=np.uint64)
    if sha:
        return sha254_pairs(children.reshape(1, 2, 4))[0]
    return poseidon_groups(children.reshape(1, -1, 4))[0]


def root_from_path(leaf: np.ndarray, path, *, sha: bool) -> np.ndarray:
    """Recompute a root from a leaf and [(siblings, position)] (InclusionPath::root)."""
    h = np.asarray(leaf, dtype=np.uint64)
    for sibs, pos in path:
        sibs = np.asarray(sibs, dtype=np.uint64).reshape(-1, 4)
        h = hash_node(np.insert(sibs, pos, h, axis=0), sha=sha)
    return h


def column_hashes(columns: np.ndarray) -> np.ndarray:
    """hash_single_column over each (layers, 4) column: (n, layers, 4) -> (n, 4)."""
    return poseidon_groups(columns)
