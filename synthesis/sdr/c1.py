"""The C1 document of the SDR family: public inputs plus every partition's vanilla proofs
(the synthetic families' layout, ``synthesis.family.synthetic``; labels, TreeD nodes and the
replica id are SHA-254 digests, below 2^254, written as field elements).
"""
from __future__ import annotations

from typing import Any

from ..family import synthetic
from ..family.c1 import Digest
from .params import TREE_ARITY, SdrParams

MAX_PARENTS = 16

C1Document = synthetic.c1_document_model("sdr", TREE_ARITY, MAX_PARENTS, label=Digest, leaf=Digest,
                                         replica_id=Digest)


def json_schema() -> dict[str, Any]:
    return C1Document.model_json_schema()


def parse(prm: SdrParams, doc: Any) -> C1Document:
    """Validate ``doc`` (a decoded JSON object) for parameter set ``prm``; raise C1Error."""
    return synthetic.parse(C1Document, prm, doc, prm.tree_depth)
