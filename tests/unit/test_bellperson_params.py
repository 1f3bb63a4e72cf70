"""bellperson's .params / .vk files (gpu/groth16/bellperson.py): the encoding against ZCash's
vectors, the layout, a key read back proving the same proofs, and every tampering refused with
the section and byte offset."""
import json
import random
import shutil

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point

from gpu import prove, setup, verify
from gpu.groth16 import KeyFormatError, Proof, ProofFormatError, bellperson as bp, curve
from gpu.groth16.compress import FQ_MODULUS as P
from synthesis import field as F
from synthesis.builder import ONE, ConstraintSystem

R = F.MODULUS

# ZCash BLS12-381 generators (the bls12_381 crate's tests; the IETF pairing-friendly-curves draft)
G1_UNCOMPRESSED = bytes.fromhex(
    "17f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb"
    "08b3f481e3aaa0f1a09e30ed741d8ae4fcf5e095d5d00af600db18cb2c04b3edd03cc744a2888ae40caa232946c5e7e1")
G1_COMPRESSED = bytes.fromhex(
    "97f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb")
G2_UNCOMPRESSED = bytes.fromhex(
    "13e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e"
    "024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8"
    "0606c4a02ea734cc32acd2b02bc28b99cb3e287e85a763af267492ab572e99ab3f370d275cec1da1aaa9075ff05f79be"
    "0ce5d527727d6e118cc9cdc6da2e351aadfd9baa8cbdd3a76d429a695160d12c923ac9cc3baca289e193548608b82801")
G2_COMPRESSED = bytes.fromhex(
    "93e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e"
    "024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8")

# filecoin-proofs parameters.json (rust-fil-proofs master): the v28 PoRep file stems' hashes
PARAMETERS_JSON_HASHES = {
    2048: "032d3138d22506ec0082ed72b2dcba18df18477904e35bafee82b3793b06832f",
    8 << 20: "ecd683648512ab1765faa2a5f14bab48f676e633467f0aa8aad4b55dcb0652bb",
    512 << 20: "6babf46ce344ae495d558e7770a585b2382d54f225af8ed0397b8be7c3fcd472",
    32 << 30: "82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820",
    64 << 30: "96f1b4a04c5c51e4759bbf224bbc2ef5a42c7100f16ec0637123f16a845ddfb2",
}


def circuit(x: int, inputs: int = 3, only_c: bool = False):
    """x^32 by squaring with ``inputs`` public inputs; ``only_c``: one more auxiliary variable
    used only in C (outside A's and B's density) and an input outside B."""
    cs = ConstraintSystem()
    ins = [cs.alloc_input(x)]
    cur, val = ins[0], x
    for _ in range(5):
        val = val * val % R
        nxt = cs.alloc(val)
        cs.enforce(cur, cur, nxt)
        cur = nxt
    out = cs.alloc_input(val)
    cs.enforce(cur, ONE, out)
    for j in range(inputs - 2):
        extra = cs.alloc_input((x + j) % R)
        cs.enforce(ins[0] + j, ONE, extra)
    if only_c:
        w = cs.alloc(2 * val % R)
        cs.enforce(out * 2, ONE, w)   # w in C only; `out` appears in A only
    return cs


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bellperson")
    cs = circuit(random.randrange(R), only_c=True)
    r1cs = cs.to_r1cs()
    pk, vk = setup(r1cs, seed=b"bellperson test")
    bp.write_params(pk, r1cs, d / "k.params")
    bp.write_vk(pk, d / "k.vk")
    return d, r1cs, pk, vk


def tampered(files, tmp_path, edit, name="k.params"):
    d = files[0]
    out = tmp_path / name
    shutil.copy(d / name, out)
    data = bytearray(out.read_bytes())
    data = edit(data) or data
    out.write_bytes(bytes(data))
    return out


def test_encoding_is_zcash_uncompressed_and_compressed():
    g1, g2 = curve.g1(), curve.g2()
    raw1 = np.frombuffer(g1.to_xy_bytes_le(), np.uint8).reshape(1, 96)
    raw2 = np.frombuffer(g2.to_xy_bytes_le(), np.uint8).reshape(1, 192)
    assert bp.to_uncompressed(raw1, 1).tobytes() == G1_UNCOMPRESSED
    assert bp.to_uncompressed(raw2, 2).tobytes() == G2_UNCOMPRESSED
    back = bp.from_uncompressed(np.frombuffer(G2_UNCOMPRESSED, np.uint8).reshape(1, 192), 2)
    assert back.tobytes() == g2.to_xy_bytes_le()
    # proofs: compressed A, B, C as bellperson's proof.rs writes them (flags 0x80 | sign 0x20)
    assert g1.to_compressed_bytes() == G1_COMPRESSED and g2.to_compressed_bytes() == G2_COMPRESSED
    proof = Proof(g1, g2, -g1)
    data = proof.to_bytes()
    assert data[:48] == G1_COMPRESSED and data[48:144] == G2_COMPRESSED
    assert data[144] == G1_COMPRESSED[0] | 0x20  # -G: the larger y, the sign bit set
    from gpu.groth16.compress import compress
    assert compress(raw1, 1).tobytes() == G1_COMPRESSED and compress(raw2, 2).tobytes() == G2_COMPRESSED


def test_layout_and_vk_is_the_params_head(files):
    d, r1cs, pk, _ = files
    lay = bp.scan(d / "k.params")
    s = lay.sections
    assert [s[n].start for n in ("alpha_g1", "beta_g1", "beta_g2", "gamma_g2", "delta_g1",
                                 "delta_g2", "ic")] == [0, 96, 192, 384, 576, 672, 868]
    shape = bp.shape_of(r1cs)
    assert {n: s[n].count for n in shape.want()} == shape.want()
    # the only-in-C variable is out of A and B; the ONE-free input `out` is out of B
    assert s["a"].count == r1cs.num_variables - 1 and s["l"].count == r1cs.num_aux
    assert s["b_g1"].count < s["a"].count and s["h"].count == shape.domain - 1
    assert lay.size == s["b_g2"].end
    vk_bytes = (d / "k.vk").read_bytes()
    assert vk_bytes == (d / "k.params").read_bytes()[:s["ic"].end]
    assert bp.scan(d / "k.vk").size == len(vk_bytes)
    # the writer fed rows already encoded (what the device's store_file_points hands it)
    bp.write_params_from(pk, r1cs, d / "enc.params", encoded=True,
                         rows=lambda name, lo, hi: bp.to_uncompressed(getattr(pk, name).raw[lo:hi], 2 if name == "b_g2_query" else 1))
    assert (d / "enc.params").read_bytes() == (d / "k.params").read_bytes()


