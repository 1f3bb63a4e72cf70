"""``zkhive window-post`` / ``winning-post`` / ``prove-update`` (c2's siblings) through a cluster
started by the real ``zkhive up`` (its keeper, real workers, real Redis): the files lotus-bench
writes and the vanilla proofs Curio sends, made here from a sealed 2 KiB sector (and its SnapDeals
update), proved by the cluster; each proof, as written by ``-o``, verified with the .vk the key
cache holds (bellperson's format) against public inputs derived here. A tampered file is refused
before anything is submitted (no job recorded), one line naming the file.

window-post-2k's key is made in the fixture (~10 s on 2 cores); winning-post-2k's (~45 s, ~20 s
a proof) and snap-update-2k's (1.7 M constraints) only with ZKHIVE_LONG_FILECOIN=1."""
from __future__ import annotations

import base64
import json
import os

import pytest

from test_up_cluster import Setup, zkhive

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(3600)]

LONG = os.environ.get("ZKHIVE_LONG_FILECOIN") == "1"
MINER = 1000
RANDOMNESS = bytes(range(101, 132)) + b"\x1f"


@pytest.fixture(scope="module")
def sectors():
    from synthesis.filecoin import params as fp
    from synthesis.filecoin import sector as fs

    prm = fp.get("filecoin-2k")
    return [fs.seal(prm, bytes([k]) * 1016, fs.prover_id_from_miner(MINER), sid, bytes([k + 1] * 32))
            for k, sid in ((1, 301), (2, 302))]


@pytest.fixture(scope="module")
def cl(tmp_path_factory):
    from synthesis.circuits import get_circuit

    tmp = tmp_path_factory.mktemp("proof-cli")
    s = Setup(tmp, extra_toml="[deadlines]\nwinning_post_s = 600\n")
    extra = [get_circuit("winning-post-2k"), get_circuit("snap-update-2k")] if LONG else []
    s.setup_keys(get_circuit("window-post-2k"), *extra)
    s.up(check=0)
    try:
        yield s
    finally:
        s.down()
    assert s.ours() == []


def vanilla(name, sealed, sector_index=0):
    from synthesis.filecoin import bincode as bc
    from synthesis.filecoin import post

    prm = post.get(name)
    if prm.kind == "winning":
        sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, RANDOMNESS, sealed.sector_id, i))
              for i in range(prm.sector_count)]
    else:
        sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, RANDOMNESS, sealed.sector_id, sector_index))]
    return bc.write_post_sector_proof(prm, sp)


def verify(s, name, proof: bytes, public: list[int]) -> bool:
    from cluster.pipeline.keys import KeyCache
    from gpu.groth16 import Proof
    from gpu.groth16 import verify as groth16_verify
    from synthesis.circuits import get_circuit

    vk = KeyCache(s.tmp / "keys").load_vk(get_circuit(name))
    return groth16_verify(vk, public, Proof.from_bytes(proof))


def _public(name, sectors, api, randomness=RANDOMNESS):
    from synthesis import field
    from synthesis.filecoin import post

    prm = post.get(name)
    pub = [(x.sector_id, field.from_bytes(x.comm_r)) for x in sectors]
    return post.public_inputs(prm, randomness, pub * (prm.sector_count if prm.kind == "winning" else 1), 0,
                              api_version=api)


def _jobs(s) -> list[str]:
    import redis
    r = redis.Redis(host="127.0.0.1", port=s.redis_port, password=s.password)
    return sorted(k.decode() for k in r.scan_iter("zkhive:job:*"))


def test_window_post_from_vanilla_files_proved_and_verified(cl, sectors, tmp_path):
    s = cl
    files = []
    for i, sec in enumerate(sectors):
        files += ["--vanilla", str(tmp_path / f"s{sec.sector_id}.vp")]
        (tmp_path / f"s{sec.sector_id}.vp").write_bytes(vanilla("window-post-2k", sec, i))
    out = tmp_path / "proof.bin"
    res = zkhive(*s.args("window-post", *files, "--sector-size", "2KiB", "--randomness", RANDOMNESS.hex(),
                         "-o", str(out), "--timeout", "600"), env=s.env, timeout=900)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("Proof ") and base64.b64decode(lines[1]) == out.read_bytes(), res.stdout
    assert "priority high" in res.stderr and "window-post-2k, 1 partitions" in res.stderr, res.stderr
    proof = out.read_bytes()
    assert len(proof) == 192
    assert verify(s, "window-post-2k", proof, _public("window-post-2k", sectors, "1.2.0"))
    assert not verify(s, "window-post-2k", proof, _public("window-post-2k", sectors, "1.2.0", bytes(32)))
    # a tampered file: refused before anything is submitted, naming it
    before = _jobs(s)
    raw = bytearray((tmp_path / "s302.vp").read_bytes())
    raw[20] ^= 1
    (tmp_path / "s302.vp").write_bytes(bytes(raw))
    res = zkhive(*s.args("window-post", *files, "--sector-size", "2KiB", "--randomness", RANDOMNESS.hex()),
                 env=s.env)
    assert res.returncode == 2 and res.stderr.startswith(
        f"zkhive window-post: {tmp_path / 's302.vp'}: field vanilla_proofs: partition 0, sector 1 (id 302): "
        "H(comm_c, comm_r_last) differs from comm_r 0x"), res.stderr
    assert _jobs(s) == before


