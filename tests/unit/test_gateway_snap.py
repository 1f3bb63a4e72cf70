"""SNAP_DEALS_UPDATE at the gateway's door (cluster/gateway/snap.py) and the snap-update job
document (synthesis/filecoin/snap_circuit.py): a request filled as Curio's ProveUpdateCuzk fills
it becomes the job document; every wrong field, commitment and partition proof is refused in one
line naming it, before a job exists. The request through a running cluster: test_gateway_cluster
(refusals, CI) and tests/integration/test_gateway_snap_cluster.py (a verified proof, ZKHIVE_LONG_FILECOIN)."""
from __future__ import annotations

import base64
import json

import pytest

from cluster.gateway import snap as gsnap
from cluster.gateway.pb import proving_pb2 as pb
from synthesis.circuits import C1Error, get_circuit
from synthesis.filecoin import snap_circuit as sc


@pytest.fixture(scope="module")
def updated():
    from synthesis.filecoin.samples import sample_update
    return sample_update(b"gateway snap")


def curio_request(u, **change) -> pb.SubmitProofRequest:
    """``ProveUpdateCuzk``'s request: the raw 32-byte commitments, the JSON list of bincode
    partition proofs its storage holds, NORMAL priority, RegisteredUpdateProof 0 (2 KiB)."""
    from synthesis import field
    from synthesis.filecoin import snap
    vproofs = json.loads(json.dumps([list(snap.to_bytes(u.prm, snap.partition_proof(u, k)))
                                     for k in range(u.prm.partition_count)]))
    fields = dict(request_id="snap-1000-7", proof_kind=pb.SNAP_DEALS_UPDATE, sector_size=2048,
                  registered_proof=0, priority=pb.NORMAL, vanilla_proofs=[bytes(p) for p in vproofs],
                  sector_number=7, miner_id=1000, comm_r_old=field.to_bytes(u.comm_r_old),
                  comm_r_new=field.to_bytes(u.comm_r_new), comm_d_new=field.to_bytes(u.comm_d_new))
    fields.update(change)
    return pb.SubmitProofRequest(**fields)


def test_curios_request_becomes_the_job_document_the_circuit_parses(updated):
    u = updated
    doc = gsnap.job_document(curio_request(u))
    assert doc["params"] == "snap-update-2k" and doc["registered_proof"] == "StackedDrg2KiBV1"
    assert (doc["sector_number"], doc["miner_id"], doc["h"]) == (7, 1000, 1)
    circuit = get_circuit("snap-update-2k")
    job = circuit.parse_c1(json.loads(json.dumps(doc)))
    assert circuit.public_inputs(job, 0) == [1, u.comm_r_old, u.comm_d_new, u.comm_r_new]
    assert circuit.witness(job, 0).comm_c == u.comm_c
    assert circuit.file_stem == ("v28-empty-sector-update-merkletree-poseidon_hasher-8-0-0-"
                                 "fb9e095bebdd77511c0269b967b4d87ba8b8a525edaa0e165de23ba454510194")
    assert sc.proof_bytes(u.prm) == len(base64.b64decode("".join(doc["partition_proofs"][0]))) == 15064
    assert [len(c) for c in doc["partition_proofs"][0]] == [256] * 78 + [120]   # limits.string_bytes
    from synthesis import limits
    limits.check(doc)                         # what the cluster holds every job document to


def _refused(u, match: str, **change):
    with pytest.raises(gsnap.SnapRequestError, match=match) as e:
        gsnap.job_document(curio_request(u, **change))
    assert "\n" not in str(e.value)


