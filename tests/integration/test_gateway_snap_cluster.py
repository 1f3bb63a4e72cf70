"""A 2 KiB SnapDeals update through ``zkhive gateway`` on a cluster started by the real ``zkhive
up`` (its keeper, real workers, real Redis): a CC sector sealed, updated with new data, its
vanilla partition proof sent by a real gRPC client built from our .proto exactly as Curio's
``ProveUpdateCuzk`` fills the request; the 192-byte answer verified with the .vk the key cache
wrote in bellperson's format (the v28-empty-sector-update file name Filecoin gives it); tampered
commitments and proofs refused before a job exists. The key of the 1,705,039-constraint circuit
is made on the CPU: ZKHIVE_LONG_FILECOIN=1 (docs/testing.md has the time)."""
from __future__ import annotations

import os
import re

import grpc
import pytest

from cluster.gateway.pb import proving_pb2 as pb
from test_gateway_cluster import TOKEN, Gateway, _code
from tests.unit.test_gateway_snap import curio_request
from test_up_cluster import Setup

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(5400),
              pytest.mark.skipif(not os.environ.get("ZKHIVE_LONG_FILECOIN"),
                                 reason="the 1.7 M-constraint key on the CPU: set ZKHIVE_LONG_FILECOIN=1")]


@pytest.fixture(scope="module")
def updated():
    from synthesis.filecoin.samples import sample_update
    return sample_update(b"cluster snap")


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    from cluster.pipeline.keys import KeyCache
    from synthesis.circuits import get_circuit

    tmp = tmp_path_factory.mktemp("gateway-snap")
    s = Setup(tmp)
    s.env["ZKHIVE_GATEWAY__TOKEN"] = TOKEN
    circuit = get_circuit("snap-update-2k")
    cache = KeyCache(tmp / "keys")
    cache.setup(circuit)
    # under Filecoin's own name, as a miner's parameter cache holds it
    for kind in ("params", "vk", "meta"):
        cache.path(circuit, kind).rename(tmp / "keys" / f"{circuit.file_stem}.{kind}")
    res = s.up(check=0)
    assert re.search(r"^  gateway\s+ready in ", res.stdout, re.M), res.stdout
    g = Gateway(s)
    try:
        yield g
    finally:
        g.channel.close()
        s.down()
    assert s.ours() == []


def test_a_2k_snapdeals_update_is_proved_and_verifies_with_the_bellperson_vk(gw, updated):
    from cluster.pipeline.keys import KeyCache
    from gpu.groth16 import Proof, verify
    from synthesis.circuits import get_circuit
    from synthesis.filecoin import snap_circuit as sc

    u = updated
    res = gw.call("Prove", pb.ProveRequest(submit=curio_request(u)), timeout=3600).result
    assert res.status == pb.AwaitProofResponse.COMPLETED, res.error_message
    assert len(res.proof) == 192
    circuit = get_circuit("snap-update-2k")
    cache = KeyCache(gw.s.tmp / "keys")
    assert cache.find(circuit, "vk").name == circuit.file_stem + ".vk"
    vk = cache.load_vk(circuit)
    job = circuit.parse_c1(sc.job_document("snap-update-2k", u))
    pub = circuit.public_inputs(job, 0)
    proof = Proof.from_bytes(res.proof)
    assert verify(vk, pub, proof)
    assert not verify(vk, [pub[0], pub[1], pub[2], pub[3] + 1], proof)
    assert not verify(vk, [pub[0], pub[1], pub[2] + 1, pub[3]], proof)


def test_tampered_update_requests_are_refused_before_a_job_exists(gw, updated):
    from synthesis import field

    u = updated
    raw = curio_request(u).vanilla_proofs[0]
    bad = bytearray(raw)
    bad[32 + 8 + 8 * 32 + 8 + 4 + 64 + 8 + 8 + 5] ^= 1
    for rid, change, message in [
            ("snap-r-new", dict(comm_r_new=field.to_bytes(u.comm_r_new + 1)),
             "field vanilla_proofs[0]: partition 0: H(comm_c, root_r_new) differs from comm_r_new"),
            ("snap-d-new", dict(comm_d_new=field.to_bytes(u.comm_d_new ^ 1)),
             "field vanilla_proofs[0]: partition 0, challenge 0 (node "),
            ("snap-proof", dict(vanilla_proofs=[bytes(bad)]),
             "field vanilla_proofs[0]: partition 0, challenge 0 (node ")]:
        req = curio_request(u, request_id=rid, **change)
        code, msg = _code(lambda: gw.call("Prove", pb.ProveRequest(submit=req)))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and msg.startswith(message) and "\n" not in msg, msg
        assert gw.r.get(f"zkhive:job:{rid}") is None
