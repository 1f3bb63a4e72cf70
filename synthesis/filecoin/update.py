"""Filecoin's EmptySectorUpdate (SnapDeals) circuit and its Poseidon variant: parameter sets,
public inputs, file names and the counting replay, constraint for constraint.

rust-fil-proofs (mirror commit 87348a7) ``storage-proofs-update/src/{circuit,gadgets,constants,
vanilla,compound}.rs`` and ``poseidon/{circuit,vanilla,compound}.rs``, replayed on the census's
counting gadgets (``census.poseidon_hash``, ``sha256_hash_multi_leaf``, ``insert``, ``pick``,
``to_bits_le``, ``pack_bits``).

**Parameter sets** (``constants.rs``, ``vanilla.rs PublicParams::from_sector_size``): sector sizes
1 KiB .. 64 GiB (``ALLOWED_SECTOR_SIZES``), TreeR shape per size (``validate_tree_r_shape``),
``partition_count`` 1 (<= 8 KiB), 2 (<= 32 KiB), 4 (<= 16 MiB), 16; ``challenge_count`` 10
(<= 16 MiB) or 86 a partition; ``apex_leaf_count`` 8 (<= 8 KiB) or 128; ``hs`` [1] * 6 (<= 32 KiB)
or [7 .. 12]. The Poseidon variant (``from_sector_size_poseidon``) is one partition of
``challenge_count * partition_count`` challenges and no apex tree.

**The circuit** (``EmptySectorUpdateCircuit::synthesize``): ``k_and_h_select`` inputized and split
into ``partition_bit_len + 6`` bits (one decomposition constraint), the partition packed;
comm_r_old, comm_d_new, comm_r_new inputized; ``phi = Poseidon_GenRandomness(comm_d_new,
comm_r_old)``; comm_c, root_r_old, root_r_new, the apex leafs and the partition path allocated;
``comm_r_{old,new} = H(comm_c, root_r_{old,new})``; ``apex_por`` (the apex tree by SHA-256
``hash2``, then a TreeD PoR of the partition path to comm_d_new); ``gen_challenge_bits`` (per
digest: ``digest_index = k * digests + j``, ``Poseidon(comm_r_new, digest_index)``, 255 bits);
per challenge: ``get_challenge_high_bits`` (6 packs, 6 products with the h_select bits, one
sum), ``rho = Poseidon(phi, c_high)``, ``leaf_r_new = leaf_r_old + leaf_d_new * rho``, the TreeR
PoRs of old and new replica (``por_no_challenge_input``: no input), ``select`` of the apex leaf
and the TreeD PoR up to it. The Poseidon variant: ``h_select`` alone as first input, partition
zero, no apex, and the TreeD path checked as a Poseidon path of TreeR's shape to comm_d_new.

**Public inputs** (``PublicInputs::to_vec``): ``k | h_select << partition_bit_len``, comm_r_old,
comm_d_new, comm_r_new (the Poseidon variant: ``h_select``, comm_r_old, comm_d_new, comm_r_new).

**File names** (``parameter_cache.rs cache_identifier``; ``compound.rs cache_prefix``):
``v28-empty-sector-update[-poseidon]-<TreeR::display()>-<sha256(identifier)>`` with identifier
``empty_sector_update::PublicParams{ sector_nodes: N }`` for both variants.

**Registered proofs** (rust-filecoin-proofs-api ``registry.rs``): ``RegisteredUpdateProof::
StackedDrg{2KiB,8MiB,512MiB,32GiB,64GiB}V1`` (api 1.1.0) only; the Poseidon variant has
parameters (32 GiB and 64 GiB in ``parameters.json``) but no registered proof type.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from . import census as cen

VERSION = 28
NODE_SIZE = 32
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
#: constants.rs ALLOWED_SECTOR_SIZES (bytes) -> validate_tree_r_shape's (base, sub, top)
SHAPES = {1 * KIB: (8, 4, 0), 2 * KIB: (8, 0, 0), 4 * KIB: (8, 2, 0), 8 * KIB: (8, 4, 0),
          16 * KIB: (8, 8, 0), 32 * KIB: (8, 8, 2), 8 * MIB: (8, 0, 0), 16 * MIB: (8, 2, 0),
          512 * MIB: (8, 0, 0), 32 * GIB: (8, 8, 0), 64 * GIB: (8, 8, 2)}
#: sector sizes with a registered proof (RegisteredUpdateProof::StackedDrg*V1)
PUBLISHED = {"2KiB": 2 * KIB, "8MiB": 8 * MIB, "512MiB": 512 * MIB, "32GiB": 32 * GIB,
             "64GiB": 64 * GIB}
#: storage-proofs-update tests/circuit.rs (TestConstraintSystem / BenchCS num_constraints)
RUST_CONSTRAINTS = {1 * KIB: 1_248_389, 2 * KIB: 1_705_039, 4 * KIB: 2_165_109,
                    8 * KIB: 2_620_359, 16 * KIB: 6_300_021, 32 * KIB: 6_760_091,
                    32 * GIB: 81_049_499}
#: tests/circuit_poseidon.rs
RUST_CONSTRAINTS_POSEIDON = {1 * KIB: 32_164, 8 * KIB: 47_974, 32 * GIB: 22_305_906}
HS_SMALL, HS_LARGE = (1,) * 6, (7, 8, 9, 10, 11, 12)


def _size_name(size: int) -> str:
    for unit, n in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size >= n:
            return f"{size // n}{unit}"
    raise ValueError(f"sector size {size}")


@dataclass(frozen=True)
class UpdateParams:
    """One EmptySectorUpdate partition circuit (``PublicParams`` + TreeR shape)."""
    sector_size: int
    poseidon: bool = False

    def __post_init__(self):
        if self.sector_size not in SHAPES:
            raise ValueError(f"sector size {self.sector_size}: not one of storage-proofs-update's "
                             f"ALLOWED_SECTOR_SIZES ({', '.join(_size_name(s) for s in SHAPES)})")

    @property
    def name(self) -> str:
        kind = "empty-sector-update-poseidon" if self.poseidon else "empty-sector-update"
        return f"{kind}-{_size_name(self.sector_size)}"

    @property
    def sector_nodes(self) -> int:
        return self.sector_size // NODE_SIZE

    @property
    def shape(self) -> tuple[int, int, int]:
        return SHAPES[self.sector_size]

    @property
    def challenge_bit_len(self) -> int:
        return self.sector_nodes.bit_length() - 1

    @property
    def sector_partitions(self) -> int:
        """constants.rs ``partition_count`` (the non-Poseidon proof's partitions)."""
        n = self.sector_nodes
        if n <= 8 * KIB // NODE_SIZE:
            return 1
        return 2 if n <= 32 * KIB // NODE_SIZE else 4 if n <= 16 * MIB // NODE_SIZE else 16

    @property
    def partition_count(self) -> int:
        return 1 if self.poseidon else self.sector_partitions

    @property
    def partition_bit_len(self) -> int:
        return self.partition_count.bit_length() - 1

    @property
    def challenge_count(self) -> int:
        c = 10 if self.sector_nodes <= 16 * MIB // NODE_SIZE else 86
        return c * self.sector_partitions if self.poseidon else c

    @property
    def apex_leaf_count(self) -> int:
        if self.poseidon:
            return 0
        return 8 if self.sector_nodes <= 8 * KIB // NODE_SIZE else 128

    @property
    def apex_leaf_bit_len(self) -> int:
        return max(self.apex_leaf_count.bit_length() - 1, 0)

    @property
    def hs(self) -> tuple[int, ...]:
        return HS_SMALL if self.sector_nodes <= 32 * KIB // NODE_SIZE else HS_LARGE

    @property
    def tree_r_arities(self) -> tuple[int, ...]:
        """TreeR's arity per level, leaves first (``ChallengeProof::empty``'s path_r)."""
        base, sub, top = self.shape
        bits = self.challenge_bit_len - (sub.bit_length() - 1 if sub else 0) \
            - (top.bit_length() - 1 if top else 0)
        return (base,) * (bits // 3) + ((sub,) if sub else ()) + ((top,) if top else ())

    @property
    def num_public(self) -> int:
        return 4

    @property
    def tree_display(self) -> str:
        return "merkletree-poseidon_hasher-" + "-".join(str(a) for a in self.shape)

    @property
    def identifier(self) -> str:
        return f"empty_sector_update::PublicParams{{ sector_nodes: {self.sector_nodes} }}"

    @property
    def file_stem(self) -> str:
        """parameters.json's name without ``.params`` / ``.vk`` / ``.meta``."""
        prefix = "empty-sector-update-poseidon" if self.poseidon else "empty-sector-update"
        return (f"v{VERSION}-{prefix}-{self.tree_display}-"
                f"{hashlib.sha256(self.identifier.encode()).hexdigest()}")

    @property
    def registered_proof(self) -> str | None:
        sz = _size_name(self.sector_size)
        return None if self.poseidon or sz not in PUBLISHED else f"StackedDrg{sz}V1"


SETS = {p.name: p for p in (UpdateParams(s, v) for v in (False, True) for s in SHAPES)}


def get(name: str) -> UpdateParams:
    try:
        return SETS[name]
    except KeyError:
        raise ValueError(f"unknown update parameter set {name!r}: "
                         f"one of {', '.join(SETS)}") from None


# --- public inputs -------------------------------------------------------------------------------

def h_select(prm: UpdateParams, h: int) -> int:
    """constants.rs ``h_select``: ``1 << index of h in hs``."""
    if h not in prm.hs:
        raise ValueError(f"h = {h}: not one of {prm.hs} for {_size_name(prm.sector_size)}")
    return 1 << prm.hs.index(h)


def h_default(prm: UpdateParams) -> int:
    return prm.hs[3]


def public_inputs(prm: UpdateParams, k: int, h: int, comm_r_old: int, comm_d_new: int,
                  comm_r_new: int) -> list[int]:
    """``PublicInputs::new(..).to_vec()`` (ONE not included)."""
    if not 0 <= k < prm.partition_count:
        raise ValueError(f"partition k = {k}: {prm.partition_count} partitions at "
                         f"{_size_name(prm.sector_size)}")
    first = k | (h_select(prm, h) << prm.partition_bit_len)
    return [first, comm_r_old, comm_d_new, comm_r_new]


# --- the counting replay -------------------------------------------------------------------------

def _poseidon2(cs: cen.CountCS, a: int, b: int) -> int:
    """neptune ``poseidon_hash`` arity 2 (standard or the GenRandomness custom tag: the domain tag
    is a constant, so both count alike) and ``PoseidonFunction::hash2_circuit``."""
    return cen.poseidon_hash(cs, [a, b])


def _sha2(cs: cen.CountCS, a: int, b: int) -> int:
    """``Sha256Function::hash2_circuit`` = ``hash_multi_leaf_circuit`` of two leaves."""
    return cen.sha256_hash_multi_leaf(cs, [a, b])


def por_no_challenge_input(cs: cen.CountCS, bits: list[int], leaf: int, sibs: list[list[int]],
                           root: int, arities: tuple[int, ...], sha: bool) -> None:
    """storage-proofs-core ``por_no_challenge_input``: per level insert then hash (siblings
    already allocated by the caller), the root equality; no input."""
    cur, it = leaf, iter(bits)
    for arity, level in zip(arities, sibs, strict=True):
        idx = [next(it) for _ in range(arity.bit_length() - 1)]
        ins = cen.insert(cs, cur, idx, level)
        cur = cen.sha256_hash_multi_leaf(cs, ins) if sha else cen.poseidon_hash(cs, ins)
    if next(it, None) is not None:
        raise AssertionError("challenge bit-length and tree arity do not agree")
    cen.equal(cs, cur, root)


def _alloc_path(cs: cen.CountCS, arities: tuple[int, ...]) -> list[list[int]]:
    return [[cen.alloc_num(cs) for _ in range(a - 1)] for a in arities]


def gen_challenge_bits(cs: cen.CountCS, comm_r_new: int, partition: int, challenges: int,
                       bits_per_challenge: int) -> list[list[int]]:
    per_digest = cen.CAPACITY // bits_per_challenge
    digests = -(-challenges // per_digest)
    out: list[list[int]] = []
    for j in range(digests):
        idx = cen.alloc_num(cs)
        cs.enforce({partition: digests, cen.ONE: j} if j else {partition: digests},
                   {cen.ONE: 1}, {idx: 1})
        bits = cen.to_bits_le(cs, _poseidon2(cs, comm_r_new, idx))
        take = challenges - len(out) if j == digests - 1 else per_digest
        out += [bits[i:i + bits_per_challenge]
                for i in range(0, take * bits_per_challenge, bits_per_challenge)]
    return out


def get_challenge_high_bits(cs: cen.CountCS, c_bits: list[int], h_bits: list[int],
                            hs: tuple[int, ...]) -> int:
    n = len(c_bits)
    ors = []
    for h, hb in zip(hs, h_bits, strict=True):
        high = cen.pack_bits(cs, c_bits[n - h:])
        o = cen.alloc_num(cs)
        cs.enforce({high: 1}, {hb: 1}, {o: 1})
        ors.append(o)
    sel = cen.alloc_num(cs)
    cs.enforce({o: 1 for o in ors}, {cen.ONE: 1}, {sel: 1})
    return sel


def label_r_new(cs: cen.CountCS, old: int, d_new: int, rho: int) -> int:
    prod = cen.alloc_num(cs)                     # AllocatedNum::mul
    cs.enforce({d_new: 1}, {rho: 1}, {prod: 1})
    new = cen.alloc_num(cs)
    cs.enforce({old: 1, prod: 1}, {cen.ONE: 1}, {new: 1})
    return new


def select(cs: cen.CountCS, leafs: list[int], bits: list[int]) -> int:
    """insertion.rs ``select``: most significant bit first, ``pick`` halves."""
    state = list(leafs)
    for b in reversed(bits):
        half = len(state) // 2
        state = [cen.pick(cs, b, state[half + j], state[j]) for j in range(half)]
    return state[0]


def apex_por(cs: cen.CountCS, apex_leafs: list[int], part_bits: list[int],
             part_path: list[list[int]], comm_d: int) -> None:
    """gadgets.rs ``apex_por``: the partition's apex tree by SHA-256 ``hash2``, its root's TreeD
    path (one sibling a level) to comm_d."""
    row = apex_leafs
    while len(row) > 1:
        row = [_sha2(cs, row[i], row[i + 1]) for i in range(0, len(row), 2)]
    por_no_challenge_input(cs, part_bits, row[0], part_path, comm_d, (2,) * len(part_bits), True)


def _decompose(cs: cen.CountCS, v: int, n: int) -> list[int]:
    bits = [cen.alloc_bit(cs) for _ in range(n)]
    cs.enforce({b: pow(2, i, cen.R) for i, b in enumerate(bits)}, {cen.ONE: 1}, {v: 1})
    return bits


def _challenge(cs, prm, c_bits, h_bits, phi, root_r_old, root_r_new, comm_d_new, apex_leafs):
    """One challenge's block of either variant."""
    c_high = get_challenge_high_bits(cs, c_bits, h_bits, prm.hs)
    rho = _poseidon2(cs, phi, c_high)
    leaf_r_old, leaf_d_new = cen.alloc_num(cs), cen.alloc_num(cs)
    leaf_r_new = label_r_new(cs, leaf_r_old, leaf_d_new, rho)
    ar = prm.tree_r_arities
    por_no_challenge_input(cs, c_bits, leaf_r_old, _alloc_path(cs, ar), root_r_old, ar, False)
    por_no_challenge_input(cs, c_bits, leaf_r_new, _alloc_path(cs, ar), root_r_new, ar, False)
    if prm.poseidon:
        por_no_challenge_input(cs, c_bits, leaf_d_new, _alloc_path(cs, ar), comm_d_new, ar, False)
        return
    start = prm.challenge_bit_len - prm.partition_bit_len - prm.apex_leaf_bit_len
    apex_leaf = select(cs, apex_leafs, c_bits[start:start + prm.apex_leaf_bit_len])
    below = (2,) * start
    por_no_challenge_input(cs, c_bits[:start], leaf_d_new, _alloc_path(cs, below), apex_leaf,
                           below, True)


@dataclass
class UpdateCensus:
    name: str
    synthesized: cen.Tally        # what synthesize allocates (ONE in inputs): bellperson's count
    header: cen.Tally             # everything before the challenge loop
    challenge: cen.Tally          # one challenge block

    @property
    def with_input_rows(self) -> cen.Tally:
        return self.synthesized.with_input_rows()


def census(prm: UpdateParams | str) -> UpdateCensus:
    """Count one partition: the header (inputs, phi, comm_r checks, apex PoR, challenge bits) and
    one challenge block counted, the partition = header + ``challenge_count`` blocks (every block
    has the same shape)."""
    prm = get(prm) if isinstance(prm, str) else prm
    cs = cen.CountCS()
    first = cen.alloc_num(cs)
    cen.inputize(cs, first)
    sel_bits = _decompose(cs, first, prm.partition_bit_len + len(prm.hs))
    part_bits, h_bits = sel_bits[:prm.partition_bit_len], sel_bits[prm.partition_bit_len:]
    if not prm.poseidon:
        partition = cen.pack_bits(cs, part_bits)
    comm_r_old, comm_d_new, comm_r_new = (cen.alloc_num(cs) for _ in range(3))
    for v in (comm_r_old, comm_d_new, comm_r_new):
        cen.inputize(cs, v)
    phi = _poseidon2(cs, comm_d_new, comm_r_old)
    comm_c, root_r_old, root_r_new = (cen.alloc_num(cs) for _ in range(3))
    apex_leafs = [cen.alloc_num(cs) for _ in range(prm.apex_leaf_count)]
    part_path = _alloc_path(cs, (2,) * prm.partition_bit_len)
    for root, comm_r in ((root_r_old, comm_r_old), (root_r_new, comm_r_new)):
        cen.equal(cs, _poseidon2(cs, comm_c, root), comm_r)
    if prm.poseidon:
        partition = cen.alloc_num(cs)            # "gen_challenge_bits partition zero"
    else:
        apex_por(cs, apex_leafs, part_bits, part_path, comm_d_new)
    gen = gen_challenge_bits(cs, comm_r_new, partition, prm.challenge_count,
                             prm.challenge_bit_len - prm.partition_bit_len)
    if len(gen) != prm.challenge_count:
        raise AssertionError(f"{len(gen)} challenges generated, {prm.challenge_count} expected")
    header = cs.total.copy()
    _challenge(cs, prm, gen[0] + part_bits, h_bits, phi, root_r_old, root_r_new, comm_d_new,
               apex_leafs)
    one = cs.total.minus(header)
    total = header.copy()
    total.add(one, prm.challenge_count - 1)
    total.add(one)
    return UpdateCensus(prm.name, total, header, one)


# --- GenRandomness ------------------------------------------------------------------------------

#: constants.rs HASH_TYPE_GEN_RANDOMNESS = HashType::Custom(CType::Arbitrary(1)): neptune's
#: ``CType::domain_tag`` is ``x_pow2(id, 40)`` = id * 2^40 (checked against challenges.rs's
#: test_challenges_against_hardcoded vectors, tests/unit/test_filecoin_update_witness.py)
GEN_RANDOMNESS_TAG = 1 << 40


def gen_randomness_constants():
    """``POSEIDON_CONSTANTS_GEN_RANDOMNESS``: neptune's arity-2 constants (round constants and MDS
    do not depend on the hash type) with the custom domain tag."""
    import dataclasses
    from ..bellpepper import neptune
    return dataclasses.replace(neptune.constants(2), tag=GEN_RANDOMNESS_TAG)


def gen_hash(a: int, b: int) -> int:
    """``Poseidon::new_with_preimage(&[a, b], &POSEIDON_CONSTANTS_GEN_RANDOMNESS).hash()``."""
    from ..bellpepper import neptune
    return neptune.trace_ints([a, b], gen_randomness_constants())[0]


def phi(comm_d_new: int, comm_r_old: int) -> int:
    """vanilla.rs ``phi``."""
    return gen_hash(comm_d_new, comm_r_old)


def rho(phi_: int, high: int) -> int:
    """vanilla.rs ``rho``."""
    return gen_hash(phi_, high)


def challenges(prm: UpdateParams, comm_r_new: int, k: int) -> list[int]:
    """challenges.rs ``Challenges::new(sector_nodes, comm_r_new, k)`` (``new_poseidon`` for the
    Poseidon variant: one partition of every challenge, no partition bits)."""
    if not 0 <= k < prm.partition_count:
        raise ValueError(f"partition k = {k}: {prm.partition_count} partitions")
    width = prm.challenge_bit_len - prm.partition_bit_len
    per_digest = cen.CAPACITY // width
    digests = -(-prm.challenge_count // per_digest)
    out: list[int] = []
    for j in range(digests):
        d = gen_hash(comm_r_new, k * digests + j)
        take = min(per_digest, prm.challenge_count - len(out))
        out += [((d >> (i * width)) & ((1 << width) - 1)) | (k << width) for i in range(take)]
    return out


# --- the circuit (shape and witness) ------------------------------------------------------------

@dataclass
class ChallengeWitness:
    """One challenge's proofs (vanilla.rs ``ChallengeProof`` as the circuit reads it): the leaves
    and, per level from the leaves, the siblings ((arity - 1, 4) uint64 each). ``path_d_new``:
    every TreeD level (binary SHA-256; the Poseidon variant: TreeR's shape)."""
    challenge: int
    leaf_r_old: int
    leaf_d_new: int
    leaf_r_new: int
    path_r_old: list
    path_d_new: list
    path_r_new: list


@dataclass
class PartitionWitness:
    """Partition k's public and private inputs (circuit.rs ``PublicInputs`` / ``PrivateInputs``)."""
    k: int
    h: int
    comm_r_old: int
    comm_d_new: int
    comm_r_new: int
    comm_c: int
    root_r_old: int
    root_r_new: int
    apex_leafs: list[int]
    challenges: list[ChallengeWitness]

    def public_inputs(self, prm: UpdateParams) -> list[int]:
        return public_inputs(prm, self.k, self.h, self.comm_r_old, self.comm_d_new, self.comm_r_new)


@dataclass
class ChallengeBatch:
    """B challenges' proofs stacked for one values-mode run (a row a challenge): the leaves
    (B, 4) and, per level from the leaves, the siblings (B, arity - 1, 4)."""
    leaf_r_old: np.ndarray
    leaf_d_new: np.ndarray
    path_r_old: list
    path_d_new: list
    path_r_new: list

    @classmethod
    def of(cls, ws: list[ChallengeWitness]) -> "ChallengeBatch":
        from .. import field
        levels = lambda name: [np.stack([np.asarray(getattr(c, name)[lv], np.uint64).reshape(-1, 4)  # noqa: E731
                                         for c in ws]) for lv in range(len(getattr(ws[0], name)))]
        return cls(field.vec_from_ints([c.leaf_r_old % field.MODULUS for c in ws]),
                   field.vec_from_ints([c.leaf_d_new % field.MODULUS for c in ws]),
                   levels("path_r_old"), levels("path_d_new"), levels("path_r_new"))


@dataclass
class Header:
    """What the challenge blocks read of the header: the ``k_and_h_select`` bits, comm_d_new,
    phi, the two TreeR roots, the apex leafs, and per challenge its bits from ``gen_challenge_bits``
    (below the partition bits, LE)."""
    part_bits: list
    h_bits: list
    comm_d_new: object
    phi: object
    root_r_old: object
    root_r_new: object
    apex_leafs: list
    gen: list


class _Gadgets:
    """The helpers ``EmptySectorUpdateCircuit::synthesize`` is written with, over one Synth."""

    def __init__(self, s):
        from ..builder import LinearCombination
        self.s, self.comp = s, s.computing
        self.ONE = LinearCombination({0: 1})
        self.gen_c = gen_randomness_constants()

    def num(self, f):
        """An allocated number; ``f()`` its values ((B, 4)) in values mode."""
        from ..bellpepper import alloc_num
        return alloc_num(self.s, f if self.comp else None)

    def enforce(self, abc, name):
        """A constraint whose sides (``abc()``: linear combinations) exist in shape mode only."""
        if self.s.shape:
            self.s.cs.enforce(*abc(), name)

    def gen_hash(self, a, b):
        from ..bellpepper.neptune import poseidon_hash
        return poseidon_hash(self.s, [a, b], 2, self.gen_c)

    def path(self, arities, levels):
        """Allocate the siblings of ``arities`` (values mode: ``levels``, (B, arity - 1, 4) each)."""
        from ..bellpepper import alloc_num
        if not arities:
            return []
        if self.comp:
            return [[alloc_num(self.s, lambda lv=lv, j=j: np.ascontiguousarray(lv[:, j]))
                     for j in range(a - 1)] for a, lv in zip(arities, levels, strict=True)]
        return [[alloc_num(self.s) for _ in range(a - 1)] for a in arities]

    def por_nci(self, bits, leaf, sibs, root, arities, sha):
        """storage-proofs-core ``por_no_challenge_input``."""
        from . import stacked
        s, cur, it = self.s, leaf, iter(bits)
        for arity, level in zip(arities, sibs, strict=True):
            ins = stacked.insert(s, cur, [next(it) for _ in range(arity.bit_length() - 1)], level)
            cur = stacked.sha256_hash_multi_leaf(s, ins) if sha else stacked.poseidon(s, ins)
        self.enforce(lambda: (cur.lc, self.ONE, root.lc), "calculated root == provided root")


def digests_of(prm: UpdateParams) -> tuple[int, int, int]:
    """(bits a challenge below the partition bits, challenges a digest, digests) of
    ``gen_challenge_bits``."""
    top = prm.challenge_bit_len - prm.partition_bit_len
    per_digest = cen.CAPACITY // top
    return top, per_digest, -(-prm.challenge_count // per_digest)


def synthesize_header(s, prm: UpdateParams, w: PartitionWitness | None = None) -> Header:
    """Everything before the challenge loop: inputs, phi, comm_c and the roots, the apex leafs
    and the partition's TreeD path, H(comm_c, root_r_*) = comm_r_*, the apex PoR, and
    ``gen_challenge_bits`` (every digest: all challenges' bits)."""
    from ..bellpepper import AllocatedBit, Boolean, equal, inputize, to_bits_le
    from ..bellpepper.boolean import comb
    from .. import field
    from . import stacked
    g = _Gadgets(s)
    comp, num, enforce, ONE = g.comp, g.num, g.enforce, g.ONE
    fe = lambda x: field.vec_from_ints([int(x) % field.MODULUS])  # noqa: E731
    nsel = prm.partition_bit_len + len(prm.hs)
    first = num(lambda: fe(w.public_inputs(prm)[0]))
    inputize(s, first)
    sel_val = (lambda i: (lambda: np.array([(w.public_inputs(prm)[0] >> i) & 1], np.uint8))) \
        if comp else (lambda i: None)
    sel = [Boolean.is_(AllocatedBit.alloc(s, sel_val(i), "k_and_h_select bit")) for i in range(nsel)]
    enforce(lambda: (comb(*((1 << i, b) for i, b in enumerate(sel))), ONE, first.lc),
            "k_and_h_select binary decomp")
    part_bits, h_bits = sel[:prm.partition_bit_len], sel[prm.partition_bit_len:]
    if not prm.poseidon:
        partition = stacked.pack_bits(s, part_bits)
    comm_r_old = num(lambda: fe(w.comm_r_old))
    inputize(s, comm_r_old)
    comm_d_new = num(lambda: fe(w.comm_d_new))
    inputize(s, comm_d_new)
    comm_r_new = num(lambda: fe(w.comm_r_new))
    inputize(s, comm_r_new)
    phi_ = g.gen_hash(comm_d_new, comm_r_old)
    comm_c, root_r_old, root_r_new = (num(lambda: fe(w.comm_c)), num(lambda: fe(w.root_r_old)),
                                      num(lambda: fe(w.root_r_new)))
    apex_leafs = [num(lambda i=i: fe(w.apex_leafs[i])) for i in range(prm.apex_leaf_count)]
    top, per_digest, digests = digests_of(prm)
    part_ar = (2,) * prm.partition_bit_len
    part_path = g.path(part_ar, [np.asarray(w.challenges[0].path_d_new[lv], np.uint64).reshape(1, -1, 4)
                                 for lv in range(top, prm.challenge_bit_len)]
                       if comp and not prm.poseidon else None)
    for root, comm_r in ((root_r_old, comm_r_old), (root_r_new, comm_r_new)):
        equal(s, stacked.poseidon(s, [comm_c, root]), comm_r, "enforce comm_r_calc == comm_r")
    if prm.poseidon:
        partition = num(lambda: fe(0))
    else:
        row = apex_leafs
        while len(row) > 1:
            row = [stacked.sha256_hash_multi_leaf(s, row[i:i + 2]) for i in range(0, len(row), 2)]
        g.por_nci(part_bits, row[0], part_path, comm_d_new, part_ar, True)
    gen: list = []
    for j in range(digests):
        idx = num(lambda j=j: fe(w.k * digests + j))
        enforce(lambda j=j, idx=idx: (partition.lc * digests + ONE * j if j else
                                      partition.lc * digests, ONE, idx.lc), "digest_index")
        bits = to_bits_le(s, g.gen_hash(comm_r_new, idx))
        take = prm.challenge_count - len(gen) if j == digests - 1 else per_digest
        gen += [bits[i * top:(i + 1) * top] for i in range(take)]
    return Header(part_bits, h_bits, comm_d_new, phi_, root_r_old, root_r_new, apex_leafs, gen)


def synthesize_challenge(s, prm: UpdateParams, hd: Header, c_bits: list,
                         cw: ChallengeBatch | None = None) -> None:
    """One challenge's block (values mode: a batch of challenges, a row each; ``hd``'s numbers
    and bits then carry one row a challenge too): the high bits selected by h, rho, leaf_r_new,
    the TreeR PoRs of old and new replica, the apex leaf ``select``-ed and the TreeD PoR up to
    it (the Poseidon variant: the TreeD PoR of TreeR's shape to comm_d_new)."""
    from ..bellpepper.num import mul
    from . import stacked
    g = _Gadgets(s)
    comp, num, enforce, ONE = g.comp, g.num, g.enforce, g.ONE
    c_bits = c_bits + hd.part_bits
    n, ors = len(c_bits), []
    for h, hb in zip(prm.hs, hd.h_bits, strict=True):
        high = stacked.pack_bits(s, c_bits[n - h:])
        o = s.alloc((lambda high=high, hb=hb: _times_bit(high.val, hb)) if comp else None)
        enforce(lambda high=high, hb=hb, o=o: (high.lc, hb.lc(), o.lc), "c_high_or_zero")
        ors.append(o)
    c_high = s.alloc((lambda: _sum(ors)) if comp else None)
    enforce(lambda: (sum((o.lc for o in ors[1:]), ors[0].lc), ONE, c_high.lc), "c_high_selected")
    rho_ = g.gen_hash(hd.phi, c_high)
    leaf_r_old, leaf_d_new = num(lambda: cw.leaf_r_old), num(lambda: cw.leaf_d_new)
    prod = mul(s, leaf_d_new, rho_)
    leaf_r_new = s.alloc((lambda: _add(leaf_r_old.val, prod.val)) if comp else None)
    enforce(lambda: (leaf_r_old.lc + prod.lc, ONE, leaf_r_new.lc), "label_r_new")
    ar = prm.tree_r_arities
    g.por_nci(c_bits, leaf_r_old, g.path(ar, cw.path_r_old if comp else None), hd.root_r_old, ar, False)
    g.por_nci(c_bits, leaf_r_new, g.path(ar, cw.path_r_new if comp else None), hd.root_r_new, ar, False)
    if prm.poseidon:
        g.por_nci(c_bits, leaf_d_new, g.path(ar, cw.path_d_new if comp else None), hd.comm_d_new,
                  ar, False)
        return
    start = prm.challenge_bit_len - prm.partition_bit_len - prm.apex_leaf_bit_len
    state = list(hd.apex_leafs)
    for b in reversed(c_bits[start:start + prm.apex_leaf_bit_len]):
        half = len(state) // 2
        state = [stacked.pick(s, b, state[half + j], state[j]) for j in range(half)]
    below = (2,) * start
    g.por_nci(c_bits[:start], leaf_d_new, g.path(below, cw.path_d_new[:start] if comp else None),
              state[0], below, True)


def synthesize(s, prm: UpdateParams | str, w: PartitionWitness | None = None, *,
               upto: int | None = None, marks: list | None = None) -> Header:
    """``EmptySectorUpdateCircuit::synthesize`` (either variant) over ``synthesis.bellpepper``:
    the constraints and variables in bellperson's allocation order, on the PoRep circuit's
    gadgets (``stacked.insert/pick/pack_bits/sha256_hash_multi_leaf``, neptune's Poseidon: the
    Merkle-tree constants for TreeR and comm_r, the GenRandomness ones for phi, the challenge
    digests and rho). Shape mode (``Synth(cs=...)``), values mode (``Synth(batch=1)``, ``w`` one
    partition's witness) or both at once: the header, then the challenges one by one.
    ``upto``: only the first ``upto`` challenges (the compact matrices' recording); ``marks``
    (shape mode): (constraints, aux) appended after the header and after each challenge."""
    prm = get(prm) if isinstance(prm, str) else prm
    comp = s.computing
    if comp and (w is None or s.batch != 1):
        raise ValueError("update.synthesize computes one partition (Synth(batch=1) and a witness)")
    if comp and len(w.challenges) != prm.challenge_count:
        raise ValueError(f"{len(w.challenges)} challenge proofs, {prm.challenge_count} expected")
    mark = (lambda: marks.append((s.cs.num_constraints, s.cs.num_aux))) \
        if marks is not None and s.shape else (lambda: None)
    hd = synthesize_header(s, prm, w)
    mark()
    for ci in range(prm.challenge_count if upto is None else upto):
        synthesize_challenge(s, prm, hd, hd.gen[ci],
                             ChallengeBatch.of([w.challenges[ci]]) if comp else None)
        mark()
    return hd


def witness(prm: UpdateParams, w: PartitionWitness):
    """z of a partition as an ``assignment.Compact``, in bellperson's numbering: the header in
    values mode (batch 1), then every challenge block in one values-mode batch (a row a
    challenge; the header's numbers and bits repeated, each row its challenge's bits)."""
    from .. import assignment, field
    from ..bellpepper import AllocatedBit, Boolean
    from ..bellpepper.core import Num, Synth
    if len(w.challenges) != prm.challenge_count:
        raise ValueError(f"{len(w.challenges)} challenge proofs, {prm.challenge_count} expected")
    C = prm.challenge_count
    hs = Synth(batch=1, blocks=True)
    h1 = synthesize_header(hs, prm, w)

    def rep_bit(b):
        return b if b.is_constant else Boolean(AllocatedBit(None, np.repeat(b.bit.val, C)), b.neg)

    def rep(x):
        return Num(None, np.repeat(x.val, C, axis=0))
    top = len(h1.gen[0])
    bits = np.array([[b.value(1)[0] for b in ch] for ch in h1.gen], dtype=np.uint8)   # (C, top)
    c_bits = [Boolean.is_(AllocatedBit(None, np.ascontiguousarray(bits[:, i]))) for i in range(top)]
    hd = Header([rep_bit(b) for b in h1.part_bits], [rep_bit(b) for b in h1.h_bits], rep(h1.comm_d_new),
                rep(h1.phi), rep(h1.root_r_old), rep(h1.root_r_new), [rep(x) for x in h1.apex_leafs], [])
    cs = Synth(batch=C, blocks=True)
    synthesize_challenge(cs, prm, hd, c_bits, ChallengeBatch.of(w.challenges))
    head = np.concatenate([field.vec_from_ints([1]), np.concatenate(hs.public, axis=0)])
    return assignment.from_blocks(head, hs.values, cs.values, C)


def _times_bit(x: np.ndarray, bit) -> np.ndarray:
    return np.where(bit.value(len(x))[:, None] == 1, x, np.zeros_like(x))


def _sum(nums) -> np.ndarray:
    from arith import native
    acc = nums[0].val
    for o in nums[1:]:
        acc = native.add(acc, o.val)
    return acc


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from arith import native
    return native.add(a, b)


def synthesize_shape(s, prm: UpdateParams | str) -> None:
    """Shape mode only (``Synth(cs=ConstraintSystem(with_values=False))``)."""
    if not s.shape or s.computing:
        raise ValueError("update.synthesize_shape records shape only")
    synthesize(s, prm, None)
