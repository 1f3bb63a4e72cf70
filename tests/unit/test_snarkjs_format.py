"""The snarkjs formats without node: JSON point layout, the iden3 files read back, the test-only
ptau's Lagrange scalars against their definition, and ``zkhive export snarkjs``'s errors.
(tests/unit/test_snarkjs.py runs the real snarkjs on the same files.)"""
from __future__ import annotations

import argparse
import json
import struct

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from gpu.export.cli import CommandError
from gpu import prove, setup
from gpu.export import cli as export_cli
from gpu.export import iden3, ptau, snarkjs
from synthesis import field
from synthesis.builder import ConstraintSystem

# The BLS12-381 generators as py_ecc (optimized_bls12_381.G1, G2) and snarkjs print them;
# an Fq2 pair is (c0, c1).
G1_X = 3685416753713387016781088315183077757961620795782546409894578378688607592378376318836054947676345821548104185464507
G1_Y = 1339506544944476473020471379941921221584933875938349620426543736416511423956333506472724655353366534992391756441569
G2_X = (352701069587466618187139116011060144890029952792775240219908644239793785735715026873347600343865175952761926303160,
        3059144344244213709971259814753781636986470325476647558659373206291635324768958432433509563104347017837885763365758)
G2_Y = (1985150602287291935568054521177171638300868978215655730859378665066344726373823718423869104263333984641494340347905,
        927553665492332455747201965776037880757740193453592970025027978793976877002675564980949289727957565575433344219582)


def scalar(x: int) -> Scalar:
    return Scalar.from_le_bytes((x % field.MODULUS).to_bytes(32, "little"))


def test_generators_match_snarkjs_and_py_ecc_coordinates():
    assert snarkjs.g1_to_json(G1Point()) == [str(G1_X), str(G1_Y), "1"]
    assert snarkjs.g2_to_json(G2Point()) == [[str(G2_X[0]), str(G2_X[1])],
                                             [str(G2_Y[0]), str(G2_Y[1])], ["1", "0"]]


def test_points_round_trip_and_identity():
    for _ in range(3):
        k = scalar(field.random_element())
        p1, p2 = G1Point() * k, G2Point() * k
        assert snarkjs.g1_from_json(snarkjs.g1_to_json(p1)) == p1
        assert snarkjs.g2_from_json(snarkjs.g2_to_json(p2)) == p2
    assert snarkjs.g1_to_json(G1Point.identity()) == ["0", "1", "0"]
    assert snarkjs.g1_from_json(["0", "1", "0"]) == G1Point.identity()
    assert snarkjs.g2_from_json(snarkjs.g2_to_json(G2Point.identity())) == G2Point.identity()


def test_bad_points_are_refused_naming_the_field():
    x, y, _ = snarkjs.g1_to_json(G1Point())
    with pytest.raises(snarkjs.SnarkjsFormatError, match="pi_a: not a point"):
        snarkjs.g1_from_json([x, str(int(y) + 1), "1"], "pi_a")
    with pytest.raises(snarkjs.SnarkjsFormatError, match=r"pi_a\[2\]"):
        snarkjs.g1_from_json([x, y, "one"], "pi_a")
    with pytest.raises(snarkjs.SnarkjsFormatError, match="third coordinate"):
        snarkjs.g1_from_json([x, y, "2"], "pi_a")
    with pytest.raises(snarkjs.SnarkjsFormatError, match="below the base field modulus"):
        snarkjs.g1_from_json([str(snarkjs.FQ_MODULUS), y, "1"], "pi_a")
    (x0, x1), (y0, y1), one = snarkjs.g2_to_json(G2Point())
    with pytest.raises(snarkjs.SnarkjsFormatError, match="pi_b: not a point"):  # c0/c1 swapped
        snarkjs.g2_from_json([[x1, x0], [y1, y0], one], "pi_b")


def test_public_inputs_must_be_canonical():
    assert snarkjs.public_json([0, 5, field.MODULUS - 1]) == ["0", "5", str(field.MODULUS - 1)]
    for bad in (field.MODULUS, -1, True, "5"):
        with pytest.raises(snarkjs.SnarkjsFormatError, match="public input 1"):
            snarkjs.public_json([1, bad])
    assert snarkjs.public_from_json(["7", "8"]) == [7, 8]
    with pytest.raises(snarkjs.SnarkjsFormatError, match="public input 0"):
        snarkjs.public_from_json([str(field.MODULUS)])


@pytest.fixture(scope="module")
def small():
    cs = ConstraintSystem()
    x = cs.alloc_input(field.random_element())
    x2 = cs.alloc(cs.value(x) ** 2)
    y = cs.alloc_input(cs.value(x2) * cs.value(x) % field.MODULUS)
    cs.enforce(x, x, x2)
    cs.enforce(x2, x, y)
    r1cs, z = cs.to_r1cs(), cs.assignment()
    pk, vk = setup(r1cs)
    return {"r1cs": r1cs, "z": z, "public": cs.public_inputs(), "pk": pk, "vk": vk,
            "proof": prove(pk, r1cs, z)}


