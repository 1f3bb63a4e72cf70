"""The compact, replicated matrices' kernels (gpu/kernels/compact.cuh, through their host build)
against the full-CSR host library; the device setup's steps against the host setup; the compact
assignment path of the CPU backend; seeded keys; what is refused."""
from __future__ import annotations

import numpy as np
import pytest

from arith import native
from gpu.native import compact as C
from synthesis import assignment, field as F
from tests.compact_circuits import random_z, toy, witness


@pytest.fixture(scope="module")
def fc_test():
    from synthesis.circuits import get_circuit
    from synthesis.filecoin.params import TEST
    return get_circuit(TEST)


@pytest.mark.parametrize("which", ["toy", "filecoin-test-256b"])
def test_products_equal_full_csr(which, fc_test):
    cr = toy(6) if which == "toy" else fc_test.compact_r1cs()
    rng = np.random.default_rng()
    nv = cr.num_variables
    z = random_z(nv, rng)
    for name in "abc":
        m = getattr(cr, name)
        p = C.parts(m, name)
        C.check_columns(p, nv, name)
        full = m.to_sparse()
        want_z = native.spmv(full.indptr, full.indices, full.coeffs, z)
        assert np.array_equal(C.spmv(p, z), want_z)
        # the device's warp-a-row order for long rows (32 strided parts summed), and an odd split
        for lanes in (32, 3):
            assert np.array_equal(C.spmv(p, z, lanes=lanes), want_z), lanes
        lh, lb = C.long_rows(p)
        lengths = np.diff(full.indptr)
        long_all = set(lh.tolist()) | {p["hrows"] + j * p["brows"] + int(r) for j in range(p["copies"])
                                       for r in lb}
        assert long_all == set(np.flatnonzero(lengths > C.REP_LONG).tolist())
        L = F.vec_from_ints([int(x) for x in rng.integers(0, 2**62, p["rows"])]) if which != "toy" else \
            F.vec_from_ints([F.random_element() for _ in range(p["rows"])])
        want = native.spmv_t(full.indptr, full.indices, full.coeffs, L, nv)
        for piece in (1, 3, C.PIECE):  # heavy columns cut into pieces, summed again
            assert np.array_equal(C.spmv_t(p, C.transpose(p, piece), L, nv), want), piece
        i = int(rng.integers(0, p["rows"]))
        assert C.row_terms(p, i) == [(int(k), v) for k, v in full.row(i)]


@pytest.mark.parametrize("which", ["toy", "filecoin-test-256b"])
def test_products_from_the_assignment_planes_equal_full_csr(which, fc_test):
    """A z, B z, C z with z read from the compact assignment's bit planes (compact.cuh
    z_planes_t, the device's rep_spmv_planes and rep_spmv_long_planes: a 0 skipped, a 1 adding
    the coefficient itself, a field element by its offset) == the full-CSR product, for a
    witness of 0s, 1s and other values (all three kinds in one word of the planes), one of 0s
    and 1s only and one of field elements only; a changed field element changes the product."""
    cr = toy(6) if which == "toy" else fc_test.compact_r1cs()
    rng = np.random.default_rng()
    nv = cr.num_variables
    mixed = random_z(nv, rng)
    kinds = rng.integers(0, 3, nv)
    mixed[kinds == 0] = 0
    mixed[kinds == 1] = [1, 0, 0, 0]
    bits = mixed.copy()
    bits[kinds == 2] = [1, 0, 0, 0]
    dense = F.vec_from_ints([int(x) for x in rng.integers(2, 2**62, nv)])
    for z in (mixed, bits, dense):
        z[0] = [1, 0, 0, 0]  # the constant one
        blob = assignment.encode(z)
        for name in "abc":
            p = C.parts(getattr(cr, name), name)
            full = getattr(cr, name).to_sparse()
            want = native.spmv(full.indptr, full.indices, full.coeffs, z)
            for lanes in (0, 32, 3):
                assert np.array_equal(C.spmv_planes(p, blob, nv, lanes=lanes), want), (name, lanes)
    # a field element that A reads, changed: the product follows it
    full = cr.a.to_sparse()
    k = int(next(c for c in np.unique(full.indices) if c and kinds[c] == 2))
    z = mixed.copy()
    z[0] = [1, 0, 0, 0]
    p = C.parts(cr.a, "a")
    before = C.spmv_planes(p, assignment.encode(z), nv)
    z[k, 0] ^= 2
    after = C.spmv_planes(p, assignment.encode(z), nv)
    assert np.array_equal(after, native.spmv(full.indptr, full.indices, full.coeffs, z))
    assert not np.array_equal(before, after)


