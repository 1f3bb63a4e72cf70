"""WinningPoSt and WindowPoSt through ``zkhive gateway`` on a cluster started by the real ``zkhive up``
(its keeper, real workers, real Redis): a sealed 2 KiB sector's vanilla proofs sent by a real gRPC
client built from our .proto, the request filled field for field as Curio's ``cuzk_funcs.go``
fills it (``WindowPoStCuzk``: WINDOW_POST_PARTITION, HIGH, partition_index, randomness, the
partition's bincode FallbackPoStSectorProofs; ``WinningPoStCuzk``: WINNING_POST, CRITICAL), the
192 proof bytes verified with the .vk the key cache holds in bellperson's format against public
inputs derived here from the randomness and sector ids. Tampered vanilla proofs, randomness,
sector ids and comm_rs are refused at the door, one line naming what.

The window-post-2k key is made in the fixture (about 10 s on 2 cores); winning-post-2k's (90,750
constraints: about 45 s to make, 20 s a proof) only with ZKHIVE_LONG_FILECOIN=1."""
from __future__ import annotations

import json
import os
import re
import threading
import time

import grpc
import pytest

from cluster.gateway.pb import proving_pb2 as pb
from cluster.gateway.pb import proving_pb2_grpc as pb_grpc
from test_up_cluster import Setup

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LONG = os.environ.get("ZKHIVE_LONG_FILECOIN") == "1"
MINER = 1000
#: lotus's PoSt randomness: 32 bytes with randomness[31] &= 0x3f (a field element)
RANDOMNESS = bytes(range(201, 232)) + b"\x1f"


@pytest.fixture(scope="module")
def sectors():
    from synthesis.filecoin import params as fp
    from synthesis.filecoin import sector as fs

    prm = fp.get("filecoin-2k")
    return [fs.seal(prm, bytes([k]) * 1016, fs.prover_id_from_miner(MINER), sid, bytes([k + 1] * 32))
            for k, sid in ((1, 234), (2, 235), (3, 236))]


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    from synthesis.circuits import get_circuit

    tmp = tmp_path_factory.mktemp("gateway-post")
    # a WinningPoSt's deadline (deadlines.winning_post_s, 25 s) is the GPU's budget: on one CPU
    # prover a 2 KiB one takes ~40 s, so these tests give it 10 minutes
    s = Setup(tmp, preload=["window-post-2k"], extra_toml="[deadlines]\nwinning_post_s = 600\n")
    s.setup_keys(get_circuit("window-post-2k"), *([get_circuit("winning-post-2k")] if LONG else []))
    s.up(check=0)
    channel = grpc.insecure_channel(f"unix://{s.run_dir.resolve() / 'gateway.sock'}")
    stub = pb_grpc.ProvingEngineStub(channel)
    try:
        yield s, stub
    finally:
        channel.close()
        s.down()
    assert s.ours() == []


def vanilla(name: str, sealed, randomness: bytes, sector_index: int = 0) -> bytes:
    """What Curio's vanilla proof generation gives for ``sealed``: the bincode
    FallbackPoStSectorProof of the challenges the randomness and sector id derive."""
    from synthesis.filecoin import bincode as bc
    from synthesis.filecoin import post

    prm = post.get(name)
    if prm.kind == "winning":     # one sector, its 66 challenges (api 1.0.0: index i)
        sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, randomness, sealed.sector_id, i))
              for i in range(prm.sector_count)]
    else:
        sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, randomness, sealed.sector_id, sector_index))]
    return bc.write_post_sector_proof(prm, sp)


def window_request(proof_type: int, vproofs: list[bytes], partition: int, randomness: bytes = RANDOMNESS):
    """``WindowPoStCuzk``'s request, field for field (its request id as Go's Sprintf("%d") prints
    ``randomness[:8]``, a byte slice: ``[201 202 ...]``)."""
    return pb.SubmitProofRequest(
        request_id=f"wdpost-{MINER}-{partition}-[{' '.join(str(b) for b in randomness[:8])}]",
        proof_kind=pb.WINDOW_POST_PARTITION, sector_size=2048, registered_proof=proof_type,
        priority=pb.HIGH, vanilla_proofs=vproofs, miner_id=MINER, randomness=randomness,
        partition_index=partition)