def test_a_key_read_back_proves_the_same_proofs(files):
    d, r1cs, pk, vk = files
    back = bp.read_params(d / "k.params", r1cs, points="full", eager=True)
    for name in ("a_query", "b_g1_query", "b_g2_query", "h_query", "l_query"):
        assert np.array_equal(getattr(back, name).raw, getattr(pk, name).raw), name
    vk_file = bp.read_vk(d / "k.vk", circuit=r1cs)
    for _ in range(2):
        cs = circuit(random.randrange(R), only_c=True)
        r, s = random.randrange(1, R), random.randrange(1, R)
        mine = prove(pk, r1cs, cs.assignment(), r=r, s=s)
        theirs = prove(back, r1cs, cs.assignment(), r=r, s=s)
        assert mine.to_bytes() == theirs.to_bytes()
        assert verify(vk_file, cs.public_inputs(), theirs)
        wrong = list(cs.public_inputs())
        wrong[0] = (wrong[0] + 1) % R
        assert not verify(vk_file, wrong, theirs)


def test_partition_proofs_concatenated_and_a_flipped_byte_refused(files):
    from gpu.groth16 import split_proofs
    d, r1cs, pk, _ = files
    vk = bp.read_vk(d / "k.vk", circuit=r1cs)
    parts = [circuit(random.randrange(R), only_c=True) for _ in range(2)]
    blob = b"".join(prove(pk, r1cs, cs.assignment()).to_bytes() for cs in parts)
    assert len(blob) == 384
    assert all(verify(vk, cs.public_inputs(), p) for cs, p in zip(parts, split_proofs(blob)))
    for byte in (0, 47, 60, 150, 191):         # every element, flags and coordinates
        bad = bytearray(blob)
        bad[byte] ^= 0x01 if byte not in (0,) else 0x20
        try:
            proofs = split_proofs(bytes(bad))
        except ProofFormatError as e:
            assert "proof element" in str(e)
            continue
        assert not verify(vk, parts[0].public_inputs(), proofs[0]), byte


def test_length_tampering_names_section_and_offset(files, tmp_path):
    d, r1cs, _, _ = files
    lay = bp.scan(d / "k.params")
    b2 = lay.sections["b_g2"]
    short = tampered(files, tmp_path, lambda b: b[:-1])
    with pytest.raises(KeyFormatError, match=rf"section b_g2: its length field at byte offset "
                                             rf"{b2.start - 4} says {b2.count} points"):
        bp.scan(short)
    long = tampered(files, tmp_path, lambda b: b + b"\0")
    with pytest.raises(KeyFormatError, match=rf": 1 bytes after the last section \(b_g2, ending at "
                                             rf"byte offset {b2.end}\)"):
        bp.scan(long)
    h = lay.sections["h"]

    def grow_h(b):
        b[h.start - 4:h.start] = (h.count + 1).to_bytes(4, "big")
    # one point more in h: the next length (l's) is read from inside a point and runs past the end
    with pytest.raises(KeyFormatError, match=rf"section l: its length field at byte offset "
                                             rf"{lay.sections['l'].start - 4 + 96} says \d+ points"):
        bp.scan(tampered(files, tmp_path, grow_h))
    with pytest.raises(KeyFormatError, match=r"too short for a verifying key"):
        bp.scan(tampered(files, tmp_path, lambda b: b[:500], name="k.vk"))


def test_wrong_circuit_sizes_refused(files, tmp_path):
    d, r1cs, _, _ = files
    other = circuit(5, inputs=4, only_c=True).to_r1cs()       # one input more
    with pytest.raises(KeyFormatError, match=r"section ic: the length field at byte offset 864 "
                                             r"says 4 points, the circuit needs 5"):
        bp.read_params(d / "k.params", other)
    with pytest.raises(KeyFormatError, match=r"section ic: .* byte offset 864"):
        bp.read_vk(d / "k.vk", circuit=other)
    same_io = circuit(5, inputs=3, only_c=False).to_r1cs()    # one aux variable fewer
    with pytest.raises(KeyFormatError, match=r"section l: the length field at byte offset \d+ "
                                             r"says \d+ points, the circuit needs \d+"):
        bp.read_params(d / "k.params", same_io)