def test_export_writes_the_three_documents(small, tmp_path):
    paths = snarkjs.export(small["vk"], small["proof"], small["public"], tmp_path)
    vk = json.loads(paths["verification_key.json"].read_text())
    assert (vk["protocol"], vk["curve"], vk["nPublic"], len(vk["IC"])) == ("groth16", "bls12381", 2, 3)
    proof = json.loads(paths["proof.json"].read_text())
    assert snarkjs.proof_from_json(proof) == small["proof"]
    assert snarkjs.verifying_key_from_json(vk).gamma_abc_g1 == small["vk"].gamma_abc_g1
    assert json.loads(paths["public.json"].read_text()) == [str(v) for v in small["public"]]
    with pytest.raises(snarkjs.SnarkjsFormatError, match="takes 2 public inputs, got 1"):
        snarkjs.export(small["vk"], small["proof"], small["public"][:1], tmp_path / "x")
    proof["curve"] = "bn128"
    with pytest.raises(snarkjs.SnarkjsFormatError, match="'curve' is 'bn128'"):
        snarkjs.proof_from_json(proof)


# --- iden3 files -----------------------------------------------------------------------------

def read_binfile(path):
    raw = path.read_bytes()
    magic, version, count = raw[:4], *struct.unpack_from("<II", raw, 4)
    pos, sections = 12, {}
    for _ in range(count):
        kind, size = struct.unpack_from("<IQ", raw, pos)
        sections[kind] = raw[pos + 12:pos + 12 + size]
        pos += 12 + size
    assert pos == len(raw)
    return magic, version, sections


def test_r1cs_file_reads_back_as_the_same_matrices(small, tmp_path):
    r1cs = small["r1cs"]
    magic, version, sec = read_binfile(iden3.write_r1cs(r1cs, tmp_path / "c.r1cs"))
    assert (magic, version, sorted(sec)) == (b"r1cs", 1, [1, 2, 3])
    n8, = struct.unpack_from("<I", sec[1])
    assert n8 == 32 and int.from_bytes(sec[1][4:36], "little") == field.MODULUS
    wires, outs, pubs, prvs, labels, cons = struct.unpack_from("<IIIIQI", sec[1], 36)
    assert (wires, outs, pubs, prvs, labels, cons) == (r1cs.num_variables, 0, 2, 0,
                                                       r1cs.num_variables, r1cs.num_constraints)
    pos, body = 0, sec[2]
    for i in range(r1cs.num_constraints):
        for m in (r1cs.a, r1cs.b, r1cs.c):
            n, = struct.unpack_from("<I", body, pos)
            terms = [(struct.unpack_from("<I", body, pos + 4 + 36 * t)[0],
                      int.from_bytes(body[pos + 8 + 36 * t:pos + 40 + 36 * t], "little"))
                     for t in range(n)]
            assert terms == m.row(i)
            pos += 4 + 36 * n
    assert pos == len(body)
    assert np.frombuffer(sec[3], "<u8").tolist() == list(range(r1cs.num_variables))


def test_wtns_file_holds_the_assignment(small, tmp_path):
    magic, version, sec = read_binfile(iden3.write_wtns(small["z"], tmp_path / "w.wtns"))
    assert (magic, version) == (b"wtns", 2)
    assert struct.unpack_from("<I", sec[1], 36)[0] == len(small["z"])
    assert field.vec_to_ints(np.frombuffer(sec[2], "<u8").reshape(-1, 4)) == field.vec_to_ints(small["z"])
    bad = small["z"].copy()
    bad[0] = field.vec_from_ints([2])[0]
    with pytest.raises(iden3.Iden3FormatError, match=r"assignment\[0\]"):
        iden3.write_wtns(bad, tmp_path / "bad.wtns")


# --- the test-only ptau ----------------------------------------------------------------------

def naive_lagrange(n: int, tau: int, i: int) -> int:
    w = ptau.ffjs_root(n)
    num = den = 1
    for j in range(n):
        if j != i:
            num = num * (tau - pow(w, j, field.MODULUS)) % field.MODULUS
            den = den * (pow(w, i, field.MODULUS) - pow(w, j, field.MODULUS)) % field.MODULUS
    return num * field.inv(den) % field.MODULUS


def test_ffjavascript_root_has_order_two_to_the_32():
    w = ptau.FFJS_ROOT_2_32
    assert pow(w, 1 << 32, field.MODULUS) == 1 and pow(w, 1 << 31, field.MODULUS) != 1
    assert ptau.ffjs_root(16) != field.root_of_unity(16)  # why the module needs its own roots


def test_lagrange_scalars_match_the_definition():
    tau = field.random_element()
    assert field.vec_to_ints(ptau.lagrange_scalars(8, tau)) == [naive_lagrange(8, tau, i) for i in range(8)]
    # section 12's last level: the inverse DFT of tau^0..tau^(m-2) padded with one zero
    power, m = 2, 8
    last = field.vec_to_ints(ptau.section12_scalars(power, tau)[(1 << (power + 1)) - 1:])
    w_inv = field.inv(ptau.ffjs_root(m))
    padded = [pow(tau, j, field.MODULUS) for j in range(m - 1)] + [0]
    want = [v * field.inv(m) % field.MODULUS for v in field.naive_dft(padded, w_inv)]
    assert last == want


