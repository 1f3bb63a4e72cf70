"""The largest request of each PoSt / SnapDeals kind, from its circuit's own maximum (issue 37).

A WINNING_POST / WINDOW_POST_PARTITION / SNAP_DEALS_UPDATE request carries bincode vanilla
proofs of a fixed length (``post_job.max_proof_bytes``, ``snap_circuit.proof_bytes``), at most
``post_job.max_sectors`` / ``partition_count`` of them: its largest honest size is counted here
(the protobuf encoding of that many proofs, every number at its widest) plus ``MARGIN`` for the
request id and what else a caller sets. ``request_limit`` is that of one registered proof, or of
the kind's largest size; ``largest_request`` of every kind, which the gateway's gRPC receive
bound covers (``server.build``: the Commit2 bound or this, whichever is larger), so an honest
full 32 or 64 GiB WindowPoSt partition (~60 MB) is read whatever ``limits.c1_max_bytes`` is.
A request over its own kind's limit is refused with one line naming the kind, size and limit.
"""
from __future__ import annotations

import functools

from .pb import proving_pb2 as pb

#: bytes beyond the largest honest request (request id, a caller's extra fields)
MARGIN = 4096
KINDS = (pb.WINNING_POST, pb.WINDOW_POST_PARTITION, pb.SNAP_DEALS_UPDATE)


def _sets(kind: int, registered_proof: int | None):
    """(name, sector count or partitions, proof bytes) of the kind's parameter sets."""
    from synthesis.filecoin import post, post_job as pj
    from synthesis.filecoin import snap_circuit as sc

    if kind == pb.SNAP_DEALS_UPDATE:
        rps = [registered_proof] if registered_proof in sc.REGISTERED else list(sc.REGISTERED)
        out = []
        for rp in rps:
            prm = sc.SETS[sc.name_of(sc.REGISTERED[rp])].params
            out.append((sc.name_of(sc.REGISTERED[rp]), prm.partition_count, sc.proof_bytes(prm)))
        return out
    want = "winning" if kind == pb.WINNING_POST else "window"
    name = pj.REGISTERED_POST_PROOFS.get(registered_proof) if registered_proof is not None else None
    sets = [pj.params_of(name)] if name is not None else []
    if not sets or sets[0].kind != want:   # another kind's proof: refused by the field checks, not here
        sets = [p for p in post.SETS.values() if p.kind == want]
    return [(p.name, pj.max_sectors(p), pj.max_proof_bytes(p)) for p in sets]


def _size(kind: int, n: int, proof: int) -> int:
    top = (1 << 64) - 1
    req = pb.SubmitProofRequest(proof_kind=kind, sector_size=top, registered_proof=top, priority=pb.CRITICAL,
                                vanilla_proofs=[b"\xff" * proof] * n, sector_number=top, miner_id=top,
                                randomness=b"\xff" * 32, partition_index=(1 << 32) - 1,
                                comm_r_old=b"\xff" * 32, comm_r_new=b"\xff" * 32, comm_d_new=b"\xff" * 32)
    return req.ByteSize()


@functools.lru_cache(maxsize=None)
def request_limit(kind: int, registered_proof: int | None = None) -> int:
    """The largest request of ``kind`` (of its ``registered_proof``'s set when that names one,
    else of its largest size) with ``MARGIN``. Counted from one and two proofs, never built whole."""
    most = 0
    for _, n, proof in _sets(kind, registered_proof):
        one, two = _size(kind, 1, proof), _size(kind, 2, proof)
        most = max(most, one + (n - 1) * (two - one))
    return most + MARGIN


def largest_request() -> int:
    """The largest request of any PoSt / SnapDeals kind (window-post-64g's partition)."""
    return max(request_limit(k) for k in KINDS)


def check_request_size(req) -> None:
    """ValueError (one line: the kind, its set, the size, the limit) when ``req`` is larger than
    its kind's largest honest request."""
    if req.proof_kind not in KINDS:
        return
    rp = req.registered_proof
    sets = _sets(req.proof_kind, rp)
    most, size = request_limit(req.proof_kind, rp), req.ByteSize()
    if size > most:
        label = sets[0][0] if len(sets) == 1 else f"any {pb.ProofKind.Name(req.proof_kind)} size"
        raise ValueError(f"{pb.ProofKind.Name(req.proof_kind)} ({label}): the request is {size} bytes, over its "
                         f"limit of {most} (its largest honest request + {MARGIN} bytes)")
