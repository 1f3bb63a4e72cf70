"""``zkhive winning-post`` / ``window-post`` / ``prove-update`` (cluster/gateway/proofcli.py) up to
the cluster: the files lotus-bench writes (``simple winning-post --show-inputs``' output,
``provereplicaupdate1``'s vproofs.json and the CIDs ``provereplicaupdate2`` takes) and the raw
vanilla proofs Curio sends, read with bounds, every vanilla proof verified before any cluster is
asked; a tampered file is refused in one line naming the file, the field and the offset. With no
cluster answering (a free port), a good input reaches "no cluster with a ready prover": every
check passed. Proofs through a real cluster: tests/integration/test_proof_cli_cluster.py."""
from __future__ import annotations

import base64
import json

import pytest

from cluster.gateway import proofcli as P

MINER = 1000
RANDOMNESS = bytes(range(201, 232)) + b"\x1f"


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch):
    from cluster.ops.supervisor import free_port
    monkeypatch.setenv("ZKHIVE_REDIS__URL", f"redis://127.0.0.1:{free_port()}/0")
    monkeypatch.delenv("ZKHIVE_CONFIG", raising=False)


@pytest.fixture(scope="module")
def sealed():
    from synthesis.filecoin import params as fp
    from synthesis.filecoin import sector as fs
    return fs.seal(fp.get("filecoin-2k"), b"\x01" * 1016, fs.prover_id_from_miner(MINER), 234, b"\x02" * 32)


def vanilla(name, sealed, randomness=RANDOMNESS, sector_index=0):
    from synthesis.filecoin import bincode as bc
    from synthesis.filecoin import post
    prm = post.get(name)
    if prm.kind == "winning":
        sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, randomness, sealed.sector_id, i))
              for i in range(prm.sector_count)]
    else:
        sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, randomness, sealed.sector_id, sector_index))]
    return bc.write_post_sector_proof(prm, sp)


def run(capsys, *args):
    from cluster.cli import main
    rc = main([*map(str, args)])
    cap = capsys.readouterr()
    return rc, cap.err.strip()


def flip(raw: bytes, at: int) -> bytes:
    b = bytearray(raw)
    b[at] ^= 1
    return bytes(b)


ONE = 4 + 64 + 8 + 2 * (8 + 7 * 32 + 8)      # an 8-0-0 inclusion proof of 64 leaves


def sibling(c: int) -> int:
    return 8 + 32 + 16 + c * ONE + 4 + 64 + 8 + 8 + 32


def test_window_post_vanilla_files_checked_and_tampering_named(sealed, tmp_path, capsys):
    good = tmp_path / "s234.vp"
    good.write_bytes(vanilla("window-post-2k", sealed))
    base = ["window-post", "--sector-size", "2KiB", "--randomness", RANDOMNESS.hex()]
    rc, err = run(capsys, *base, "--vanilla", good)
    assert rc == 2 and err.startswith("zkhive window-post: no cluster with a ready prover answers"), err
    cases = [
        (flip(good.read_bytes(), sibling(6)), r"field vanilla_proofs: partition 0, sector 0 \(id 234\), challenge 6 "
                                               r"\(leaf \d+\): the path does not reach comm_r_last"),
        (good.read_bytes()[:100], r"field vanilla_proofs\[0\]: sector 0 \(id 234\): vanilla_proof.sectors at byte 48: "
                                  r"truncated"),
        (flip(good.read_bytes(), 20), r"field vanilla_proofs: partition 0, sector 0 \(id 234\): H\(comm_c, comm_r_last\) "
                                      r"differs from comm_r"),
    ]
    import re
    for raw, pattern in cases:
        bad = tmp_path / "bad.vp"
        bad.write_bytes(raw)
        rc, err = run(capsys, *base, "--vanilla", bad)
        assert rc == 2 and re.match(rf"zkhive window-post: {re.escape(str(bad))}: {pattern}", err), err
        assert "\n" not in err
    # another randomness than the proof's: the challenged leaf named
    rc, err = run(capsys, "window-post", "--sector-size", "2KiB", "--vanilla", good)
    assert rc == 2 and f"{good}: field vanilla_proofs: partition 0, sector 0 (id 234), challenge " in err, err
    assert "the randomness and sector id 234 challenge leaf" in err
    # bounded before it is read: one byte over the largest FallbackPoStSectorProof
    big = tmp_path / "big.vp"
    most = P.post_bytes_max("window")
    big.write_bytes(b"\0" * (most + 1))
    rc, err = run(capsys, *base, "--vanilla", big)
    assert rc == 2 and err == (f"zkhive window-post: {big}: {most + 1} bytes, over the limit of {most} "
                               "(the largest FallbackPoStSectorProof)"), err
    rc, err = run(capsys, *base, "--vanilla", tmp_path / "none.vp")
    assert rc == 2 and err.endswith("none.vp: no such file")
    rc, err = run(capsys, "window-post", "--sector-size", "3KiB", "--vanilla", good)
    assert rc == 2 and "--sector-size 3KiB: 3072 bytes is not a sector size" in err
    rc, err = run(capsys, *base[:-1], "abc", "--vanilla", good)
    assert rc == 2 and err.endswith("--randomness: 3 hex digits, 64 expected (32 bytes)")


