"""The bounded bincode reader for Curio's vanilla proofs (issue 37, item 2): bytes laid out as
Rust's serde + bincode 1.x write ``FallbackPoStSectorProof`` / the update ``PartitionProof``,
from a sealed 2 KiB sector's real PoSt paths; every malformed buffer refused with its offset."""
import struct

import numpy as np
import pytest

from synthesis import field
from synthesis.filecoin import bincode as bc
from synthesis.filecoin import params as fp
from synthesis.filecoin import post
from synthesis.filecoin import sector as fsec
from synthesis.filecoin import update

RANDOMNESS = bytes(range(1, 33))


@pytest.fixture(scope="module")
def sealed():
    return fsec.seal(fp.get("filecoin-2k"), bytes(range(256)) * 7, fsec.prover_id_from_miner(1000), 234,
                     bytes(range(32)))


@pytest.fixture(scope="module")
def window(sealed):
    prm = post.get("window-post-2k")
    good = post.vanilla_proof(sealed, post.sector_challenges(prm, RANDOMNESS, sealed.sector_id, 0))
    return prm, good, bc.write_post_sector_proof(prm, [good])


def _secs(sealed):
    return [(sealed.sector_id, field.from_bytes(sealed.comm_r))]


def test_layout_by_hand(window):
    """The first bytes as serde+bincode 1.x lay them out: sector_id u64 LE, comm_r 32 bytes,
    sectors len u64 = 1, inclusion_proofs len u64 = 10, ProofData variant u32 = 0 (Single: 8-0-0),
    root, leaf, path len u64 = 2 (64 nodes, arity 8), hashes len u64 = 7."""
    prm, good, data = window
    assert struct.unpack_from("<Q", data, 0)[0] == good.sector_id
    assert data[8:40] == field.to_bytes(good.comm_r)
    assert struct.unpack_from("<QQI", data, 40) == (1, 10, 0)
    assert data[60:92] == field.to_bytes(good.comm_r_last)
    assert struct.unpack_from("<QQ", data, 124) == (2, 7)
    one = 4 + 64 + 8 + 2 * (8 + 7 * 32 + 8)
    assert len(data) == 8 + 32 + 8 + 8 + 10 * one + 64


def test_window_round_trip_verifies_and_tamper_is_named(sealed, window):
    prm, good, data = window
    d = bc.read_post_sector_proof(prm, data, 0)
    [w] = bc.to_post_proofs(prm, d)
    assert w.challenges == good.challenges
    assert np.array_equal(w.leafs, good.leafs)
    assert all(np.array_equal(a, b) for a, b in zip(w.paths, good.paths))
    post.verify(prm, RANDOMNESS, _secs(sealed), [w])
    # one sibling byte of challenge 4, level 1 changed (a canonical value still)
    one = 4 + 64 + 8 + 2 * (8 + 7 * 32 + 8)
    at = 8 + 32 + 16 + 4 * one + 4 + 64 + 8 + (8 + 7 * 32 + 8) + 8 + 2 * 32
    bad = bytearray(data)
    bad[at] ^= 1
    [wb] = bc.to_post_proofs(prm, bc.read_post_sector_proof(prm, bytes(bad), 0))
    with pytest.raises(post.PostProofError,
                       match=rf"sector 0 \(id {sealed.sector_id}\), challenge 4 \(leaf \d+\): the path"):
        post.verify(prm, RANDOMNESS, _secs(sealed), [wb])
    # a changed path index moves the challenge: named as the wrong leaf
    bad = bytearray(data)
    bad[8 + 32 + 16 + 2 * one + 4 + 64 + 8 + 8 + 7 * 32] ^= 1
    [wb] = bc.to_post_proofs(prm, bc.read_post_sector_proof(prm, bytes(bad), 0))
    with pytest.raises(post.PostProofError, match=r"sector 0 \(id \d+\), challenge 2: the inclusion proof is of leaf"):
        post.verify(prm, RANDOMNESS, _secs(sealed), [wb])
    # the root field must be comm_r_last
    bad = bytearray(data)
    bad[8 + 32 + 16 + 3 * one + 4] ^= 1
    with pytest.raises(post.PostProofError, match=r"sector 0 \(id \d+\), challenge 3: .*root"):
        bc.read_post_sector_proof(prm, bytes(bad), 0)


