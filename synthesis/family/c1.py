"""The building blocks of a family's C1 schema, and its one-line errors.

Field elements are ``0x``-prefixed hex strings of at most 64 digits whose value is below r. A
family's pydantic model bounds every array (so no document makes a worker allocate without
limit); ``validate`` turns pydantic's first error into a ``C1Error`` naming the JSON path
(``partitions[1].challenges[3].tree_d_path[2]``) and the partition, ``expect`` checks a length
against the parameter set.
"""
from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints, ValidationError

from .. import field
from ..circuits import C1Error


def canonical_fr(x: str) -> str:
    if int(x, 16) >= field.MODULUS:
        raise ValueError("field element is not below the BLS12-381 scalar field modulus r")
    return x


def below_2_254(x: str) -> str:
    if int(x, 16) >> 254:
        raise ValueError("SHA-254 value is not below 2^254 (its top two bits must be clear)")
    return x


HEX_FE = r"^0x[0-9a-fA-F]{1,64}$"
#: a field element below r
Fr = Annotated[str, StringConstraints(pattern=HEX_FE), AfterValidator(canonical_fr)]
#: a SHA-254 digest (Filecoin's Sha256Domain: the top two bits cleared)
Digest = Annotated[str, StringConstraints(pattern=HEX_FE), AfterValidator(below_2_254)]
#: 32 bytes as 0x + 64 hex digits (a seed, a ticket)
Bytes32 = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-fA-F]{64}$")]


class Strict(BaseModel):
    """No unknown fields, immutable once parsed."""
    model_config = ConfigDict(extra="forbid", frozen=True)


def json_path(loc) -> str:
    """``partitions[1].challenges[3]``; a key that is not ours (an extra field) is clipped."""
    from ..limits import json_path as path

    return path(p if isinstance(p, int) else str(p) for p in loc)


def partition_of(loc: tuple) -> int | None:
    """The partition index of an error location under ``partitions[k]``."""
    return loc[1] if len(loc) > 1 and loc[0] == "partitions" and isinstance(loc[1], int) else None


M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], doc: Any, *, partition_of=partition_of) -> M:
    """``model.model_validate(doc)``, or a C1Error with pydantic's first error on one line."""
    if not isinstance(doc, dict):
        raise C1Error(f"a C1 document is a JSON object, not {type(doc).__name__}")
    try:
        return model.model_validate(doc)
    except ValidationError as e:
        from ..limits import validation_line

        loc, msg = validation_line(e)
        raise C1Error(msg, field=json_path(loc) or None, partition=partition_of(loc)) from None


def check_params(found: str, want: str) -> None:
    if found != want:
        raise C1Error(f"document is for parameter set {found!r}, this circuit is {want!r}",
                      field="params")


def expect(n: int, want: int, path: str, partition: int | None, what: str) -> None:
    """A length against the parameter set's: C1Error naming ``path`` when they differ."""
    if n != want:
        raise C1Error(f"has {n} {what}, {want} expected for this parameter set", field=path,
                      partition=partition)
