"""Filecoin's C1 document (SealCommitPhase1Output as serde_json writes it) and the Commit2 input file.

The JSON shape, from the serde derives (rust-filecoin-proofs-api 0e64ce8 src/seal.rs;
rust-fil-proofs 87348a7 storage-proofs-core/src/merkle/proof.rs, storage-proofs-porep stacked/
vanilla/{params,column,column_proof,labeling_proof,encoding_proof}.rs; cross-checked with Curio's
Go mirror of the types, lib/proof/porep_vproof_types.go)::

    {"registered_proof": "StackedDrg2KiBV1_1",
     "vanilla_proofs": {"StackedDrg2KiBV1": [[Proof, ...challenges], ...partitions]},
     "comm_r": D, "comm_d": D, "replica_id": D, "seed": D, "ticket": D}
    Proof = {"comm_d_proofs": MP, "comm_r_last_proof": MP,
             "replica_column_proofs": {"c_x": CP, "drg_parents": [CP x 6], "exp_parents": [CP x 8]},
             "labeling_proofs": [{"parents": [D x 37], "layer_index": l, "node": v} x layers],
             "encoding_proof": {"parents": [D x 37], "layer_index": layers, "node": v}}
    CP = {"column": {"index": v, "rows": [D x layers], "_h": null}, "inclusion_proof": MP}
    MP = {"data": {"Single": {"root": D, "leaf": D, "path": IP}}}
       | {"data": {"Sub": {"base_proof": IP, "sub_proof": IP, "root": D, "leaf": D}}}
       | {"data": {"Top": {"base_proof": IP, "sub_proof": IP, "top_proof": IP, "root": D, "leaf": D}}}
    IP = {"path": [{"hashes": [D x arity - 1], "index": position} per level from the leaves]}

D, a domain (Sha256Domain, PoseidonDomain, Commitment, Ticket: all ``[u8; 32]``), is a JSON
array of 32 integers, the little-endian Fr repr. ``Column._h`` is a ``PhantomData`` without
``serde(skip)``: serde writes it as ``null``. serde_json writes no spaces, fields in declaration
order. A benchmark sector's document adds ``"_zkhive_benchmark_sector": "<note>"`` at the top
level (serde ignores unknown fields, as Lotus's ``_lotus_SealRandomness`` in PreCommit1 output).

The Commit2 input file (lotus-bench's and Curio's ``Commit2In``: cmd/curio/debug-proofsvc.go,
lib/ffi/cuzk_funcs.go) is Go's json.Marshal of ``{"SectorNum": int64, "Phase1Out": []byte (the C1
JSON, base64), "SectorSize": uint64}``.

``parse`` validates the shape (pydantic, bounded) and ``verify`` every vanilla proof against the
parameter set: challenges against the seed, parents against the graph, every path against its
root, every label against its preimage, the encoding, comm_r = Poseidon(comm_c, comm_r_last).
Each failure is one line naming the partition, the challenge, the layer where there is one, and
the JSON path of the field.
"""
from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import numpy as np
from pydantic import ValidationError

from .. import field, limits
from ..bellpepper import neptune_params
from . import challenges as chal
# the schema's names stay reachable here (C.FilecoinC1Error, C.C1Document, C.BENCHMARK_KEY)
from .document import BENCHMARK_KEY, BENCHMARK_NOTE, C1Document, FilecoinC1Error  # noqa: F401
from .graph import Graph, label_parent_order
from .params import SETS, TOTAL_PARENTS, FilecoinParams

#: Bounds for Filecoin documents: a 32 GiB C1 (10 x 18 proofs) is ~60 MB of JSON, nested 16
#: deep (root .. an inclusion path's sibling domain); the Commit2 file holds it as one base64
#: string. Every other bound is the default's.
C1_LIMITS = limits.Limits(document_bytes=160 << 20, depth=16)
COMMIT2_LIMITS = limits.Limits(document_bytes=224 << 20, depth=2, string_bytes=220 << 20)


def json_schema() -> dict[str, Any]:
    return C1Document.model_json_schema(by_alias=True)


def _loc_error(loc: tuple) -> dict:
    """partition / challenge of a pydantic error location under vanilla_proofs.<shape>[k][i]."""
    if len(loc) > 3 and loc[0] == "vanilla_proofs" and isinstance(loc[2], int):
        return {"partition": loc[2], "challenge": loc[3] if isinstance(loc[3], int) else None}
    return {}


