"""What a sealing pipeline hands the prover for C2, decoded into the cluster's C1 document.

Two shapes arrive, in cuzk's ``vanilla_proof`` and in the file ``zkhive c2`` reads:

- a **Commit2 input**: ``{"SectorNum": n, "Phase1Out": "<base64>", "SectorSize": bytes}``, the
  JSON of Go's ``Commit2In`` (lotus-bench ``--save-commit2-input``) and of Curio's
  ``c1OutputWrapper`` (what Curio sends cuzk); Go writes ``[]byte`` as standard base64. Inside
  ``Phase1Out``: Filecoin's SealCommitPhase1Output as serde_json writes it (handed to the
  Filecoin family, ``synthesis.filecoin.c1.phase1_to_c1``), or a zkhive C1 document (what the
  tests and the porep-lite family uses);
- a **zkhive C1 document** as is (``{"params": ..., ...}``: ``zkhive sector c1``).

Every size is bounded before it is decoded: the wrapper's text (``limits.c1_max_bytes`` plus
base64's third), the base64 string, then the inner document with the cluster's ``[limits]``.
Errors are one line naming the field (and the byte offset where the bytes are bad).
"""
from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, replace

from synthesis import limits as lim

#: the wrapper's keys, in Go's field order
WRAPPER_KEYS = ("SectorNum", "Phase1Out", "SectorSize")


class C2InputError(ValueError):
    """A Commit2 input or C1 document the cluster cannot take: one line naming the field."""


@dataclass
class C2Input:
    #: the cluster's C1 document (``params`` names the parameter set)
    doc: dict
    #: from the wrapper (None for a bare C1 document)
    sector_number: int | None = None
    sector_size: int | None = None
    #: "commit2" (a wrapper) or "c1" (a bare zkhive C1 document)
    shape: str = "c1"


def is_wrapper(raw: bytes) -> bool:
    """Whether ``raw`` looks like a Commit2 input: a JSON object whose first key is one of the
    wrapper's (Go writes SectorNum first; any order is accepted once parsed)."""
    head = raw[:64].lstrip()
    return head.startswith(b"{") and any(head[1:].lstrip().startswith(b'"%s"' % k.encode())
                                         for k in WRAPPER_KEYS)


def decode(raw: bytes, limits: lim.Limits, *, miner_id: int | None = None,
           where: str = "vanilla_proof") -> C2Input:
    """The C1 document in ``raw`` (a Commit2 input or a bare C1 document)."""
    if not raw:
        raise C2InputError(f"{where}: empty (PoRep C2 needs the C1 output)")
    if not is_wrapper(raw):
        return C2Input(doc=_c1_doc(raw, limits, where), shape="c1")
    # the wrapper: three keys, one of them a long base64 string; its own bounds
    b64_max = (limits.document_bytes + 2) // 3 * 4
    # (the inner document's own bound applies once decoded: a Phase1Out just over b64_max fails there)
    outer = replace(limits, document_bytes=b64_max + 4096, depth=2, string_bytes=b64_max + 4096,
                    object_keys=len(WRAPPER_KEYS) + 8)
    try:
        wrapper = lim.loads(raw, outer, setting="limits.c1_max_bytes, as base64 in a Commit2 input")
    except lim.InputError as e:
        raise C2InputError(f"{where}: Commit2 input: {e}") from None
    if not isinstance(wrapper, dict):
        raise C2InputError(f"{where}: Commit2 input: not a JSON object")
    missing = [k for k in WRAPPER_KEYS if k not in wrapper]
    if missing:
        raise C2InputError(f"{where}: Commit2 input: field {missing[0]} is missing "
                           f"(a Commit2 input has {', '.join(WRAPPER_KEYS)})")
    num, size, b64 = wrapper["SectorNum"], wrapper["SectorSize"], wrapper["Phase1Out"]
    if not isinstance(num, int) or isinstance(num, bool) or not 0 <= num < 1 << 63:
        raise C2InputError(f"{where}: Commit2 input: field SectorNum must be a sector number, got {lim.clip(num)}")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0 or size & (size - 1):
        raise C2InputError(f"{where}: Commit2 input: field SectorSize must be a power of two in bytes, "
                           f"got {lim.clip(size)}")
    if not isinstance(b64, str):
        raise C2InputError(f"{where}: Commit2 input: field Phase1Out must be a base64 string")
    try:
        phase1 = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise C2InputError(f"{where}: Commit2 input: field Phase1Out is not standard base64 ({e})") from None
    # serde writes SealCommitPhase1Output's fields in order: registered_proof first
    if re.match(rb'\s*\{\s*"registered_proof"', phase1[:256]):
        doc = _filecoin_doc(phase1, num, size, miner_id, where)
    else:
        doc = _c1_doc(phase1, limits, f"{where}: Commit2 input: field Phase1Out")
    return C2Input(doc=doc, sector_number=num, sector_size=size, shape="commit2")


