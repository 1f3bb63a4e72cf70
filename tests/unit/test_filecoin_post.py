"""Filecoin's FallbackPoSt circuit (synthesis/filecoin/post.py): the counts rust-fil-proofs states,
the parameter file names of parameters.json, and a sealed 2 KiB sector's WinningPoSt and
WindowPoSt synthesized for real, satisfied, and refused with a changed comm_r or challenge."""
import copy
import hashlib
import os

import numpy as np
import pytest

from synthesis import field
from synthesis.bellpepper.check import assignments, check, set_value
from synthesis.builder import ConstraintSystem
from synthesis.filecoin import params as fp
from synthesis.filecoin import post
from synthesis.filecoin import sector as fsec
from synthesis.bellpepper.core import Synth
from synthesis.r1cs import UnsatisfiedConstraint

RANDOMNESS = hashlib.sha256(b"zkhive post randomness").digest()[:31] + b"\x01"

#: rust-fil-proofs 87348a7 parameters.json: the v28-proof-of-spacetime-fallback-* files
PARAMETERS_JSON = {
    "winning-post-2k": "8-0-0-3ea05428c9d11689f23529cde32fd30aabd50f7d2c93657c1d3650bca3e8ea9e",
    "window-post-2k": "8-0-0-0170db1f394b35d995252228ee359194b13199d259380541dc529fb0099096b0",
    "winning-post-8m": "8-0-0-50c7368dea9593ed0989e70974d28024efa9d156d585b7eea1be22b2e753f331",
    "window-post-8m": "8-0-0-5294475db5237a2e83c3e52fd6c2b03859a1831d45ed08c4f35dbf9a803165a9",
    "winning-post-512m": "8-0-0-7d739b8cf60f1b0709eeebee7730e297683552e4b69cab6984ec0285663c5781",
    "window-post-512m": "8-0-0-0cfb4f178bbb71cf2ecfcd42accce558b27199ab4fb59cb78f2483fe21ef36d9",
    "winning-post-32g": "8-8-0-559e581f022bb4e4ec6e719e563bf0e026ad6de42e56c18714a2c692b1b88d7e",
    "window-post-32g": "8-8-0-0377ded656c6f524f1618760bffe4e0a1c51d5a70c4509eedae8a27555733edc",
    "winning-post-64g": "8-8-2-b62098629d07946e9028127e70295ed996fe3ed25b0f9f88eb610a0ab4385a3c",
    "window-post-64g": "8-8-2-2627e4006b67f99cef990c0a47d5426cb7ab0a0ad58fc1061547bf2d28b09def",
}


def test_window_post_counts_equal_filecoin_proofs_constants():
    """filecoin-proofs constants.rs WINDOW_POST_SECTOR_COUNT: 2,349 sectors "gives 125,279,217
    constraints" at 32 GiB, 2,300 "gives 129,887,900" at 64 GiB (synthesized rows, no input rows)."""
    for size, want in post.RUST_WINDOW_CONSTRAINTS.items():
        prm = next(p for p in post.SETS.values() if p.kind == "window" and p.sector_size == size)
        c = post.census(prm)
        assert c.synthesized.constraints == want, prm.name
        assert c.synthesized.inputs == 1 + prm.num_public
    for name in ("window-post-32g", "window-post-64g"):    # the built (compact) matrices agree
        cr, c = post.build(name), post.census(name).synthesized
        assert (cr.num_constraints, cr.num_aux, cr.num_public + 1, cr.nnz) == (
            c.constraints, c.aux, c.inputs, c.nnz)
    assert post.get("window-post-32g").sector_count == 2349
    assert post.get("window-post-64g").sector_count == 2300