def show_inputs(wpt: int, vp: bytes, rand: bytes = RANDOMNESS) -> str:
    """What ``lotus-bench simple winning-post --show-inputs`` prints (simple.go)."""
    return (f"Vanilla 19.266625ms (103.8 KiB/s)\nProof 1.234634708s (1.619 KiB/s)\no4VBUf2wBHuvmm58XY8wgCC/1x==\n"
            f"GenerateWinningPoStWithVanilla info:\n wpt: {wpt}\n mid: {MINER}\n rand: {rand.hex()}\n"
            f" vp: {vp.hex()}\n proof: [{{0 {'ab' * 192}}}]\n")


def test_winning_post_reads_lotus_bench_show_inputs(sealed, tmp_path, capsys):
    vp = vanilla("winning-post-2k", sealed)
    f = tmp_path / "winning.txt"
    f.write_text(show_inputs(0, vp))
    rc, err = run(capsys, "winning-post", f)
    assert rc == 2 and err.startswith("zkhive winning-post: no cluster with a ready prover answers"), err
    got = P.read_show_inputs(f)
    assert (got["wpt"], got["mid"], got["rand"], got["vp"]) == (0, MINER, RANDOMNESS, vp)
    # the same as raw bytes with flags
    (tmp_path / "w.vp").write_bytes(vp)
    rc, err = run(capsys, "winning-post", "--vanilla", tmp_path / "w.vp", "--sector-size", "2K",
                  "--randomness", RANDOMNESS.hex())
    assert rc == 2 and "no cluster with a ready prover" in err, err
    for text, want in [
        (show_inputs(0, flip(vp, sibling(17))), f"{f} (line 8, vp): field vanilla_proofs: sector 0 (id 234), "
                                                "challenge 17 (leaf "),
        (show_inputs(0, vp, bytes([9]) + RANDOMNESS[1:]), f"{f} (line 8, vp): field vanilla_proofs: sector 0 (id 234), "
                                                          "challenge "),
        (show_inputs(10, vp), "field registered_proof: 10 (StackedDrgWindow2KiBV1_2) is a WindowPoSt proof, "
                              "the request is WINNING_POST"),
        (show_inputs(0, vp).replace(" rand: ", " rand: zz"), f"{f}: line 7, rand: 66 hex digits, 64 expected"),
        (show_inputs(0, vp).replace(" vp: ", " vp: 0g"), f"{f}: line 8, vp: not hex (character 1: 'g')"),
        (show_inputs(0, vp).replace(" mid: ", " nomid: "), f"{f}: no ' mid: ' line"),
        (show_inputs(0, vp[:200]), f"{f} (line 8, vp): field vanilla_proofs[0]: sector 0 (id 234): "
                                   "vanilla_proof.sectors[0].inclusion_proofs at byte 56: truncated: 66 items need at least"),
    ]:
        f.write_text(text)
        rc, err = run(capsys, "winning-post", f)
        assert rc == 2 and want in err and "\n" not in err, (want, err)
    big = 2 * P.post_bytes_max("winning") + (64 << 10)
    f.write_bytes(b" " * (big + 1))
    rc, err = run(capsys, "winning-post", f)
    assert rc == 2 and f"{f}: {big + 1} bytes, over the limit of {big}" in err, err