def _shape_of(prm: FilecoinParams) -> str:
    return prm.shape


def params_of(doc: Any) -> FilecoinParams:
    """The parameter set a decoded C1 names (registered_proof), or a FilecoinC1Error."""
    rp = doc.get("registered_proof") if isinstance(doc, dict) else None
    for p in SETS.values():
        if isinstance(rp, str) and p.accepts(rp):   # V1_1 or its SyntheticPoRep kind: one circuit
            return p
    ni = " (NI-PoRep is not proved here: docs/interop.md)" if isinstance(rp, str) and "NonInteractive" in rp else ""
    raise FilecoinC1Error(f"registered proof {limits.clip(rp)} is not one of "
                          f"{', '.join(r for p in SETS.values() for r in (p.registered_proof, p.synthetic_proof))}{ni}",
                          field="registered_proof")


def parse(prm: FilecoinParams, doc: Any, *, bounded: bool = False) -> C1Document:
    """Validate a decoded C1 document's shape for ``prm``; raise FilecoinC1Error. ``bounded``:
    it came from ``limits.loads`` (already checked against C1_LIMITS)."""
    if not isinstance(doc, dict):
        raise FilecoinC1Error(f"a C1 document is a JSON object, not {type(doc).__name__}")
    if not bounded:
        limits.check(doc, C1_LIMITS)
    try:
        c1 = C1Document.model_validate(doc)
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(err["loc"])
        more = f" (and {e.error_count() - 1} more errors)" if e.error_count() > 1 else ""
        raise FilecoinC1Error(err["msg"] + more, field=limits.json_path(loc) or None, **_loc_error(loc)) from None
    if not prm.accepts(c1.registered_proof):
        ni = " (NI-PoRep is not proved here: docs/interop.md)" if "NonInteractive" in c1.registered_proof else ""
        raise FilecoinC1Error(f"is {limits.clip(c1.registered_proof)}, this parameter set ({prm.name}) "
                              f"is {prm.registered_proof} or {prm.synthetic_proof}{ni}", field="registered_proof")
    if c1.shape != prm.shape:
        raise FilecoinC1Error(f"vanilla proofs are keyed {limits.clip(c1.shape)}, {prm.shape} expected",
                              field="vanilla_proofs")
    if prm.benchmark != (c1.benchmark is not None):
        raise FilecoinC1Error(f"{prm.name} documents {'are' if prm.benchmark else 'are not'} benchmark "
                              f"sectors here", field=BENCHMARK_KEY)
    if len(c1.partitions) != prm.partitions:
        raise FilecoinC1Error(f"has {len(c1.partitions)} partitions, {prm.partitions} expected",
                              field=f"vanilla_proofs.{prm.shape}")
    for k, part in enumerate(c1.partitions):
        if len(part) != prm.challenges:
            raise FilecoinC1Error(f"has {len(part)} challenges, {prm.challenges} expected",
                                  field=f"vanilla_proofs.{prm.shape}[{k}]", partition=k)
    return c1


# --- writing ------------------------------------------------------------------------------------

def _d(v: np.ndarray) -> list[int]:
    return list(np.ascontiguousarray(v, dtype="<u8").tobytes())


def _lists(v: np.ndarray):
    """Fr vectors (..., 4) -> nested lists of 32-int domains, in one numpy call."""
    a = np.ascontiguousarray(v, dtype="<u8")
    return a.view(np.uint8).reshape(*a.shape[:-1], 32).tolist()


def _inclusion(levels: list[tuple[list, int]]) -> dict:
    return {"path": [{"hashes": sibs, "index": int(pos)} for sibs, pos in levels]}


def _merkle_json(root: list, leaf: list, levels: list[tuple[list, int]], prm: FilecoinParams | None) -> dict:
    """MerkleProof JSON from per-level (siblings as domain lists, position); ``prm`` None for
    TreeD (binary, Single)."""
    if prm is None or not prm.sub_arity:
        return {"data": {"Single": {"root": root, "leaf": leaf, "path": _inclusion(levels)}}}
    base = prm.base_tree_depth
    if not prm.top_arity:
        return {"data": {"Sub": {"base_proof": _inclusion(levels[:base]), "sub_proof": _inclusion(levels[base:]),
                                 "root": root, "leaf": leaf}}}
    return {"data": {"Top": {"base_proof": _inclusion(levels[:base]), "sub_proof": _inclusion(levels[base:base + 1]),
                             "top_proof": _inclusion(levels[base + 1:]), "root": root, "leaf": leaf}}}


