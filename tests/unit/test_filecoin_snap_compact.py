"""SnapDeals' compact matrices and compact witness (synthesis/filecoin/snap_circuit.py ``build``,
update.py ``witness``): the header and a repeated challenge block expand to exactly the rows the
full recording gives (one digest: a challenge a block; several: ``per_digest`` challenges a block,
the rest in the header), the counts equal the census and the Rust's, the device form's column
checks accept them, they are cached by the circuit's digest, and the batched witness is the
sequential one and satisfies them."""
from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from synthesis import field
from synthesis.bellpepper import check
from synthesis.bellpepper.core import Synth
from synthesis.builder import ConstraintSystem
from synthesis.compact import CompactR1CS, TemplatingCS, compact_matrices
from synthesis.filecoin import snap
from synthesis.filecoin import snap_circuit as sc
from synthesis.filecoin import update as upd
from synthesis.r1cs import UnsatisfiedConstraint

LONG = pytest.mark.skipif(not os.environ.get("ZKHIVE_LONG_FILECOIN"),
                          reason="a minute or more on 2 shared cores: set ZKHIVE_LONG_FILECOIN=1")


def _row_sorted(m) -> np.ndarray:
    """(nnz, 6): row, column, coefficient limbs, each row's entries in column order."""
    rows = np.repeat(np.arange(len(m.indptr) - 1), np.diff(m.indptr))
    order = np.lexsort((m.indices, rows))
    return np.column_stack([rows[order], m.indices[order], m.coeffs[order].astype(np.int64)])


def _same_rows(full, compact) -> None:
    assert (full.num_public, full.num_aux) == (compact.num_public, compact.num_aux)
    for m, n in ((full.a, compact.a), (full.b, compact.b), (full.c, compact.c)):
        assert np.array_equal(m.indptr, n.indptr)
        assert np.array_equal(_row_sorted(m), _row_sorted(n))


def _templated(prm):
    """The whole partition recorded (ordered TemplatingCS: every challenge, nothing replicated)
    as full matrices."""
    cs = TemplatingCS(ordered=True)
    upd.synthesize(Synth(cs=cs), prm, None)
    a, b, c = (m.to_sparse() for m in compact_matrices(cs))
    from synthesis.r1cs import R1CS
    return R1CS(cs.num_public, cs.num_aux, a, b, c)


def _random_update(prm):
    n = prm.sector_nodes
    nodes = lambda tag: field.vec_from_ints([  # noqa: E731
        int.from_bytes(hashlib.sha256(tag + i.to_bytes(4, "little")).digest(), "little") >> 2
        for i in range(n)])
    return snap.encode(prm, nodes(b"sector key"), 0x1234, nodes(b"new data"))


def _witness(prm, u):
    return snap.verify_partition(prm, 0, u.h, u.comm_r_old, u.comm_d_new, u.comm_r_new,
                                 snap.partition_proof(u, 0))


@pytest.mark.parametrize("name, layout", [
    ("empty-sector-update-poseidon-1KiB", (0, 1, 10)),     # one digest: a challenge a block
    ("empty-sector-update-2KiB", (0, 1, 10)),
    ("empty-sector-update-poseidon-8MiB", (12, 14, 2)),    # 3 digests of 14: 12 + 2 x 14
])
def test_compact_matrices_expand_to_the_whole_recording(name, layout):
    """Header + replicated block, expanded, are the rows of the whole partition recorded
    challenge by challenge; constraints, aux and nonzeros equal the census."""
    prm = upd.get(name)
    assert sc.layout(prm) == layout
    cr = sc.build(prm)
    c = upd.census(prm).synthesized
    assert (cr.num_constraints, cr.num_aux, cr.num_public + 1, cr.nnz) == \
        (c.constraints, c.aux, c.inputs, c.nnz)
    _same_rows(_templated(prm), cr.to_r1cs())