def winning_request(vproofs: list[bytes], randomness: bytes = RANDOMNESS, proof_type: int = 0):
    """``WinningPoStCuzk``'s request, field for field."""
    return pb.SubmitProofRequest(
        request_id=f"winpost-{MINER}-{randomness[:8].hex()}", proof_kind=pb.WINNING_POST, sector_size=2048,
        registered_proof=proof_type, priority=pb.CRITICAL, vanilla_proofs=vproofs, miner_id=MINER,
        randomness=randomness)


def verify(setup, name: str, proof: bytes, public: list[int]) -> bool:
    from cluster.pipeline.keys import KeyCache
    from gpu.groth16 import Proof
    from gpu.groth16 import verify as groth16_verify
    from synthesis.circuits import get_circuit

    vk = KeyCache(setup.tmp / "keys").load_vk(get_circuit(name))
    assert len(proof) == 192
    return groth16_verify(vk, public, Proof.from_bytes(proof))


def _code(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as e:
        call()
    return e.value.code(), e.value.details()


def _public(name, sectors, partition=0, api="1.2.0", randomness=RANDOMNESS) -> list[int]:
    """The chain verifier's public inputs: ``sectors`` every partition's, in order (WinningPoSt:
    the one sector listed 66 times, as ``verify_winning_post`` lists it)."""
    from synthesis import field
    from synthesis.filecoin import post

    prm = post.get(name)
    pub = [(s.sector_id, field.from_bytes(s.comm_r)) for s in sectors]
    if prm.kind == "winning":
        pub = pub * prm.sector_count
    return post.public_inputs(prm, randomness, pub, partition, api_version=api)


def test_window_post_partitions_as_curio_sends_them_prove_and_verify(gw, sectors):
    """A partial partition (one sector of two, padded as the Rust pads it) under StackedDrgWindow
    2KiBV1_1 (Go's 10, the Rust's V1_2), then partition 1 of a four-sector deadline (its two
    sectors, StackedDrgWindow2KiBV1: api 1.0.0 hashes the sector indices 2 and 3) each proved and
    verified with the vk; the proof refused under another randomness; the job a window-post job
    at priority HIGH in ``zkhive status``."""
    from cluster.pipeline.jobs import PRIORITIES
    from test_up_cluster import zkhive

    s, stub = gw
    call = lambda req: stub.Prove(pb.ProveRequest(submit=req), timeout=300).result  # noqa: E731
    t0 = time.monotonic()
    req = window_request(10, [vanilla("window-post-2k", sectors[0], RANDOMNESS)], 0)
    res = call(req)
    took = time.monotonic() - t0
    assert res.status == pb.AwaitProofResponse.COMPLETED, res.error_message
    pub = _public("window-post-2k", sectors[:1])
    assert verify(s, "window-post-2k", res.proof, pub)
    assert not verify(s, "window-post-2k", res.proof, _public("window-post-2k", sectors[:1], randomness=bytes(32)))
    rec = json.loads(s_redis(s).get(f"zkhive:job:{res.job_id}"))
    assert rec["kind"] == "window-post" and rec["priority"] == PRIORITIES["high"] and rec["num_partitions"] == 1
    assert res.job_id.startswith(f"wdpost-{MINER}-0-_201_202_") and res.synthesis_ms > 0
    again = call(req)                                               # the same request: the same job
    assert (again.job_id, again.proof) == (res.job_id, res.proof)
    st = json.loads(zkhive(*s.args("status", "--json"), env=s.env, check=0).stdout)
    [job] = [j for j in st["jobs"]["recent"] if j["job_id"] == res.job_id]
    assert (job["kind"], job["status"]) == ("window-post", "done")
    text = zkhive(*s.args("status"), env=s.env, check=0).stdout
    assert any(res.job_id in line and "window-post-2k" in line and " window-post " in line
               for line in text.splitlines()), text
    # partition 1 of the deadline [234, 234, 235, 236]: the request holds 235 and 236 (indices 2, 3)
    proofs = [vanilla_v1(sectors[k], 2 + i) for i, k in enumerate((1, 2))]
    seen, stop = [], threading.Event()

    def watch():  # GetStatus while the job is queued and proved: its queue and prover by kind
        while not stop.is_set():
            st = stub.GetStatus(pb.GetStatusRequest(), timeout=10)
            seen.append(({q.proof_kind: (q.pending, q.in_progress) for q in st.queues},
                         {g.current_proof_kind for g in st.gpus}))
            time.sleep(0.1)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        res1 = call(window_request(5, proofs, 1))
    finally:
        stop.set()
        watcher.join(15)
    assert all(next(iter(q)) == "porep-c2" for q, _ in seen), seen[:3]  # PoRep's queue first, always
    assert any(sum(q.get("window-post", (0, 0))) == 1 for q, _ in seen), seen[-3:]
    assert any("window-post" in kinds for _, kinds in seen), seen[-3:]
    assert res1.status == pb.AwaitProofResponse.COMPLETED, res1.error_message
    deadline = [sectors[0], sectors[0], sectors[1], sectors[2]]
    assert verify(s, "window-post-2k", res1.proof, _public("window-post-2k", deadline, 1, api="1.0.0"))
    assert not verify(s, "window-post-2k", res1.proof, _public("window-post-2k", deadline, 1, api="1.2.0"))
    print(f"\nwindow-post-2k partition through the gateway: {took:.1f} s Submit to proof "
          f"(synthesis {res.synthesis_ms} ms, prover {res.gpu_compute_ms} ms)")


def test_the_preloaded_post_kind_is_warm_before_its_first_job(gw):
    """Issue 37: the first PoSt of a kind after ``up`` paid Poseidon's constants in the gateway,
    the synthesis and the aggregate worker, and the .vk read in the aggregate worker (0.3 + 0.4 +
    0.55 s of a 2 KiB WinningPoSt). With the kind in ``[srs] preload`` they are made at start."""
    from cluster.pipeline import registry

    s, _ = gw
    warmed = {w.role: w.warmed for w in registry.workers(s_redis(s))}
    assert warmed == {"aggregate": ["poseidon", "vk:window-post-2k"], "synthesis": ["poseidon"], "prove": []}, warmed


def test_a_post_job_document_through_zkhive_submit(gw, sectors, tmp_path):
    """The same kind of job from the command line: a WindowPoSt job document (post_job.document,
    from Curio's bytes) submitted with ``zkhive submit --wait``, its proof verified against inputs
    derived here; ``zkhive status --json`` shows it as a window-post job."""
    from synthesis.filecoin import post
    from synthesis.filecoin import post_job as pj
    from test_up_cluster import zkhive

    s, _ = gw
    doc = pj.document(post.get("window-post-2k"), "StackedDrgWindow2KiBV1_2", RANDOMNESS, MINER,
                      [vanilla("window-post-2k", sectors[k], RANDOMNESS) for k in (2, 1)])
    (tmp_path / "wdpost.json").write_text(json.dumps(doc))
    sub = zkhive(*s.args("submit", str(tmp_path / "wdpost.json"), "--job-id", "wdpost-cli", "--wait",
                         "--timeout", "300"), env=s.env, check=0)
    assert "wdpost-cli submitted (window-post-2k, 1 partitions)" in sub.stdout, sub.stdout
    out = json.loads(sub.stdout.splitlines()[-1])
    pub = _public("window-post-2k", [sectors[2], sectors[1]])
    assert [int(x, 16) for x in out["public_inputs"][0]] == pub
    assert verify(s, "window-post-2k", bytes.fromhex(out["proof"]), pub)
    st = json.loads(zkhive(*s.args("status", "--json"), env=s.env, check=0).stdout)
    assert [j["kind"] for j in st["jobs"]["recent"] if j["job_id"] == "wdpost-cli"] == ["window-post"]
    bad = {**doc, "sectors": [doc["sectors"][1], doc["sectors"][0]]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    res = zkhive(*s.args("submit", str(tmp_path / "bad.json"), "--job-id", "wdpost-bad"), env=s.env)
    assert res.returncode != 0 and "field sectors[0].sector_id: the vanilla proof is of sector id 236, " \
        "sectors[0] is 235" in res.stderr, res.stderr


def vanilla_v1(sealed, sector_index: int) -> bytes:
    from synthesis.filecoin import bincode as bc
    from synthesis.filecoin import post

    prm = post.get("window-post-2k")
    sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, RANDOMNESS, sealed.sector_id, sector_index,
                                                            "1.0.0"))]
    return bc.write_post_sector_proof(prm, sp)