def merkle_proofs(tree, nodes, leaves: np.ndarray, prm: FilecoinParams | None) -> list[dict]:
    """MerkleProof JSON for each leaf index in ``nodes`` (batched: one sibling lookup a level)."""
    nodes = np.asarray(nodes, dtype=np.uint64).reshape(-1)
    sibs = [_lists(s) for s in tree.paths(nodes)]             # per level: n x (a-1) domains
    pos, root, leaves = [], _d(tree.root_vec), _lists(leaves)
    i = nodes.copy()
    for a in tree.arities:
        pos.append((i % np.uint64(a)).tolist())
        i = i // np.uint64(a)
    # no list shared between two places of the document (a caller may edit one)
    return [_merkle_json(list(root), leaves[j], [(sibs[h][j], pos[h][j]) for h in range(len(sibs))], prm)
            for j in range(len(nodes))]


def merkle_proof(tree, i: int, leaf: np.ndarray, prm: FilecoinParams | None) -> dict:
    """MerkleProof JSON for leaf i."""
    return merkle_proofs(tree, [i], np.asarray(leaf).reshape(1, 4), prm)[0]


def vanilla_proof(sector, c: int) -> dict:
    """One challenge's stacked::Proof (prove_layers_generate) as serde writes it."""
    prm = sector.prm
    parents = sector.graph.parents([c])[0].tolist()
    opened = [c] + parents
    col = sector.columns[sector.position(opened)]                  # (15, layers, 4)
    col_l = _lists(col)
    inclusion = merkle_proofs(sector.tree_c, opened, sector.tree_c.nodes(0, np.asarray(opened, np.uint64)), prm)
    cps = [{"column": {"index": v, "rows": col_l[j], "_h": None}, "inclusion_proof": inclusion[j]}
           for j, v in enumerate(opened)]
    labeling = []
    for layer in range(1, prm.layers + 1):
        plabels = [col_l[1 + q][layer - 1] if q < 6 else col_l[1 + q][layer - 2] for q in range(14)]
        labeling.append({"parents": [list(plabels[q]) for q in label_parent_order(layer)],
                         "layer_index": layer, "node": c})
    k = sector.position([c])[0]
    return {
        "comm_d_proofs": merkle_proofs(sector.tree_d, [c], sector.data[k:k + 1], None)[0],
        "comm_r_last_proof": merkle_proofs(sector.tree_r, [c], sector.tree_r.nodes(0, np.asarray([c], np.uint64)),
                                           prm)[0],
        "replica_column_proofs": {"c_x": cps[0], "drg_parents": cps[1:7], "exp_parents": cps[7:]},
        "labeling_proofs": labeling,
        "encoding_proof": {"parents": [list(p) for p in labeling[-1]["parents"]], "layer_index": prm.layers,
                           "node": c},
    }


def c1_document(sector, seed: bytes) -> dict:
    """SealCommitPhase1Output for ``seed`` (the interactive randomness, 32 bytes); a sector
    sealed as SyntheticPoRep (``sector.registered_proof``) opens the synthetic challenges."""
    if len(seed) != 32:
        raise ValueError("the interactive seed is 32 bytes")
    if sector.benchmark and sector.seed != seed:
        raise ValueError("a benchmark sector is populated for one seed: use the seed it was made with")
    prm = sector.prm
    rp = getattr(sector, "registered_proof", None) or prm.registered_proof
    rows = [chal.porep_partition(rp, prm.nodes, prm.challenges, sector.replica_id, seed, sector.comm_r, k)
            for k in range(prm.partitions)]
    proofs = [[vanilla_proof(sector, int(c)) for c in row] for row in rows]
    doc = {"registered_proof": rp, "vanilla_proofs": {prm.shape: proofs},
           "comm_r": list(sector.comm_r), "comm_d": list(sector.comm_d),
           "replica_id": list(sector.replica_id), "seed": list(seed), "ticket": list(sector.ticket)}
    if sector.benchmark:
        doc[BENCHMARK_KEY] = f"{prm.name}: {BENCHMARK_NOTE}"
    return doc


def dumps(doc: dict) -> bytes:
    """serde_json::to_vec: no whitespace, fields in order."""
    return json.dumps(doc, separators=(",", ":")).encode()


