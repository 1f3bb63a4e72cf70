"""Per-kind input bounds (issue 37): a PoSt / SnapDeals job document is bounded by its circuit's
own largest honest document + 1% + 4 KiB (cluster.pipeline.bounds), not by limits.c1_max_bytes
(a full 32 GiB WindowPoSt partition is 79.7 MB of JSON, over the 64 MiB default); a gateway
request by its set's largest honest request + 4 KiB (cluster.gateway.kindlimits), and the gRPC
receive bound covers the largest of them. The rule is shown at its exact bound on 2 KiB sets
(nothing of 80 MB is built); the large sets' figures are computed."""
from __future__ import annotations


import pytest

from cluster.errors import JobError
from cluster.pipeline import bounds
from cluster.settings import Settings


def _canonical(doc) -> bytes:
    from cluster.pipeline.workflow import canonical_c1
    return canonical_c1(doc)


def _padded(params: str, size: int) -> dict:
    """A document naming ``params`` whose canonical JSON is exactly ``size`` bytes (strings of at
    most 200 characters: within limits.string_bytes)."""
    doc = {"params": params, "pad": []}
    base = len(_canonical(doc))
    room = size - base
    while room > 0:
        n = min(200, room - 2 - (1 if doc["pad"] else 0))
        if n < 0:                       # too little room for another string: lengthen the last
            doc["pad"][-1] += "x" * room
            break
        doc["pad"].append("x" * n)
        room = size - len(_canonical(doc))
    assert len(_canonical(doc)) == size
    return doc


@pytest.mark.parametrize("params,kind", [("window-post-2k", "window-post"), ("winning-post-2k", "winning-post"),
                                         ("snap-update-2k", "snap-update")])
def test_the_kinds_document_bound_at_its_limit_and_one_byte_over(params, kind):
    from synthesis.circuits import get_circuit
    s = Settings()
    most = bounds.document_limit(get_circuit(params))
    n = get_circuit(params).max_document_bytes()
    assert most == n + n // 100 + 4096
    at = _padded(params, most)
    bounds.check_c1(s, at)
    bounds.check_canonical_size(s, _canonical(at), at)
    over = _padded(params, most + 1)
    with pytest.raises(JobError) as e:
        bounds.check_canonical_size(s, _canonical(over), over)
    assert str(e.value) == (f"{kind} {params}: the job document is {most + 1} bytes as JSON, over its limit of "
                            f"{most} (the largest honest {params} document + 1% + 4 KiB)")
    # a PoRep C1 is still held to limits.c1_max_bytes
    s1 = Settings(limits={"c1_max_bytes": 1000})
    c1 = {"params": "filecoin-2k", "pad": ["x" * 200] * 5}
    with pytest.raises(JobError, match=r"over the limit of 1000 \(limits\.c1_max_bytes\)$"):
        bounds.check_canonical_size(s1, _canonical(c1), c1)
    bounds.check_canonical_size(s1, _canonical(at), at)        # the kind's bound is its own, not c1_max_bytes


def test_an_honest_document_is_within_the_computed_maximum():
    """The largest document is counted with every number at its widest: a real 2 KiB WindowPoSt
    document of two sectors (Curio's bytes) is no larger; its exact form with the widest numbers
    is exactly the count."""
    from synthesis.filecoin import post, post_job as pj

    prm = post.get("window-post-2k")
    proofs = [b"\x00" * pj.max_proof_bytes(prm)] * 2
    proofs = [(234).to_bytes(8, "little") + p[8:] for p in proofs[:1]] + [(235).to_bytes(8, "little") + proofs[1][8:]]
    doc = pj.document(prm, "StackedDrgWindow2KiBV1_2", b"\x01" * 32, 1000, proofs)
    assert len(_canonical(doc)) <= pj.max_document_bytes(prm)
    widest = pj.document(prm, "StackedDrgWindow2KiBV1_2", b"\xff" * 32, (1 << 64) - 1,
                         [b"\xff" * pj.max_proof_bytes(prm)] * 2, (1 << 32) - 1)
    assert len(_canonical(widest)) == pj.max_document_bytes(prm)


def test_a_full_32_and_64_gib_window_partition_passes_and_the_c1_bound_is_unchanged():
    from synthesis.circuits import get_circuit
    s = Settings()
    assert s.limits.c1_max_bytes == 64 << 20
    for params, measured in (("window-post-32g", 79_671_282), ("window-post-64g", 79_757_349)):
        n = get_circuit(params).max_document_bytes()
        assert n == measured and n > s.limits.c1_max_bytes       # over the C1 bound: refused before
        assert bounds.document_limit(get_circuit(params)) > n
    # zkhive submit reads up to the largest kind's document before it knows the kind
    assert bounds.read_limits(s).document_bytes == bounds.largest_kind_document() == \
        bounds.document_limit(get_circuit("window-post-64g"))
    s1 = Settings(limits={"c1_max_bytes": 128 << 20})
    assert bounds.read_limits(s1).document_bytes == 128 << 20