def test_a_plain_compact_matrix_is_a_header(fc_test):
    cm = fc_test.compact_r1cs().a.header
    p = C.parts(cm)
    z = random_z(int(cm.cols.max()) + 1, np.random.default_rng())
    full = cm.to_sparse()
    assert np.array_equal(C.spmv(p, z), native.spmv(full.indptr, full.indices, full.coeffs, z))


def test_field_steps_equal_the_host_library():
    rng = np.random.default_rng()
    for log_n in (1, 6, 13):
        n, tau = 1 << log_n, F.random_element()
        assert np.array_equal(C.lagrange(n, tau), native.lagrange_at(n, tau))
    x, c = F.random_element(), F.random_element()
    for k in (1, 63, 64, 65, 1000):
        assert np.array_equal(C.powers(k, c, x), native.powers(k, c, x))
    u, v, w = (F.vec_from_ints([F.random_element() for _ in range(77)]) for _ in range(3))
    a, b, k = (F.random_element() for _ in range(3))
    want = native.scale(native.add(native.add(native.scale(u, b), native.scale(v, a)), w), k)
    assert np.array_equal(C.lincomb(u, v, w, b, a, k), want)
    del rng


def test_device_setup_steps_give_the_host_key():
    """gpu/cuda/setup.py's sequence (trapdoor draw, Lagrange, transposed products with the input
    rows, the l and h scalars) through the host builds of its kernels == gpu.groth16.setup."""
    from gpu.cuda.setup import domain_of, trapdoor
    from gpu.groth16 import curve
    from gpu.groth16.setup import setup

    cr, seed, r = toy(7), b"steps", F.MODULUS
    pk, vk = setup(cr.to_r1cs(), seed=seed)
    npub, nv, m = cr.num_public, cr.num_variables, cr.num_constraints
    n = domain_of(m, npub)
    assert n == pk.domain_size
    tau, alpha, beta, gamma, delta = trapdoor(cr.digest(), n, seed)
    L = C.lagrange(n, tau)
    ps = {k: C.parts(getattr(cr, k)) for k in "abc"}
    u, v, w = (C.spmv_t(ps[k], C.transpose(ps[k]), L, nv) for k in "abc")
    u[:npub + 1] = native.add(u[:npub + 1], L[m:m + npub + 1])
    dinv = pow(delta, r - 2, r)
    k = C.lincomb(u, v, w, beta, alpha, dinv)
    h = C.powers(n - 1, (pow(tau, n, r) - 1) * dinv % r, tau)
    g1, g2 = curve.g1(), curve.g2()
    assert curve.fixed_base(g1, u).raw.tobytes() == pk.a_query.raw.tobytes()
    assert curve.fixed_base(g2, v).raw.tobytes() == pk.b_g2_query.raw.tobytes()
    assert curve.fixed_base(g1, k[npub + 1:]).raw.tobytes() == pk.l_query.raw.tobytes()
    assert curve.fixed_base(g1, h).raw.tobytes() == pk.h_query.raw.tobytes()
    assert vk.alpha_g1 == g1 * curve.scalar(alpha) and vk.delta_g2 == g2 * curve.scalar(delta)


def test_batched_fixed_base_equals_the_per_point_one():
    """gpu/kernels/fixed_base_batch.cuh (one inversion per 16 points) through its host build ==
    fixed_base.cuh's one inversion a point; zeros (identity sums) inside and at range edges."""
    from gpu.groth16 import curve
    from gpu.groth16.fixed_base import host_fixed_base
    for g, sizes in ((curve.g1(), (1, 15, 16, 17, 40)), (curve.g2(), (1, 17))):
        for n in sizes:
            s = F.vec_from_ints([F.random_element() if i % 3 else 0 for i in range(n)])
            assert C.fixed_base_batched(g, s).raw.tobytes() == host_fixed_base(g, s).raw.tobytes()


def test_seeded_setup_is_deterministic():
    from gpu.backends import get_backend
    be = get_backend("cpu")
    cr = toy(4)
    _, vk1 = be.setup_resident(cr, seed=b"one")
    _, vk2 = be.setup_resident(cr, seed=b"one")
    _, vk3 = be.setup_resident(cr, seed=b"two")
    _, vk4 = be.setup_resident(cr)  # fresh randomness
    assert vk1.to_bytes() == vk2.to_bytes()
    assert vk1.to_bytes() != vk3.to_bytes() and vk4.to_bytes() not in (vk1.to_bytes(), vk3.to_bytes())