def test_winning_round_trip_verifies(sealed):
    prm = post.get("winning-post-2k")
    proofs = [post.vanilla_proof(sealed, post.sector_challenges(prm, RANDOMNESS, sealed.sector_id, i))
              for i in range(prm.sector_count)]
    data = bc.write_post_sector_proof(prm, proofs)
    assert struct.unpack_from("<QQ", data, 40) == (1, 66)
    got = bc.to_post_proofs(prm, bc.read_post_sector_proof(prm, data, 0))
    assert len(got) == 66
    post.verify(prm, RANDOMNESS, _secs(sealed) * 66, got)


def test_malformed_post_bytes_refused_with_offsets(window):
    prm, good, data = window
    where = rf"sector 3 \(id {good.sector_id}\)"
    for cut in (0, 7, 40, 100, len(data) - 1):
        with pytest.raises(bc.BincodeError, match=r"^sector 3.*truncated") as e:
            bc.read_post_sector_proof(prm, data[:cut], 3)
        assert e.value.offset <= cut
    with pytest.raises(bc.BincodeError, match=where + r": end at byte %d: 1 trailing bytes" % len(data)):
        bc.read_post_sector_proof(prm, data + b"\0", 3)
    huge = data[:48] + struct.pack("<Q", 1 << 40) + data[56:]
    with pytest.raises(bc.BincodeError, match=where + r": vanilla_proof.sectors\[0\].inclusion_proofs "
                       r"length at byte 48: 1099511627776 items, 10 expected"):
        bc.read_post_sector_proof(prm, huge, 3)
    huge = data[:40] + struct.pack("<Q", 2) + data[48:]
    with pytest.raises(bc.BincodeError, match=r"vanilla_proof.sectors length at byte 40: 2 items, 1"):
        bc.read_post_sector_proof(prm, huge, 3)
    wrong = data[:56] + struct.pack("<I", 1) + data[60:]
    with pytest.raises(bc.BincodeError, match=where + r": vanilla_proof.sectors\[0\].inclusion_proofs\[0\]"
                       r".data variant at byte 56: variant 1 \(Sub\), Single expected for a 8-0-0 tree"):
        bc.read_post_sector_proof(prm, wrong, 3)
    wrong = data[:56] + struct.pack("<I", 7) + data[60:]
    with pytest.raises(bc.BincodeError, match=r"variant 7 \(unknown\)"):
        bc.read_post_sector_proof(prm, wrong, 3)
    hashes = data[:132] + struct.pack("<Q", 1 << 40) + data[140:]
    with pytest.raises(bc.BincodeError, match=r"inclusion_proofs\[0\].path.path\[0\].hashes length at "
                       r"byte 132: 1099511627776 items, 7 expected"):
        bc.read_post_sector_proof(prm, hashes, 3)
    idx = data[:140 + 224] + struct.pack("<Q", 8) + data[140 + 232:]
    with pytest.raises(bc.BincodeError, match=r"path\[0\].index at byte 364: 8, not below the arity 8"):
        bc.read_post_sector_proof(prm, idx, 3)
    at = 140 + 3 * 32
    big = data[:at] + b"\xff" * 32 + data[at + 32:]
    with pytest.raises(bc.BincodeError, match=where + r": vanilla_proof.sectors\[0\].inclusion_proofs\[0\]"
                       r".path.path\[0\].hashes\[3\] at byte %d: not a canonical" % at):
        bc.read_post_sector_proof(prm, big, 3)
    big = data[:8] + b"\xff" * 32 + data[40:]
    with pytest.raises(bc.BincodeError, match=where + r": comm_r at byte 8: not a canonical"):
        bc.read_post_sector_proof(prm, big, 3)


def _update_bytes(prm, rng):
    ar = prm.tree_r_arities
    ad, sd = (ar, prm.shape) if prm.poseidon else (bc.tree_d_arities(prm), (2, 0, 0))
    dom = lambda: field.to_bytes(field.random_element())  # noqa: E731

    def mp(arities, shape):
        sibs = [field.vec_from_ints([field.random_element() for _ in range(a - 1)]) for a in arities]
        return bc.write_merkle_proof(shape, arities, dom(), dom(), sibs, [int(rng.integers(a)) for a in arities])
    cps = [(mp(ar, prm.shape), mp(ad, sd), mp(ar, prm.shape)) for _ in range(prm.challenge_count)]
    return bc.write_update_partition_proof(prm, dom(), b"".join(dom() for _ in range(prm.apex_leaf_count)), cps)


