"""The census of Filecoin's PoRep circuit (synthesis.filecoin.census) against the numbers the
Rust sources and Curio publish: every gadget counted as bellperson synthesizes it."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from synthesis.filecoin import census as c


def _count(fn, *args):
    cs = c.CountCS()
    before = cs.total.copy()
    fn(cs, *args)
    return cs.total.minus(before)


@pytest.mark.parametrize("arity,want", [(2, 311), (4, 377), (8, 505), (11, 598)])
def test_poseidon_constraints_are_neptunes(arity, want):
    # neptune circuit.rs test_poseidon_hash (311, 377, 505) and rust-fil-proofs
    # stacked/circuit/hash.rs test_hash_single_column_circuit (598)
    cs = c.CountCS()
    xs = [cs.alloc() for _ in range(arity)]
    before = cs.total.copy()
    c.poseidon_hash(cs, xs)
    got = cs.total.minus(before)
    assert (got.constraints, got.aux) == (want, want)


def test_sha256_full_block_is_bellpersons_25840():
    # bellperson sha256.rs test_full_block: one compression of 512 allocated bits from the IV
    cs = c.CountCS()
    bits = [c.alloc_bit(cs) for _ in range(512)]
    before = cs.total.copy()
    c._compression(cs, bits, [c.u32_const(x) for x in c.IV])
    assert cs.total.minus(before).constraints == 25_840
    # a block whose state is variable folds nothing: more constraints
    state = [[c.alloc_bit(cs) for _ in range(32)] for _ in range(8)]
    before = cs.total.copy()
    c._compression(cs, [c.alloc_bit(cs) for _ in range(512)], state)
    assert cs.total.minus(before).constraints - 512 > 25_840


def test_create_label_is_rust_fil_proofs_532025():
    # storage-proofs-porep stacked/circuit/create_label.rs test_create_label: 37 parents and the
    # replica id allocated as 256 bits each, layer 3 and node 22 constants
    cs = c.CountCS()
    parents = [[c.alloc_bit(cs) for _ in range(256)] for _ in range(37)]
    rid = [c.alloc_bit(cs) for _ in range(256)]
    c.create_label(cs, rid, parents, 3, c.u32_const(22) + c.u32_const(0))
    assert cs.total.constraints == 532_025
    # the node allocated (as the circuit has it) instead of constant: a different count
    cs2 = c.CountCS()
    parents = [[c.alloc_bit(cs2) for _ in range(256)] for _ in range(37)]
    rid = [c.alloc_bit(cs2) for _ in range(256)]
    c.create_label(cs2, rid, parents, 3, c.u64_alloc(cs2))
    assert cs2.total.constraints != 532_025 + 64


@pytest.mark.parametrize("arities,want", [((2, 2, 2), 1_206_212), ((8,), 1_199_620),
                                          ((8, 4), 1_296_576), ((8, 4, 2), 1_346_982)])
def test_stacked_circuit_is_rust_fil_proofs(arities, want):
    # storage-proofs-porep tests/stacked_circuit.rs: 2 layers, 1 challenge, 8 nodes a base tree,
    # Poseidon TreeC/TreeR of these arities; 22 inputs (ONE included)
    nodes = 1
    for a in arities:
        nodes *= a
    prm = SimpleNamespace(name="t", layers=2, tree_d_depth=nodes.bit_length() - 1, drg_parents=6,
                          exp_parents=8, tree_c_arities=arities, tree_r_arities=arities, challenges=1)
    got = c.census(prm).synthesized
    assert (got.constraints, got.inputs) == (want, 22)


def test_32g_partition_is_filecoins():
    """The four numbers of curio's cuzk-pce header test: bellperson's 328 input rows included."""
    r = c.census("filecoin-32g", densities=True)
    got = r.with_input_rows
    assert {"inputs": got.inputs, "aux": got.aux, "constraints": got.constraints,
            "nonzeros": got.nnz} == c.FILECOIN_32G
    assert r.synthesized.constraints == 130_278_869 - 328
    # cuzk's notes (curio extern/cuzk/cuzk-project.md, "PCE Extraction"): per-matrix nonzeros
    # with the input rows, and the densities (aux with a nonzero in A, in B; inputs in B)
    assert (got.nnz_a, got.nnz_b, got.nnz_c) == c.FILECOIN_32G_MATRICES
    assert (r.a_aux, r.b_aux, r.b_inputs) == c.FILECOIN_32G_DENSITIES
    # every challenge block is the same: 18 of them and the header
    assert r.synthesized.constraints == r.header.constraints + 18 * r.challenge.constraints


def test_a_wrong_poseidon_structure_misses_filecoins_nonzeros(monkeypatch):
    # the pre-sparse matrix as M' = diag(1, M^) (a zero first row and column) instead of
    # neptune's dense M x M': constraints and aux unchanged, nonzeros no longer Filecoin's
    right = _count(lambda cs: c.poseidon_hash(cs, [cs.alloc() for _ in range(8)]))
    monkeypatch.setattr(c, "_PCONST", {})
    orig = c._pconst

    def sparse_pre(t):
        k = orig(t)
        k.pre_sparse = [[1 if i == j == 0 else 0 if (i == 0 or j == 0) else 5 for j in range(t)]
                        for i in range(t)]
        return k

    monkeypatch.setattr(c, "_pconst", sparse_pre)
    wrong = _count(lambda cs: c.poseidon_hash(cs, [cs.alloc() for _ in range(8)]))
    assert (wrong.constraints, wrong.aux) == (right.constraints, right.aux)
    assert wrong.nnz != right.nnz
