"""The sealing side of the SDR family: a synthetic sector from a seed, and its C1 document.

Labels and TreeD are computed with ``hashlib`` (not the gadget's code: the circuit is checked
against an independent implementation). A sector smaller than the trees' 2^tree_depth leaves
fills the rest with zero leaves; their subtrees are the per-level defaults (``Tree.defaults``),
so the trees cost the sector's size, not 2^tree_depth.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import field, poseidon
from ..bellpepper.neptune import hash_native
from ..family import sector as store
from ..family.sector import SectorError, hexfe
from ..gadgets.sha256 import sha254
from . import graph
from .params import SETS, TREE_ARITY, SdrParams


def fr_bytes(v: np.ndarray) -> bytes:
    """(4,) uint64 canonical limbs -> 32 little-endian bytes."""
    return np.ascontiguousarray(v, dtype="<u8").tobytes()


def _sha_pairs(pairs: np.ndarray) -> np.ndarray:
    """(n, 2, 4) Fr -> (n, 4): SHA-254 of the two 32-byte little-endian encodings."""
    raw = np.ascontiguousarray(pairs, dtype="<u8").reshape(len(pairs), 8).view(np.uint8)
    out = b"".join(sha254(raw[i].tobytes()) for i in range(len(pairs)))
    return np.frombuffer(out, dtype="<u8").reshape(-1, 4).astype(np.uint64)


def _poseidon_groups(groups: np.ndarray) -> np.ndarray:
    return hash_native(np.ascontiguousarray(groups, dtype=np.uint64))


@dataclass
class Tree:
    """A tree of 2^depth (binary) leaves stored by its non-default prefix per level."""
    levels: list[np.ndarray]     # level h: the first ceil(n / arity^h) nodes, (m, 4)
    defaults: list[np.ndarray]   # level h: the root of an all-zero subtree of height h, (4,)
    arity: int

    @classmethod
    def build(cls, leaves: np.ndarray, height: int, arity: int) -> "Tree":
        hash_groups = _sha_pairs if arity == 2 else _poseidon_groups
        levels = [np.ascontiguousarray(leaves, dtype=np.uint64)]
        defaults = [np.zeros(4, dtype=np.uint64)]
        for _ in range(height):
            cur, z = levels[-1], defaults[-1]
            padded = np.concatenate([cur, np.broadcast_to(z, ((-len(cur)) % arity, 4))])
            levels.append(hash_groups(padded.reshape(-1, arity, 4)))
            defaults.append(hash_groups(np.broadcast_to(z, (1, arity, 4)))[0])
        return cls(levels, defaults, arity)

    @property
    def root(self) -> int:
        return field.vec_to_ints(self.levels[-1][:1])[0]

    def node(self, h: int, i: int) -> np.ndarray:
        lv = self.levels[h]
        return lv[i] if i < len(lv) else self.defaults[h]

    def path(self, index: int) -> np.ndarray:
        """(height, arity - 1, 4): per level the siblings on index's path, in order."""
        out = []
        for h in range(len(self.levels) - 1):
            group, pos = divmod(index, self.arity)
            out.append([self.node(h, group * self.arity + q) for q in range(self.arity) if q != pos])
            index = group
        return np.array(out, dtype=np.uint64).reshape(len(out), self.arity - 1, 4)


@dataclass
class Sector:
    prm: SdrParams
    seed: bytes
    replica_id: int
    data: np.ndarray          # (nodes, 4), each < 2^254
    labels: np.ndarray        # (layers, nodes, 4)
    tree_d: Tree
    tree_c: Tree
    tree_r: Tree

    @property
    def comm_d(self) -> int:
        return self.tree_d.root

    @property
    def comm_c(self) -> int:
        return self.tree_c.root

    @property
    def comm_r_last(self) -> int:
        return self.tree_r.root

    @property
    def comm_r(self) -> int:
        return poseidon.hash_ints([self.comm_c, self.comm_r_last])

    def save(self, directory: str | Path) -> Path:
        meta = {"version": 1, "family": "sdr", "params": self.prm.name, "seed": "0x" + self.seed.hex(),
                "replica_id": hexfe(self.replica_id), "comm_d": hexfe(self.comm_d),
                "comm_c": hexfe(self.comm_c), "comm_r_last": hexfe(self.comm_r_last),
                "comm_r": hexfe(self.comm_r)}
        return store.save(directory, {"data": self.data, "labels": self.labels}, meta)

    @classmethod
    def load(cls, directory: str | Path) -> "Sector":
        """Reads data and labels and rebuilds the trees (cheap: the sector is small)."""
        meta, prm, seed, replica_id = store.read_meta(directory, SETS)
        z = store.read_arrays(directory, ["data", "labels"])
        data, labels = z["data"], z["labels"]
        if data.shape != (prm.nodes, 4) or labels.shape != (prm.layers, prm.nodes, 4):
            raise SectorError(f"{Path(directory) / 'sector.npz'}: arrays do not match {prm.name}")
        s = _with_trees(prm, seed, replica_id, data, labels)
        store.check_commitment(directory, meta, s.comm_r)
        return s


