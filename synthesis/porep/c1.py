"""The C1 document of porep-lite: public inputs plus every partition's vanilla proofs.

Field elements are ``0x``-prefixed hex strings of at most 64 digits whose value is below r.
The model's own bounds cap every array (so no document makes a worker allocate without limit);
``parse`` then checks every length against the parameter set and names the offending field as a
JSON path (``partitions[1].challenges[3].tree_d_path[2]``). The layout is the synthetic families'
(``synthesis.family.synthetic``), every value a field element.
"""
from __future__ import annotations

from typing import Any

from ..family import synthetic
from .params import TREE_ARITY, PorepParams

MAX_PARENTS = 13

C1Document = synthetic.c1_document_model("porep-lite", TREE_ARITY, MAX_PARENTS)


def json_schema() -> dict[str, Any]:
    return C1Document.model_json_schema()


def parse(prm: PorepParams, doc: Any) -> C1Document:
    """Validate ``doc`` (a decoded JSON object) for parameter set ``prm``; raise C1Error."""
    return synthetic.parse(C1Document, prm, doc, prm.tree_d_depth)
