"""Filecoin parameter sets against rust-fil-proofs' constants (filecoin-proofs/src/constants.rs)."""
import pytest

from synthesis.filecoin import params as P


def test_32g_partition_shape():
    p = P.get("filecoin-32g")
    assert (p.nodes, p.layers, p.partitions, p.challenges) == (1 << 30, 11, 10, 18)
    assert p.num_public + 1 == 328                      # Curio's cuzk PCE header: 328 inputs
    assert p.tree_r_arities == (8,) * 9 + (8,)          # SectorShape32GiB = LCTree<U8, U8, U0>
    assert p.porep_id == bytes([8]) + bytes(31)         # StackedDrg32GiBV1_1 = 8, nonce 0
    assert p.preimage_bytes == 1248 and p.benchmark


def test_small_and_64g_shapes():
    assert P.get("filecoin-2k").tree_r_arities == (8, 8) and not P.get("filecoin-2k").benchmark
    assert P.get("filecoin-2k").challenges == 2 and P.get("filecoin-2k").num_public + 1 == 40
    assert P.get("filecoin-64g").tree_r_arities == (8,) * 9 + (8, 2)
    assert P.get("filecoin-8m").tree_d_depth == 18 and not P.get("filecoin-8m").benchmark
    assert P.get("filecoin-512m").benchmark


def test_rejects_unknown_and_bad_shapes():
    with pytest.raises(ValueError, match="unknown filecoin parameter set 'filecoin-1k'"):
        P.get("filecoin-1k")
    with pytest.raises(ValueError, match="not a power of 8"):
        P.FilecoinParams("x", "StackedDrg2KiBV1_1", "StackedDrg2KiBV1", 4 << 10, layers=2,
                         minimum_challenges=2, partitions=1)


def test_the_test_sized_configuration_is_no_registered_proof():
    """filecoin-test-256b (issue 36: what sdr-256k served): rust-fil-proofs' circuit-test shape
    (8 nodes, 2 layers, one challenge a partition), its own porep id, and no RegisteredSealProof:
    a request naming a proof id can never reach it, and its C1 is routed by its own kind."""
    from synthesis.filecoin.c1 import FilecoinC1Error, params_of

    p = P.get(P.TEST)
    assert (p.nodes, p.layers, p.partitions, p.challenges, p.tree_r_arities) == (8, 2, 2, 1, (8,))
    assert p.is_test and not P.get("filecoin-2k").is_test
    assert p.registered_proof not in P.ALL_PROOF_IDS and "Test" in p.registered_proof
    assert all(P.proof_name(i) != p.registered_proof for i in range(64))
    assert p.porep_id != P.get("filecoin-2k").porep_id and p.porep_id[8:] == bytes(24)
    assert params_of({"registered_proof": p.registered_proof}) is p
    with pytest.raises(FilecoinC1Error, match="field registered_proof"):
        params_of({"registered_proof": p.registered_proof + "X"})
    with pytest.raises(KeyError):
        P.porep_id_of("StackedDrg256BV1_1")