def test_the_rust_counts_and_the_device_forms_checks():
    """The Rust's counts (tests/circuit.rs, circuit_poseidon.rs) from the compact matrices; the
    CUDA form's column checks (gpu/native/compact.py) take them; a block whose copies' columns
    overlap is refused there."""
    from gpu.native.compact import CompactFormError, check_columns, parts
    for size, want in ((1 << 10, 1_248_389), (2 << 10, 1_705_039)):
        assert sc.build(upd.UpdateParams(size)).num_constraints == want == upd.RUST_CONSTRAINTS[size]
    # Poseidon 32 GiB: 172 digests of 8 challenges, every digest a block (its window tiles the
    # header's digest variables up to the first challenge's own ones)
    big = sc.build(upd.get("empty-sector-update-poseidon-32GiB"))
    assert big.num_constraints == 22_305_906 and big.a.copies == 172
    for cr in (big, sc.build(upd.get("empty-sector-update-poseidon-8MiB"))):
        for k in "abc":
            check_columns(parts(getattr(cr, k)), cr.num_variables, k)
    a = cr.a
    a.stride = a.stride.copy()
    a.stride[a.stride > 0] -= 1                  # copies shifted by one column less: they overlap
    with pytest.raises(CompactFormError, match="do not tile"):
        check_columns(parts(a), cr.num_variables, "a")


def test_matrices_cached_by_the_circuits_digest(tmp_path, monkeypatch):
    """Built once, saved under the digest, loaded by a fresh circuit object; a half-written
    file is rebuilt; r1cs() is the expansion."""
    monkeypatch.setenv("ZKHIVE_CACHE_DIR", str(tmp_path))
    prm = upd.get("empty-sector-update-poseidon-1KiB")
    c1 = sc.UpdateCircuit("t", prm)
    assert not c1.is_built()
    cr = c1.compact_r1cs()
    path = c1.matrices_path()
    assert path == tmp_path / "r1cs" / f"snap-{c1.digest()}.npz" and path.exists() and c1.is_built()
    c2 = sc.UpdateCircuit("t", prm)
    assert c2.is_built() and c2.compact_r1cs().digest() == cr.digest()
    assert c2.size()["nonzeros"] == upd.census(prm).synthesized.nnz
    path.write_bytes(path.read_bytes()[:100])
    c3 = sc.UpdateCircuit("t", prm)
    assert c3.compact_r1cs().digest() == cr.digest()
    assert CompactR1CS.load(path).digest() == cr.digest()
    assert c3.r1cs().num_constraints == cr.num_constraints
    assert c3.r1cs().digest() == cr.digest()


def test_poseidon_1k_compact_witness_is_the_sequential_one_and_satisfies():
    prm = upd.get("empty-sector-update-poseidon-1KiB")
    w = _witness(prm, _random_update(prm))
    s = Synth(batch=1)
    upd.synthesize(s, prm, w)
    z = check.assignments(s)[0]
    comp = upd.witness(prm, w)
    assert np.array_equal(comp.to_vec(), z)
    r1cs = sc.build(prm).to_r1cs()
    r1cs.check(z)
    bad = z.copy()
    bad[5 + 7] = field.vec_from_ints([12345])[0]
    with pytest.raises(UnsatisfiedConstraint):
        r1cs.check(bad)
    w.challenges[0] = w.challenges[1]            # another challenge's proofs
    with pytest.raises(UnsatisfiedConstraint):
        r1cs.check(upd.witness(prm, w).to_vec())


@pytest.fixture(scope="module")
def job2k():
    from synthesis.filecoin.samples import sample_update
    u = sample_update(b"snap compact test")
    circuit = sc.SETS["snap-update-2k"]
    return circuit, circuit.parse_c1(sc.job_document("snap-update-2k", u))


def test_2k_compact_witness_is_the_full_one_and_satisfies_the_compact_matrices(job2k):
    """snap-update-2k through the registered circuit: ``synthesize_compact`` (the cluster's
    call) equals the whole partition computed challenge by challenge, and satisfies the
    expanded compact matrices; a changed public input does not."""
    circuit, job = job2k
    comp = circuit.synthesize_compact(job, 0)
    s = Synth(batch=1)
    upd.synthesize(s, circuit.params, circuit.witness(job, 0))
    z = check.assignments(s)[0]
    assert np.array_equal(comp.to_vec(), z)
    assert comp.stats()["other"] < len(z) // 5             # mostly bits: the blob is small
    r1cs = sc.build(circuit.params).to_r1cs()
    r1cs.check(z)
    assert field.vec_to_ints(z[1:5]) == circuit.public_inputs(job, 0)
    bad = z.copy()
    bad[4] = field.vec_from_ints([circuit.public_inputs(job, 0)[3] + 1])[0]    # comm_r_new
    with pytest.raises(UnsatisfiedConstraint):
        r1cs.check(bad)


