"""What a synthetic family (porep-lite; sdr's too until issue 36) takes beyond the base: the parameter-set
shape and the C1 layout. Both prove, per challenged node v, the same five checks (TreeD, parent
columns in TreeC, labels, v's column in TreeC, the encoding in TreeR); they differ in the label
and TreeD hash (Poseidon against SHA-254), hence in which values are field elements and which
SHA-254 digests. (The filecoin family has Filecoin's own C1: SealCommitPhase1Output.)
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from ..circuits import C1Error
from . import params as family_params
from .c1 import Bytes32, Fr, Strict, check_params, expect, validate

#: Hard caps of the C1 layout, independent of the parameter set (checked before anything is
#: allocated).
MAX_DEPTH = 30
MAX_LAYERS = 15
MAX_CHALLENGES = 4096
MAX_PARTITIONS = 64
C1_VERSION = 1


class SyntheticShape:
    """Derived sizes of a synthetic parameter set: a mixin for a frozen dataclass with the fields
    name, log_nodes, layers, base_degree, exp_degree, challenges, partitions, and the class
    attributes FAMILY, CIRCUIT_VERSION, MATRIX_SOURCES."""

    FAMILY: ClassVar[str]
    CIRCUIT_VERSION: ClassVar[int]
    MATRIX_SOURCES: ClassVar[tuple[str, ...]]

    @property
    def nodes(self) -> int:
        return 1 << self.log_nodes

    @property
    def parents(self) -> int:
        return self.base_degree + self.exp_degree

    @property
    def public_per_challenge(self) -> int:
        return 1 + self.parents  # the challenge and its parents' indices

    @property
    def num_public(self) -> int:
        return 3 + self.challenges * self.public_per_challenge  # replica id, comm_d, comm_r, ...

    def digest(self) -> str:
        """Names the circuit definition: parameters, circuit version, the digest of the code that
        builds the matrices, and Poseidon parameters (by their own construction rule, which is
        fixed for BLS12-381)."""
        from dataclasses import asdict

        return family_params.circuit_digest(self.FAMILY, self.CIRCUIT_VERSION, self.MATRIX_SOURCES,
                                            asdict(self))


def c1_document_model(circuit: str, tree_arity: int, max_parents: int, *, label=Fr, leaf=Fr,
                      replica_id=Fr) -> type[Strict]:
    """The C1 document model of a synthetic family: ``label`` is the type of a column's labels,
    ``leaf`` of TreeD's nodes, ``replica_id`` of the replica id (Fr, or Digest for SHA-254)."""
    Node = Annotated[int, Field(ge=0, lt=1 << 30)]
    Siblings = Annotated[list[Fr], Field(min_length=tree_arity - 1, max_length=tree_arity - 1)]
    Column = Annotated[list[label], Field(min_length=1, max_length=MAX_LAYERS)]
    TreePath = Annotated[list[Siblings], Field(max_length=MAX_DEPTH)]

    class ParentOpening(Strict):
        """A parent's column (its labels in every layer) and the column's TreeC path."""
        node: Node
        column: Column
        tree_c_path: TreePath

    class ChallengeProof(Strict):
        """The vanilla proof of one challenged node."""
        node: Node
        data_leaf: leaf
        tree_d_path: Annotated[list[leaf], Field(max_length=MAX_DEPTH)]
        column: Column
        tree_c_path: TreePath
        tree_r_path: TreePath
        parents: Annotated[list[ParentOpening], Field(max_length=max_parents)]

    class PartitionProof(Strict):
        challenges: Annotated[list[ChallengeProof], Field(min_length=1, max_length=MAX_CHALLENGES)]

    class C1Document(Strict):
        """``zkhive sector c1`` output; one proof job's whole input."""
        version: Literal[1]
        circuit: Literal[circuit]  # type: ignore[valid-type]
        params: str
        seed: Bytes32
        replica_id: replica_id  # type: ignore[valid-type]
        comm_d: Fr
        comm_r: Fr
        comm_c: Fr
        comm_r_last: Fr
        partitions: Annotated[list[PartitionProof], Field(min_length=1, max_length=MAX_PARTITIONS)]

    return C1Document


def parse(model: type[Strict], prm: Any, doc: Any, tree_d_depth: int):
    """Validate ``doc`` (a decoded JSON object) for parameter set ``prm``; raise C1Error naming
    the field: the schema first, then every length against the parameter set."""
    c1 = validate(model, doc)
    check_params(c1.params, prm.name)
    expect(len(c1.partitions), prm.partitions, "partitions", None, "partitions")
    for k, part in enumerate(c1.partitions):
        base = f"partitions[{k}]"
        expect(len(part.challenges), prm.challenges, f"{base}.challenges", k, "challenges")
        for i, ch in enumerate(part.challenges):
            at = f"{base}.challenges[{i}]"
            if ch.node >= prm.nodes:
                raise C1Error(f"node {ch.node} is outside the sector's {prm.nodes} nodes",
                              field=f"{at}.node", partition=k)
            expect(len(ch.tree_d_path), tree_d_depth, f"{at}.tree_d_path", k, "levels")
            expect(len(ch.column), prm.layers, f"{at}.column", k, "labels")
            expect(len(ch.tree_c_path), prm.tree_rc_depth, f"{at}.tree_c_path", k, "levels")
            expect(len(ch.tree_r_path), prm.tree_rc_depth, f"{at}.tree_r_path", k, "levels")
            expect(len(ch.parents), prm.parents, f"{at}.parents", k, "parents")
            for j, par in enumerate(ch.parents):
                expect(len(par.column), prm.layers, f"{at}.parents[{j}].column", k, "labels")
                expect(len(par.tree_c_path), prm.tree_rc_depth, f"{at}.parents[{j}].tree_c_path",
                       k, "levels")
    return c1