def test_compact_assignment_path_equals_the_vector_path():
    from gpu import prove, verify
    from gpu.backends import get_backend
    from gpu.timing import StageTimer

    be = get_backend("cpu")
    cr, z = toy(5), witness(5)
    pk, vk = be.setup_resident(cr, seed=b"paths")
    pub = F.vec_to_ints(z[1:2])
    terms = [be.prove_terms(pk, cr, form, StageTimer())
             for form in (z, assignment.from_vec(z), assignment.encode(z))]
    for t in terms[1:]:
        assert all(getattr(t, k) == getattr(terms[0], k) for k in ("a", "b_g1", "b_g2", "l", "h"))
    r, s = F.random_element(), F.random_element()
    proofs = [prove(pk, cr, form, backend=be, r=r, s=s).to_bytes()
              for form in (z, assignment.encode(z))] + [prove(pk, cr.to_r1cs(), z, backend=be, r=r, s=s).to_bytes()]
    assert len(set(proofs)) == 1
    proof = prove(pk, cr, assignment.encode(z), backend=be)
    assert verify(vk, pub, proof) and not verify(vk, [pub[0] + 1], proof)


def test_rejects():
    from gpu.backends import get_backend
    from gpu.groth16.errors import CircuitMismatch
    from gpu.timing import StageTimer

    be = get_backend("cpu")
    cr, z = toy(5), witness(5)
    pk, _ = be.setup_resident(cr, seed=b"rejects")
    with pytest.raises(assignment.AssignmentError, match="values, the circuit has"):
        be.prove_terms(pk, cr, assignment.encode(z[:-1]), StageTimer())
    with pytest.raises(assignment.AssignmentError, match="values, the circuit has"):
        C.planes(assignment.encode(z[:-1]), len(z))
    with pytest.raises(CircuitMismatch):
        be.prove_terms(pk, toy(4), assignment.encode(witness(4)), StageTimer())
    blob = bytearray(assignment.encode(z))
    blob[20] |= 1  # z[0] also marked "other"
    with pytest.raises(assignment.AssignmentError):
        C.planes(bytes(blob), len(z))
    with pytest.raises(assignment.AssignmentError, match="is .* bytes, its header says"):
        C.planes(assignment.encode(z)[:-1], len(z))


def test_expand_equals_decode_and_rejects_bad_blobs():
    rng = np.random.default_rng()
    for n in (1, 7, 8, 31, 32, 33, 64, 999):
        z = random_z(n, rng)
        blob = assignment.encode(z)
        assert np.array_equal(C.expand(blob, n), assignment.decode(blob, n=n))
    z = random_z(100, rng)
    z[0] = 0
    with pytest.raises(assignment.AssignmentError, match=r"assignment\[0\]"):
        C.planes(assignment.encode(z), 100)


def _planes_into(blob, n):
    words, off, total = C.planes_layout(blob, n)
    out = np.full(total, 0xA5, np.uint8)  # poisoned: padding and offsets must be written
    assert C.planes_into(blob, n, out) == (words, off)
    return out, words, off


def test_planes_on_every_core_equal_the_numpy_planes():
    rng = np.random.default_rng()
    for n in (1, 7, 8, 31, 32, 33, 64, 999, 70_001):
        z = random_z(n, rng)
        blob = assignment.encode(z)
        out, words, off = _planes_into(blob, n)
        other, one, offs, fes = C.planes(blob, n)
        assert np.array_equal(out[:4 * words].view(np.uint32), other)
        assert np.array_equal(out[4 * words:8 * words].view(np.uint32), one)
        assert np.array_equal(out[8 * words:12 * words].view(np.uint32), offs)
        assert off % 16 == 0 and np.array_equal(out[off:].view(np.uint64).reshape(-1, 4), fes)


