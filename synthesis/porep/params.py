"""porep-lite parameter sets: the shape of a sector and of one partition's proof.

StackedDRG at small scale. A sector of ``nodes = 2^log_nodes`` field elements is labeled in
``layers`` layers; node v's label in layer l hashes the replica id, (l, v), ``base_degree``
parents' labels from the same layer (earlier nodes: v - 1 and pseudo-random ones, so labeling is
sequential) and ``exp_degree`` parents' labels from layer l - 1 (zero in layer 1). TreeD is a
binary tree over the data, TreeC an 8-ary tree over column hashes (all layers' labels of a
node), TreeR an 8-ary tree over the replica (data + last layer's label). Each partition proves
``challenges`` challenged nodes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..family import params as family_params
from ..family.synthetic import SyntheticShape

#: Bumped whenever the circuit's constraints change for the same parameters; part of the digest
#: that keys cached matrices and proving keys.
CIRCUIT_VERSION = 2  # 2: neptune's Poseidon circuit and bellpepper's bits (issue 36)
#: TreeC and TreeR arity (as StackedDRG's 8-ary Poseidon trees); TreeD is binary.
TREE_ARITY = 8
#: The code that decides the constraint matrices. Its digest is part of the circuit digest too,
#: so a change to a gadget that someone forgot to mark with CIRCUIT_VERSION still gets new
#: cached matrices and new keys instead of a "shape (3524, 4), expected (3477, 4)" at prove time.
MATRIX_SOURCES = ("porep/circuit.py", "porep/gadget.py", "porep/matrices.py", "porep/params.py",
                  "porep/graph.py", "bellpepper/*.py", "builder.py", "r1cs.py", "family/circuit.py")


def source_digest() -> str:
    return family_params.source_digest(MATRIX_SOURCES)


@dataclass(frozen=True)
class PorepParams(SyntheticShape):
    FAMILY: ClassVar[str] = "porep-lite"
    CIRCUIT_VERSION: ClassVar[int] = CIRCUIT_VERSION
    MATRIX_SOURCES: ClassVar[tuple[str, ...]] = MATRIX_SOURCES

    name: str
    log_nodes: int
    layers: int
    base_degree: int
    exp_degree: int
    challenges: int
    partitions: int

    def __post_init__(self):
        if self.log_nodes % 3 or not 3 <= self.log_nodes <= 30:
            raise ValueError(f"{self.name}: log_nodes must be a multiple of 3 in 3..30 "
                             "(8-ary TreeC/TreeR)")
        if self.base_degree < 1:
            raise ValueError(f"{self.name}: base_degree >= 1 (v - 1 is always a parent)")
        if self.layers < 1 or (self.layers == 1 and self.exp_degree):
            raise ValueError(f"{self.name}: expander parents need at least 2 layers")
        if not 2 <= self.label_arity <= 15 or self.layers > 15:
            raise ValueError(f"{self.name}: hash arities must fit Poseidon widths up to 16")

    @property
    def label_arity(self) -> int:
        # replica id, the (layer, node) tag, then the parents' labels
        return 2 + self.parents

    @property
    def tree_d_depth(self) -> int:
        return self.log_nodes

    @property
    def tree_rc_depth(self) -> int:
        return self.log_nodes // 3


def _sets() -> dict[str, PorepParams]:
    # Sizes (constraints per partition) are in docs/circuits.md, measured by bench/synthesis.py.
    small = dict(log_nodes=3, layers=1, base_degree=1, exp_degree=0)
    mid = dict(log_nodes=6, layers=2, base_degree=3, exp_degree=3)
    big = dict(log_nodes=9, layers=2, base_degree=3, exp_degree=3)
    rows = [
        # the tiny set: cluster tests and `zkhive demo` (CPU-proves a partition in about a second)
        PorepParams("porep-lite-4k", **small, challenges=1, partitions=2),
        PorepParams("porep-lite-16k", **mid, challenges=1, partitions=2),
        PorepParams("porep-lite-64k", **big, challenges=3, partitions=4),
        PorepParams("porep-lite-256k", **big, challenges=13, partitions=4),
        # ~2^20 per partition, 10 partitions: the cluster and GPU issues' workload
        PorepParams("porep-lite-1m", **big, challenges=55, partitions=10),
        PorepParams("porep-lite-4m", **big, challenges=223, partitions=10),
        PorepParams("porep-lite-16m", **big, challenges=895, partitions=10),
    ]
    return {p.name: p for p in rows}


SETS = _sets()
#: The smallest set, for tests and the demo.
TINY = "porep-lite-4k"