def test_wrong_fields_commitments_and_proofs_are_refused_naming_them(updated):
    from synthesis import field
    u = updated
    raw = curio_request(u).vanilla_proofs[0]
    _refused(u, r"^field registered_proof: 5 is not a RegisteredUpdateProof", registered_proof=5)
    _refused(u, r"^field sector_size: 4096, but StackedDrg2KiBV1 is a 2048-byte sector", sector_size=4096)
    _refused(u, r"^field comm_r_new: 31 bytes, a 32-byte commitment expected",
             comm_r_new=field.to_bytes(u.comm_r_new)[:31])
    _refused(u, r"^field comm_d_new: not below the BLS12-381 scalar field modulus", comm_d_new=b"\xff" * 32)
    _refused(u, r"^field vanilla_proofs\[0\]: partition 0: H\(comm_c, root_r_new\) differs from comm_r_new",
             comm_r_new=field.to_bytes(u.comm_r_new + 1))
    _refused(u, r"^field vanilla_proofs\[0\]: partition 0: H\(comm_c, root_r_old\) differs from comm_r_old",
             comm_r_old=field.to_bytes(u.comm_r_old + 1))
    _refused(u, r"^field vanilla_proofs\[0\]: partition 0, challenge 0 \(node \d+\), proof_d_new: root",
             comm_d_new=field.to_bytes(u.comm_d_new ^ 1))
    _refused(u, r"^field vanilla_proofs: 2 partition proofs, StackedDrg2KiBV1 has 1 partitions",
             vanilla_proofs=[raw, raw])
    _refused(u, r"^field vanilla_proofs\[0\]: partition 0: 15063 bytes, a StackedDrg2KiBV1 "
             r"PartitionProof is 15064", vanilla_proofs=[raw[:-1]])
    bad = bytearray(raw)
    bad[32 + 8 + 8 * 32 + 8 + 4 + 64 + 8 + 8 + 5] ^= 1     # challenge 0, proof_r_old, a level-0 sibling
    _refused(u, r"^field vanilla_proofs\[0\]: partition 0, challenge 0 \(node \d+\), proof_r_old: "
             r"the path does not reach its root", vanilla_proofs=[bytes(bad)])
    bad = bytearray(raw)
    bad[32:40] = (9).to_bytes(8, "little")                  # apex_leafs' length
    _refused(u, r"^field vanilla_proofs\[0\]: partition 0: apex_leafs length at byte 32: 9 items, "
             r"8 expected", vanilla_proofs=[bytes(bad)])


def test_the_job_document_is_checked_field_by_field(updated):
    u = updated
    circuit = get_circuit("snap-update-2k")
    good = sc.job_document("snap-update-2k", u)
    circuit.parse_c1(good)

    def refused(match, **change):
        doc = dict(good, **change)
        with pytest.raises(C1Error, match=match):
            circuit.parse_c1({k: v for k, v in doc.items() if v is not None})
    refused(r"^field params: names 'snap-update-8m', this circuit is snap-update-2k", params="snap-update-8m")
    refused(r"^field registered_proof: 'StackedDrg8MiBV1', snap-update-2k proves StackedDrg2KiBV1",
            registered_proof="StackedDrg8MiBV1")
    refused(r"^field comm_r_new: must be a 0x-prefixed hex string", comm_r_new=12)
    refused(r"^field comm_d_new: is not below the BLS12-381 scalar field modulus", comm_d_new="0x" + "f" * 64)
    refused(r"^field h: 2 is not one of \(1, 1, 1, 1, 1, 1\)", h=2)
    refused(r"^field partition_proofs: 0 proofs, 1 expected", partition_proofs=[])
    refused(r"^partition 0; field partition_proofs\[0\]: 1 strings, the base64 of 15064 bytes in 79 "
            r"strings of 256 characters expected", partition_proofs=[["AAAAAAAA"]])
    refused(r"^partition 0; field partition_proofs\[0\]: not a list of strings:", partition_proofs=["AAAA"])
    chunks = good["partition_proofs"][0]
    refused(r"^partition 0; field partition_proofs\[0\]\[3\]: 255 characters, 256 expected",
            partition_proofs=[chunks[:3] + [chunks[3][1:]] + chunks[4:]])
    refused(r"^partition 0; field partition_proofs\[0\]: is not base64",
            partition_proofs=[["!" + chunks[0][1:]] + chunks[1:]])
    raw = bytearray(base64.b64decode("".join(chunks)))
    raw[32 + 8 + 8 * 32:32 + 8 + 8 * 32 + 8] = (11).to_bytes(8, "little")
    refused(r"^partition 0; field partition_proofs\[0\]: challenge_proofs length at byte 296: 11 items, "
            r"10 expected", partition_proofs=[sc.chunked(bytes(raw))])
    refused(r"^field extra: unknown field", extra=1)
    # the vanilla proof itself is synthesis's check: refused naming the partition and challenge
    job = circuit.parse_c1(dict(good, comm_d_new=hex(u.comm_d_new ^ 1)))
    with pytest.raises(C1Error, match=r"^partition 0: challenge 0 \(node \d+\), proof_d_new: root"):
        circuit.synthesize(job, 0)
    with pytest.raises(C1Error, match=r"partition index 1 is outside 0..0"):
        circuit.synthesize(job, 1)