@pytest.fixture(scope="module")
def updated():
    from synthesis.filecoin.samples import sample_update
    return sample_update(b"proof cli")


def test_prove_update_reads_provereplicaupdate_files(updated, tmp_path, capsys):
    from synthesis import field
    from synthesis.filecoin import snap

    u = updated
    proofs = [snap.to_bytes(u.prm, snap.partition_proof(u, k)) for k in range(u.prm.partition_count)]
    vp = tmp_path / "pr1.json"
    vp.write_text(json.dumps([base64.b64encode(p).decode() for p in proofs]))   # Go's [][]byte
    key = P.cid_of(field.to_bytes(u.comm_r_old), P.SEALED)
    new = P.cid_of(field.to_bytes(u.comm_r_new), P.SEALED)
    data = P.cid_of(field.to_bytes(u.comm_d_new), P.UNSEALED)
    assert key.startswith("bagboea4b5abc") and data.startswith("baga6ea4seaq")
    base = ["prove-update", "--sector-size", "2KiB"]
    rc, err = run(capsys, *base, key, new, data, vp)
    assert rc == 2 and err.startswith("zkhive prove-update: no cluster with a ready prover answers"), err
    bad = tmp_path / "bad.json"
    for text, args, want in [
        (None, (key, key, data), "field vanilla_proofs[0]: partition 0: H(comm_c, root_r_new) differs from comm_r_new"),
        (None, (key, new, new), "newUnsealed (comm_d_new): byte 1: codec 0xf102, an unsealed (comm_d) commitment's "
                                "is 0xf101"),
        (None, (key, new, data[:-2]), "newUnsealed (comm_d_new): byte 6: a digest of 32 bytes (31 present)"),
        (json.dumps([base64.b64encode(flip(proofs[0], 32 + 8 + 8 * 32 + 8 + 4 + 64 + 8 + 8 + 5)).decode()]), None,
         f"{bad} [0]: field vanilla_proofs[0]: partition 0, challenge 0 (node "),
        (json.dumps([base64.b64encode(proofs[0][:-1]).decode()]), None,
         f"{bad} [0]: field vanilla_proofs[0]: partition 0: 15063 bytes, a StackedDrg2KiBV1 PartitionProof is 15064"),
        ("[]", None, f"{bad}: 0 partition proofs, a 2048-byte sector's update has 1"),
        ('["abc', None, f"{bad}: byte 1: not JSON (Unterminated string"),
        ("[7]", None, f"{bad}: [0]: a base64 string expected, not int"),
        ('["***"]', None, f"{bad}: [0]: not standard base64"),
    ]:
        if text is not None:
            bad.write_text(text)
        rc, err = run(capsys, *base, *(args or (key, new, data)), bad if text is not None else vp)
        assert rc == 2 and want in err and "\n" not in err, (want, err)
    from synthesis.filecoin import snap_circuit as sc
    most = (sc.proof_bytes(u.prm) + 2) // 3 * 4 + 3 + 2 + 4096
    bad.write_bytes(b" " * (most + 1))
    rc, err = run(capsys, *base, key, new, data, bad)
    assert rc == 2 and f"{bad}: {most + 1} bytes, over the limit of {most}" in err, err


