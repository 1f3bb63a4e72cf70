"""cuzk's ``WINNING_POST`` and ``WINDOW_POST_PARTITION`` requests as the cluster's PoSt jobs.

Curio fills the request (``lib/ffi/cuzk_funcs.go`` ``WinningPoStCuzk`` / ``WindowPoStCuzk``):
``registered_proof`` its ``abi.RegisteredPoStProof`` number, ``sector_size``, ``miner_id``,
``randomness`` (32 bytes), ``vanilla_proofs`` one bincode ``FallbackPoStSectorProof`` a sector
(WinningPoSt: the one challenged sector; WindowPoSt: the partition's sectors),
``partition_index`` (WindowPoSt), priority CRITICAL (WinningPoSt) / HIGH (WindowPoSt); its
request ids are ``winpost-<miner>-<randomness[:8] hex>`` and ``wdpost-<miner>-<partition>-
<randomness[:8] as Go's %d prints a byte slice: "[1 2 ...]">``. cuzk hands them to
``generate_winning_post_with_vanilla`` / ``generate_single_window_post_with_vanilla``, whose
public sectors are the vanilla proofs' own sector ids and comm_rs; the answer is the partition's
192 proof bytes.

Here the request becomes a job document (``synthesis.filecoin.post_job.document``: the vanilla
proofs decoded, their sectors listed) of the parameter set the registered proof names, checked
whole at the door (``submit_job`` parses it: the bincode read with offsets, the vanilla proofs
verified), so a tampered proof, randomness, sector id or comm_r is INVALID_ARGUMENT naming it
before any synthesis. A request id that is not a zkhive job id (Curio's WindowPoSt one has
spaces and brackets) is mapped to one, the same each time (``job_id_of``).
"""
from __future__ import annotations

import hashlib
import re

import grpc

from .pb import proving_pb2 as pb

#: cuzk's default priority of a kind (types.rs ``Priority::default_for``), as the cluster's names
DEFAULT_PRIORITY = {pb.WINNING_POST: "critical", pb.WINDOW_POST_PARTITION: "high"}
KIND = {pb.WINNING_POST: "winning", pb.WINDOW_POST_PARTITION: "window"}
_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def job_id_of(request_id: str) -> str | None:
    """The job id of a request id: itself when it is a valid one; else its valid characters
    (runs of others as ``_``) and 12 hex digits of its SHA-256, so the same request id is always
    the same job and two request ids never share one by their cleaned text."""
    from cluster.pipeline.jobkeys import JOB_ID

    if not request_id:
        return None
    if JOB_ID.match(request_id):
        return request_id
    clean = _BAD.sub("_", request_id).strip("_.-")[:100] or "request"
    return f"{clean}-{hashlib.sha256(request_id.encode()).hexdigest()[:12]}"


class PostRequestError(ValueError):
    """A WINNING_POST / WINDOW_POST_PARTITION request refused at the door (one line naming the field)."""


def job_document(req) -> tuple[dict, str]:
    """The job document of a PoSt ``SubmitProofRequest`` and its priority (the cluster's name),
    every field and vanilla proof checked that can be without the cluster (``submit_job`` parses
    the document whole); PostRequestError names the first thing wrong. The gateway's
    ``submit`` and ``zkhive winning-post|window-post`` both start here."""
    from synthesis.filecoin import post_job as pj

    from .wire import PRIORITIES

    from .kindlimits import check_request_size

    bad = PostRequestError
    kind, what = KIND[req.proof_kind], pb.ProofKind.Name(req.proof_kind)
    name = pj.REGISTERED_POST_PROOFS.get(req.registered_proof)
    if name is None:
        raise bad(f"field registered_proof: {req.registered_proof} is not a RegisteredPoStProof "
                  f"(0-{max(pj.REGISTERED_POST_PROOFS)})")
    prm = pj.params_of(name)
    if prm.kind != kind:
        raise bad(f"field registered_proof: {req.registered_proof} ({name}) is a "
                  f"{'WinningPoSt' if prm.kind == 'winning' else 'WindowPoSt'} proof, the request is {what}")
    if req.sector_size and req.sector_size != prm.sector_size:
        raise bad(f"field sector_size: {req.sector_size}, but {name} is a {prm.sector_size}-byte sector's")
    if len(req.randomness) != 32:
        raise bad(f"field randomness: {len(req.randomness)} bytes, 32 expected")
    n, most = len(req.vanilla_proofs), pj.max_sectors(prm)
    if not 1 <= n <= most:
        raise bad(f"field vanilla_proofs: {n} vanilla proofs, {name} takes "
                  + ("exactly 1 (the challenged sector's)" if kind == "winning"
                     else f"1 to {most} (one a sector of the partition)"))
    try:
        check_request_size(req)     # the set's largest honest request (kindlimits): the other fields
    except ValueError as e:
        raise bad(str(e)) from None
    if kind == "winning" and req.partition_index:
        raise bad(f"field partition_index: {req.partition_index}, a WinningPoSt is partition 0")
    if req.priority not in PRIORITIES:
        raise bad(f"field priority: {req.priority} is not a Priority")
    priority = DEFAULT_PRIORITY[req.proof_kind] if req.priority == pb.PRIORITY_UNSPECIFIED else PRIORITIES[req.priority]
    try:
        doc = pj.document(prm, name, bytes(req.randomness), req.miner_id, [bytes(p) for p in req.vanilla_proofs],
                          req.partition_index)
    except ValueError as e:
        raise bad(f"field {e}") from None
    return doc, priority


def submit(engine, req):
    """SubmitProof of a PoSt request (``ProvingEngine._submit_one`` dispatches here)."""
    from cluster.errors import DispatchBusy, JobConflict, JobError
    from cluster.pipeline.workflow import submit_job

    from .wire import Abort

    bad = lambda msg: Abort(grpc.StatusCode.INVALID_ARGUMENT, msg)  # noqa: E731
    try:
        doc, priority = job_document(req)
    except PostRequestError as e:
        raise bad(str(e)) from None
    try:
        rec, created = submit_job(engine.rt, doc, job_id=job_id_of(req.request_id), priority=priority)
    except JobConflict as e:
        raise Abort(grpc.StatusCode.ALREADY_EXISTS, f"field request_id: {e}") from None
    except DispatchBusy as e:
        raise Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e).splitlines()[0]) from None
    except JobError as e:
        text = str(e).splitlines()[0]
        if "broker memory full" in text:
            raise Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, text) from None
        # the document's checks name the field of the document made from the request
        text = text.removeprefix("bad C1 input: ")
        raise bad(f"field request_id: {text}" if text.startswith("job id") else text) from None
    return pb.SubmitProofResponse(job_id=rec.job_id, queue_position=engine._queue_position(rec)), created