def commit2_input(c1_json: bytes, sector_num: int, sector_size: int) -> bytes:
    """Go's json.Marshal of Commit2In{SectorNum, Phase1Out, SectorSize}."""
    return json.dumps({"SectorNum": sector_num, "Phase1Out": base64.b64encode(c1_json).decode(),
                       "SectorSize": sector_size}, separators=(",", ":")).encode()


def read_commit2(raw: bytes) -> tuple[int, bytes, int]:
    """(SectorNum, the C1 JSON bytes, SectorSize) of a Commit2 input file; InputError/C1Error."""
    doc = limits.loads(raw, COMMIT2_LIMITS, setting="the Commit2 file bound")
    if not isinstance(doc, dict) or set(doc) != {"SectorNum", "Phase1Out", "SectorSize"}:
        keys = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise FilecoinC1Error(f"a Commit2 input is {{SectorNum, Phase1Out, SectorSize}}, got {limits.clip(keys)}")
    for key in ("SectorNum", "SectorSize"):
        if not isinstance(doc[key], int) or isinstance(doc[key], bool) or not 0 <= doc[key] < 1 << 63:
            raise FilecoinC1Error(f"is {limits.clip(doc[key])}, not an integer in 0..2^63", field=key)
    if not isinstance(doc["Phase1Out"], str):
        raise FilecoinC1Error("is not a base64 string", field="Phase1Out")
    try:
        c1_json = base64.b64decode(doc["Phase1Out"], validate=True)
    except (binascii.Error, ValueError):
        raise FilecoinC1Error("is not valid base64", field="Phase1Out") from None
    return doc["SectorNum"], c1_json, doc["SectorSize"]


def load(raw: bytes) -> tuple[FilecoinParams, C1Document, dict]:
    """A C1 JSON document or a Commit2 input file -> (params, parsed C1, facts), shape-checked
    (``verify`` checks the proofs). facts: SectorNum / SectorSize when it was a Commit2 file."""
    facts: dict = {}
    if raw[:256].lstrip()[:1] == b"{" and b'"Phase1Out"' in raw[:256]:
        facts["sector_num"], raw, facts["sector_size"] = read_commit2(raw)
    doc = limits.loads(raw, C1_LIMITS, setting="the filecoin C1 bound")
    prm = params_of(doc)
    if "sector_size" in facts and facts["sector_size"] != prm.sector_size:
        raise FilecoinC1Error(f"is {facts['sector_size']}, the C1 is a {prm.sector_size}-byte "
                              f"{prm.registered_proof}", field="SectorSize")
    return prm, parse(prm, doc, bounded=True), facts


# --- verifying -----------------------------------------------------------------------------------

def expected_challenges(prm: FilecoinParams, c1: C1Document, k: int):
    """Partition k's challenges as the verifier derives them from the document's replica id,
    seed (and comm_r, SyntheticPoRep): interactive or synthetic by ``registered_proof``."""
    return chal.porep_partition(c1.registered_proof, prm.nodes, prm.challenges, bytes(c1.replica_id),
                                bytes(c1.seed), bytes(c1.comm_r), k)


def verify(prm: FilecoinParams, c1: C1Document, *, partitions=None) -> list:
    """Check every vanilla proof (or those of ``partitions``); return their PartitionVanilla."""
    from .vanilla import check_partition, from_c1
    rid = bytes(c1.replica_id)
    for name in ("replica_id", "comm_d"):   # SHA-256 outputs trimmed to 254 bits
        if int.from_bytes(bytes(getattr(c1, name)), "little") >> 254:
            raise FilecoinC1Error("is not below 2^254 (a trimmed domain)", field=name)
    comm_c = comm_r_last = None
    out = []
    graph = Graph.for_params(prm, c1.registered_proof)
    for k in range(prm.partitions) if partitions is None else partitions:
        expect = expected_challenges(prm, c1, k)
        pv = from_c1(prm, c1, k)
        check_partition(prm, pv, expect, graph, k)
        if comm_c is None:
            comm_c, comm_r_last = pv.comm_c, pv.comm_r_last
            if neptune_params.hash_ints([comm_c, comm_r_last]) != pv.comm_r:
                raise FilecoinC1Error("comm_r is not Poseidon(comm_c, comm_r_last) of the proofs' roots",
                                      field="comm_r")
        elif (pv.comm_c, pv.comm_r_last) != (comm_c, comm_r_last):
            raise FilecoinC1Error("TreeC/TreeR roots differ from partition 0's", partition=k,
                                  field=f"vanilla_proofs.{prm.shape}[{k}]")
        out.append(pv)
    return out
