"""SDR parameter sets: the shape of a StackedDRG sector and of one partition's proof.

A sector of ``nodes = 2^log_nodes`` 32-byte nodes is labeled in ``layers`` layers with SHA-254
(Filecoin's SDR: labels hash the replica id, the layer, the node and ``total_parents`` parent
labels, ``base_degree`` base parents from the same layer and ``exp_degree`` expander parents from
the previous one, repeated in order until there are ``total_parents``; layer 1 uses the base
parents only). TreeD is a binary SHA-254 tree, TreeC (over Poseidon column hashes) and TreeR
(over the replica, data + last layer's label) 8-ary Poseidon trees, all of depth ``tree_depth``
(binary levels): a sector smaller than 2^tree_depth nodes fills the leaves after its own with
zeros, so a small sector gives a partition circuit of the full size (the tree depth, not the
data, sets the constraint count). Each partition proves ``challenges`` challenged nodes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..family import params as family_params
from ..family.synthetic import SyntheticShape

#: Bumped whenever the circuit's constraints change for the same parameters.
CIRCUIT_VERSION = 1
TREE_ARITY = 8
MATRIX_SOURCES = ("sdr/circuit.py", "sdr/params.py", "gadgets/*.py", "poseidon.py", "builder.py",
                  "compact.py", "r1cs.py", "family/circuit.py", "sha256_spec.py")


def source_digest() -> str:
    return family_params.source_digest(MATRIX_SOURCES)


@dataclass(frozen=True)
class SdrParams(SyntheticShape):
    FAMILY: ClassVar[str] = "sdr"
    CIRCUIT_VERSION: ClassVar[int] = CIRCUIT_VERSION
    MATRIX_SOURCES: ClassVar[tuple[str, ...]] = MATRIX_SOURCES

    name: str
    log_nodes: int
    tree_depth: int
    layers: int
    base_degree: int
    exp_degree: int
    total_parents: int
    challenges: int
    partitions: int

    def __post_init__(self):
        if self.tree_depth % 3 or not 3 <= self.tree_depth <= 30:
            raise ValueError(f"{self.name}: tree_depth must be a multiple of 3 in 3..30 (8-ary TreeC/TreeR)")
        if not 1 <= self.log_nodes <= self.tree_depth:
            raise ValueError(f"{self.name}: log_nodes must be in 1..tree_depth")
        if self.base_degree < 1 or self.total_parents < self.parents:
            raise ValueError(f"{self.name}: base_degree >= 1 and total_parents >= the parents")
        if self.layers < 1 or (self.layers == 1 and self.exp_degree) or self.layers > 15:
            raise ValueError(f"{self.name}: 1..15 layers; expander parents need at least 2")

    @property
    def tree_rc_depth(self) -> int:
        return self.tree_depth // 3

    @property
    def preimage_bytes(self) -> int:
        """replica id (32) | layer u32 BE | node u64 BE | total_parents labels of 32 bytes."""
        return 32 + 4 + 8 + 32 * self.total_parents


def _sets() -> dict[str, SdrParams]:
    # sizes per partition: docs/circuits.md (from SdrCircuit.size(), equal to the built matrices)
    fil = dict(layers=11, base_degree=6, exp_degree=8, total_parents=37)
    rows = [
        # the smallest SDR set: one SHA-254 label of 2 blocks and a depth-3 TreeD already cost
        # ~190k constraints (one compression is 26k), so there is no CI set of a few thousand
        SdrParams("sdr-256k", log_nodes=3, tree_depth=3, layers=1, base_degree=1, exp_degree=0,
                  total_parents=1, challenges=1, partitions=2),
        SdrParams("sdr-1m", log_nodes=6, tree_depth=6, layers=2, base_degree=2, exp_degree=2,
                  total_parents=5, challenges=2, partitions=2),
        # one challenge of the 32 GiB shape (11 layers, 6 + 8 parents repeated to 37, depth 30)
        SdrParams("sdr-32g-1", log_nodes=10, tree_depth=30, **fil, challenges=1, partitions=2),
        # the 32 GiB partition shape: 18 challenges a partition, 10 partitions
        SdrParams("sdr-32g", log_nodes=10, tree_depth=30, **fil, challenges=18, partitions=10),
    ]
    return {p.name: p for p in rows}


SETS = _sets()
TINY = "sdr-256k"
BIG = "sdr-32g"
