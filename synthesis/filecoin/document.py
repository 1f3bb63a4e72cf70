"""The schema of Filecoin's C1 document (SealCommitPhase1Output as serde_json writes it; c1.py
draws the JSON shape), every array bounded, and its one-line error: what c1.py parses, writes and
verifies, and what vanilla.py reads, below both."""
from __future__ import annotations

from typing import Annotated, Optional

from pydantic import BaseModel, ConfigDict, Field

from ..circuits import C1Error

BENCHMARK_KEY = "_zkhive_benchmark_sector"
BENCHMARK_NOTE = ("benchmark sector: a committed-capacity sector whose trees hold only the columns "
                  "this seed's challenges open; not a replica")


class FilecoinC1Error(C1Error):
    """One line: partition, challenge (and its node), layer, field (JSON path), message."""

    def __init__(self, message: str, *, field: str | None = None, partition: int | None = None,
                 challenge: int | None = None, node: int | None = None, layer: int | None = None):
        self.challenge, self.node, self.layer = challenge, node, layer
        parts = []
        if challenge is not None:
            parts.append(f"challenge {challenge}" + (f" (node {node})" if node is not None else ""))
        if layer is not None:
            parts.append(f"layer {layer}")
        super().__init__(f"{', '.join(parts)}: {message}" if parts else message, field=field,
                         partition=partition)


# --- the schema (pydantic; every array bounded) -------------------------------------------------

Byte = Annotated[int, Field(ge=0, le=255, strict=True)]
Domain = Annotated[list[Byte], Field(min_length=32, max_length=32)]
U32 = Annotated[int, Field(ge=0, lt=1 << 32, strict=True)]
U64 = Annotated[int, Field(ge=0, lt=1 << 64, strict=True)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class PathElement(_Strict):
    hashes: Annotated[list[Domain], Field(min_length=1, max_length=7)]
    index: Annotated[int, Field(ge=0, lt=8, strict=True)]


class InclusionPath(_Strict):
    path: Annotated[list[PathElement], Field(max_length=32)]


class SingleProof(_Strict):
    root: Domain
    leaf: Domain
    path: InclusionPath


class SubProof(_Strict):
    base_proof: InclusionPath
    sub_proof: InclusionPath
    root: Domain
    leaf: Domain


class TopProof(_Strict):
    base_proof: InclusionPath
    sub_proof: InclusionPath
    top_proof: InclusionPath
    root: Domain
    leaf: Domain


class ProofData(_Strict):
    Single: Optional[SingleProof] = None
    Sub: Optional[SubProof] = None
    Top: Optional[TopProof] = None


class MerkleProof(_Strict):
    data: ProofData


class Column(_Strict):
    index: U32
    rows: Annotated[list[Domain], Field(min_length=1, max_length=15)]
    h: None = Field(default=None, alias="_h")


class ColumnProof(_Strict):
    column: Column
    inclusion_proof: MerkleProof


class ReplicaColumnProof(_Strict):
    c_x: ColumnProof
    drg_parents: Annotated[list[ColumnProof], Field(max_length=16)]
    exp_parents: Annotated[list[ColumnProof], Field(max_length=16)]


class LabelingProof(_Strict):
    parents: Annotated[list[Domain], Field(max_length=64)]
    layer_index: U32
    node: U64


class VanillaProof(_Strict):
    comm_d_proofs: MerkleProof
    comm_r_last_proof: MerkleProof
    replica_column_proofs: ReplicaColumnProof
    labeling_proofs: Annotated[list[LabelingProof], Field(min_length=1, max_length=15)]
    encoding_proof: LabelingProof


Partitions = Annotated[list[Annotated[list[VanillaProof], Field(min_length=1, max_length=64)]],
                       Field(min_length=1, max_length=16)]


class C1Document(_Strict):
    registered_proof: Annotated[str, Field(max_length=64)]
    vanilla_proofs: Annotated[dict[str, Partitions], Field(min_length=1, max_length=1)]
    comm_r: Domain
    comm_d: Domain
    replica_id: Domain
    seed: Domain
    ticket: Domain
    benchmark: Optional[Annotated[str, Field(max_length=256)]] = Field(default=None, alias=BENCHMARK_KEY)

    @property
    def shape(self) -> str:
        return next(iter(self.vanilla_proofs))

    @property
    def partitions(self) -> list[list[VanillaProof]]:
        return self.vanilla_proofs[self.shape]
