"""Groth16 end to end on the CPU backend: proofs verify, and everything that should be refused is."""
import random

import numpy as np
import pytest

from gpu import prove, setup, verify
from gpu.groth16 import (PROOF_BYTES, CircuitMismatch, KeyFormatError, Proof, ProofFormatError,
                         ProvingKey, VerifyingKey, split_proofs)
from gpu.groth16 import curve
from synthesis import field as F
from synthesis.builder import ONE, ConstraintSystem, lc_sum
from synthesis.r1cs import UnsatisfiedConstraint

R = F.MODULUS


def power_chain(x: int, k: int, pub: int = 1):
    """x^(2^k) by repeated squaring, with `pub` public inputs: x, the result, and extra sums."""
    cs = ConstraintSystem()
    ins = [cs.alloc_input(x)]
    cur, val = ins[0], x
    for _ in range(k):
        val = val * val % R
        nxt = cs.alloc(val)
        cs.enforce(cur, cur, nxt)
        cur = nxt
    out = cs.alloc_input(val)
    cs.enforce(cur, ONE, out)
    for j in range(pub - 1):  # more public inputs, tied to x linearly
        extra = cs.alloc_input((x + j) % R)
        cs.enforce(ins[0] + j, ONE, extra)
    return cs


def linear_mix(vals: list[int]):
    """A circuit with coefficients other than 1 and a dense last constraint."""
    cs = ConstraintSystem()
    vs = [cs.alloc(v) for v in vals]
    prods = []
    for i in range(len(vs) - 1):
        p = cs.alloc(vals[i] * vals[i + 1] % R)
        cs.enforce(vs[i] * 3 + 1, vs[i + 1], p * 3 + vs[i + 1])
        prods.append(p)
    total = sum(vals[i] * vals[i + 1] * (i + 2) for i in range(len(vals) - 1)) % R
    out = cs.alloc_input(total)
    cs.enforce(lc_sum(p * (i + 2) for i, p in enumerate(prods)), ONE, out)
    return cs


# arkworks-style fixing: (3 v_i + 1) v_{i+1} = 3 p + v_{i+1}  <=>  p = v_i v_{i+1}
CIRCUITS = {
    "power_chain": lambda: power_chain(random.randrange(R), 8),
    "three_inputs": lambda: power_chain(random.randrange(R), 5, pub=3),
    "linear_mix": lambda: linear_mix([random.randrange(R) for _ in range(12)]),
}


@pytest.fixture(scope="module")
def keyed():
    out = {}
    for name, make in CIRCUITS.items():
        cs = make()
        r1cs = cs.to_r1cs()
        out[name] = (r1cs, *setup(r1cs))
    return out


@pytest.mark.parametrize("name", sorted(CIRCUITS))
def test_proofs_verify_for_random_witnesses(keyed, name):
    r1cs, pk, vk = keyed[name]
    for _ in range(2):
        cs = CIRCUITS[name]()  # same shape, fresh random witness
        assert cs.to_r1cs().digest() == r1cs.digest()
        proof = prove(pk, r1cs, cs.assignment())
        assert verify(vk, cs.public_inputs(), proof)


def test_tampered_proofs_and_wrong_inputs_are_rejected(keyed):
    r1cs, pk, vk = keyed["three_inputs"]
    cs = CIRCUITS["three_inputs"]()
    pub = cs.public_inputs()
    p = prove(pk, r1cs, cs.assignment())
    g1, g2 = curve.g1(), curve.g2()
    assert verify(vk, pub, p)
    assert not verify(vk, pub, Proof(p.a + g1, p.b, p.c))
    assert not verify(vk, pub, Proof(p.a, p.b + g2, p.c))
    assert not verify(vk, pub, Proof(p.a, p.b, p.c + g1))
    assert not verify(vk, pub, Proof(p.c, p.b, p.a))
    for i in range(len(pub)):
        wrong = list(pub)
        wrong[i] = (wrong[i] + 1) % R
        assert not verify(vk, wrong, p)
    assert len(pub) == 4  # x, x^32, and two extra inputs
    with pytest.raises(CircuitMismatch, match="takes 4 public inputs, got 2"):
        verify(vk, pub[:2], p)
    with pytest.raises(ValueError, match="public input 1"):
        verify(vk, [pub[0], R, *pub[2:]], p)


def test_a_proof_for_another_circuit_is_rejected(keyed):
    r1cs_a, pk_a, vk_a = keyed["power_chain"]
    cs = CIRCUITS["power_chain"]()
    p = prove(pk_a, r1cs_a, cs.assignment())
    # the same circuit shape with an independent setup: another circuit's keys
    pk_b, vk_b = setup(r1cs_a)
    assert verify(vk_a, cs.public_inputs(), p)
    assert not verify(vk_b, cs.public_inputs(), p)
    # and a key for a different circuit refuses to prove this one
    r1cs_c, pk_c, _ = keyed["linear_mix"]
    with pytest.raises(CircuitMismatch, match="another circuit"):
        prove(pk_c, r1cs_a, cs.assignment())


def test_fresh_randomness_per_proof_and_fixed_r_s_is_deterministic(keyed):
    r1cs, pk, vk = keyed["power_chain"]
    z = CIRCUITS["power_chain"]().assignment()
    assert prove(pk, r1cs, z).to_bytes() != prove(pk, r1cs, z).to_bytes()
    assert prove(pk, r1cs, z, r=5, s=7).to_bytes() == prove(pk, r1cs, z, r=5, s=7).to_bytes()