def replica_id_of(seed: bytes) -> int:
    return field.from_bytes(sha254(b"zkhive sdr replica id\0" + seed))


def _data(prm: SdrParams, seed: bytes) -> np.ndarray:
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(b"zkhive sdr data\0" + seed).digest(), "little"))
    data = rng.integers(0, 1 << 64, size=(prm.nodes, 4), dtype=np.uint64, endpoint=False)
    data[:, 3] &= np.uint64((1 << 62) - 1)  # Fr32-safe: < 2^254, as Filecoin's padded data
    return data


def label_preimage(prm: SdrParams, replica_id: int, layer: int, node: int,
                   parent_labels: list[bytes]) -> bytes:
    """replica_id (32 LE) | layer u32 BE | node u64 BE | the total_parents slots' labels."""
    slots = graph.preimage_parents(prm, layer)
    return (replica_id.to_bytes(32, "little") + layer.to_bytes(4, "big") + node.to_bytes(8, "big")
            + b"".join(parent_labels[j] for j in slots))


def label_layers(prm: SdrParams, replica_id: int) -> np.ndarray:
    """labels[l - 1][v] = SHA-254(preimage): base parents from layer l (earlier nodes), expander
    parents from layer l - 1; node 0's base parents are 32 zero bytes."""
    par = graph.parents(prm).tolist()
    db = prm.base_degree
    raw = [[b""] * prm.nodes for _ in range(prm.layers)]
    zero = bytes(32)
    for layer in range(1, prm.layers + 1):
        cur, prev = raw[layer - 1], raw[layer - 2] if layer >= 2 else None
        for v in range(prm.nodes):
            pl = [cur[p] if v else zero for p in par[v][:db]]
            pl += [prev[p] for p in par[v][db:]] if prev is not None else []
            cur[v] = sha254(label_preimage(prm, replica_id, layer, v, pl))
    return np.frombuffer(b"".join(b"".join(r) for r in raw), dtype="<u8").reshape(
        prm.layers, prm.nodes, 4).astype(np.uint64)


def _with_trees(prm: SdrParams, seed: bytes, replica_id: int, data: np.ndarray,
                labels: np.ndarray) -> Sector:
    from arith import native
    columns = hash_native(np.ascontiguousarray(labels.transpose(1, 0, 2)))
    replica = native.add(data, labels[-1])  # the encoding: replica = data + key (last layer)
    return Sector(prm, seed, replica_id, data, labels, Tree.build(data, prm.tree_depth, 2),
                  Tree.build(columns, prm.tree_rc_depth, TREE_ARITY),
                  Tree.build(replica, prm.tree_rc_depth, TREE_ARITY))


def generate(prm: SdrParams, seed: bytes) -> Sector:
    """Seal a synthetic sector: data from the seed, labels, TreeD, TreeC, TreeR."""
    replica_id = replica_id_of(seed)
    data = _data(prm, seed)
    return _with_trees(prm, seed, replica_id, data, label_layers(prm, replica_id))


def interactive_seed(sector: Sector) -> bytes:
    return hashlib.sha256(b"zkhive sdr interactive seed\0" + sector.seed).digest()


def c1_document(sector: Sector, seed: bytes) -> dict:
    """The C1 input of a proof job (schema: ``synthesis.sdr.c1``)."""
    return store.c1_document(sector, seed, "sdr", graph.challenges, graph.parents,
                             sector.tree_d.path, lambda tree, v: tree.path(v))
