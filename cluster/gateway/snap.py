"""The gateway's SNAP_DEALS_UPDATE kind: Curio's ``ProveUpdateCuzk`` request as a job document.

Curio (``lib/ffi/cuzk_funcs.go ProveUpdateCuzk``) fills ``SubmitProofRequest`` with
``proof_kind = SNAP_DEALS_UPDATE``, ``sector_size``, ``registered_proof`` (its
``abi.RegisteredUpdateProof``: 0 = StackedDrg2KiBV1 .. 4 = StackedDrg64GiBV1), ``priority =
NORMAL``, ``vanilla_proofs`` (one bincode ``PartitionProof`` a partition: the JSON list its
storage holds), ``sector_number``, ``miner_id``, and the raw 32-byte ``comm_r_old``,
``comm_r_new`` (``CIDToReplicaCommitmentV1``) and ``comm_d_new`` (``CIDToDataCommitmentV1``).
``h`` is not sent: filecoin-proofs proves with ``h_default`` (``hs[3]``), and so do we.

Everything is checked here, before a job exists (INVALID_ARGUMENT, one line naming the field,
the partition, the challenge and the level): the registered proof and the sector size, each
commitment 32 bytes below r, the number of partition proofs and each one's exact length, its
bincode (``bincode.read_update_partition_proof``: lengths before allocation, the byte offset),
then the vanilla proof itself (``snap.verify_partition``, as vanilla.rs ``verify``). What goes to
the cluster is ``synthesis.filecoin.snap_circuit``'s job document; the answer is the
partitions' 192-byte proofs concatenated in partition order, as cuzk returns them.
"""
from __future__ import annotations

from synthesis import field
from synthesis.filecoin import bincode, snap
from synthesis.filecoin import snap_circuit as sc


class SnapRequestError(ValueError):
    """A SNAP_DEALS_UPDATE request refused at the door (one line, naming what is wrong)."""


def _comm(req, name: str) -> int:
    raw = getattr(req, name)
    if len(raw) != 32:
        raise SnapRequestError(f"field {name}: {len(raw)} bytes, a 32-byte commitment expected")
    x = int.from_bytes(raw, "little")
    if x >= field.MODULUS:
        raise SnapRequestError(f"field {name}: not below the BLS12-381 scalar field modulus")
    return x


def job_document(req) -> dict:
    """The job document of a SNAP_DEALS_UPDATE ``SubmitProofRequest``, every vanilla proof
    checked; SnapRequestError names the first thing wrong."""
    rp = sc.REGISTERED.get(req.registered_proof)
    if rp is None:
        raise SnapRequestError(f"field registered_proof: {req.registered_proof} is not a "
                               f"RegisteredUpdateProof (0..4: StackedDrg2KiBV1 .. StackedDrg64GiBV1)")
    name = sc.name_of(rp)
    prm = sc.SETS[name].params
    if req.sector_size and req.sector_size != prm.sector_size:
        raise SnapRequestError(f"field sector_size: {req.sector_size}, but {rp} is a "
                               f"{prm.sector_size}-byte sector")
    comms = {k: _comm(req, k) for k in ("comm_r_old", "comm_d_new", "comm_r_new")}
    proofs = list(req.vanilla_proofs)
    if len(proofs) != prm.partition_count:
        raise SnapRequestError(f"field vanilla_proofs: {len(proofs)} partition proofs, {rp} has "
                               f"{prm.partition_count} partitions")
    from .kindlimits import check_request_size

    try:
        check_request_size(req)     # the set's largest honest request (kindlimits): the other fields
    except ValueError as e:
        raise SnapRequestError(str(e)) from None
    want, h = sc.proof_bytes(prm), sc.upd.h_default(prm)
    for k, raw in enumerate(proofs):
        if len(raw) != want:
            raise SnapRequestError(f"field vanilla_proofs[{k}]: partition {k}: {len(raw)} bytes, a "
                                   f"{rp} PartitionProof is {want}")
        try:
            pp = bincode.read_update_partition_proof(prm, raw, k)
            snap.verify_partition(prm, k, h, comms["comm_r_old"], comms["comm_d_new"],
                                  comms["comm_r_new"], pp)
        except (bincode.BincodeError, snap.UpdateProofError) as e:
            raise SnapRequestError(f"field vanilla_proofs[{k}]: {e}") from None
    doc = {"params": name, "registered_proof": rp, "h": h,
           "partition_proofs": [sc.chunked(p) for p in proofs],
           **{k: hex(v) for k, v in comms.items()}}
    if req.sector_number:
        doc["sector_number"] = req.sector_number
    if req.miner_id:
        doc["miner_id"] = req.miner_id
    return doc
