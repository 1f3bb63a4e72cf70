"""The C1 document of the SDR family: public inputs plus every partition's vanilla proofs
(the same layout as porep-lite's; TreeD paths are SHA-254 nodes, as field elements).

Field elements are ``0x``-prefixed hex strings of at most 64 digits whose value is below r.
The model's own bounds cap every array (so no document makes a worker allocate without limit);
``parse`` then checks every length against the parameter set and names the offending field as a
JSON path (``partitions[1].challenges[3].tree_d_path[2]``).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from .. import field
from ..circuits import C1Error
from .params import TREE_ARITY, SdrParams

#: Hard caps, independent of the parameter set (checked before anything is allocated).
MAX_DEPTH = 30
MAX_LAYERS = 15
MAX_PARENTS = 16
MAX_CHALLENGES = 4096
MAX_PARTITIONS = 64


def _canonical(x: str) -> str:
    if int(x, 16) >= field.MODULUS:
        raise ValueError("field element is not below the BLS12-381 scalar field modulus r")
    return x


def _below_2_254(x: str) -> str:
    if int(x, 16) >> 254:
        raise ValueError("SHA-254 value is not below 2^254 (its top two bits must be clear)")
    return x


Fr = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-fA-F]{1,64}$"), AfterValidator(_canonical)]
Node = Annotated[int, Field(ge=0, lt=1 << 30)]
Digest = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-fA-F]{1,64}$"), AfterValidator(_below_2_254)]
Siblings = Annotated[list[Fr], Field(min_length=TREE_ARITY - 1, max_length=TREE_ARITY - 1)]
Column = Annotated[list[Digest], Field(min_length=1, max_length=MAX_LAYERS)]
TreePath = Annotated[list[Siblings], Field(max_length=MAX_DEPTH)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParentOpening(_Strict):
    """A parent's column (its labels in every layer) and the column's TreeC path."""
    node: Node
    column: Column
    tree_c_path: TreePath


class ChallengeProof(_Strict):
    """The vanilla proof of one challenged node."""
    node: Node
    data_leaf: Digest
    tree_d_path: Annotated[list[Digest], Field(max_length=MAX_DEPTH)]
    column: Column
    tree_c_path: TreePath
    tree_r_path: TreePath
    parents: Annotated[list[ParentOpening], Field(max_length=MAX_PARENTS)]


class PartitionProof(_Strict):
    challenges: Annotated[list[ChallengeProof], Field(min_length=1, max_length=MAX_CHALLENGES)]


class C1Document(_Strict):
    """``zkhive sector c1`` output; one proof job's whole input."""
    version: Literal[1]
    circuit: Literal["sdr"]
    params: str
    seed: Annotated[str, StringConstraints(pattern=r"^0x[0-9a-fA-F]{64}$")]
    replica_id: Digest
    comm_d: Fr
    comm_r: Fr
    comm_c: Fr
    comm_r_last: Fr
    partitions: Annotated[list[PartitionProof], Field(min_length=1, max_length=MAX_PARTITIONS)]


def json_schema() -> dict[str, Any]:
    return C1Document.model_json_schema()


def json_path(loc: tuple) -> str:
    """``partitions[1].challenges[3]``; a key that is not ours (an extra field) is clipped."""
    from ..limits import json_path as path

    return path(p if isinstance(p, int) else str(p) for p in loc)


def _partition_of(loc: tuple) -> int | None:
    return loc[1] if len(loc) > 1 and loc[0] == "partitions" and isinstance(loc[1], int) else None


def parse(prm: SdrParams, doc: Any) -> C1Document:
    """Validate ``doc`` (a decoded JSON object) for parameter set ``prm``; raise C1Error."""
    if not isinstance(doc, dict):
        raise C1Error(f"a C1 document is a JSON object, not {type(doc).__name__}")
    try:
        c1 = C1Document.model_validate(doc)
    except ValidationError as e:
        from ..limits import validation_line

        loc, msg = validation_line(e)
        raise C1Error(msg, field=json_path(loc) or None, partition=_partition_of(loc)) from None
    if c1.params != prm.name:
        raise C1Error(f"document is for parameter set {c1.params!r}, this circuit is {prm.name!r}",
                      field="params")
    _check_sizes(prm, c1)
    return c1


def _expect(n: int, want: int, path: str, partition: int | None, what: str) -> None:
    if n != want:
        raise C1Error(f"has {n} {what}, {want} expected for this parameter set", field=path,
                      partition=partition)


def _check_sizes(prm: SdrParams, c1: C1Document) -> None:
    _expect(len(c1.partitions), prm.partitions, "partitions", None, "partitions")
    for k, part in enumerate(c1.partitions):
        base = f"partitions[{k}]"
        _expect(len(part.challenges), prm.challenges, f"{base}.challenges", k, "challenges")
        for i, ch in enumerate(part.challenges):
            at = f"{base}.challenges[{i}]"
            if ch.node >= prm.nodes:
                raise C1Error(f"node {ch.node} is outside the sector's {prm.nodes} nodes",
                              field=f"{at}.node", partition=k)
            _expect(len(ch.tree_d_path), prm.tree_depth, f"{at}.tree_d_path", k, "levels")
            _expect(len(ch.column), prm.layers, f"{at}.column", k, "labels")
            _expect(len(ch.tree_c_path), prm.tree_rc_depth, f"{at}.tree_c_path", k, "levels")
            _expect(len(ch.tree_r_path), prm.tree_rc_depth, f"{at}.tree_r_path", k, "levels")
            _expect(len(ch.parents), prm.parents, f"{at}.parents", k, "parents")
            for j, par in enumerate(ch.parents):
                _expect(len(par.column), prm.layers, f"{at}.parents[{j}].column", k, "labels")
                _expect(len(par.tree_c_path), prm.tree_rc_depth, f"{at}.parents[{j}].tree_c_path",
                        k, "levels")