@pytest.mark.parametrize("shape,total,sectors,challenges,size,inputs,constraints", [
    # storage-proofs-post tests/fallback_circuit.rs: (total_sector_count, sector_count, partitions,
    # expected_num_inputs, expected_constraints), 5 challenges, leaves = 64 * base tree count
    ((8, 0, 0), 3, 3, 5, None, 19, 16_869),
    ((8, 4, 0), 3, 3, 5, None, 19, 22_674),
    ((8, 4, 2), 3, 3, 5, None, 19, 27_384),
    ((8, 0, 0), 4, 2, 5, None, 13, 11_246),
    # test_fallback_post_circuit_poseidon_base_8_bench_cs: 32 GiB, 10 challenges, 5 sectors, U8-0-0
    ((8, 0, 0), 5, 5, 10, 32 << 30, 1 + 5 * 11, 266_665),
])
def test_fallback_circuit_test_counts(shape, total, sectors, challenges, size, inputs, constraints):
    c = post.census(post.rust_test_params(shape, sectors, challenges, size)).synthesized
    assert (c.constraints, c.inputs) == (constraints, inputs)


def test_winning_post_counts_by_size():
    """No Rust number: 66 circuit sectors of 1 challenge; each 313 (comm_r input, Poseidon-2 311,
    equality) + a TreeR PoR (530 an 8-ary level, 314 a binary level, 2)."""
    want = {"2k": 90_750, "8m": 230_670, "512m": 300_630, "32g": 370_590, "64g": 391_314}
    for short, n in want.items():
        prm = post.get(f"winning-post-{short}")
        assert (prm.sector_count, prm.challenge_count) == (66, 1)
        levels8 = sum(1 for a in prm.arities if a == 8)
        levels2 = sum(1 for a in prm.arities if a == 2)
        assert post.census(prm).synthesized.constraints == n == 66 * (313 + 530 * levels8 + 314 * levels2 + 2)


def test_file_names_equal_parameters_json():
    for name, tail in PARAMETERS_JSON.items():
        stem = post.get(name).file_stem
        assert stem == "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-" + tail, name
    assert post.get("winning-post-2k").identifier == (
        "FallbackPoSt::PublicParams{sector_size: 2048, challenge_count: 1, sector_count: 66}")


def test_public_inputs_order_and_partial_partition_padding():
    prm = post.get("window-post-2k")            # 2 sectors a partition, 10 challenges, api 1.2.0
    secs = [(7, 1111), (9, 2222), (12, 3333)]
    p0 = post.public_inputs(prm, RANDOMNESS, secs, 0)
    assert len(p0) == prm.num_public == 22
    assert p0[0] == 1111 and p0[11] == 2222
    h = hashlib.sha256(RANDOMNESS + (7).to_bytes(8, "little") + (3).to_bytes(8, "little")).digest()
    assert p0[1 + 3] == int.from_bytes(h[:8], "little") % 64
    # api 1.2.0: challenge n of every sector hashes n, not sector_index * 10 + n
    assert p0[12:22] == post.sector_challenges(prm, RANDOMNESS, 9, 0)
    p1 = post.public_inputs(prm, RANDOMNESS, secs, 1)   # one sector left: repeated
    assert p1[:11] == p1[11:] and p1[0] == 3333
    with pytest.raises(ValueError, match="partition 2: no sectors"):
        post.public_inputs(prm, RANDOMNESS, secs, 2)
    # api 1.0.0 (WinningPoSt): circuit sector i's challenge is index i
    w = post.get("winning-post-2k")
    pw = post.public_inputs(w, RANDOMNESS, [(7, 1111)] * 66)
    assert [pw[2 * i + 1] for i in range(66)] == [post.leaf_challenge(w, RANDOMNESS, 7, i) for i in range(66)]


@pytest.fixture(scope="module")
def sealed():
    return fsec.seal(fp.get("filecoin-2k"), bytes(range(256)) * 7, fsec.prover_id_from_miner(1000), 234,
                     bytes(range(32)))


def _row_sorted(m) -> np.ndarray:
    """(nnz, 5): row, column, coefficient, each row's entries in column order."""
    rows = np.repeat(np.arange(len(m.indptr) - 1), np.diff(m.indptr))
    order = np.lexsort((m.indices, rows))
    return np.column_stack([rows[order], m.indices[order], m.coeffs[order].astype(np.int64)])


