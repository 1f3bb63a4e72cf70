"""Filecoin's EmptySectorUpdate (SnapDeals) circuit and its Poseidon variant
(synthesis/filecoin/update.py): the counts storage-proofs-update's tests assert, gadget by gadget
and whole, the parameter sets, the public inputs and the file names of parameters.json."""
import os

import pytest

from synthesis.filecoin import census as cen
from synthesis.filecoin import update as upd

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30

#: rust-fil-proofs 87348a7 parameters.json: the v28-empty-sector-update[-poseidon]-* files
PARAMETERS_JSON = {
    (2 * KIB, False): "8-0-0-fb9e095bebdd77511c0269b967b4d87ba8b8a525edaa0e165de23ba454510194",
    (8 * MIB, False): "8-0-0-92180959e1918d26350b8e6cfe217bbdd0a2d8de51ebec269078b364b715ad63",
    (512 * MIB, False): "8-0-0-61fa69f38b9cc771ba27b670124714b4ea77fbeae05e377fb859c4a43b73a30c",
    (32 * GIB, False): "8-8-0-3b7f44a9362e3985369454947bc94022e118211e49fd672d52bec1cbfd599d18",
    (64 * GIB, False): "8-8-2-102e1444a7e9a97ebf1e3d6855dcc77e66c011ea66f936d9b2c508f87f2f83a7",
    (32 * GIB, True): "8-8-0-3b7f44a9362e3985369454947bc94022e118211e49fd672d52bec1cbfd599d18",
    (64 * GIB, True): "8-8-2-102e1444a7e9a97ebf1e3d6855dcc77e66c011ea66f936d9b2c508f87f2f83a7",
}


@pytest.mark.parametrize("size", sorted(upd.RUST_CONSTRAINTS))
def test_counts_equal_storage_proofs_update_tests(size):
    """tests/circuit.rs test_empty_sector_update_circuit_{1,2,4,8,16,32}kib and
    test_empty_sector_update_constraints_32gib (81,049,499)."""
    assert upd.census(upd.UpdateParams(size)).synthesized.constraints == upd.RUST_CONSTRAINTS[size]


@pytest.mark.parametrize("size", sorted(upd.RUST_CONSTRAINTS_POSEIDON))
def test_poseidon_counts_equal_storage_proofs_update_tests(size):
    """tests/circuit_poseidon.rs: 32,164 (1 KiB), 47,974 (8 KiB), 22,305,906 (32 GiB)."""
    got = upd.census(upd.UpdateParams(size, poseidon=True)).synthesized.constraints
    assert got == upd.RUST_CONSTRAINTS_POSEIDON[size]


def test_gen_challenge_bits_counts_equal_the_gadget_test():
    """gadgets.rs test_gen_challenge_bits_gadget: 568 at every size up to 16 MiB, 4,544 at
    512 MiB, 5,680 at 32 and 64 GiB."""
    want = [568] * 8 + [4544, 5680, 5680]
    for size, w in zip(upd.SHAPES, want, strict=True):
        prm = upd.UpdateParams(size)
        cs = cen.CountCS()
        comm_r_new, k = cen.alloc_num(cs), cen.alloc_num(cs)
        before = cs.total.constraints
        bits = upd.gen_challenge_bits(cs, comm_r_new, k, prm.challenge_count,
                                      prm.challenge_bit_len - prm.partition_bit_len)
        assert (cs.total.constraints - before, len(bits)) == (w, prm.challenge_count), size


@pytest.mark.parametrize("partitions, leafs, want", [
    (1, 8, 317_654), (2, 128, 5_808_515), (4, 16, 771_448), (8, 8, 453_797)])
def test_apex_por_counts_equal_the_gadget_tests(partitions, leafs, want):
    """gadgets.rs test_apex_por_gadget_small_sector_sizes (1..8 KiB: 1 partition of 8 leafs;
    16/32 KiB: 2 of 128) and test_apex_por_gadget_16kib_4_8_partitions."""
    cs = cen.CountCS()
    comm_d = cen.alloc_num(cs)
    bits = [cen.alloc_bit(cs) for _ in range(partitions.bit_length() - 1)]
    apex = [cen.alloc_num(cs) for _ in range(leafs)]
    path = [[cen.alloc_num(cs)] for _ in bits]
    before = cs.total.constraints
    upd.apex_por(cs, apex, bits, path, comm_d)
    assert cs.total.constraints - before == want


