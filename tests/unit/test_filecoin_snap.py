"""SnapDeals end to end below the cluster (synthesis/filecoin/snap.py, update.synthesize): the
challenge derivation against challenges.rs's hard-coded vectors, a sealed 2 KiB CC sector updated
with new data, its vanilla partition proof written and read back as Curio's bincode bytes and
verified as vanilla.rs verifies it, tampering named (partition, challenge, proof, level), and the
witness of the real gadget stack held against the circuit it records."""
from __future__ import annotations

import os

import numpy as np
import pytest

from synthesis import field
from synthesis.bellpepper import check
from synthesis.builder import ConstraintSystem
from synthesis.filecoin import bincode, snap
from synthesis.filecoin import update as upd
from synthesis.bellpepper.core import Synth
from synthesis.r1cs import UnsatisfiedConstraint

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
LONG = pytest.mark.skipif(not os.environ.get("ZKHIVE_LONG_FILECOIN"),
                          reason="minutes on 2 shared cores: set ZKHIVE_LONG_FILECOIN=1")

#: storage-proofs-core TEST_SEED
TEST_SEED = bytes([0x59, 0x62, 0xbe, 0x5d, 0x76, 0x3d, 0x31, 0x8d, 0x17, 0xdb, 0x37, 0x32, 0x54,
                   0x06, 0xbc, 0xe5])
#: challenges.rs test_challenges_against_hardcoded: (sector size, k) -> the first 5 challenges
RUST_CHALLENGES = {
    (1 * KIB, 0): [21, 7, 3, 31, 0], (2 * KIB, 0): [53, 51, 56, 3, 0],
    (4 * KIB, 0): [117, 25, 62, 0, 72], (8 * KIB, 0): [245, 140, 15, 128, 28],
    (16 * KIB, 0): [245, 140, 15, 128, 28], (16 * KIB, 1): [286, 308, 493, 510, 508],
    (32 * KIB, 0): [245, 454, 3, 400, 193], (32 * KIB, 1): [542, 666, 955, 927, 911],
    (8 * MIB, 0): [36085, 32783, 44060, 10950, 3731],
    (8 * MIB, 1): [78878, 130797, 112892, 93994, 78379],
    (16 * MIB, 1): [209950, 163702, 175679, 224741, 197410],
    (512 * MIB, 15): [16388544, 15794686, 16637142, 16319148, 16328348],
    (32 * GIB, 0): [1019125, 27985696, 15282860, 11586600, 44651330],
    (32 * GIB, 14): [990420169, 955146989, 968005601, 976863263, 944650706],
    (64 * GIB, 15): [2045262457, 2036941247, 2136653521, 2091356007, 2147167623],
}


class XorShift:
    """rand_xorshift 0.3 ``XorShiftRng::from_seed`` (next_u64 = two next_u32, low first)."""

    def __init__(self, seed: bytes):
        self.x, self.y, self.z, self.w = (int.from_bytes(seed[i:i + 4], "little") for i in range(0, 16, 4))

    def u32(self) -> int:
        t = (self.x ^ (self.x << 11)) & 0xFFFFFFFF
        self.x, self.y, self.z = self.y, self.z, self.w
        self.w = (self.w ^ (self.w >> 19) ^ (t ^ (t >> 8))) & 0xFFFFFFFF
        return self.w

    def fr(self) -> int:
        """blstrs ``Scalar::random``: 4 u64 limbs, the top bit cleared, redrawn until below r."""
        while True:
            limbs = [self.u32() | (self.u32() << 32) for _ in range(4)]
            v = sum(x << (64 * i) for i, x in enumerate(limbs)) & ((1 << 255) - 1)
            if v < field.MODULUS:
                return v


def test_challenges_equal_challenges_rs_hardcoded_vectors():
    comm_r_new = XorShift(TEST_SEED).fr()       # TreeRDomain::random(&mut rng)
    for (size, k), want in RUST_CHALLENGES.items():
        assert upd.challenges(upd.UpdateParams(size), comm_r_new, k)[:5] == want, (size, k)
    # the GenRandomness tag matters: the Merkle-tree arity-2 tag gives other challenges
    from synthesis.bellpepper import neptune
    d = neptune.hash_ints([comm_r_new, 0])
    assert [(d >> (6 * i)) & 63 for i in range(5)] != RUST_CHALLENGES[2 * KIB, 0]
    with pytest.raises(ValueError, match="partition k = 1: 1 partitions"):
        upd.challenges(upd.get("empty-sector-update-2KiB"), comm_r_new, 1)