def check_filecoin(c2: C2Input, *, registered_proof: int, sector_number: int, miner_id: int) -> None:
    """The request against a Filecoin C1, as ``seal_commit_phase2`` holds them (filecoin-proofs
    api/seal.rs: its ensures, then ``verify_seal`` from prover id, sector id, ticket and seed):
    the request's RegisteredSealProof number names the C1's ``registered_proof``; its
    sector_number is the Commit2 input's SectorNum; comm_d, comm_r and seed are not all zero; the
    replica id SHA-256(prover id of miner_id | sector number u64 BE | ticket | comm_d | porep id)
    (trimmed to 254 bits) is the C1's. The partitions' public inputs are then derived from these
    (``FilecoinCircuit.public_inputs``). A document of another family (no ``registered_proof``)
    has none of these fields: nothing to check. C2InputError, one line naming the field."""
    doc = c2.doc
    if "registered_proof" not in doc:
        return
    from synthesis.filecoin import sector as fs
    from synthesis.filecoin.params import porep_id_of, proof_name

    rp = doc["registered_proof"]
    if proof_name(registered_proof) != rp:
        raise C2InputError(f"registered_proof: request says {proof_name(registered_proof)}, C1 is {rp}")
    if c2.sector_number is not None and sector_number != c2.sector_number:
        raise C2InputError(f"sector_number: request says {sector_number}, the Commit2 input's SectorNum "
                           f"is {c2.sector_number}")
    for name in ("comm_d", "comm_r", "seed"):
        if not any(doc[name]):
            raise C2InputError(f"{name}: all zero (seal_commit_phase2 refuses it)")
    want = fs.replica_id(fs.prover_id_from_miner(miner_id), sector_number, bytes(doc["ticket"]),
                         bytes(doc["comm_d"]), porep_id_of(rp))
    if want != bytes(doc["replica_id"]):
        raise C2InputError(f"replica_id: the C1's is {bytes(doc['replica_id']).hex()[:16]}..., miner_id {miner_id}, "
                           f"sector {sector_number}, the C1's ticket and comm_d under {rp} give "
                           f"{want.hex()[:16]}... (another miner's or sector's C1?)")


def _c1_doc(raw: bytes, limits: lim.Limits, where: str) -> dict:
    try:
        doc = lim.loads(raw, limits, setting="limits.c1_max_bytes")
    except lim.InputError as e:
        raise C2InputError(f"{where}: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("params"), str):
        raise C2InputError(f"{where}: not a C1 document: a JSON object with a string field params "
                           f"(or a Commit2 input: SectorNum, Phase1Out, SectorSize)")
    return doc


def _filecoin_doc(phase1: bytes, num: int, size: int, miner_id: int | None, where: str) -> dict:
    """Filecoin's SealCommitPhase1Output, through the Filecoin family (synthesis/filecoin): its
    own converter when it has one (``c1.phase1_to_c1``), else its parser and shape check, the
    parameter set named by ``registered_proof`` and the serde document with ``params`` added
    (serde ignores unknown fields)."""
    try:
        from synthesis.filecoin import c1 as fc1
    except ImportError:
        raise C2InputError(
            f"{where}: Commit2 input: field Phase1Out is Filecoin's SealCommitPhase1Output and this "
            f"build has no Filecoin circuit family (synthesis/filecoin) to prove it") from None
    hook = getattr(fc1, "phase1_to_c1", None)
    try:
        if hook is not None:
            doc = hook(phase1, sector_number=num, sector_size=size, miner_id=miner_id)
        else:
            raw = lim.loads(phase1, fc1.C1_LIMITS, setting="the filecoin C1 bound")
            prm = fc1.params_of(raw)
            fc1.parse(prm, raw)  # the shape for this parameter set: partitions, challenges, fields
            if prm.sector_size != size:
                raise C2InputError(f"{where}: Commit2 input: field SectorSize is {size}, the C1 output "
                                   f"is a {prm.sector_size}-byte {prm.registered_proof}")
            doc = {"params": prm.name, **raw}
    except (lim.InputError, ValueError) as e:
        if isinstance(e, C2InputError):
            raise
        raise C2InputError(f"{where}: Commit2 input: field Phase1Out: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("params"), str):
        raise C2InputError(f"{where}: the Filecoin family made no C1 document (a bug: report it)")
    return doc


def wrap(doc_bytes: bytes, sector_number: int, sector_size: int) -> bytes:
    """A Commit2 input around ``doc_bytes``, as Go's json.Marshal writes ``Commit2In`` (the
    tests' and ``zkhive sector`` users' way to make one from a zkhive C1 document)."""
    import json

    return json.dumps({"SectorNum": sector_number, "Phase1Out": base64.b64encode(doc_bytes).decode(),
                       "SectorSize": sector_size}, separators=(",", ":")).encode()