@LONG
@pytest.mark.parametrize("name", ["empty-sector-update-2KiB", "empty-sector-update-poseidon-8MiB"])
def test_compact_matrices_equal_the_plain_recording(name):
    """Against the plain ConstraintSystem recording (no templates) too: ~1-2 min a size."""
    prm = upd.get(name)
    s = Synth(cs=ConstraintSystem(with_values=False))
    upd.synthesize(s, prm, None)
    _same_rows(s.cs.to_r1cs(), sc.build(prm).to_r1cs())


@LONG
def test_poseidon_8m_compact_witness_of_several_digests_satisfies():
    """Three digests' challenges (12 in the header rows, 2 blocks of 14): the batched witness is
    the sequential one and satisfies the expanded compact matrices (~1 min)."""
    prm = upd.get("empty-sector-update-poseidon-8MiB")
    w = _witness(prm, _random_update(prm))
    s = Synth(batch=1)
    upd.synthesize(s, prm, w)
    z = check.assignments(s)[0]
    assert np.array_equal(upd.witness(prm, w).to_vec(), z)
    sc.build(prm).to_r1cs().check(z)


@LONG
@pytest.mark.parametrize("name", ["empty-sector-update-32GiB", "empty-sector-update-64GiB"])
def test_32g_and_64g_compact_matrices_built_from_the_header_and_one_challenge(name):
    """The 32 and 64 GiB sets built without the full recording (bench/snap_matrices.py times
    them): the census's
    constraints (32 GiB: the Rust's 81,049,499), aux and nonzeros, the device form's checks."""
    from gpu.native.compact import check_columns, parts
    prm = upd.get(name)
    cr = sc.build(prm)
    c = upd.census(prm).synthesized
    assert (cr.num_constraints, cr.num_aux, cr.nnz) == (c.constraints, c.aux, c.nnz)
    assert cr.num_constraints == upd.RUST_CONSTRAINTS.get(prm.sector_size, cr.num_constraints)
    for k in "abc":
        check_columns(parts(getattr(cr, k)), cr.num_variables, k)


def test_saved_matrices_carry_their_digest_and_a_damaged_array_refuses_the_file(tmp_path, monkeypatch):
    """CompactR1CS.save stores the arrays' digest, so a prover's load does not hash them again
    (1.3 s of its path to ready at 32 GiB); it is the digest of the arrays loaded with it, a file
    from before (no digest) is hashed, and a byte of an array changed in the file is refused by
    the zip's CRC-32 as it is read (the circuit rebuilds such a file), never trusted."""
    import zipfile

    from tests.compact_circuits import toy
    monkeypatch.setenv("ZKHIVE_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="column map is not the one its segments give"):
        toy(9).save(tmp_path / "toy.npz")        # no segments: it would load as other matrices
    assert not (tmp_path / "toy.npz").exists()
    cr = sc.UpdateCircuit("t", upd.get("empty-sector-update-poseidon-1KiB")).compact_r1cs()
    path = tmp_path / "m.npz"
    cr.save(path)
    back = CompactR1CS.load(path)
    assert back.__dict__.get("_digest") == cr.digest()
    back.__dict__.pop("_digest")
    assert back.digest() == cr.digest()          # what the arrays hash to
    with np.load(path) as z:                      # a file without it: hashed at first use
        old = {k: z[k] for k in z.files if k != "digest"}
    np.savez(tmp_path / "old.npz", **old)
    before = CompactR1CS.load(tmp_path / "old.npz")
    assert "_digest" not in before.__dict__ and before.digest() == cr.digest()
    with zipfile.ZipFile(path) as zf:
        info = max((zf.getinfo(n) for n in zf.namelist() if n != "digest.npy"),
                   key=lambda i: i.file_size)
    data = bytearray(path.read_bytes())
    name_len, extra_len = (int.from_bytes(data[info.header_offset + k:info.header_offset + k + 2],
                                          "little") for k in (26, 28))
    at = info.header_offset + 30 + name_len + extra_len + info.file_size - 1   # its last byte
    data[at] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(zipfile.BadZipFile, match="CRC"):
        CompactR1CS.load(path)