# --- a 2 KiB CC sector updated --------------------------------------------------------------------

@pytest.fixture(scope="module")
def cc():
    from synthesis.filecoin import sector as fs
    from synthesis.filecoin.params import SETS
    sealed = fs.seal(SETS["filecoin-2k"], b"", fs.prover_id_from_miner(1000), 7,
                     fs.randomness("ticket", b"snap test"))
    prm = upd.get("empty-sector-update-2KiB")
    data = fs.data_from_seed(b"snap test new data", 2 * KIB // 128 * 127)
    u = snap.update_sector(prm, sealed, data)
    raw = snap.to_bytes(prm, snap.partition_proof(u, 0))
    return {"prm": prm, "sealed": sealed, "data": data, "u": u, "bytes": raw}


def _verify(cc, raw=None, **pub):
    prm, u = cc["prm"], cc["u"]
    p = dict(u.public(0), **pub)
    pp = bincode.read_update_partition_proof(prm, cc["bytes"] if raw is None else raw, p["k"])
    return snap.verify_partition(prm, p["k"], p["h"], p["comm_r_old"], p["comm_d_new"],
                                 p["comm_r_new"], pp)


def test_a_cc_sector_updated_keeps_comm_c_and_decodes_with_rho(cc):
    """comm_r_old is the sealed sector's comm_r; comm_d_new the PoRep TreeD root of the same
    data; every new replica node minus data * rho(phi, high bits) is the sector key."""
    from arith import native
    from synthesis.filecoin import sector as fs
    from synthesis.filecoin.params import SETS
    u, sealed = cc["u"], cc["sealed"]
    assert u.comm_r_old == field.from_bytes(sealed.comm_r)
    assert u.h == 1 and u.h == upd.h_default(cc["prm"])      # hs = [1] * 6 up to 32 KiB
    fresh = fs.seal(SETS["filecoin-2k"], cc["data"], sealed.prover_id, 8, sealed.ticket)
    assert field.to_bytes(u.comm_d_new) == fresh.comm_d
    phi = upd.phi(u.comm_d_new, u.comm_r_old)
    rhos = field.vec_from_ints([upd.rho(phi, i >> 5) for i in range(64)])   # the h = 1 high bit
    assert np.array_equal(native.sub(u.replica, native.mul(u.data, rhos)), u.sector_key)
    assert u.comm_r_new != u.comm_r_old and not np.array_equal(u.replica, u.sector_key)


def test_the_partition_proof_round_trips_verifies_and_its_witness_is_the_circuits(cc):
    prm, u = cc["prm"], cc["u"]
    pp = bincode.read_update_partition_proof(prm, cc["bytes"], 0)
    assert snap.to_bytes(prm, pp) == cc["bytes"]
    assert len(pp.apex_leafs) == 8 and len(pp.challenge_proofs) == 10
    w = _verify(cc)
    assert [c.challenge for c in w.challenges] == upd.challenges(prm, u.comm_r_new, 0)
    assert w.public_inputs(prm) == [1, u.comm_r_old, u.comm_d_new, u.comm_r_new]
    s = Synth(batch=1)
    upd.synthesize(s, prm, w)                    # values mode: the whole partition's witness
    z = check.assignments(s)[0]
    assert len(z) == 1 + 4 + upd.census(prm).synthesized.aux
    assert field.vec_to_ints(z[1:5]) == w.public_inputs(prm)


def _flip(raw: bytes, offset: int) -> bytes:
    b = bytearray(raw)
    b[offset] ^= 1
    return bytes(b)


def test_tampered_commitments_and_proofs_are_refused_naming_what(cc):
    u, raw = cc["u"], cc["bytes"]
    with pytest.raises(snap.UpdateProofError, match=r"^partition 0: H\(comm_c, root_r_new\) "
                       r"differs from comm_r_new"):
        _verify(cc, comm_r_new=u.comm_r_new + 1)
    with pytest.raises(snap.UpdateProofError, match=r"^partition 0: H\(comm_c, root_r_old\) "
                       r"differs from comm_r_old"):
        _verify(cc, comm_r_old=u.comm_r_old + 1)
    c0 = upd.challenges(cc["prm"], u.comm_r_new, 0)[0]
    with pytest.raises(snap.UpdateProofError, match=rf"^partition 0, challenge 0 \(node {c0}\), "
                       r"proof_d_new: root 0x[0-9a-f]+, 0x[0-9a-f]+ expected"):
        _verify(cc, comm_d_new=u.comm_d_new ^ 1)
    with pytest.raises(snap.UpdateProofError, match=r"^partition 0: h = 4 is not one of"):
        _verify(cc, h=4)
    # the bytes: comm_c 32, apex length 8 + 8 x 32, challenge_proofs length 8; challenge 0's
    # proof_r_old: variant 4, root 32, leaf 32, path length 8, level 0: length 8, 7 x 32, index 8
    r_old0 = 32 + 8 + 8 * 32 + 8
    with pytest.raises(snap.UpdateProofError, match=r"^partition 0, challenge 0 \(node \d+\), "
                       r"proof_r_old: the path does not reach its root"):
        _verify(cc, _flip(raw, r_old0 + 4 + 64 + 8 + 8 + 5))        # a level-0 sibling
    with pytest.raises(snap.UpdateProofError, match=r"^partition 0, challenge 0 \(node \d+\), "
                       r"proof_r_old, level 0: index \d, the challenge's is \d"):
        _verify(cc, _flip(raw, r_old0 + 4 + 64 + 8 + 8 + 7 * 32))   # level 0's index
    # data that is not what the replica encodes: every path checks, the encoding does not
    import dataclasses
    from synthesis.filecoin.trees import Tree
    data = u.data.copy()
    data[:, 0] ^= np.uint64(1)
    forged = dataclasses.replace(u, tree_d_new=Tree.build(u.tree_d_new.arities, np.arange(64, dtype=np.uint64),
                                                          data, sha=True))
    pp = snap.partition_proof(forged, 0)
    with pytest.raises(snap.UpdateProofError, match=r"^partition 0, challenge 0 \(node \d+\): "
                       r"leaf_r_new is not leaf_r_old \+ leaf_d_new \* rho \(rho of high bits \d\)"):
        snap.verify_partition(cc["prm"], 0, u.h, u.comm_r_old, forged.comm_d_new, u.comm_r_new, pp)
    with pytest.raises(snap.UpdateProofError, match=r"^partition 0, challenge 0 \(node \d+\), "
                       r"proof_d_new, level [345]: the sibling is not in the apex tree's row [012]"):
        _verify(cc, _flip(raw, 32 + 8 + 5))                         # apex leaf 0
    with pytest.raises(bincode.BincodeError, match=r"^partition 0: challenge_proofs length at "
                       r"byte 296: 9 items, 10 expected"):
        _verify(cc, raw[:296] + (9).to_bytes(8, "little") + raw[304:])


# --- the circuit ---------------------------------------------------------------------------------

def _random_update(prm):
    import hashlib
    n = prm.sector_nodes
    nodes = lambda tag: field.vec_from_ints([  # noqa: E731
        int.from_bytes(hashlib.sha256(tag + i.to_bytes(4, "little")).digest(), "little") >> 2
        for i in range(n)])
    return snap.encode(prm, nodes(b"sector key"), 0x1234, nodes(b"new data"))


def _both(prm, w):
    s = Synth(cs=ConstraintSystem(with_values=False), batch=1)
    upd.synthesize(s, prm, w)
    return s


def test_poseidon_variant_1k_witness_satisfies_its_circuit_and_a_tampered_one_fails():
    """EmptySectorUpdate-Poseidon 1 KiB (32,164 constraints, the Rust's count): shape and witness
    from one code path; the recorded counts equal the census; z satisfies every row; a changed
    leaf, apex-free TreeD path or public input breaks a row."""
    prm = upd.get("empty-sector-update-poseidon-1KiB")
    u = _random_update(prm)
    pp = bincode.read_update_partition_proof(prm, snap.to_bytes(prm, snap.partition_proof(u, 0)), 0)
    w = snap.verify_partition(prm, 0, u.h, u.comm_r_old, u.comm_d_new, u.comm_r_new, pp)
    s = _both(prm, w)
    c = upd.census(prm).synthesized
    assert (s.cs.num_constraints, s.cs.num_aux, s.cs.num_public + 1) == (c.constraints, c.aux, c.inputs)
    assert c.constraints == 32_164
    check.check(s)
    z = check.assignments(s)[0]
    for i in (2, 3, 4, 5 + 10, len(z) - 1):          # comm_r_old, comm_d_new, comm_r_new, aux
        bad = z.copy()
        bad[i] = field.vec_from_ints([(field.vec_to_ints(bad[i:i + 1])[0] + 1) % field.MODULUS])[0]
        with pytest.raises(UnsatisfiedConstraint):
            check.check(s, z=bad)


def test_a_witness_of_other_challenges_does_not_satisfy():
    """Proofs of nodes other than the derived challenges: the vanilla check refuses them and,
    forced past it, the circuit does too (the challenge bits come from comm_r_new)."""
    prm = upd.get("empty-sector-update-poseidon-1KiB")
    u = _random_update(prm)
    pp = snap.partition_proof(u, 0)
    pp.challenge_proofs[0] = pp.challenge_proofs[1]
    with pytest.raises(snap.UpdateProofError, match=r"^partition 0, challenge 0 \(node \d+\), "
                       r"proof_r_old, level \d: index"):
        snap.verify_partition(prm, 0, u.h, u.comm_r_old, u.comm_d_new, u.comm_r_new, pp)
    w = snap.verify_partition(prm, 0, u.h, u.comm_r_old, u.comm_d_new, u.comm_r_new,
                              snap.partition_proof(u, 0))
    w.challenges[0] = w.challenges[1]
    with pytest.raises(UnsatisfiedConstraint):
        check.check(_both(prm, w))


@LONG
def test_the_2k_update_witness_satisfies_the_1_7m_constraint_circuit(cc):
    """EmptySectorUpdate 2 KiB (1,705,039 constraints) recorded and computed at once on the
    real gadgets from the sealed CC sector's update: counts equal the census, z satisfies it."""
    prm = cc["prm"]
    s = _both(prm, _verify(cc))
    c = upd.census(prm).synthesized
    assert (s.cs.num_constraints, s.cs.num_aux, s.cs.num_public + 1) == (c.constraints, c.aux, c.inputs)
    assert c.constraints == 1_705_039
    check.check(s)


@LONG
@pytest.mark.timeout(3600)   # the 1.7 M-constraint key on 2 shared cores: ~20 min under load
def test_the_2k_update_proves_on_the_cpu_and_verifies_with_the_bellperson_vk(cc, tmp_path):
    """snap-update-2k (the registered circuit): its key made on the CPU, the .vk written and read
    back in bellperson's format, the sealed CC sector's update proved from the job document,
    192 bytes, verified; a changed comm_r_new, comm_d_new or h_select input rejected."""
    import base64
    import json
    from gpu.groth16 import bellperson as bp
    from gpu.groth16 import prove, setup, verify
    from synthesis.circuits import get_circuit
    from synthesis.filecoin import snap_circuit as sc
    circuit = get_circuit("snap-update-2k")
    doc = json.loads(json.dumps(sc.job_document("snap-update-2k", cc["u"])))
    assert base64.b64decode("".join(doc["partition_proofs"][0])) == cc["bytes"]
    job = circuit.parse_c1(doc)
    r1cs = circuit.r1cs()
    z = circuit.synthesize(job, 0, check=True)
    pk, _ = setup(r1cs, seed=b"zkhive snap-update-2k test")
    proof = prove(pk, r1cs, z)
    assert len(proof.to_bytes()) == 192
    vk = bp.read_vk(bp.write_vk(pk, tmp_path / f"{circuit.file_stem}.vk"))
    pub = circuit.public_inputs(job, 0)
    assert verify(vk, pub, proof)
    for i in (3, 2, 0):                       # comm_r_new, comm_d_new, k | h_select
        bad = list(pub)
        bad[i] += 1
        assert not verify(vk, bad, proof), i