def _point_off_subgroup() -> bytes:
    """A G1 point on the curve but outside the prime-order subgroup (uncompressed, ZCash)."""
    x = 5
    while True:
        rhs = (x ** 3 + 4) % P
        y = pow(rhs, (P + 1) // 4, P)
        if y * y % P == rhs:
            raw = np.frombuffer(x.to_bytes(48, "little") + y.to_bytes(48, "little"), np.uint8)
            pt = G1Point.from_xy_bytes_unchecked_le(raw.tobytes())
            if not pt.is_in_subgroup():
                return x.to_bytes(48, "big") + y.to_bytes(48, "big")
        x += 1


def test_bad_points_refused_with_section_and_offset(files, tmp_path):
    d, r1cs, _, _ = files
    lay = bp.scan(d / "k.params")
    l2 = lay.sections["l"].offset(2)

    def off_curve(b):
        b[l2 + 95] ^= 1                                  # y's last byte
    with pytest.raises(KeyFormatError, match=rf"section l, point 2 at byte offset {l2}: not on the G1 curve"):
        bp.read_params(tampered(files, tmp_path, off_curve), r1cs, eager=True)
    a1 = lay.sections["a"].offset(1)
    bad = _point_off_subgroup()

    def off_group(b):
        b[a1:a1 + 96] = bad
    path = tampered(files, tmp_path, off_group)
    bp.read_params(path, r1cs, points="curve", eager=True)   # on the curve: "curve" takes it
    with pytest.raises(KeyFormatError, match=rf"section a, point 1 at byte offset {a1}: not in the "
                                             r"prime-order subgroup"):
        bp.read_params(path, r1cs, points="full", eager=True)
    h0 = lay.sections["h"].offset(0)

    def infinity(b):
        b[h0:h0 + 96] = b"\x40" + bytes(95)
    with pytest.raises(KeyFormatError, match=rf"section h, point 0 at byte offset {h0}: the point at infinity"):
        bp.read_params(tampered(files, tmp_path, infinity), r1cs, eager=True)
    g = lay.sections["b_g2"].offset(0)

    def big_coord(b):
        b[g + 48:g + 96] = P.to_bytes(48, "big")         # x.c0 = p
    with pytest.raises(KeyFormatError, match=rf"section b_g2, point 0 at byte offset {g}: a coordinate "
                                             r"is not below the field modulus"):
        bp.read_params(tampered(files, tmp_path, big_coord), r1cs, eager=True)
    ic1 = lay.sections["ic"].offset(1)
    with pytest.raises(KeyFormatError, match=rf"section ic, point 1 at byte offset {ic1}: not in the "
                                             r"prime-order subgroup"):
        bp.read_vk(tampered(files, tmp_path, lambda b: b.__setitem__(slice(ic1, ic1 + 96), bad),
                            name="k.vk"), points="full")
    # a .params' IC is its verifying key's: read_params checks it by ``points`` too
    ic_bad = tampered(files, tmp_path, lambda b: b.__setitem__(slice(ic1, ic1 + 96), bad))
    bp.read_params(ic_bad, r1cs, points="curve")
    with pytest.raises(KeyFormatError, match=rf"section ic, point 1 at byte offset {ic1}: not in the "
                                             r"prime-order subgroup"):
        bp.read_params(ic_bad, r1cs, points="full")

    def swap_beta(b):
        b[96:192] = G1_UNCOMPRESSED                     # beta_g1 := the generator
    with pytest.raises(KeyFormatError, match=r"section beta_g1 at byte offset 96 and beta_g2 at 192 "
                                             r"are not the same scalar"):
        bp.read_vk(tampered(files, tmp_path, swap_beta, name="k.vk"))


def test_digest_as_paramfetch_computes_it(files, tmp_path):
    import hashlib
    d = files[0]
    path = d / "k.params"
    want = hashlib.blake2b(path.read_bytes()).hexdigest()[:32]
    assert bp.file_digest(path) == want
    manifest = tmp_path / "parameters.json"
    manifest.write_text(json.dumps({"k.params": {"cid": "x", "digest": want, "sector_size": 2048}}))
    assert bp.check_digest(path, manifest) == want
    flipped = tampered(files, tmp_path, lambda b: b.__setitem__(len(b) - 1, b[-1] ^ 1))
    with pytest.raises(KeyFormatError, match=r"digest [0-9a-f]{32} \(BLAKE2b-512 of bytes 0\.\.\d+, "
                                             rf"first 32 hex digits\) differs from the manifest's {want}"):
        bp.check_digest(flipped, manifest)
    with pytest.raises(KeyFormatError, match="not in the parameters manifest"):
        bp.check_digest(d / "k.vk", manifest)


def test_v28_file_names_equal_parameters_json():
    for size, h in PARAMETERS_JSON_HASHES.items():
        stem = bp.filecoin_stem(size)
        assert stem.endswith("-sha256_hasher-" + h), size
        assert stem.startswith("v28-stacked-proof-of-replication-merkletree-poseidon_hasher-")
    assert bp.filecoin_stem(32 << 30) == ("v28-stacked-proof-of-replication-merkletree-poseidon_"
                                          "hasher-8-8-0-sha256_hasher-" + PARAMETERS_JSON_HASHES[32 << 30])


def test_writer_refuses_what_bellperson_cannot_hold(tmp_path):
    cs = ConstraintSystem()
    x = cs.alloc_input(3)
    y = cs.alloc(9)
    cs.alloc(7)                       # never constrained: L would hold the identity
    cs.enforce(x, x, y)
    r1cs = cs.to_r1cs()
    pk, _ = setup(r1cs, seed=b"s")
    with pytest.raises(KeyFormatError, match=r"section l: point 1 \(variable 1\) is the identity.*"
                                             r"no constraint uses"):
        bp.write_params(pk, r1cs, tmp_path / "x.params")
    assert not (tmp_path / "x.params").exists()


def test_the_device_point_checks_host_build():
    """gpu/kernels/subgroup.cuh (the device's checks with points="full") on the host: the [r] P
    test agrees with arkworks' on subgroup points and on one off the subgroup."""
    vec = F.vec_from_ints([random.randrange(1, R) for _ in range(3)]).reshape(-1, 4)
    g1 = curve.fixed_base(curve.g1(), vec).raw.copy()
    g2 = curve.fixed_base(curve.g2(), vec).raw.copy()
    assert bp.first_bad(g1, 1, "full", native_subgroup=True) == (-1, "")
    assert bp.first_bad(g2, 2, "full", native_subgroup=True) == (-1, "")
    bad = np.frombuffer(_point_off_subgroup(), np.uint8).reshape(1, 96)
    g1[1] = bp.from_uncompressed(bad, 1)[0]
    assert bp.first_bad(g1, 1, "curve") == (-1, "")
    assert bp.first_bad(g1, 1, "full", native_subgroup=True) == (1, "not in the prime-order subgroup")
    assert bp.first_bad(g1, 1, "full") == (1, "not in the prime-order subgroup")
    g2[2, 100] ^= 4
    assert bp.first_bad(g2, 2, "curve") == (2, "not on the G2 curve")


def test_compact_circuits_densities_and_a_key_through_the_file(tmp_path):
    """The densities read from the compact (replicated) matrices equal the full R1CS's, and a
    key for a compact circuit goes through a file and proves on the CPU backend."""
    from synthesis import assignment
    from tests.compact_circuits import toy, witness
    cr = toy(9)
    a, b = bp.shape_of(cr), bp.shape_of(cr.to_r1cs())
    assert a.want() == b.want()
    assert np.array_equal(a.a_density, b.a_density) and np.array_equal(a.b_density, b.b_density)
    assert 0 < a.want()["b_g1"] < a.want()["a"] < a.num_vars or a.want()["a"] == a.num_vars
    pk, vk = setup(cr.to_r1cs(), seed=b"compact")
    bp.write_params(pk, cr, tmp_path / "t.params")
    bp.write_vk(pk, tmp_path / "t.vk")
    back = bp.read_params(tmp_path / "t.params", cr)
    z = witness(9)
    r, s = random.randrange(1, R), random.randrange(1, R)
    p1 = prove(pk, cr.to_r1cs(), z, r=r, s=s)
    p2 = prove(back, cr, assignment.encode(z), r=r, s=s)
    assert p1.to_bytes() == p2.to_bytes()
    assert verify(bp.read_vk(tmp_path / "t.vk", circuit=cr), F.vec_to_ints(z[1:2]), p2)


def test_snarkjs_export_takes_a_bellperson_vk(files, tmp_path):
    """``zkhive export snarkjs --key X.vk`` reads bellperson's .vk (what keys setup writes now)
    and writes the same verification_key.json as from our own verifying key file."""
    import argparse
    from gpu.export import cli as export_cli
    d, r1cs, pk, vk = files
    cs = circuit(random.randrange(R), only_c=True)
    (tmp_path / "p.bin").write_bytes(prove(pk, r1cs, cs.assignment()).to_bytes())
    vk.save(tmp_path / "ours.key")
    inputs = ",".join(hex(x) for x in cs.public_inputs())
    for key, out in ((d / "k.vk", "theirs"), (tmp_path / "ours.key", "ours")):
        parser = argparse.ArgumentParser()
        export_cli.register(parser.add_subparsers(dest="command"))
        args = parser.parse_args(["export", "snarkjs", "--key", str(key), "--proof", str(tmp_path / "p.bin"),
                                  "--inputs", inputs, "--out", str(tmp_path / out)])
        assert args.func(args) == 0
    assert ((tmp_path / "theirs" / "verification_key.json").read_text()
            == (tmp_path / "ours" / "verification_key.json").read_text())


def test_our_key_is_bellpersons_generator_on_the_same_trapdoor():
    """Our conventions against bellperson's generator.rs, recomputed here in Python integers from
    the same trapdoor (the seeded ceremony's draws): h = tau^i t(tau) / delta, i < n - 1 (t = X^n
    - 1, n the next power of two >= m + inputs); the Lagrange coefficients as the inverse FFT of
    the powers of tau over omega = ROOT_OF_UNITY^(2^(32 - log n)) (ROOT_OF_UNITY = 0x16a2...0d2b,
    the bls12_381/blstrs constant); input i's extra row m + i with A = 1; IC over gamma, L over
    delta. Every point of our key equals the one bellperson's formulas give."""
    from gpu.groth16.setup import seeded_draw
    cs = circuit(11, only_c=True)
    r1cs = cs.to_r1cs()
    pk, vk = setup(r1cs, seed=b"generator.rs")
    draw = seeded_draw(b"generator.rs", r1cs.digest())
    tau, alpha, beta, gamma, delta = (draw() for _ in range(5))
    m, inputs = r1cs.num_constraints, r1cs.num_public + 1
    n = 1
    while n < m + inputs:
        n *= 2
    root = 0x16a2a19edfe81f20d09b681922c813b4b63683508c2280b93829971f439f0d2b
    omega = pow(root, 1 << (32 - (n.bit_length() - 1)), R)
    assert pow(tau, n, R) != 1
    powers = [pow(tau, i, R) for i in range(n)]
    ninv, winv = pow(n, R - 2, R), pow(omega, R - 2, R)
    lag = [ninv * sum(p * pow(winv, i * j, R) for i, p in enumerate(powers)) % R for j in range(n)]
    t_over_delta = (pow(tau, n, R) - 1) * pow(delta, R - 2, R) % R
    g1, g2 = curve.g1(), curve.g2()

    def at(mat, k, extra=()):
        acc = sum(c * lag[row] for row in range(m) for col, c in mat.row(row) if col == k)
        return (acc + sum(lag[row] for row in extra)) % R

    def pt(base, x):
        return base * curve.scalar(x) if x else type(base).identity()
    for i in range(n - 1):
        assert pk.h_query[i] == pt(g1, powers[i] * t_over_delta % R), i
    for k in range(r1cs.num_variables):
        u = at(r1cs.a, k, [m + k] if k < inputs else [])
        v, w = at(r1cs.b, k), at(r1cs.c, k)
        assert pk.a_query[k] == pt(g1, u) and pk.b_g1_query[k] == pt(g1, v) and pk.b_g2_query[k] == pt(g2, v)
        e = (beta * u + alpha * v + w) % R
        if k < inputs:
            assert vk.gamma_abc_g1[k] == pt(g1, e * pow(gamma, R - 2, R) % R), k
        else:
            assert pk.l_query[k - inputs] == pt(g1, e * pow(delta, R - 2, R) % R), k
    assert pk.beta_g1 == pt(g1, beta) and vk.delta_g2 == pt(g2, delta) and vk.alpha_g1 == pt(g1, alpha)


# --- issue 35/39: every key-file check has a test that breaks with it ---------------------------

def _off_subgroup(kind: int) -> bytes:
    """A point of E(Fp) (G1) or E'(Fp2) (G2) outside the r-subgroup, uncompressed (ZCash): a
    curve point found from its x, never multiplied by the cofactor."""
    point, width = (G1Point, 48) if kind == 1 else (G2Point, 96)
    for x in range(1, 1000):
        enc = bytes([0x80]) + bytes(width - 2) + bytes([x])
        try:
            p = point.from_compressed_bytes_unchecked(enc)
        except Exception:
            continue   # x^3 + b is not a square
        if not p.is_in_subgroup():
            raw = np.frombuffer(p.to_xy_bytes_le(), np.uint8).reshape(1, 2 * width)
            return bp.to_uncompressed(raw, kind).tobytes()
    raise AssertionError("no point outside the subgroup found")


@pytest.mark.parametrize("name", [n for n, _ in bp.VK_FIXED])
def test_vk_fixed_points_off_the_subgroup_refused_each(files, tmp_path, name):
    """Each of the six single points replaced by a curve point outside the subgroup: refused
    naming the point, in the .vk and at the head of the .params (whatever ``points``)."""
    sec = bp.scan(files[0] / "k.vk").sections[name]
    bad = _off_subgroup(sec.kind)
    G = G1Point if sec.kind == 1 else G2Point
    assert not G.from_xy_bytes_unchecked_le(bp.from_uncompressed(np.frombuffer(bad, np.uint8).reshape(1, -1),
                                                                 sec.kind).tobytes()).is_in_subgroup()
    edit = lambda b: b.__setitem__(slice(sec.start, sec.end), bad)   # noqa: E731
    want = rf"section {name}, point 0 at byte offset {sec.start}: not in the prime-order subgroup"
    vk = tampered(files, tmp_path, edit, name="k.vk")
    bp.read_vk(vk, points="none")          # on the curve, and unchecked "none" takes it
    for points in ("curve", "full"):
        with pytest.raises(KeyFormatError, match=want):
            bp.read_vk(vk, points=points)
    with pytest.raises(KeyFormatError, match=want):
        bp.read_params(tampered(files, tmp_path, edit), files[1], points="curve")
    with pytest.raises(KeyFormatError, match=want):
        bp.check_file(tampered(files, tmp_path, edit), files[1], points="curve")


def _set_len(sec, n):
    def edit(b):
        b[sec.start - 4:sec.start] = n.to_bytes(4, "big")
    return edit


@pytest.mark.parametrize("name", ["ic", "h", "l", "a", "b_g1", "b_g2"])
def test_each_length_is_named_in_its_own_section(files, tmp_path, name):
    """A length one too long or one too short is refused in that section, at its length field,
    against the circuit (IC too long used to be reported as h's)."""
    d, r1cs, _, _ = files
    sec = bp.scan(d / "k.params").sections[name]
    for n in (sec.count + 1, sec.count - 1):
        path = tampered(files, tmp_path, _set_len(sec, n))
        want = (rf"k.params: section {name}: the length field at byte offset {sec.start - 4} says {n} "
                rf"points, the circuit needs {sec.count} \(")
        for read in (lambda: bp.read_params(path, r1cs), lambda: bp.check_file(path, r1cs),
                     # densities on a thread (a fresh matrices object: no Shape cached yet)
                     lambda: bp.read_params(path, circuit(5, only_c=True).to_r1cs(), later=True)):
            with pytest.raises(KeyFormatError, match=want):
                read()


def test_ic_too_long_and_too_short_in_a_vk(files, tmp_path):
    d, r1cs, _, _ = files
    ic = bp.scan(d / "k.vk").sections["ic"]
    for n in (ic.count + 1, ic.count - 1):
        path = tampered(files, tmp_path, _set_len(ic, n), name="k.vk")
        with pytest.raises(KeyFormatError, match=rf"section ic: the length field at byte offset 864 "
                                                 rf"says {n} points, the circuit needs {ic.count} "
                                                 rf"\({ic.count - 1} public inputs \+ ONE\)"):
            bp.read_vk(path, circuit=r1cs)
        with pytest.raises(KeyFormatError, match=r"k\.vk: .*\(?ic\b"):   # without a circuit: the size
            bp.read_vk(path)
    assert bp.read_vk(d / "k.vk", circuit=r1cs).num_public == ic.count - 1


@pytest.mark.parametrize("section,coord", [("alpha_g1", 0), ("ic", 1), ("h", 0), ("l", 1),
                                           ("b_g2", 0), ("b_g2", 3), ("beta_g2", 2)])
def test_a_coordinate_equal_to_p_refused_by_the_range_check(files, tmp_path, section, coord):
    """A coordinate = p (which the curve code would read as 0) refused by the range check
    itself: with points="none" no curve check runs; p - 1 passes the range check."""
    d, r1cs, _, _ = files
    sec = bp.scan(d / "k.params").sections[section]
    at = sec.offset(0) + 48 * coord
    path = tampered(files, tmp_path, lambda b: b.__setitem__(slice(at, at + 48), P.to_bytes(48, "big")))
    with pytest.raises(KeyFormatError, match=rf"^{path}: section {section}, point 0 at byte offset "
                                             rf"{sec.offset(0)}: a coordinate is not below the field "
                                             r"modulus$"):
        bp.read_params(path, r1cs, points="none", eager=True)
    buf = bytearray((d / "k.params").read_bytes()[sec.offset(0):sec.offset(1)])
    for v, ok in ((P - 1, True), (P, False), (P + 1, False), (2 ** 381 - 1, False)):
        buf[48 * coord:48 * coord + 48] = v.to_bytes(48, "big")
        arr = np.frombuffer(bytes(buf), np.uint8).reshape(1, -1)
        if ok:
            bp.from_uncompressed(arr, sec.kind)
            continue
        with pytest.raises(KeyFormatError, match=r"point 0: a coordinate is not below the field modulus"):
            bp.from_uncompressed(arr, sec.kind)


@pytest.mark.parametrize("section", ["alpha_g1", "beta_g2", "delta_g1", "ic", "h", "l", "a",
                                     "b_g1", "b_g2"])
def test_zero_filled_and_identity_points_refused_everywhere(files, tmp_path, section):
    """No section of a bellperson file may hold the identity: its reader refuses it in IC and
    the queries (its generator drops it from a and b), Groth16's alpha..delta never are. A
    zero-filled point ((0, 0), no flag) is our layout's identity: refused whatever ``points``."""
    d, r1cs, _, _ = files
    sec = bp.scan(d / "k.params").sections[section]
    i = sec.count - 1
    at = sec.offset(i)
    g = "G1" if sec.kind == 1 else "G2"
    zero = tampered(files, tmp_path, lambda b: b.__setitem__(slice(at, at + sec.width), bytes(sec.width)))
    for points in ("none", "curve", "full"):
        with pytest.raises(KeyFormatError, match=rf"section {section}, point {i} at byte offset {at}: "
                                                 rf"every byte zero \(a zero-filled point: \(0, 0\) is "
                                                 rf"not on the {g} curve\)"):
            bp.read_params(zero, r1cs, points=points, eager=True)
    with pytest.raises(KeyFormatError, match=rf"section {section}, point {i} at byte offset {at}: every byte zero"):
        bp.check_file(zero, r1cs)
    inf = tampered(files, tmp_path, lambda b: b.__setitem__(slice(at, at + sec.width),
                                                            b"\x40" + bytes(sec.width - 1)))
    fixed = "a Groth16 key's alpha, beta, gamma, delta never are" if section in bp.FIXED_NAMES else \
        "bellperson's reader refuses it in IC and the queries"
    with pytest.raises(KeyFormatError, match=rf"section {section}, point {i} at byte offset {at}: the "
                                             rf"point at infinity \({fixed}\)"):
        bp.check_file(inf, r1cs)


def test_off_subgroup_refused_by_default_and_the_batch_hook(files, tmp_path):
    """``check_file`` (``zkhive keys check``/``import``) checks the subgroup by default;
    ``set_subgroup_check`` replaces the host's per-point test (a device's batch test)."""
    d, r1cs, _, _ = files
    for name, i in (("a", 1), ("b_g2", 0), ("h", 2), ("ic", 2)):
        sec = bp.scan(d / "k.params").sections[name]
        at = sec.offset(i)
        bad = _off_subgroup(sec.kind)
        path = tampered(files, tmp_path, lambda b: b.__setitem__(slice(at, at + sec.width), bad))
        bp.check_file(path, r1cs, points="curve")
        with pytest.raises(KeyFormatError, match=rf"section {name}, point {i} at byte offset {at}: "
                                                 r"not in the prime-order subgroup"):
            bp.check_file(path, r1cs)
    seen = []

    def batch(raw, kind):
        seen.append((len(raw), kind))
        return 0 if kind == 2 and len(raw) > 1 else -1     # refuses b_g2's first point
    bp.set_subgroup_check(batch)
    try:
        l2 = bp.scan(d / "k.params").sections["b_g2"]
        with pytest.raises(KeyFormatError, match=rf"section b_g2, point 0 at byte offset {l2.start}: "
                                                 r"not in the prime-order subgroup"):
            bp.check_file(d / "k.params", r1cs)
        assert (l2.count, 2) in seen and any(k == 1 for _, k in seen)
    finally:
        bp.set_subgroup_check(None)
    bp.check_file(d / "k.params", r1cs)


def test_fifos_and_other_non_regular_files_refused_at_once(files, tmp_path):
    """A FIFO (no writer: opening it would block), a directory, a device as the .params or .vk:
    refused at once naming the path, by every reader."""
    import os
    import threading
    from gpu.groth16 import keys as zkeys
    d, r1cs, _, _ = files
    fifo = tmp_path / "f.params"
    os.mkfifo(fifo)
    vfifo = tmp_path / "f.vk"
    os.mkfifo(vfifo)
    (tmp_path / "dir.params").mkdir()
    calls = [lambda: bp.scan(fifo), lambda: bp.read_params(fifo, r1cs), lambda: bp.check_file(fifo, r1cs),
             lambda: bp.read_vk(vfifo), lambda: bp.check_file(vfifo, r1cs), lambda: bp.file_digest(fifo),
             lambda: bp.is_bellperson_vk(vfifo), lambda: zkeys.read_header(fifo)]
    results = []

    def run():
        for call in calls:
            try:
                call()
                results.append("accepted")
            except KeyFormatError as e:
                results.append(str(e))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():   # unblock the reader so the test process can end, then fail
        for p in (fifo, vfifo):
            try:
                os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        pytest.fail(f"a reader blocked on the FIFO after {len(results)} calls")
    assert len(results) == len(calls)
    for r, p in zip(results, [fifo] * 3 + [vfifo] * 2 + [fifo, vfifo, fifo]):
        assert r == f"{p}: a FIFO, not a regular file: a key file must be one", r
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(20):   # each refusal closes what it opened
        with pytest.raises(KeyFormatError, match=r"dir\.params: a directory, not a regular file"):
            bp.scan(tmp_path / "dir.params")
    assert len(os.listdir("/proc/self/fd")) == fds
    with pytest.raises(KeyFormatError, match=r"/dev/null: a character device, not a regular file"):
        bp.scan("/dev/null")
    with pytest.raises(KeyFormatError, match=r"nothing\.params: no such file"):
        bp.scan(tmp_path / "nothing.params")
    link = tmp_path / "link.params"
    link.symlink_to(d / "k.params")
    assert bp.scan(link).size == (d / "k.params").stat().st_size   # a link to a file is fine


def test_a_length_field_cut_short_is_refused_as_truncated(files, tmp_path):
    """A file ending inside a length field (1 to 3 of its 4 bytes there) is refused naming the
    field, not read as a short integer."""
    d = files[0]
    lay = bp.scan(d / "k.params")
    for name, at in (("ic", bp.IC_LEN_AT), ("h", lay.sections["h"].start - 4),
                     ("b_g2", lay.sections["b_g2"].start - 4)):
        for extra in (0, 1, 3):
            cut = tampered(files, tmp_path, lambda b: b[:at + extra])
            with pytest.raises(KeyFormatError, match=rf"^{cut}: {name}: the length field at byte offset "
                                                     rf"{at} lies past the end of the file "
                                                     rf"\({at + extra} bytes\): truncated$"):
                bp.scan(cut)


def test_a_vk_with_no_ic_and_reads_from_the_middle_of_a_section(files, tmp_path):
    """A file may end right after a length field (IC of 0 points: scan takes it, the circuit's
    length refuses it); ``read_section`` from a point inside a section; ``check_file`` on a .vk
    returns the .vk's layout."""
    d, r1cs, _, _ = files
    empty = tampered(files, tmp_path, lambda b: b[:bp.IC_LEN_AT] + bytes(4), name="k.vk")
    lay = bp.scan(empty)
    assert lay.sections["ic"].count == 0 and lay.size == bp.IC_LEN_AT + 4 and not lay.is_params
    with pytest.raises(KeyFormatError, match=r"section ic: the length field at byte offset 864 says 0 points"):
        bp.read_vk(empty, circuit=r1cs)
    full = bp.scan(d / "k.params")
    with open(d / "k.params", "rb") as f:
        whole = bp.read_section(f, full, "h")
        part = bp.read_section(f, full, "h", lo=2, hi=5)
    assert part.shape == (3, 96) and np.array_equal(part, whole[2:5])
    vk = bp.check_file(d / "k.vk", r1cs)
    assert set(vk.sections) == {n for n, _ in bp.VK_FIXED} | {"ic"} and vk.size == (d / "k.vk").stat().st_size


def test_the_key_cache_refuses_a_fifo_beside_the_key(tmp_path):
    """The key cache's .meta (the circuit digest beside a .params) as a FIFO: refused naming it,
    not read (a worker would block); a missing .meta is no error."""
    import os

    from cluster.pipeline.keys import KeyCache
    keys = KeyCache(tmp_path)
    params = tmp_path / "x.params"
    params.write_bytes(b"")
    assert keys.circuit_digest(None, params) is None
    os.mkfifo(tmp_path / "x.meta")
    with pytest.raises(KeyFormatError, match=r"x\.meta: a FIFO, not a regular file"):
        keys.circuit_digest(None, params)


def test_first_point_of_a_section_checked_and_a_vk_read_alone(files, tmp_path):
    """The first point of a chunk is checked like the others; a .vk read without a circuit
    carries no digest and no sizes, with one the circuit's."""
    d, r1cs, _, _ = files
    h0 = bp.scan(d / "k.params").sections["h"].offset(0)
    bad = tampered(files, tmp_path, lambda b: b.__setitem__(h0 + 95, b[h0 + 95] ^ 1))
    with pytest.raises(KeyFormatError, match=rf"^{bad}: section h, point 0 at byte offset {h0}: not on the G1 curve$"):
        bp.read_params(bad, r1cs, points="curve", eager=True)
    alone = bp.read_vk(d / "k.vk")
    assert alone.circuit_digest == bytes(32) and alone.num_aux == 0 and alone.domain_size == 0
    shape = bp.shape_of(r1cs)
    mine = bp.read_vk(d / "k.vk", circuit=r1cs)
    assert (mine.num_aux, mine.domain_size) == (shape.num_aux, shape.domain) and shape.num_aux != shape.domain
    short = tampered(files, tmp_path, lambda b: b[:500], name="k.vk")
    with pytest.raises(KeyFormatError, match=rf"^{short}: 500 bytes is too short for a verifying key "
                                             rf"\(868 bytes before the IC points\)$"):
        bp.scan(short)


def test_decoding_names_the_first_bad_point_and_each_flag(files, tmp_path):
    """Every refusal of ``from_uncompressed`` names the first bad point, counted from ``first``,
    with the file and section when it has them; each flag has its own message; ``first_bad`` and
    ``not_in_subgroup`` answer -1 for good points; points="none" checks no curve."""
    d, r1cs, _, _ = files
    lay = bp.scan(d / "k.params")
    sec = lay.sections["h"]
    good = np.frombuffer((d / "k.params").read_bytes()[sec.offset(0):sec.offset(4)], np.uint8).reshape(4, 96).copy()
    where = (lay, sec)
    cases = {"compressed": (0x80, "the compressed flag is set in an uncompressed point"),
             "infinity": (0x40, r"the point at infinity \(bellperson's reader refuses it in IC and the queries\)"),
             "sort": (0x20, "the sort flag is set in an uncompressed point")}
    for flag, msg in cases.values():
        buf = good.copy()
        buf[1, 0] |= flag
        buf[3, 0] |= 0xE0
        with pytest.raises(KeyFormatError, match=rf"^point 6: {msg}$"):
            bp.from_uncompressed(buf, 1, first=5)
        with pytest.raises(KeyFormatError, match=rf"^{lay.path}: section h, point 6 at byte offset "
                                                 rf"{sec.offset(6)}: {msg}$"):
            bp.from_uncompressed(buf, 1, where=where, first=5)
    for edit, msg in ((lambda b, j: b.__setitem__(j, 0), r"every byte zero \(a zero-filled point: \(0, 0\) is not on the G1 curve\)"),
                      (lambda b, j: b[j].__setitem__(slice(0, 48), np.frombuffer(P.to_bytes(48, "big"), np.uint8)),
                       "a coordinate is not below the field modulus")):
        buf = good.copy()
        edit(buf, 2)
        edit(buf, 3)
        with pytest.raises(KeyFormatError, match=rf"^point 9: {msg}$"):
            bp.from_uncompressed(buf, 1, first=7)
        with pytest.raises(KeyFormatError, match=rf"^{lay.path}: section h, point 9 at byte offset "
                                                 rf"{sec.offset(9)}: {msg}$"):
            bp.from_uncompressed(buf, 1, where=where, first=7)
    raw = bp.from_uncompressed(good, 1)
    assert bp.first_bad(raw, 1, "full") == (-1, "") and bp.first_bad(raw, 1, "curve") == (-1, "")
    assert bp.not_in_subgroup(raw, 1) == -1
    raw[2, 95] ^= 1
    assert bp.first_bad(raw, 1, "none") == (-1, "") and bp.first_bad(raw, 1, "curve") == (2, "not on the G1 curve")
    h1 = sec.offset(1)
    off = tampered(files, tmp_path, lambda b: b.__setitem__(h1 + 95, b[h1 + 95] ^ 1))
    bp.read_params(off, r1cs, points="none", eager=True)     # "none": no curve check
    from gpu.backends.forms import circuit_digest
    assert bp.read_vk(d / "k.vk", circuit=r1cs).circuit_digest == circuit_digest(r1cs)


def test_size_messages_say_what_the_file_is(files, tmp_path):
    d = files[0]
    for name, kind in (("k.vk", "verifying key"), ("k.params", "parameter")):
        padded = tampered(files, tmp_path, lambda b: b + bytes(3), name=name)
        size = padded.stat().st_size
        with pytest.raises(KeyFormatError, match=rf"^{padded}: 3 bytes after the last section \(\w+, ending at "
                                                 rf"byte offset {size - 3}\): not a bellperson {kind} file, or padded$"):
            bp.scan(padded)
    b2 = bp.scan(d / "k.params").sections["b_g2"]
    big = tampered(files, tmp_path, lambda b: b.__setitem__(slice(b2.start - 4, b2.start), (b2.count + 2).to_bytes(4, "big")))
    with pytest.raises(KeyFormatError, match=rf"^{big}: section b_g2: its length field at byte offset {b2.start - 4} "
                                             rf"says {b2.count + 2} points \({(b2.count + 2) * 192} bytes from offset "
                                             rf"{b2.start}\), but the file ends at {b2.end}: truncated or a wrong length$"):
        bp.scan(big)


@pytest.mark.parametrize("n", [0, 1, 7, 64, 65, 1000])
def test_the_density_index_is_flatnonzero_in_int32_across_steps(n, monkeypatch):
    """Issue 40 item 3: the index the loader scatters a and b by, made INDEX_STEP entries at a
    time (4-9 s -> 0.7 s at filecoin-32g here), equals np.flatnonzero's across the steps'
    edges, for any density; a density too long for int32 is refused, not wrapped."""
    monkeypatch.setattr(bp, "INDEX_STEP", 8)
    rng = np.random.default_rng(n)
    for dens in (rng.random(n) < 0.7, np.ones(n, bool), np.zeros(n, bool)):
        got = bp.density_index(dens)
        assert got.dtype == np.int32 and got.tolist() == np.flatnonzero(dens).tolist()
    shape = bp.Shape(0, max(n - 1, 0), 8, np.ones(n, bool), rng.random(n) < 0.5)
    assert shape.index("b_g2").tolist() == np.flatnonzero(shape.b_density).tolist()
    assert shape.index("h") is None
    with pytest.raises(ValueError, match="2147483648 variables do not fit the int32 density index"):
        bp.density_index(np.broadcast_to(np.ones(1, bool), (1 << 31,)))
    if n == 0:   # the bound is int32's, no lower: 2^30 variables (none in the query) are indexed
        monkeypatch.setattr(bp, "INDEX_STEP", 1 << 26)
        assert len(bp.density_index(np.broadcast_to(np.zeros(1, bool), (1 << 30,)))) == 0


def test_densities_that_fail_on_their_thread_raise_where_the_load_waits():
    """The densities' thread keeps its error for ``result`` (the load), which raises it as it
    was: an unreadable circuit is named, not lost on the thread."""
    dens = bp.Densities(object())   # no matrices at all
    with pytest.raises(Exception) as e:
        dens.result()
    assert not isinstance(e.value, KeyError), e.value
    with pytest.raises(type(e.value)):
        dens.result()   # asked again: the same error


def test_densities_later_give_the_same_key_and_check_a_and_b_before_their_reads(files, tmp_path):
    """Issue 40 item 3: ``read_params(later=True)`` (the prover's load: the densities on a
    thread while h and l stream) gives the key ``later=False`` gives; a length of a or b that
    the file's size cannot tell apart (a one longer, b_g1 one shorter: both G1) is refused
    when that query is first used (``resolve``: before the device allocates or reads it),
    naming the section and the length field's offset, as ``later=False`` refuses it at once."""
    d, r1cs, pk, _ = files
    cs = circuit(5, only_c=True).to_r1cs()   # a fresh matrices object: no cached Shape
    now, later = bp.read_params(d / "k.params", r1cs), bp.read_params(d / "k.params", cs, later=True)
    for name in bp.OURS.values():
        q = getattr(later, name)
        assert np.array_equal(q.raw, getattr(now, name).raw), name
        assert (q.index is None) == (name in ("h_query", "l_query")), name
    lay = bp.scan(d / "k.params")
    a, b = lay.sections["a"], lay.sections["b_g1"]

    def edit(buf):   # b_g1's first point moved to the end of a: the same size
        return (buf[:a.start - 4] + (a.count + 1).to_bytes(4, "big") + buf[a.start:a.end]
                + buf[b.start:b.start + 96] + (b.count - 1).to_bytes(4, "big")
                + buf[b.start + 96:])
    path = tampered(files, tmp_path, edit)
    assert path.stat().st_size == (d / "k.params").stat().st_size
    want = (rf"k.params: section a: the length field at byte offset {a.start - 4} says {a.count + 1} "
            rf"points, the circuit needs {a.count} \(")
    with pytest.raises(KeyFormatError, match=want):
        bp.read_params(path, r1cs)
    key = bp.read_params(path, circuit(5, only_c=True).to_r1cs(), later=True)
    assert key.h_query.index is None and len(key.h_query.raw) == len(now.h_query.raw)
    for q in (key.a_query, key.b_g1_query):
        with pytest.raises(KeyFormatError, match=want if q is key.a_query else
                           rf"section b_g1: the length field at byte offset {b.start - 4 + 96} says "
                           rf"{b.count - 1} points, the circuit needs {b.count} \("):
            q.resolve()


def test_the_engines_sizes_are_known_before_any_section_is_read(tmp_path):
    """gpu/backends/cuda.py query_sizes, what the CUDA load warms the split MSM's engines for on
    a thread beside the sections' reads: from a key read with ``later=True`` (its densities
    still pending, nothing read) it equals the key's own lengths, per group the longest query;
    an empty query counts for none."""
    from types import SimpleNamespace

    from gpu.backends.cuda import query_sizes
    from tests.compact_circuits import toy
    cr = toy(9)
    pk, _ = setup(cr.to_r1cs(), seed=b"sizes")
    bp.write_params(pk, cr, tmp_path / "t.params")
    later = bp.read_params(tmp_path / "t.params", toy(9), later=True)
    got = query_sizes(later)
    qs = (later.a_query, later.b_g1_query, later.b_g2_query, later.l_query, later.h_query)
    assert all(q._raw is None for q in qs)
    assert later.a_query._pending is not None   # the densities not waited for
    want = {"g1": max(len(pk.a_query), len(pk.b_g1_query), len(pk.l_query), len(pk.h_query)),
            "g2": len(pk.b_g2_query)}
    assert got == want == query_sizes(pk) and want["g2"] > 0
    toy_key = SimpleNamespace(a_query=[0] * 3, b_g1_query=[], b_g2_query=[0], l_query=[0] * 2,
                              h_query=[0] * 7)
    assert query_sizes(toy_key) == {"g1": 7, "g2": 1}
    toy_key.b_g2_query, toy_key.h_query = [], []
    assert query_sizes(toy_key) == {"g1": 3}
