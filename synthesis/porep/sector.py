"""The sealing side: a synthetic sector from a seed, and its C1 (vanilla proofs) document.

A sector directory holds ``sector.json`` (parameters, seed, replica id, commitments) and
``sector.npz`` (data, labels and the three trees; numpy, no pickle). ``c1_document`` plays the
part of a sealing pipeline's C1 step: for every partition it derives the challenges from the
interactive seed and opens the challenged nodes and their parents.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import field
from ..bellpepper import neptune_params
from ..bellpepper.neptune import hash_native
from ..family import sector as store
from ..family.sector import SectorError, hexfe
from . import graph, trees
from .params import SETS, TREE_ARITY, PorepParams


@dataclass
class Sector:
    prm: PorepParams
    seed: bytes
    replica_id: int
    data: np.ndarray          # (nodes, 4)
    labels: np.ndarray        # (layers, nodes, 4)
    tree_d: list[np.ndarray]
    tree_c: list[np.ndarray]
    tree_r: list[np.ndarray]

    @property
    def comm_d(self) -> int:
        return field.vec_to_ints(self.tree_d[-1])[0]

    @property
    def comm_c(self) -> int:
        return field.vec_to_ints(self.tree_c[-1])[0]

    @property
    def comm_r_last(self) -> int:
        return field.vec_to_ints(self.tree_r[-1])[0]

    @property
    def comm_r(self) -> int:
        return neptune_params.hash_ints([self.comm_c, self.comm_r_last])

    # -- files --------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        arrays = {"data": self.data, "labels": self.labels}
        for name, levels in (("tree_d", self.tree_d), ("tree_c", self.tree_c), ("tree_r", self.tree_r)):
            for i, lv in enumerate(levels):
                arrays[f"{name}_{i}"] = lv
        meta = {"version": 1, "params": self.prm.name, "seed": "0x" + self.seed.hex(),
                "replica_id": hexfe(self.replica_id), "comm_d": hexfe(self.comm_d),
                "comm_c": hexfe(self.comm_c), "comm_r_last": hexfe(self.comm_r_last),
                "comm_r": hexfe(self.comm_r)}
        return store.save(directory, arrays, meta)

    @classmethod
    def load(cls, directory: str | Path) -> "Sector":
        meta, prm, seed, replica_id = store.read_meta(directory, SETS)
        depth = {"tree_d": prm.tree_d_depth, "tree_c": prm.tree_rc_depth, "tree_r": prm.tree_rc_depth}
        z = store.read_arrays(directory, ["data", "labels"] + [f"{name}_{i}" for name, n in depth.items()
                                                              for i in range(n + 1)])
        levels = {name: [z[f"{name}_{i}"] for i in range(n + 1)] for name, n in depth.items()}
        s = cls(prm, seed, replica_id, z["data"], z["labels"], levels["tree_d"], levels["tree_c"],
                levels["tree_r"])
        if s.data.shape != (prm.nodes, 4) or s.labels.shape != (prm.layers, prm.nodes, 4):
            raise SectorError(f"{Path(directory) / 'sector.npz'}: arrays do not match {prm.name}")
        store.check_commitment(directory, meta, s.comm_r)
        return s


def _data(prm: PorepParams, seed: bytes) -> np.ndarray:
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(b"porep-lite data\0" + seed).digest(), "little"))
    data = rng.integers(0, 1 << 64, size=(prm.nodes, 4), dtype=np.uint64, endpoint=False)
    data[:, 3] &= np.uint64((1 << 62) - 1)  # < 2^254 < r: every sample is canonical
    return data


def label_layers(prm: PorepParams, replica_id: int) -> np.ndarray:
    """labels[l - 1][v] = H(replica_id, tag(l, v), base parents' layer-l labels,
    expander parents' layer-(l-1) labels): sequential within a layer (v - 1 is a parent), so
    one call of neptune's native hash per node (bellpepper/neptune_host.cpp, what the trees and the filecoin
    family use)."""
    par = graph.parents(prm)
    db = prm.base_degree
    labels = np.zeros((prm.layers, prm.nodes, 4), dtype=np.uint64)
    pre = np.zeros((1, prm.label_arity, 4), dtype=np.uint64)
    pre[0, 0] = field.vec_from_ints([replica_id])[0]
    for layer in range(1, prm.layers + 1):
        cur, prev = labels[layer - 1], labels[layer - 2] if layer >= 2 else None
        for v in range(prm.nodes):
            pre[0, 1] = 0
            pre[0, 1, 0] = graph.layer_tag(layer, v)
            pre[0, 2:2 + db] = cur[par[v, :db]] if v else 0
            pre[0, 2 + db:] = prev[par[v, db:]] if prev is not None else 0
            cur[v] = hash_native(pre)[0]
    return labels


def generate(prm: PorepParams, seed: bytes) -> Sector:
    """Seal a synthetic sector: data from the seed, labels, TreeD, TreeC, TreeR."""
    replica_id = int.from_bytes(hashlib.sha256(b"porep-lite replica id\0" + seed).digest(), "little") % field.MODULUS
    data = _data(prm, seed)
    labels = label_layers(prm, replica_id)
    from arith import native
    columns = hash_native(np.ascontiguousarray(labels.transpose(1, 0, 2)))
    replica = native.add(data, labels[-1])  # encoding: replica = data + key (last layer)
    return Sector(prm, seed, replica_id, data, labels, trees.build(data, 2),
                  trees.build(columns, TREE_ARITY), trees.build(replica, TREE_ARITY))


def interactive_seed(sector: Sector) -> bytes:
    """The seed a sealing pipeline would draw from the chain after pre-commit (here: from the
    sector's own seed, so a sector's C1 input is reproducible)."""
    return hashlib.sha256(b"porep-lite interactive seed\0" + sector.seed).digest()


def c1_document(sector: Sector, seed: bytes) -> dict:
    """The C1-equivalent input of a proof job (see ``synthesis.porep.c1`` for the schema)."""
    return store.c1_document(sector, seed, "porep-lite", graph.challenges, graph.parents,
                             lambda v: trees.path(sector.tree_d, v, 2),
                             lambda tree, v: trees.path(tree, v, TREE_ARITY))
