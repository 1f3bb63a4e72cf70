"""WinningPoSt and WindowPoSt as registered circuits (synthesis/filecoin/post_job.py): the challenge
derivation byte for byte as the Rust lays it out, the job document made from Curio's vanilla
proofs, its checks (every refusal one line naming the field, the sector, the challenge or the
byte offset), the registered sets with their v28 file names, and a 2 KiB sector's jobs
synthesized and satisfied with the public inputs in the Rust order."""
import base64
import copy
import hashlib
import struct

import numpy as np
import pytest

from synthesis import field
from synthesis.circuits import C1Error, get_circuit, known
from synthesis.filecoin import bincode as bc
from synthesis.filecoin import params as fp
from synthesis.filecoin import post
from synthesis.filecoin import post_job as pj
from synthesis.filecoin import sector as fsec

#: Curio's randomness is a field element (lotus masks the top byte: randomness[31] &= 0x3f)
RANDOMNESS = bytes(range(101, 132)) + b"\x2a"


# --- challenge derivation --------------------------------------------------------------------------

def test_no_rust_test_vector_exists_so_the_sha256_layout_is_rebuilt_byte_by_byte():
    """rust-fil-proofs (87348a7) has no expected challenge values in any test (storage-proofs-post
    tests, filecoin-proofs tests/api.rs only round-trip prove/verify), so the check is the layout
    of vanilla.rs ``generate_leaf_challenge`` / ``generate_leaf_challenge_inner`` rebuilt here by
    hand: one SHA-256 over randomness (32 bytes, the Domain's bytes as given) | sector id (u64 LE)
    | challenge index (u64 LE), the first 8 digest bytes as a u64 LE, mod the sector's nodes; the
    index ``get_challenge_index`` (utils.rs): api 1.0.0 / 1.1.0 ``sector_index * challenge_count
    + n``, 1.2.0 ``n``. Pinned values below were computed from that layout."""
    sid = 0x0102030405060708
    msg = bytearray(RANDOMNESS)
    msg += bytes([0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01])     # sector id, little-endian
    msg += bytes([5, 0, 0, 0, 0, 0, 0, 0])                               # challenge index 5
    assert len(msg) == 48
    digest = hashlib.sha256(bytes(msg)).digest()
    value = sum(digest[i] << (8 * i) for i in range(8))
    for name in ("window-post-2k", "window-post-32g", "winning-post-64g"):
        prm = post.get(name)
        assert post.leaf_challenge(prm, RANDOMNESS, sid, 5) == value % (prm.sector_size // 32)
    # the Rust's hasher.clone() after randomness | sector id: the same bytes, incrementally
    h = hashlib.sha256()
    h.update(RANDOMNESS)
    h.update(struct.pack("<Q", sid))
    h2 = h.copy()
    h2.update(struct.pack("<Q", 5))
    assert h2.digest() == digest
    # which index: window V1_2 (1.2.0) hashes n; window V1 and winning (1.0.0) sector_index * C + n
    w = post.get("window-post-2k")
    assert post.sector_challenges(w, RANDOMNESS, sid, 3) == [
        post.leaf_challenge(w, RANDOMNESS, sid, n) for n in range(10)]
    assert post.sector_challenges(w, RANDOMNESS, sid, 3, "1.0.0") == [
        post.leaf_challenge(w, RANDOMNESS, sid, 30 + n) for n in range(10)]
    assert [pj.api_version(r) for r in ("StackedDrgWinning2KiBV1", "StackedDrgWindow2KiBV1",
                                        "StackedDrgWindow32GiBV1_2")] == ["1.0.0", "1.0.0", "1.2.0"]
    # pinned (regression): 2 KiB, randomness above, sector 234
    assert post.sector_challenges(w, RANDOMNESS, 234, 0) == PINNED_WINDOW_2K


#: the layout computed once (hashlib, the bytes above) for randomness RANDOMNESS, sector 234, n = 0..9
PINNED_WINDOW_2K = [9, 10, 61, 53, 22, 31, 27, 1, 30, 31]


# --- registration ----------------------------------------------------------------------------------

def test_every_post_set_is_registered_with_its_kind_file_name_and_one_partition():
    names = [n for n in known() if "post" in n]
    assert sorted(names) == sorted(post.SETS)
    for name in names:
        c = get_circuit(name)
        prm = post.get(name)
        assert c.num_partitions() == 1 and c.proof_kind == pj.KINDS[prm.kind]
        assert c.filecoin_file_stem == prm.file_stem and c.filecoin_file_stem.startswith(
            "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-")
        assert c.size()["public_inputs"] == prm.num_public
    assert get_circuit("window-post-32g").size()["constraints"] == 125_279_217
    assert get_circuit("window-post-64g").size()["constraints"] == 129_887_900
    # Go's abi numbers as cuzk maps them: the window V1_1 proofs are the Rust's V1_2
    assert pj.params_of(pj.REGISTERED_POST_PROOFS[13]).name == "window-post-32g"
    assert pj.params_of(pj.REGISTERED_POST_PROOFS[0]).name == "winning-post-2k"
    assert pj.REGISTERED_POST_PROOFS[10] == "StackedDrgWindow2KiBV1_2"


def test_matrices_cached_by_the_circuits_digest(tmp_path, monkeypatch):
    """Built once, saved under the digest, loaded by a fresh circuit object; a half-written file
    is rebuilt, the same matrices (test_filecoin_snap_compact has the snap-update counterpart)."""
    from synthesis.compact import CompactR1CS

    monkeypatch.setenv("ZKHIVE_CACHE_DIR", str(tmp_path))
    prm = post.get("window-post-2k")
    c1 = pj.PostCircuit(prm)
    assert not c1.is_built()
    cr = c1.compact_r1cs()
    path = c1.matrices_path()
    assert path == tmp_path / "r1cs" / f"post-{c1.digest()}.npz" and path.exists() and c1.is_built()
    c2 = pj.PostCircuit(prm)
    assert c2.is_built() and c2.compact_r1cs().digest() == cr.digest()
    assert c2.size()["constraints"] == post.census(prm).synthesized.constraints == cr.num_constraints
    path.write_bytes(path.read_bytes()[:100])
    c3 = pj.PostCircuit(prm)
    assert c3.compact_r1cs().digest() == cr.digest() and CompactR1CS.load(path).digest() == cr.digest()


# --- a 2 KiB sector's jobs ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sealed():
    return fsec.seal(fp.get("filecoin-2k"), bytes(range(256)) * 7, fsec.prover_id_from_miner(1000), 234,
                     bytes(range(32)))


def vanilla(prm, sealed, randomness=RANDOMNESS, *, api=None, sector_index=0) -> bytes:
    """Curio's bytes for ``sealed``: bincode FallbackPoStSectorProof of the derived challenges."""
    if prm.kind == "winning":
        sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, randomness, sealed.sector_id, i))
              for i in range(prm.sector_count)]
    else:
        sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, randomness, sealed.sector_id,
                                                                sector_index, api))]
    return bc.write_post_sector_proof(prm, sp)