def _synth(prm, proofs):
    s = Synth(cs=ConstraintSystem(with_values=False), batch=1)
    post.synthesize(s, prm, proofs)
    return s


@pytest.fixture(scope="module")
def winning(sealed):
    prm = post.get("winning-post-2k")
    comm_r = field.from_bytes(sealed.comm_r)
    pub = post.public_inputs(prm, RANDOMNESS, [(sealed.sector_id, comm_r)] * prm.sector_count)
    proofs = [post.vanilla_proof(sealed, post.sector_challenges(prm, RANDOMNESS, sealed.sector_id, i))
              for i in range(prm.sector_count)]
    return prm, pub, _synth(prm, proofs), proofs


def test_winning_post_2k_synthesized_from_a_sealed_sector_is_satisfied(winning):
    prm, pub, s, proofs = winning
    c = post.census(prm).synthesized
    assert (s.cs.num_constraints, s.cs.num_aux, s.cs.num_public + 1) == (c.constraints, c.aux, c.inputs)
    assert s.cs.to_r1cs().nnz == c.nnz                          # neptune's real constants: no cancellation
    z = assignments(s)[0]
    assert field.vec_to_ints(z[1:1 + prm.num_public]) == pub   # the Rust input order
    check(s, 0)
    assert np.array_equal(post.witness(prm, proofs).to_vec(), z)


def test_winning_post_2k_refuses_a_changed_comm_r_or_challenge(winning):
    prm, pub, s, _ = winning
    z = assignments(s)[0]
    with pytest.raises(UnsatisfiedConstraint, match="enforce input is correct"):
        check(s, 0, set_value(z, 1 + 2 * 30, pub[2 * 30] + 1))          # sector 30's comm_r
    other = (pub[2 * 5 + 1] + 1) % prm.nodes
    with pytest.raises(UnsatisfiedConstraint, match="packing constraint"):
        check(s, 0, set_value(z, 1 + 2 * 5 + 1, other))                 # sector 5's challenge


def test_window_post_2k_partial_partition_repeats_the_last_sector(sealed):
    prm = post.get("window-post-2k")
    comm_r = field.from_bytes(sealed.comm_r)
    pub = post.public_inputs(prm, RANDOMNESS, [(sealed.sector_id, comm_r)])
    proofs = post.pad_partition(
        [post.vanilla_proof(sealed, post.sector_challenges(prm, RANDOMNESS, sealed.sector_id, 0))], 2)
    s = _synth(prm, proofs)
    assert s.cs.num_constraints == post.census(prm).synthesized.constraints == 21_866
    z = assignments(s)[0]
    assert field.vec_to_ints(z[1:1 + prm.num_public]) == pub and pub[:11] == pub[11:]
    check(s, 0)
    # the compact matrices (one block replicated) are the recorded rows, row for row
    full, compact = s.cs.to_r1cs(), post.build(prm).to_r1cs()
    for m, n in ((full.a, compact.a), (full.b, compact.b), (full.c, compact.c)):
        assert np.array_equal(m.indptr, n.indptr)
        assert np.array_equal(*(_row_sorted(x) for x in (m, n)))
    compact.check(np.ascontiguousarray(z))
    # the batched witness (all sectors in one values-mode batch) is the same z
    assert np.array_equal(post.witness(prm, proofs).to_vec(), z)
    # a path for other leaves than the challenged ones: the packed index differs from the input
    wrong = post.vanilla_proof(sealed, [(c + 1) % prm.nodes for c in proofs[0].challenges])
    s2 = _synth(prm, [proofs[0], wrong])
    z2 = assignments(s2)[0]
    z2[1:1 + prm.num_public] = field.vec_from_ints(pub)
    with pytest.raises(UnsatisfiedConstraint, match="packing constraint"):
        check(s2, 0, z2)
    with pytest.raises(ValueError, match="3 sector proofs for a partition of 2"):
        post.pad_partition(proofs + proofs[:1], 2)