def test_the_gateway_request_bound_of_a_kind_at_its_limit_and_one_byte_over():
    """A WINDOW_POST_PARTITION request of exactly its set's largest honest size + 4 KiB is taken
    (its request id padded); one byte more is refused naming the kind, size and limit."""
    from cluster.gateway import kindlimits as kl
    from cluster.gateway import postinput
    from cluster.gateway.pb import proving_pb2 as pb
    from synthesis.filecoin import post, post_job as pj

    prm = post.get("window-post-2k")
    most = kl.request_limit(pb.WINDOW_POST_PARTITION, 10)
    req = pb.SubmitProofRequest(proof_kind=pb.WINDOW_POST_PARTITION, registered_proof=10, sector_size=2048,
                                randomness=b"\x01" * 32, miner_id=1000,
                                vanilla_proofs=[b"\x00" * pj.max_proof_bytes(prm)] * 2)
    req.request_id = "r" * (most - req.ByteSize() - 3)
    assert req.ByteSize() == most
    doc, priority = postinput.job_document(req)
    assert (doc["params"], priority) == ("window-post-2k", "high")
    req.request_id += "r"
    with pytest.raises(postinput.PostRequestError) as e:
        postinput.job_document(req)
    assert str(e.value) == (f"WINDOW_POST_PARTITION (window-post-2k): the request is {most + 1} bytes, over its "
                            f"limit of {most} (its largest honest request + 4096 bytes)")
    # the gRPC receive bound covers the largest kind's request whatever c1_max_bytes is
    big = kl.largest_request()
    assert big == kl.request_limit(pb.WINDOW_POST_PARTITION, 14) > 58_000_000
    from cluster.settings import LARGEST_KIND_REQUEST
    assert big == LARGEST_KIND_REQUEST        # the settings' pinned copy (their checks import no circuit)
    g = Settings().gateway
    assert g.request_bytes(1 << 20, big) == big
    assert g.request_bytes(64 << 20, big) == (64 << 20) // 3 * 4 + 4 + 4096 + (64 << 10)   # the C2's, larger
    assert Settings(gateway={"max_message_bytes": 1 << 20}).gateway.request_bytes(1 << 20, big) == 1 << 20


def test_a_snap_request_over_its_bound_is_refused_naming_it():
    from cluster.gateway import kindlimits as kl
    from cluster.gateway import snap as gsnap
    from cluster.gateway.pb import proving_pb2 as pb
    from synthesis.filecoin import snap_circuit as sc

    most = kl.request_limit(pb.SNAP_DEALS_UPDATE, 0)
    prm = sc.SETS["snap-update-2k"].params
    req = pb.SubmitProofRequest(proof_kind=pb.SNAP_DEALS_UPDATE, registered_proof=0, sector_size=2048,
                                comm_r_old=b"\x01" * 32, comm_r_new=b"\x01" * 32, comm_d_new=b"\x01" * 32,
                                vanilla_proofs=[b"\x00" * sc.proof_bytes(prm)])
    req.request_id = "r" * (most - req.ByteSize() - 2)
    assert req.ByteSize() == most + 1
    with pytest.raises(gsnap.SnapRequestError, match=rf"^SNAP_DEALS_UPDATE \(snap-update-2k\): the request is "
                                                     rf"{most + 1} bytes, over its limit of {most} "):
        gsnap.job_document(req)
    req.request_id = req.request_id[:-1]
    with pytest.raises(gsnap.SnapRequestError, match=r"^field vanilla_proofs\[0\]: partition 0"):
        gsnap.job_document(req)                    # within the bound: on to the proof's own checks


def test_the_grpc_receive_bound_covers_the_largest_post_request_whatever_c1_max_bytes():
    """With c1_max_bytes at 1 MiB (a Commit2 input's bound 1.5 MiB) the gateway still reads a
    request as large as a full 64 GiB WindowPoSt partition's (kindlimits.largest_request, 56 MiB):
    at that size it reaches the servicer, one byte more is grpc's RESOURCE_EXHAUSTED."""
    import grpc

    from cluster.gateway import kindlimits as kl
    from cluster.gateway.pb import proving_pb2_grpc as pb_grpc
    from cluster.gateway.server import build
    from cluster.ops.supervisor import free_port
    from cluster.settings import GatewaySettings
    from tests.unit.test_input_limits_exact import _message_of, _Runtime

    s = Settings(limits={"c1_max_bytes": 1 << 20}, gateway=GatewaySettings(address="127.0.0.1", port=free_port()))
    limit = kl.largest_request()
    assert s.gateway.request_bytes(s.limits.c1_max_bytes, 0) < limit == s.gateway.request_bytes(s.limits.c1_max_bytes)
    # the settings refuse an in-flight budget below it (no request could be served)
    from cluster.errors import SettingsError
    with pytest.raises(SettingsError, match=rf"gateway.max_inflight_bytes \(50000000\) must be at least the largest "
                                            rf"request \({limit}:"):
        Settings(limits={"c1_max_bytes": 1 << 20}, gateway={"max_inflight_bytes": 50_000_000}).check()
    server, port = build(s, _Runtime(s))
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", -1)]) as channel:
            stub = pb_grpc.ProvingEngineStub(channel)
            with pytest.raises(grpc.RpcError) as e:
                stub.SubmitProof(_message_of(limit), timeout=120)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()   # reached the servicer
            with pytest.raises(grpc.RpcError) as e:
                stub.SubmitProof(_message_of(limit + 1), timeout=120)
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert f"({limit + 1} vs. {limit})" in e.value.details(), e.value.details()
    finally:
        server.stop(None)