@pytest.mark.parametrize("name,rp", [("window-post-2k", "StackedDrgWindow2KiBV1_2"),
                                     ("winning-post-2k", "StackedDrgWinning2KiBV1")])
def test_a_job_document_from_curios_bytes_synthesizes_and_satisfies(sealed, name, rp):
    prm, c = post.get(name), get_circuit(name)
    raw = vanilla(prm, sealed)
    doc = pj.document(prm, rp, RANDOMNESS, 1000, [raw])
    assert doc["sectors"] == [{"sector_id": 234, "comm_r": "0x%064x" % field.from_bytes(sealed.comm_r)}]
    assert all(len(p) <= pj.PIECE for p in doc["vanilla_proofs"][0])
    assert base64.b64decode("".join(doc["vanilla_proofs"][0])) == raw
    assert len(raw) == pj.max_proof_bytes(prm)
    job = c.parse_c1(doc)
    pub = c.public_inputs(job, 0)
    comm_r = field.from_bytes(sealed.comm_r)
    secs = [(234, comm_r)] * (prm.sector_count if prm.kind == "winning" else 1)
    assert pub == post.public_inputs(prm, RANDOMNESS, secs, 0)
    z = c.synthesize(job, 0, check=True)
    assert field.vec_to_ints(z[1:1 + prm.num_public]) == pub
    with pytest.raises(C1Error, match="partition index 1: a PoSt job is one partition"):
        c.public_inputs(job, 1)