def s_redis(s):
    import redis

    return redis.Redis(host="127.0.0.1", port=s.redis_port, password=s.password)


def _tamper(raw: bytes, at: int, xor: int = 1) -> bytes:
    b = bytearray(raw)
    b[at] ^= xor
    return bytes(b)


def test_tampered_post_requests_are_refused_at_the_door_naming_what(gw, sectors):
    """Winning and Window requests with a vanilla proof, randomness, sector id or comm_r changed:
    INVALID_ARGUMENT in one line naming the field, the sector and the challenge, within seconds
    (no key, no synthesis), and no job recorded."""
    s, stub = gw
    r = s_redis(s)
    win = vanilla("winning-post-2k", sectors[0], RANDOMNESS)
    wd = vanilla("window-post-2k", sectors[0], RANDOMNESS)
    one = 4 + 64 + 8 + 2 * (8 + 7 * 32 + 8)                        # an inclusion proof, 8-0-0, 64 leaves
    sibling = lambda c: 8 + 32 + 16 + c * one + 4 + 64 + 8 + 8 + 32   # noqa: E731  (level 0, hash 1)
    cases = [
        ("winning, a path", winning_request([_tamper(win, sibling(17))]),
         r"field vanilla_proofs: sector 0 \(id 234\), challenge 17 \(leaf \d+\): the path does not reach comm_r_last"),
        ("winning, the randomness", winning_request([win], bytes([9]) + RANDOMNESS[1:]),
         r"field vanilla_proofs: sector 0 \(id 234\), challenge \d+: the inclusion proof is of leaf \d+, "
         r"the randomness and sector id 234 challenge leaf \d+"),
        ("winning, the sector id", winning_request([_tamper(win, 0, 0x0f)]),
         r"field vanilla_proofs: sector 0 \(id 229\), challenge \d+: the inclusion proof is of leaf \d+, "
         r"the randomness and sector id 229"),
        ("winning, comm_r", winning_request([_tamper(win, 9)]),
         r"field vanilla_proofs: sector 0 \(id 234\), challenge 0: H\(comm_c, comm_r_last\) differs from comm_r"),
        ("window, a path", window_request(10, [_tamper(wd, sibling(6))], 0),
         r"field vanilla_proofs: partition 0, sector 0 \(id 234\), challenge 6 \(leaf \d+\): the path does not"),
        ("window, the randomness", window_request(10, [wd], 0, bytes([9]) + RANDOMNESS[1:]),
         r"field vanilla_proofs: partition 0, sector 0 \(id 234\), challenge \d+: the inclusion proof is of leaf"),
        ("window, the partition", window_request(5, [wd], 4),
         r"field vanilla_proofs: partition 4, sector 0 \(id 234\), challenge 0: the inclusion proof is of leaf"),
        ("window, the sector id", window_request(10, [_tamper(wd, 1)], 0),
         r"field vanilla_proofs: partition 0, sector 0 \(id 490\), challenge \d+: the inclusion proof"),
        ("window, comm_r", window_request(10, [_tamper(wd, 20)], 0),
         r"field vanilla_proofs: partition 0, sector 0 \(id 234\): H\(comm_c, comm_r_last\) differs"),
        ("window, truncated", window_request(10, [wd[:100]], 0),
         r"field vanilla_proofs\[0\]: sector 0 \(id 234\): vanilla_proof.sectors at byte 48: truncated: 1 items "
         r"need at least 72 bytes, 52 left"),
        ("window, three sectors", window_request(10, [wd] * 3, 0),
         r"field vanilla_proofs: 3 vanilla proofs, StackedDrgWindow2KiBV1_2 takes 1 to 2"),
        ("window, the same sector twice", window_request(10, [wd] * 2, 0),
         r"field sectors\[1\]\.sector_id: sector id 234 again"),
        ("winning, two sectors", winning_request([win, win]),
         r"field vanilla_proofs: 2 vanilla proofs, StackedDrgWinning2KiBV1 takes exactly 1"),
        ("winning, a window proof type", winning_request([win], proof_type=10),
         r"field registered_proof: 10 \(StackedDrgWindow2KiBV1_2\) is a WindowPoSt proof, the request is WINNING_POST"),
        ("winning, an unknown proof type", winning_request([win], proof_type=15),
         r"field registered_proof: 15 is not a RegisteredPoStProof \(0-14\)"),
        ("winning, short randomness", winning_request([win], RANDOMNESS[:31]),
         r"field randomness: 31 bytes, 32 expected"),
        ("winning, randomness not a field element", winning_request([win], b"\xff" * 32),
         r"field randomness: not a canonical field element"),
    ]
    for what, req, pattern in cases:
        req.request_id = "refused-" + str(len(what)) + "-" + what.replace(" ", "-").replace(",", "")
        t0 = time.monotonic()
        code, msg = _code(lambda: stub.Prove(pb.ProveRequest(submit=req), timeout=60))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (what, code, msg)
        assert re.match(pattern, msg) and "\n" not in msg, (what, msg)
        assert time.monotonic() - t0 < 15, what
        assert r.get(f"zkhive:job:{req.request_id}") is None, what
    # an untampered winning request is taken (its key exists only in the long run)
    if not LONG:
        code, msg = _code(lambda: stub.Prove(pb.ProveRequest(submit=winning_request([win])), timeout=60))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "no keys for parameter set 'winning-post-2k'" in msg, msg