def test_a_request_as_proto3_json(sealed, tmp_path, capsys):
    """cuzk's SubmitProofRequest in proto3 JSON (grpcurl -d's form) for any kind; the kind must
    be the command's."""
    from google.protobuf import json_format

    from cluster.gateway.pb import proving_pb2 as pb

    req = pb.SubmitProofRequest(proof_kind=pb.WINDOW_POST_PARTITION, registered_proof=10, sector_size=2048,
                                miner_id=MINER, randomness=RANDOMNESS,
                                vanilla_proofs=[vanilla("window-post-2k", sealed)])
    f = tmp_path / "req.json"
    f.write_text(json_format.MessageToJson(req))
    rc, err = run(capsys, "window-post", "--request", f)
    assert rc == 2 and "no cluster with a ready prover" in err, err
    rc, err = run(capsys, "winning-post", "--request", f)
    assert rc == 2 and err.endswith(f"{f}: field proof_kind: WINDOW_POST_PARTITION, this command proves WINNING_POST")
    f.write_text('{"proofKind": "WINDOW_POST_PARTITION", "sectorSize": "two"}')
    rc, err = run(capsys, "window-post", "--request", f)
    assert rc == 2 and f"{f}: not a SubmitProofRequest in proto3 JSON: Failed to parse sectorSize field" in err, err
    req.registered_proof = 0
    f.write_text(json_format.MessageToJson(req))
    rc, err = run(capsys, "window-post", "--request", f)
    assert rc == 2 and err.endswith(f"{f}: field registered_proof: 0 (StackedDrgWinning2KiBV1) is a WinningPoSt "
                                    "proof, the request is WINDOW_POST_PARTITION"), err


def test_commitment_cids_as_lotus_prints_them():
    # lotus-bench simple's example (2 KiB) and Curio's testgolden postpub.json's sealed CID
    d = P.commitment("baga6ea4seaqpy7usqklokfx2vxuynmupslkeutzexe2uqurdg5vhtebhxqmpqmy", P.UNSEALED, "d")
    r = P.commitment("bagboea4b5abcbx3jccdohrttzfneleehcpkmle4oltwuh4q3rcf5tpdodaoj6mtl", P.SEALED, "r")
    assert P.cid_of(d, P.UNSEALED) == "baga6ea4seaqpy7usqklokfx2vxuynmupslkeutzexe2uqurdg5vhtebhxqmpqmy"
    assert r.hex().startswith("df691086") and len(r) == len(d) == 32
    with pytest.raises(P.InputFileError, match=r"^r 'Qm.*': not a CIDv1 in base32"):
        P.commitment("QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", P.SEALED, "r")
    assert [P.sector_size(x) for x in ("2K", "2KiB", "2kib", "8MiB", "32GiB", "2048")] == \
        [2048, 2048, 2048, 8 << 20, 32 << 30, 2048]


def test_a_real_curio_32g_window_post_vanilla_proof_checks(capsys):
    """Curio's lib/proof/testgolden/post.vproof (a real 32 GiB sector's WindowPoSt vanilla proof,
    made by rust-fil-proofs) with its postpub.json: randomness 32 zero bytes, PoStProof 8
    (StackedDrgWindow32GiBV1), sector 1, prover 1000. As a --vanilla file it passes every check:
    its 10 inclusion proofs are of the leaves our challenge derivation gives (a vector from the
    Rust, the first here), its paths reach comm_r_last, H(comm_c, comm_r_last) = its comm_r. Another
    randomness, or partition 1 under API 1.0.0 (challenge index 2349 * 10 + n), is refused naming
    the challenge; under V1_1 (Go's 13, the Rust's V1_2: challenge n) partition 1 is the same leaves."""
    from pathlib import Path
    vp = Path(__file__).parent / "data" / "curio_post_32g.vproof"
    base = ["window-post", "--vanilla", vp, "--miner-addr", "t01000"]
    for extra in (["--registered-proof", "8"], ["--sector-size", "32GiB"], ["--sector-size", "32GiB", "--partition", "1"]):
        rc, err = run(capsys, *base, *extra)
        assert rc == 2 and "no cluster with a ready prover" in err, (extra, err)
    rc, err = run(capsys, *base, "--registered-proof", "8", "--randomness", "01" + "00" * 31)
    assert rc == 2 and err == (f"zkhive window-post: {vp}: field vanilla_proofs: partition 0, sector 0 (id 1), "
                               "challenge 0: the inclusion proof is of leaf 707914199, the randomness and sector id 1 "
                               "challenge leaf 466519993 (another randomness or sector id?)"), err
    rc, err = run(capsys, *base, "--registered-proof", "8", "--partition", "1")
    assert rc == 2 and f"{vp}: field vanilla_proofs: partition 1, sector 0 (id 1), challenge 0: the inclusion " \
                       "proof is of leaf 707914199" in err, err