def test_a_window_partition_after_the_first_derives_its_sector_indices(sealed):
    """generate_single_window_post_with_vanilla: the request holds only partition k's sectors,
    their sector indices k * sector_count + i (api 1.0.0 hashes them; 1.2.0 does not)."""
    prm, c = post.get("window-post-2k"), get_circuit("window-post-2k")
    raw = vanilla(prm, sealed, api="1.0.0", sector_index=2 * 3)
    doc = pj.document(prm, "StackedDrgWindow2KiBV1", RANDOMNESS, 1000, [raw], partition_index=3)
    job = c.parse_c1(doc)
    comm_r = field.from_bytes(sealed.comm_r)
    whole = [(1, 1), (2, 2)] * 3 + [(234, comm_r)]                  # what the chain's verifier lists
    assert c.public_inputs(job, 0) == post.public_inputs(prm, RANDOMNESS, whole, 3, api_version="1.0.0")
    c.synthesize(job, 0, check=True)
    with pytest.raises(C1Error, match=r"vanilla_proofs: partition 2, sector 0 \(id 234\), challenge 0: "
                                      r"the inclusion proof is of leaf"):
        c.parse_c1({**doc, "partition_index": 2})


def _tamper(raw: bytes, at: int, xor: int = 1) -> bytes:
    b = bytearray(raw)
    b[at] ^= xor
    return bytes(b)