def test_unsatisfied_witness_names_the_constraint(keyed):
    r1cs, pk, _ = keyed["power_chain"]
    cs = CIRCUITS["power_chain"]()
    z = F.vec_to_ints(cs.assignment())
    z[5] = (z[5] + 1) % R  # aux variable 3 (after 1 + 2 inputs): breaks constraints 2 and 3
    with pytest.raises(UnsatisfiedConstraint) as e:
        prove(pk, r1cs, F.vec_from_ints(z))
    assert e.value.index == 2


def test_proof_encoding_round_trips_and_is_zcash_compressed(keyed):
    from py_ecc.bls.point_compression import decompress_G1, decompress_G2
    from py_ecc.optimized_bls12_381 import normalize

    r1cs, pk, vk = keyed["power_chain"]
    cs = CIRCUITS["power_chain"]()
    p = prove(pk, r1cs, cs.assignment())
    raw = p.to_bytes()
    assert len(raw) == PROOF_BYTES == 192
    assert Proof.from_bytes(raw) == p
    # an independent decoder of the ZCash format (py_ecc) reads the same points
    ax, ay = normalize(decompress_G1(int.from_bytes(raw[:48], "big")))
    xy = p.a.to_xy_bytes_be()
    assert (int(ax), int(ay)) == (int.from_bytes(xy[:48], "big"), int.from_bytes(xy[48:], "big"))
    bx, _ = normalize(decompress_G2((int.from_bytes(raw[48:96], "big"), int.from_bytes(raw[96:144], "big"))))
    assert bx.coeffs[0] != 0
    # multi-partition concatenation
    assert split_proofs(raw + raw) == [p, p]
    with pytest.raises(ProofFormatError, match="192"):
        Proof.from_bytes(raw[:-1])
    bad = bytearray(raw)
    bad[50] ^= 0x01  # B's x coordinate: almost surely not on the curve / not in the subgroup
    with pytest.raises(ProofFormatError, match="element B"):
        Proof.from_bytes(bytes(bad))
    with pytest.raises(ProofFormatError, match="whole number"):
        split_proofs(raw + b"\0")


def test_key_files_round_trip(keyed, tmp_path):
    r1cs, pk, vk = keyed["three_inputs"]
    pk.save(tmp_path / "pk.bin")
    vk.save(tmp_path / "vk.bin")
    pk2, vk2 = ProvingKey.load(tmp_path / "pk.bin"), VerifyingKey.load(tmp_path / "vk.bin")
    pk2.check_shape()
    for name in ("a_query", "b_g1_query", "b_g2_query", "h_query", "l_query"):
        assert getattr(pk2, name) == getattr(pk, name)
    assert vk2.gamma_abc_g1 == vk.gamma_abc_g1 and vk2.circuit_digest == r1cs.digest()
    assert VerifyingKey.from_bytes(vk.to_bytes()).delta_g2 == vk.delta_g2
    cs = CIRCUITS["three_inputs"]()
    assert verify(vk2, cs.public_inputs(), prove(pk2, r1cs, cs.assignment()))


def test_corrupted_key_files_are_refused(keyed, tmp_path):
    r1cs, pk, vk = keyed["three_inputs"]
    path = tmp_path / "pk.bin"
    pk.save(path)
    raw = path.read_bytes()
    # one flipped byte in the body: the section's hash names it
    body = bytearray(raw)
    body[-10] ^= 0x40
    (tmp_path / "flip.bin").write_bytes(bytes(body))
    with pytest.raises(KeyFormatError, match="l_query .* corrupted|l_query.*does not (decode|decompress)"):
        ProvingKey.load(tmp_path / "flip.bin")
    # a flipped header byte
    head = bytearray(raw)
    head[50] ^= 1
    (tmp_path / "head.bin").write_bytes(bytes(head))
    with pytest.raises(KeyFormatError, match="header hash"):
        ProvingKey.load(tmp_path / "head.bin")
    (tmp_path / "short.bin").write_bytes(raw[:-96])
    with pytest.raises(KeyFormatError, match="truncated"):
        ProvingKey.load(tmp_path / "short.bin")
    (tmp_path / "magic.bin").write_bytes(b"NOTAKEY!" + raw[8:])
    with pytest.raises(KeyFormatError, match="magic"):
        ProvingKey.load(tmp_path / "magic.bin")
    vk.save(tmp_path / "vk.bin")
    with pytest.raises(KeyFormatError, match="holds a verifying key"):
        ProvingKey.load(tmp_path / "vk.bin")
    ver = bytearray(raw)
    ver[8] = 9
    (tmp_path / "ver.bin").write_bytes(bytes(ver))
    with pytest.raises(KeyFormatError, match="version 9"):
        ProvingKey.load(tmp_path / "ver.bin")


def test_assignment_with_non_canonical_value_is_refused(keyed):
    r1cs, pk, _ = keyed["power_chain"]
    z = CIRCUITS["power_chain"]().assignment()
    z[3] = np.frombuffer((R + 5).to_bytes(32, "little"), dtype="<u8")
    with pytest.raises(F.FieldError, match="element 3"):
        prove(pk, r1cs, z)


def test_the_shared_null_timer_keeps_nothing():
    """NULL_TIMER serves every proof without a timer: what the CUDA backend ``add``s to it must
    not pile up across proofs; a real StageTimer keeps both kinds of record."""
    from gpu.timing import NULL_TIMER, StageTimer

    NULL_TIMER.add("msm_a", 1.0, 2.0, device="cuda:0")
    with NULL_TIMER.stage("ntt_h"):
        pass
    assert NULL_TIMER.records == []
    real = StageTimer()
    real.add("msm_a", 1.0, 2.0)
    with real.stage("ntt_h"):
        pass
    assert [r["stage"] for r in real.records] == ["msm_a", "ntt_h"]
