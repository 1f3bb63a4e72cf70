"""Our Filecoin graph against rust-fil-proofs: the parents-cache digests its
storage-proofs-porep/parent_cache.json records (SHA-256 of every node's 6 DRG + 8 expander
parents as u32 LE), the cache ids it keys them by, and the graph tests of drgraph.rs/graph.rs."""
import numpy as np
import pytest

from synthesis.filecoin import graph as G
from synthesis.filecoin import params as P

# storage-proofs-porep/parent_cache.json (rust-fil-proofs 87348a7), sector_size 2048
RUST_2K = {
    # porep id [0; 32] (StackedDrg2KiBV1, api 1.0.0) and [5, 0...] (StackedDrg2KiBV1_1)
    (0, "1.0.0"): ("v28-sdr-parent-3f0eef38bb48af1f48ad65e14eb85b4ebfc167cec18cd81764f6d998836c9899",
                   "3da49221e2ed55371b86d0bf3d6526fcf128af61bed904f966428db1b531750d"),
    (5, "1.1.0"): ("v28-sdr-parent-494d91dc80f2df5272c4b9e129bc7ade9405225993af9fe34e6542a39a47554b",
                   "840057702eea7652cf97e04306c30fe57174714d90de156a25eddd6075c25b97"),
}


@pytest.mark.parametrize("proof_id,api", sorted(RUST_2K))
def test_2k_parents_cache_matches_rust(proof_id, api):
    g = G.Graph(64, bytes([proof_id]) + bytes(31), api)
    cache_id, digest = RUST_2K[proof_id, api]
    assert g.cache_id() == cache_id
    assert g.cache_digest(g.cache()) == digest


def test_a_changed_parent_changes_the_digest():
    g = G.Graph.for_params(P.get("filecoin-2k"))
    cache = g.cache()
    cache[17, 9] ^= 1
    assert g.cache_digest(cache) != RUST_2K[5, "1.1.0"][1]
    # and the other api version orders the DRG parents differently (predecessor last)
    old = G.Graph(64, P.get("filecoin-2k").porep_id, "1.0.0").drg(np.arange(2, 64))
    assert (old[:, 5] == np.arange(1, 63)).all() and not (old[:, 0] == np.arange(1, 63)).all()


def test_drg_rules_from_drgraph_rs():
    g = G.Graph(2048, bytes([5]) + bytes(31))
    d = g.drg(np.arange(2048))
    assert (d[:2] == 0).all()
    assert (d[1:, 0] == np.arange(2047)).all()            # immediate predecessor is parent 0
    assert (d[2:] < np.arange(2, 2048)[:, None]).all()    # no self reference, only earlier nodes


def test_expander_is_a_permutation_and_reaches_high_nodes():
    # graph.rs test_shuffle: 8 * 2^10 permuted indexes are all distinct
    keys, n = (1, 2, 3, 4), 8 << 10
    pre = G.feistel_precompute(n)
    assert len({G.feistel_permute(n, i, keys, pre) for i in range(n)}) == n
    # graph.rs test_high_parent_bits: 64 GiB (2^31 nodes), porep id 5: a parent >= 2^29 early
    e = G.Graph(1 << 31, bytes([5]) + bytes(31), "1.2.0").exp(np.arange(3))
    assert (e >= 1 << 29).any()
    # test_graph_distribution_pathology: 32 GiB V1_1 graphs reach the second half of a layer
    e = G.Graph(1 << 30, bytes([8]) + bytes(31)).exp(np.arange(50))
    assert (e >= 1 << 29).any()


def test_label_parent_order():
    assert G.label_parent_order(1) == [i % 6 for i in range(37)]
    assert G.label_parent_order(2) == list(range(14)) * 2 + list(range(9))
    with pytest.raises(ValueError, match="power of two"):
        G.Graph(96, bytes(32))