def test_refusals_name_the_field_sector_challenge_and_offset(sealed):
    prm, c = post.get("window-post-2k"), get_circuit("window-post-2k")
    rp = "StackedDrgWindow2KiBV1_2"
    raw = vanilla(prm, sealed)
    good = pj.document(prm, rp, RANDOMNESS, 1000, [raw])
    c.parse_c1(good)

    def refused(doc, pattern):
        with pytest.raises(C1Error, match=pattern) as e:
            c.parse_c1(doc)
        assert "\n" not in str(e.value)

    one = 4 + 64 + 8 + 2 * (8 + 7 * 32 + 8)
    # a sibling of challenge 4, level 1 (still canonical)
    at = 8 + 32 + 16 + 4 * one + 4 + 64 + 8 + (8 + 7 * 32 + 8) + 8 + 32
    refused(pj.document(prm, rp, RANDOMNESS, 1000, [_tamper(raw, at)]),
            r"^field vanilla_proofs: partition 0, sector 0 \(id 234\), challenge 4 \(leaf \d+\): the path "
            r"does not reach comm_r_last")
    # the randomness: every challenge moves
    other = bytes([7]) + RANDOMNESS[1:]
    refused({**good, "randomness": "0x" + other.hex()},
            r"^field vanilla_proofs: .*challenge \d+: the inclusion proof is of leaf \d+, the randomness "
            r"and sector id 234 challenge leaf \d+")
    refused({**good, "randomness": "0x" + "ff" * 32}, r"^field randomness: not a canonical field element")
    # the sector id in the proof's bytes and the list together (the document made from them)
    moved = pj.document(prm, rp, RANDOMNESS, 1000, [_tamper(raw, 0, 3)])
    refused(moved, r"^field vanilla_proofs: partition 0, sector 0 \(id 233\), challenge \d+: the inclusion "
                   r"proof is of leaf \d+, the randomness and sector id 233 challenge")
    # the sector id in the list only / the comm_r in the list only
    refused({**good, "sectors": [{**good["sectors"][0], "sector_id": 235}]},
            r"^field sectors\[0\].sector_id: the vanilla proof is of sector id 234, sectors\[0\] is 235")
    refused({**good, "sectors": [{**good["sectors"][0], "comm_r": "0x01"}]},
            r"^field sectors\[0\].comm_r: sector 0 \(id 234\): the vanilla proof's comm_r is 0x")
    # comm_r in the bytes and the list: H(comm_c, comm_r_last) is not it
    refused(pj.document(prm, rp, RANDOMNESS, 1000, [_tamper(raw, 8)]),
            r"^field vanilla_proofs: partition 0, sector 0 \(id 234\): H\(comm_c, comm_r_last\) differs")
    # the bincode: a truncated buffer, a wrong length, trailing bytes, named with the offset
    refused(pj.document(prm, rp, RANDOMNESS, 1000, [raw[:-10]]),
            r"^field vanilla_proofs\[0\]: sector 0 \(id 234\): vanilla_proof.sectors\[0\].comm_r_last at "
            r"byte \d+: truncated")
    refused(pj.document(prm, rp, RANDOMNESS, 1000, [_tamper(raw, 48, 2)]),
            r"^field vanilla_proofs\[0\]: sector 0 \(id 234\): vanilla_proof.sectors\[0\].inclusion_proofs "
            r"length at byte 48: 8 items, 10 expected")
    refused(pj.document(prm, rp, RANDOMNESS, 1000, [raw + b"\0"]), r"at byte 5680: 1 trailing bytes")
    # the document itself
    refused({**good, "registered_proof": "StackedDrgWinning2KiBV1"},
            r"^field registered_proof: 'StackedDrgWinning2KiBV1' is not proved by window-post-2k")
    refused({**good, "sectors": good["sectors"] * 2, "vanilla_proofs": good["vanilla_proofs"] * 2},
            r"^field sectors\[1\].sector_id: sector id 234 again")
    refused({**good, "sectors": good["sectors"] * 3, "vanilla_proofs": good["vanilla_proofs"] * 3},
            r"^field sectors: ")
    refused({**good, "vanilla_proofs": [["!!!!"]]}, r"^field vanilla_proofs\[0\]\[0\]: ")
    refused({**good, "extra": 1}, r"^field extra: ")
    w = post.get("winning-post-2k")
    wdoc = pj.document(w, "StackedDrgWinning2KiBV1", RANDOMNESS, 1000, [vanilla(w, sealed)])
    with pytest.raises(C1Error, match=r"^field partition_index: 1: a WinningPoSt is one partition"):
        get_circuit("winning-post-2k").parse_c1({**wdoc, "partition_index": 1})
    # a winning proof's challenge 40 tampered: named as the sector's challenge 40
    wraw = vanilla(w, sealed)
    wone = 4 + 64 + 8 + 2 * (8 + 7 * 32 + 8)
    bad = _tamper(wraw, 8 + 32 + 16 + 40 * wone + 4 + 32)            # challenge 40's leaf
    with pytest.raises(C1Error, match=r"^field vanilla_proofs: sector 0 \(id 234\), challenge 40 \(leaf \d+\): "
                                      r"the path does not reach"):
        get_circuit("winning-post-2k").parse_c1(pj.document(w, "StackedDrgWinning2KiBV1", RANDOMNESS, 1000, [bad]))


def test_job_ids_of_curios_request_ids():
    from cluster.gateway.postinput import job_id_of
    from cluster.pipeline.jobkeys import JOB_ID

    assert job_id_of("winpost-1000-0102030405060708") == "winpost-1000-0102030405060708"
    go = "wdpost-1000-0-[101 102 103 104 105 106 107 108]"      # Go's %d of a []byte
    jid = job_id_of(go)
    assert JOB_ID.match(jid) and jid.startswith("wdpost-1000-0-_101_102") and jid == job_id_of(go)
    assert job_id_of(go.replace(" ", "_")) != jid and job_id_of("") is None