@pytest.mark.skipif(not LONG, reason="a winning-post-2k key takes ~45 s to make and a proof ~20 s on 2 cores: "
                                     "ZKHIVE_LONG_FILECOIN=1 runs it")
def test_winning_post_as_curio_sends_it_proves_and_verifies(gw, sectors):
    s, stub = gw
    t0 = time.monotonic()
    res = stub.Prove(pb.ProveRequest(submit=winning_request([vanilla("winning-post-2k", sectors[0], RANDOMNESS)])),
                     timeout=600).result
    took = time.monotonic() - t0
    assert res.status == pb.AwaitProofResponse.COMPLETED, res.error_message
    pub = _public("winning-post-2k", sectors[:1], api="1.0.0")
    assert verify(s, "winning-post-2k", res.proof, pub)
    assert not verify(s, "winning-post-2k", res.proof,
                      _public("winning-post-2k", sectors[:1], api="1.0.0", randomness=bytes(32)))
    rec = json.loads(s_redis(s).get(f"zkhive:job:{res.job_id}"))
    assert (rec["kind"], rec["priority"]) == ("winning-post", 0)
    assert res.job_id == f"winpost-{MINER}-{RANDOMNESS[:8].hex()}"
    print(f"\nwinning-post-2k through the gateway: {took:.1f} s Submit to proof "
          f"(synthesis {res.synthesis_ms} ms, prover {res.gpu_compute_ms} ms)")