def test_ptau_sections_have_the_prepared_layout(tmp_path):
    power, tau, alpha, beta = 2, field.random_element(), 3, 5
    magic, version, sec = read_binfile(ptau.write_test_ptau(tmp_path / "t.ptau", power, tau=tau,
                                                            alpha=alpha, beta=beta, workers=1))
    assert (magic, version, sorted(sec)) == (b"ptau", 1, [1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15])
    n, g1, g2 = 4, 96, 192
    sizes = {2: (2 * n - 1) * g1, 3: n * g2, 4: n * g1, 5: n * g1, 6: g2, 12: (4 * n - 1) * g1,
             13: (2 * n - 1) * g2, 14: (2 * n - 1) * g1, 15: (2 * n - 1) * g1}
    assert {k: len(sec[k]) for k in sizes} == sizes
    assert struct.unpack_from("<II", sec[1], 52) == (power, power)
    # tau G1 in LEM: back to normal form, then compare with arkworks
    r_inv = pow(2, -384, snarkjs.FQ_MODULUS)
    raw = sec[2][g1:2 * g1]
    xy = b"".join((int.from_bytes(raw[i:i + 48], "little") * r_inv % snarkjs.FQ_MODULUS)
                  .to_bytes(48, "little") for i in (0, 48))
    assert G1Point.from_xy_bytes_le(xy) == G1Point() * scalar(tau)
    with pytest.raises(ptau.PtauError, match="root of unity"):
        ptau.write_test_ptau(tmp_path / "u.ptau", 2, tau=field.root_of_unity(4), alpha=1, beta=1)


# --- zkhive export snarkjs -------------------------------------------------------------------

def run_cli(argv):
    parser = argparse.ArgumentParser()
    export_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_exports_from_proof_bytes_and_from_a_result(small, tmp_path):
    small["vk"].save(tmp_path / "vk.key")
    (tmp_path / "p.bin").write_bytes(small["proof"].to_bytes())
    x, y = small["public"]
    assert run_cli(["export", "snarkjs", "--key", str(tmp_path / "vk.key"), "--proof",
                    str(tmp_path / "p.bin"), "--inputs", f"{hex(x)},{y}", "--out",
                    str(tmp_path / "a")]) == 0
    assert json.loads((tmp_path / "a" / "public.json").read_text()) == [str(x), str(y)]
    # the JSON `zkhive result` prints, two partitions
    result = {"job_id": "j", "params": "p", "proof": (small["proof"].to_bytes() * 2).hex(),
              "public_inputs": [[hex(x), hex(y)], [hex(x), hex(y)]]}
    (tmp_path / "r.json").write_text(json.dumps(result))
    base = ["export", "snarkjs", "--key", str(tmp_path / "vk.key"), "--result", str(tmp_path / "r.json")]
    with pytest.raises(CommandError, match="2 partitions: choose one with --partition"):
        run_cli(base + ["--out", str(tmp_path / "b")])
    with pytest.raises(CommandError, match="--partition 2 is outside 0..1"):
        run_cli(base + ["--partition", "2", "--out", str(tmp_path / "b")])
    assert run_cli(base + ["--partition", "1", "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "proof.json").read_text() == (tmp_path / "a" / "proof.json").read_text()


def test_cli_refuses_bad_input_with_one_line(small, tmp_path):
    small["vk"].save(tmp_path / "vk.key")
    (tmp_path / "p.bin").write_bytes(small["proof"].to_bytes()[:100])
    base = ["export", "snarkjs", "--key", str(tmp_path / "vk.key"), "--proof", str(tmp_path / "p.bin")]
    with pytest.raises(CommandError, match="not a whole number of 192-byte proofs"):
        run_cli(base + ["--inputs", "1,2"])
    (tmp_path / "p.bin").write_bytes(small["proof"].to_bytes())
    with pytest.raises(CommandError, match="needs the public inputs"):
        run_cli(base)
    with pytest.raises(CommandError, match="'zz' is not a decimal or 0x-hex"):
        run_cli(base + ["--inputs", "1,zz"])
    with pytest.raises(CommandError, match="takes 2 public inputs, got 3"):
        run_cli(base + ["--inputs", "1,2,3", "--out", str(tmp_path / "o")])
    corrupt = bytearray((tmp_path / "vk.key").read_bytes())
    corrupt[0] ^= 1
    (tmp_path / "bad.key").write_bytes(bytes(corrupt))
    with pytest.raises(CommandError, match="bad magic"):
        run_cli(["export", "snarkjs", "--key", str(tmp_path / "bad.key"), "--proof",
                 str(tmp_path / "p.bin"), "--inputs", "1,2"])