def test_planes_on_every_core_reject_what_the_numpy_planes_reject():
    """Each native check on its own: the call must raise without the numpy checks' help, so a
    native check that lets a bad blob through fails here."""
    rng = np.random.default_rng()
    n = 70_001
    z = random_z(n, rng)  # z[0] = 1
    good = assignment.encode(z)
    count, m, plane = assignment.read_header(good, n)
    h = assignment._HEADER.size
    other = np.frombuffer(good, np.uint8, count=plane, offset=h)
    one = np.frombuffer(good, np.uint8, count=plane, offset=h + plane)
    fe_byte = int(np.flatnonzero(other[1:])[-1]) + 1  # a byte of `other` with a field element
    cases = []
    b = bytearray(good); b[h + plane - 1] |= 0x80  # a bit past the last value (n % 8 = 1)
    cases.append((b, "bits set past its last value"))
    one_byte = int(np.flatnonzero(one[1:] & ~other[1:])[-1]) + 1
    bit = int(one[one_byte] & ~other[one_byte]).bit_length() - 1
    b = bytearray(good); b[h + one_byte] |= 1 << bit  # ... made "other" too; count now off by one
    b[h + fe_byte] &= ~(int(other[fe_byte]) & -int(other[fe_byte])) & 0xFF  # keep the count
    cases.append((b, f"value {8 * one_byte + bit} is marked both"))
    b = bytearray(good); b[h + fe_byte] &= ~(int(other[fe_byte]) & -int(other[fe_byte])) & 0xFF
    cases.append((b, "as field elements, its header says"))
    b = bytearray(good); k = m // 2  # element k set to r itself
    b[h + 2 * plane + 32 * k:h + 2 * plane + 32 * k + 32] = F.MODULUS.to_bytes(32, "little")
    cases.append((b, f"element {k} is not below the Fr modulus"))
    zz = z.copy(); zz[0] = 0
    cases.append((bytearray(assignment.encode(zz)), r"assignment\[0\]"))
    for blob, words in cases:
        with pytest.raises((assignment.AssignmentError, F.FieldError), match=words):
            _planes_into(bytes(blob), n)
    with pytest.raises(assignment.AssignmentError, match="its header says"):
        C.planes_layout(good[:-1], n)  # no buffer is sized from a header the length denies
    _planes_into(good, n)  # and the good blob still passes


def test_column_maps_that_would_race_are_refused():
    cr = toy(3)
    p = C.parts(cr.a)
    bad = dict(p, stride=p["stride"].copy())
    bad["stride"][3:] = 2  # copies of x, y, t would overlap
    with pytest.raises(C.CompactFormError, match="tile"):
        C.check_columns(bad, cr.num_variables)
    with pytest.raises(C.CompactFormError, match="outside"):
        C.check_columns(p, cr.num_variables - 1)


def test_column_maps_whose_tiles_overlap_are_refused():
    """Each stride's bases tile their copies, but the tiles (or a tile and a shared column)
    cover one variable twice: the transposed product would race on it."""
    cr = toy(3)
    p = C.parts(cr.a)
    assert list(p["stride"]) == [0, 0, 0, 3, 3, 3] and p["copies"] == 3
    C.check_columns(p, cr.num_variables)  # shared 0..2, the tile 3..11: the accepting side
    bad = dict(p, base=np.array([0, 1, 2, 2, 3, 4]))  # the tile 2..10 covers shared column 2
    with pytest.raises(C.CompactFormError, match=r"^matrix: copies' columns overlap at variable 2$"):
        C.check_columns(bad, cr.num_variables)
    bad = dict(p, base=np.array([0, 1, 11, 3, 4, 5]))  # shared column 11 inside the tile 3..11
    with pytest.raises(C.CompactFormError, match=r"^a: copies' columns overlap at variable 11$"):
        C.check_columns(bad, cr.num_variables, "a")


def test_filecoin_test_digests_agree_across_forms(fc_test):
    assert fc_test.r1cs().digest() == fc_test.compact_r1cs().digest()


def test_the_matvec_reads_the_planes_only_where_asked_and_where_they_fit(monkeypatch):
    n, room = 1 << 27, C.PLANES_ROOM
    monkeypatch.delenv("ZKHIVE_MATVEC_PLANES", raising=False)
    assert C.matvec_reads_planes(n, 1_693_311, 87 << 20)       # auto: a PoRep partition's mix
    assert not C.matvec_reads_planes(n, n // 4 + 1, 87 << 20)  # mostly field elements: z
    monkeypatch.setenv("ZKHIVE_MATVEC_PLANES", "0")
    assert not C.matvec_reads_planes(n, 1_693_311, 87 << 20)
    monkeypatch.setenv("ZKHIVE_MATVEC_PLANES", "1")
    assert C.matvec_reads_planes(n, 1_693_311, 87 << 20)
    assert C.matvec_reads_planes(n, n // 2, room)
    assert not C.matvec_reads_planes(n, 0, room + 1)            # past the working set's room
    monkeypatch.setenv("ZKHIVE_MATVEC_PLANES", "auto")
    assert C.matvec_reads_planes(n, n // 4, room)
    assert not C.matvec_reads_planes(n, n // 4 + 1, room)       # mostly field elements
    monkeypatch.setenv("ZKHIVE_MATVEC_PLANES", "yes")
    with pytest.raises(ValueError, match="ZKHIVE_MATVEC_PLANES='yes': expected 0, 1 or auto"):
        C.matvec_reads_planes(n, 0, 0)