def test_cuzks_circuit_ids_name_the_post_sets():
    from cluster.gateway.service import circuit_name

    assert circuit_name("wpost-32g") == "window-post-32g" and circuit_name("winning-64g") == "winning-post-64g"
    assert circuit_name("window-post-2k") == "window-post-2k"
    with pytest.raises(KeyError, match="circuit_id 'wpost-3g' is not a parameter set"):
        circuit_name("wpost-3g")
    # one short line whatever the registry holds or the client sends (the id is clipped)
    for bad in ("wpost-3g", "p" * 10_000):
        with pytest.raises(KeyError) as e:
            circuit_name(bad)
        msg = e.value.args[0]
        assert "\n" not in msg and len(msg) < 400 and "`zkhive circuits` lists them" in msg, msg


def test_zkhive_circuits_lists_the_post_sets_with_kind_counts_and_file_names(capsys):
    import argparse

    from synthesis.cli import cmd_circuits

    assert cmd_circuits(argparse.Namespace(build=False)) == 0
    lines = {ln.split(":")[0]: ln for ln in capsys.readouterr().out.splitlines()}
    assert lines["window-post-32g"].startswith(
        "window-post-32g: 1 partitions, window-post (StackedDrgWindow32GiBV1, StackedDrgWindow32GiBV1_2), "
        "2349 sectors x 10 challenges, tree 8-8-0; 125279217 constraints")
    assert "winning-post (StackedDrgWinning2KiBV1), 66 sectors x 1 challenges" in lines["winning-post-2k"]
    assert lines["winning-post-2k"].endswith("keys " + post.get("winning-post-2k").file_stem)
    assert list(lines).index("filecoin-64g") < list(lines).index("window-post-2k")


def test_zkhive_submit_reads_a_post_job_document_as_it_is(sealed, tmp_path):
    """``zkhive submit``'s file reader (filecoin/commands.job_document) takes a PoSt job document,
    which names its set, as it is: not as a Filecoin C1 (its ``registered_proof`` is a PoSt one)."""
    import json

    from synthesis.filecoin.commands import job_document
    from synthesis.limits import DEFAULT

    prm = post.get("window-post-2k")
    doc = pj.document(prm, "StackedDrgWindow2KiBV1_2", RANDOMNESS, 1000, [vanilla(prm, sealed)])
    (tmp_path / "post.json").write_text(json.dumps(doc))
    assert job_document(tmp_path / "post.json", DEFAULT) == doc


@pytest.mark.parametrize("name,rp,ids,k", [("window-post-2k", "StackedDrgWindow2KiBV1_2", [7, 9], 0),
                                          ("window-post-8m", "StackedDrgWindow8MiBV1", [11], 5),
                                          ("winning-post-2k", "StackedDrgWinning2KiBV1", [3], 0)])
def test_benchmark_vanilla_proofs_make_a_valid_partition_without_sealing(name, rp, ids, k):
    """A PoSt benchmark input (one sparse replica shared by every sector id): the document checks
    (bincode, every path, H(comm_c, comm_r_last)) and the witness satisfies the circuit; another
    randomness's challenges are refused."""
    prm, c = post.get(name), get_circuit(name)
    raws = pj.benchmark_vanilla_proofs(prm, RANDOMNESS, ids, registered_proof=rp, partition_index=k)
    doc = pj.document(prm, rp, RANDOMNESS, 1000, raws, partition_index=k)
    job = c.parse_c1(doc)
    assert [s for s, _ in job.sectors] == ids
    c.synthesize(job, 0, check=name.endswith("2k"))
    with pytest.raises(C1Error, match="the inclusion proof is of leaf"):
        c.parse_c1({**doc, "randomness": "0x" + bytes(32).hex()})