def test_update_partition_proof_round_trip_and_refusals():
    prm = next(p for p in update.SETS.values() if p.sector_size == 2 << 10 and not p.poseidon)
    data = _update_bytes(prm, np.random.default_rng(5))
    d = bc.read_update_partition_proof(prm, data, 1)
    assert d.apex_leafs.shape == (prm.apex_leaf_count, 4)
    assert len(d.challenge_proofs) == prm.challenge_count
    r_old, d_new, r_new = d.challenge_proofs[-1]
    assert len(d_new.siblings) == 6 and len(r_old.siblings) == len(prm.tree_r_arities)
    with pytest.raises(bc.BincodeError, match=r"^partition 1: end at byte \d+: 2 trailing"):
        bc.read_update_partition_proof(prm, data + b"\0\0", 1)
    with pytest.raises(bc.BincodeError, match=r"^partition 1: apex_leafs length at byte 32: "
                       r"1099511627776 items, %d expected" % prm.apex_leaf_count):
        bc.read_update_partition_proof(prm, data[:32] + struct.pack("<Q", 1 << 40) + data[40:], 1)
    at = 40 + 32 * prm.apex_leaf_count
    with pytest.raises(bc.BincodeError, match=r"challenge_proofs length at byte %d: 1099511627776" % at):
        bc.read_update_partition_proof(prm, data[:at] + struct.pack("<Q", 1 << 40) + data[at + 8:], 1)
    with pytest.raises(bc.BincodeError, match=r"challenge_proofs\[0\].proof_r_old.data variant at byte "
                       r"%d: variant 2 \(Top\)" % (at + 8)):
        bc.read_update_partition_proof(prm, data[:at + 8] + struct.pack("<I", 2) + data[at + 12:], 1)
    with pytest.raises(bc.BincodeError, match=r"^partition 1: .*truncated"):
        bc.read_update_partition_proof(prm, data[:-1], 1)


@pytest.mark.parametrize("name,variant", [("window-post-32g", 1), ("window-post-64g", 2),
                                          ("winning-post-64g", 2)])
def test_sub_and_top_tree_layouts_round_trip(name, variant):
    """8-8-0 (32 GiB) is ProofData::Sub, 8-8-2 (64 GiB) ProofData::Top: base_proof, sub_proof
    (one element), top_proof, then root and leaf; synthetic values (no 32 GiB sector here)."""
    prm = post.get(name)
    rng = np.random.default_rng(7)
    n = bc.sector_challenge_count(prm)
    per = 1 if prm.kind == "winning" else n
    rnd = lambda *s: rng.integers(0, 1 << 62, size=s + (4,), dtype=np.uint64)  # noqa: E731
    proofs = [post.SectorProof(99, 5, 6, 7, [int(c) for c in rng.integers(0, prm.nodes, per)], rnd(per),
                               [rnd(per, a - 1) for a in prm.arities]) for _ in range(n // per)]
    data = bc.write_post_sector_proof(prm, proofs)
    assert struct.unpack_from("<I", data, 56)[0] == variant
    got = bc.to_post_proofs(prm, bc.read_post_sector_proof(prm, data, 0))
    assert [g.challenges for g in got] == [p.challenges for p in proofs]
    for g, p in zip(got, proofs):
        assert np.array_equal(g.leafs, p.leafs)
        assert all(np.array_equal(a, b) for a, b in zip(g.paths, p.paths))
    with pytest.raises(bc.BincodeError, match=r"variant 0 \(Single\), %s expected for a 8-8-%d tree"
                       % (bc.VARIANTS[variant], prm.shape[2])):
        bc.read_post_sector_proof(prm, data[:56] + bytes(4) + data[60:], 0)


def test_poseidon_update_partition_proof_has_no_apex_leafs():
    prm = next(p for p in update.SETS.values() if p.sector_size == 2 << 10 and p.poseidon)
    data = _update_bytes(prm, np.random.default_rng(6))
    assert struct.unpack_from("<Q", data, 32)[0] == prm.challenge_count    # challenge_proofs right after comm_c
    d = bc.read_update_partition_proof(prm, data, 0)
    assert d.apex_leafs.shape == (0, 4) and len(d.challenge_proofs) == prm.challenge_count
    assert len(d.challenge_proofs[0][1].siblings) == len(prm.tree_r_arities)
    with pytest.raises(bc.BincodeError, match=r"^partition 0: challenge_proofs length at byte 32: "
                       r"1099511627776 items"):
        bc.read_update_partition_proof(prm, data[:32] + struct.pack("<Q", 1 << 40) + data[40:], 0)