def test_parameter_sets_follow_constants_rs():
    p = upd.get("empty-sector-update-32GiB")
    assert (p.partition_count, p.challenge_count, p.apex_leaf_count, p.hs, p.shape) == \
        (16, 86, 128, (7, 8, 9, 10, 11, 12), (8, 8, 0))
    assert p.registered_proof == "StackedDrg32GiBV1" and upd.h_default(p) == 10
    q = upd.get("empty-sector-update-poseidon-32GiB")
    assert (q.partition_count, q.challenge_count, q.apex_leaf_count, q.registered_proof) == \
        (1, 16 * 86, 0, None)
    small = upd.get("empty-sector-update-2KiB")
    assert (small.partition_count, small.challenge_count, small.apex_leaf_count, small.hs) == \
        (1, 10, 8, (1,) * 6)
    sizes = (16 * KIB, 8 * MIB, 512 * MIB)
    assert [upd.UpdateParams(s).partition_count for s in sizes] == [2, 4, 16]
    with pytest.raises(ValueError, match="sector size 3072: not one of"):
        upd.UpdateParams(3 * KIB)
    with pytest.raises(ValueError, match="unknown update parameter set 'empty-sector-update-1GiB'"):
        upd.get("empty-sector-update-1GiB")


def test_public_inputs_order_packs_k_and_h_select():
    p = upd.get("empty-sector-update-32GiB")
    # k in the low 4 bits (16 partitions), h_select = 1 << index(h) above them
    assert upd.public_inputs(p, 5, 10, 11, 22, 33) == [5 | (1 << 3) << 4, 11, 22, 33]
    q = upd.get("empty-sector-update-poseidon-32GiB")
    assert upd.public_inputs(q, 0, 7, 11, 22, 33) == [1, 11, 22, 33]
    with pytest.raises(ValueError, match="partition k = 16: 16 partitions at 32GiB"):
        upd.public_inputs(p, 16, 10, 1, 2, 3)
    with pytest.raises(ValueError, match=r"h = 6: not one of \(7, 8, 9, 10, 11, 12\)"):
        upd.public_inputs(p, 0, 6, 1, 2, 3)
    with pytest.raises(ValueError, match="partition k = 1: 1 partitions"):
        upd.public_inputs(q, 1, 7, 1, 2, 3)


def test_file_names_equal_parameters_json():
    for (size, poseidon), tail in PARAMETERS_JSON.items():
        prefix = "empty-sector-update-poseidon" if poseidon else "empty-sector-update"
        stem = upd.UpdateParams(size, poseidon).file_stem
        assert stem == f"v28-{prefix}-merkletree-poseidon_hasher-{tail}"


def _shape(name):
    from synthesis.builder import ConstraintSystem
    from synthesis.bellpepper.core import Synth
    s = Synth(cs=ConstraintSystem(with_values=False))
    upd.synthesize_shape(s, name)
    return s.cs


@pytest.mark.parametrize("name", ["empty-sector-update-poseidon-1KiB",
                                  "empty-sector-update-poseidon-2KiB"])
def test_poseidon_variant_synthesized_equals_the_census(name):
    """The circuit recorded on synthesis.bellpepper's gadgets (neptune's real constants): rows,
    aux, inputs and nonzeros equal the counting replay (1 KiB: the Rust's 32,164)."""
    cs, c = _shape(name), upd.census(name).synthesized
    assert (cs.num_constraints, cs.num_aux, cs.num_public + 1, cs.to_r1cs().nnz) == \
        (c.constraints, c.aux, c.inputs, c.nnz)


@pytest.mark.skipif(not os.environ.get("ZKHIVE_LONG_FILECOIN"),
                    reason="~1-2 min a size on 2 shared cores: set ZKHIVE_LONG_FILECOIN=1")
@pytest.mark.parametrize("name", ["empty-sector-update-1KiB", "empty-sector-update-2KiB"])
def test_update_synthesized_equals_the_census(name):
    """EmptySectorUpdate 1 KiB (1,248,389) and 2 KiB (1,705,039) recorded: rows, aux, inputs and
    nonzeros equal the counting replay."""
    cs, c = _shape(name), upd.census(name).synthesized
    assert (cs.num_constraints, cs.num_aux, cs.num_public + 1, cs.to_r1cs().nnz) == \
        (c.constraints, c.aux, c.inputs, c.nnz)