@pytest.mark.skipif(not LONG, reason="winning-post-2k's and snap-update-2k's keys take minutes on 2 cores: "
                                     "ZKHIVE_LONG_FILECOIN=1 runs it")
def test_winning_post_and_update_from_lotus_bench_files_proved_and_verified(cl, sectors, tmp_path):
    from synthesis import field
    from synthesis.circuits import get_circuit
    from synthesis.filecoin import snap
    from synthesis.filecoin import snap_circuit as sc
    from synthesis.filecoin.samples import sample_update
    from cluster.gateway import proofcli as P

    s = cl
    vp = vanilla("winning-post-2k", sectors[0])
    (tmp_path / "w.txt").write_text(f"GenerateWinningPoStWithVanilla info:\n wpt: 0\n mid: {MINER}\n"
                                    f" rand: {RANDOMNESS.hex()}\n vp: {vp.hex()}\n")
    res = zkhive(*s.args("winning-post", str(tmp_path / "w.txt"), "-o", str(tmp_path / "w.bin")), env=s.env,
                 timeout=1200)
    assert res.returncode == 0 and "priority critical" in res.stderr, res.stderr
    proof = (tmp_path / "w.bin").read_bytes()
    assert verify(s, "winning-post-2k", proof, _public("winning-post-2k", sectors[:1], "1.0.0"))
    u = sample_update(b"proof cli cluster")
    proofs = [snap.to_bytes(u.prm, snap.partition_proof(u, k)) for k in range(u.prm.partition_count)]
    (tmp_path / "pr1.json").write_text(json.dumps([base64.b64encode(p).decode() for p in proofs]))
    res = zkhive(*s.args("prove-update", "--sector-size", "2KiB", P.cid_of(field.to_bytes(u.comm_r_old), P.SEALED),
                         P.cid_of(field.to_bytes(u.comm_r_new), P.SEALED),
                         P.cid_of(field.to_bytes(u.comm_d_new), P.UNSEALED), str(tmp_path / "pr1.json"),
                         "-o", str(tmp_path / "u.bin")), env=s.env, timeout=3000)
    assert res.returncode == 0 and res.stdout.splitlines()[-1].startswith("p: "), res.stderr
    circuit = get_circuit("snap-update-2k")
    from cluster.pipeline.keys import KeyCache
    from gpu.groth16 import Proof
    from gpu.groth16 import verify as groth16_verify
    pub = circuit.public_inputs(circuit.parse_c1(sc.job_document("snap-update-2k", u)), 0)
    vk = KeyCache(s.tmp / "keys").load_vk(circuit)
    got = Proof.from_bytes((tmp_path / "u.bin").read_bytes())
    assert groth16_verify(vk, pub, got) and not groth16_verify(vk, [*pub[:3], pub[3] + 1], got)


def test_zkhive_submit_holds_a_post_document_to_its_kind_s_bound(cl, tmp_path):
    """At submission (``zkhive submit`` -> submit_job on this cluster): a window-post-2k document
    of exactly its limit passes the size check (and is then refused by the schema, for its
    missing fields), one byte more is refused naming the kind, the size and the limit; no job."""
    from tests.unit.test_kind_limits import _padded
    from cluster.pipeline import bounds
    from synthesis.circuits import get_circuit

    s = cl
    most = bounds.document_limit(get_circuit("window-post-2k"))
    before = _jobs(s)
    for size, want in ((most, "bad C1 input: field registered_proof: is missing"),
                       (most + 1, f"window-post window-post-2k: the job document is {most + 1} bytes as JSON, over "
                                  f"its limit of {most} (the largest honest window-post-2k document + 1% + 4 KiB)")):
        (tmp_path / "doc.json").write_text(json.dumps(_padded("window-post-2k", size), sort_keys=True,
                                                      separators=(",", ":")))
        res = zkhive(*s.args("submit", str(tmp_path / "doc.json")), env=s.env)
        assert res.returncode != 0 and want in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert _jobs(s) == before