def test_vanilla_proofs_checked_and_tampering_named(sealed):
    prm = post.get("window-post-2k")
    comm_r = field.from_bytes(sealed.comm_r)
    secs = [(sealed.sector_id, comm_r)]
    good = post.vanilla_proof(sealed, post.sector_challenges(prm, RANDOMNESS, sealed.sector_id, 0))
    post.verify(prm, RANDOMNESS, secs, [good])
    where = f"partition 0, sector 0 \\(id {sealed.sector_id}\\)"
    with pytest.raises(post.PostProofError, match=where + ": the proof is for sector"):
        post.verify(prm, RANDOMNESS, [(sealed.sector_id, comm_r + 1)], [good])
    bad = copy.deepcopy(good)
    bad.comm_c += 1
    with pytest.raises(post.PostProofError, match=where + r": H\(comm_c, comm_r_last\) differs"):
        post.verify(prm, RANDOMNESS, secs, [bad])
    other = post.sector_challenges(prm, bytes(32), sealed.sector_id, 0)   # another randomness
    with pytest.raises(post.PostProofError, match=where + ", challenge 0: the inclusion proof is of leaf"):
        post.verify(prm, RANDOMNESS, secs, [post.vanilla_proof(sealed, other)])
    bad = copy.deepcopy(good)
    bad.paths[1][4, 2, 0] ^= 1
    with pytest.raises(post.PostProofError,
                       match=where + r", challenge 4 \(leaf \d+\): the path does not reach"):
        post.verify(prm, RANDOMNESS, secs, [bad])
    bad = copy.deepcopy(good)
    bad.leafs[7, 0] ^= 1
    with pytest.raises(post.PostProofError, match=where + ", challenge 7"):
        post.verify(prm, RANDOMNESS, secs, [bad])
    with pytest.raises(post.PostProofError, match="partition 0: 2 sector proofs for 1 public sectors"):
        post.verify(prm, RANDOMNESS, secs, [good, good])


@pytest.mark.skipif(os.environ.get("ZKHIVE_LONG_FILECOIN") != "1",
                    reason="a window-post-2k key takes ~1.5 minutes on the loaded 2-core machine: "
                           "ZKHIVE_LONG_FILECOIN=1 runs it")
def test_window_post_2k_proves_on_the_cpu_and_verifies_with_the_bellperson_vk(sealed, tmp_path):
    """A sealed 2 KiB sector's WindowPoSt partition (one sector, padded to two) proved on the CPU
    from post.build's matrices and post.witness's z, verified with the .vk written and read back
    in bellperson's format; a changed comm_r, challenge or randomness refused."""
    from gpu.groth16 import bellperson as bp
    from gpu.groth16 import prove, setup, verify

    prm = post.get("window-post-2k")
    secs = [(sealed.sector_id, field.from_bytes(sealed.comm_r))]
    proofs = [post.vanilla_proof(sealed, post.sector_challenges(prm, RANDOMNESS, sealed.sector_id, 0))]
    post.verify(prm, RANDOMNESS, secs, proofs)
    circuit = post.build(prm)
    r1cs = circuit.to_r1cs()
    pk, _ = setup(r1cs, seed=b"zkhive window-post-2k test")
    proof = prove(pk, r1cs, post.witness(prm, post.pad_partition(proofs, 2)).to_vec())
    vk = bp.read_vk(bp.write_vk(pk, tmp_path / "window-post-2k.vk"), circuit=circuit)
    pub = post.public_inputs(prm, RANDOMNESS, secs)
    assert verify(vk, pub, proof)
    assert not verify(vk, [pub[0] + 1] + pub[1:], proof)
    assert not verify(vk, pub[:1] + [(pub[1] + 1) % prm.nodes] + pub[2:], proof)
    other = post.public_inputs(prm, bytes(32), secs)
    assert other != pub and not verify(vk, other, proof)
