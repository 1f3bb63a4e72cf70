"""Filecoin's PoRep parameter sets: the published sector sizes, as rust-fil-proofs fixes them.

Every figure is rust-fil-proofs' (mirror commit 87348a7) or rust-filecoin-proofs-api's (0e64ce8):

- ``filecoin-proofs/src/constants.rs``: ``LAYERS`` (2 below 32 GiB, 11 at 32 and 64 GiB),
  ``POREP_PARTITIONS`` (1 below 32 GiB, 10 at 32 and 64 GiB),
  ``get_porep_interactive_minimum_challenges`` (2 below 32 GiB, 176 at 32 and 64 GiB),
  ``DRG_DEGREE = BASE_DEGREE = 6`` (storage-proofs-core/src/drgraph.rs), ``EXP_DEGREE = 8``
  (storage-proofs-porep stacked), the sector shapes ``SectorShape2KiB/8MiB/512MiB = LCTree<U8, U0,
  U0>``, ``SectorShape32GiB = <U8, U8, U0>``, ``SectorShape64GiB = <U8, U8, U2>``.
- ``filecoin-proofs/src/parameters.rs``: challenges a partition = ``div_ceil(minimum, partitions)``
  (176 / 10 -> 18 at 32 GiB), at most ``MAX_CHALLENGES_PER_PARTITION = 18``.
- rust-filecoin-proofs-api ``src/registry.rs``: ``RegisteredSealProof`` (``StackedDrg32GiBV1_1`` is
  proof id 8, api version 1.1.0), ``porep_id = id u64 LE | nonce (0) u64 LE | 16 zero bytes``.

The V1_1 proofs (api 1.1.0, interactive challenges) are what Lotus and Curio seal today without the
synthetic-PoRep feature; the DRG's immediate predecessor is parent 0 from api 1.1.0 on.

A sector of 512 MiB and up is a *benchmark sector* here: it cannot be labeled on this machine
(11 layers of 2^30 nodes), so ``synthesis.filecoin.sector`` populates a small region inside
full-depth trees and draws the challenges from it. The circuit and the witness have Filecoin's
exact shape; the sector is not a real replica, and says so wherever it appears.
"""
from __future__ import annotations

from dataclasses import dataclass

#: rust-filecoin-proofs-api ``REGISTERED_PROOF_IDS`` for the V1_1 proofs.
REGISTERED_PROOF_IDS = {
    "StackedDrg2KiBV1": 0, "StackedDrg8MiBV1": 1, "StackedDrg512MiBV1": 2,
    "StackedDrg32GiBV1": 3, "StackedDrg64GiBV1": 4,
    "StackedDrg2KiBV1_1": 5, "StackedDrg8MiBV1_1": 6, "StackedDrg512MiBV1_1": 7,
    "StackedDrg32GiBV1_1": 8, "StackedDrg64GiBV1_1": 9,
}
#: the SyntheticPoRep kinds (api 1.1.0 with ApiFeature::SyntheticPoRep; registry.rs ids 10..14):
#: the same circuit and keys as the V1_1 kind of the size, challenges from the synthetic set
#: (``challenges.SynthChallenges``) and their own porep id (so their own replica ids)
SYNTHETIC_PROOF_IDS = {
    "StackedDrg2KiBV1_1_Feat_SyntheticPoRep": 10, "StackedDrg8MiBV1_1_Feat_SyntheticPoRep": 11,
    "StackedDrg512MiBV1_1_Feat_SyntheticPoRep": 12, "StackedDrg32GiBV1_1_Feat_SyntheticPoRep": 13,
    "StackedDrg64GiBV1_1_Feat_SyntheticPoRep": 14,
}
#: NI-PoRep (api 1.2.0, ids 15..19): named so a request for it is refused by name (docs/interop.md)
NON_INTERACTIVE_PROOF_IDS = {
    "StackedDrg2KiBV1_2_Feat_NonInteractivePoRep": 15, "StackedDrg8MiBV1_2_Feat_NonInteractivePoRep": 16,
    "StackedDrg512MiBV1_2_Feat_NonInteractivePoRep": 17, "StackedDrg32GiBV1_2_Feat_NonInteractivePoRep": 18,
    "StackedDrg64GiBV1_2_Feat_NonInteractivePoRep": 19,
}
ALL_PROOF_IDS = {**REGISTERED_PROOF_IDS, **SYNTHETIC_PROOF_IDS, **NON_INTERACTIVE_PROOF_IDS}
#: zkhive's test-sized configurations (``filecoin-test-*``): no RegisteredSealProof, so not in
#: ``ALL_PROOF_IDS`` (a gateway request can never name one); the number only seeds the porep id
#: (and so the graph and the replica id), far outside Filecoin's ids
TEST_PROOF_IDS = {"ZkhiveTestStackedDrg256BNotRegistered": 0x7A6B_6869_7665_0001}
SYNTHETIC_SUFFIX = "_Feat_SyntheticPoRep"


def proof_name(proof_id: int) -> str:
    """RegisteredSealProof's name for its number (Go's abi.RegisteredSealProof, the same numbers)."""
    for name, i in ALL_PROOF_IDS.items():
        if i == proof_id:
            return name
    return f"RegisteredSealProof {proof_id} (unknown)"


def is_synthetic(registered_proof: str) -> bool:
    return registered_proof in SYNTHETIC_PROOF_IDS


def porep_id_of(registered_proof: str) -> bytes:
    """rust-filecoin-proofs-api ``RegisteredSealProof::porep_id``: id LE | nonce 0 LE | zeros."""
    pid = ALL_PROOF_IDS.get(registered_proof, TEST_PROOF_IDS.get(registered_proof))
    if pid is None:
        raise KeyError(registered_proof)
    return pid.to_bytes(8, "little") + (0).to_bytes(8, "little") + bytes(16)


NODE_SIZE = 32
DRG_PARENTS = 6
EXP_PARENTS = 8
TOTAL_PARENTS = 37          # DRG + expander parents repeated in order up to 37 (create_label)
MAX_CHALLENGES_PER_PARTITION = 18


@dataclass(frozen=True)
class FilecoinParams:
    """One registered seal proof's sector and partition shape.

    ``tree_c_arities`` / ``tree_r_arities`` list the arity of each level from the leaves up:
    ``base_arity`` for the base tree's levels, then ``sub_arity`` (joining base trees) and
    ``top_arity`` (joining sub trees) where they are not 0. TreeD is binary over all nodes.
    """
    name: str
    registered_proof: str       # RegisteredSealProof, e.g. "StackedDrg32GiBV1_1"
    shape: str                  # the VanillaSealProof key in C1, e.g. "StackedDrg32GiBV1"
    sector_size: int            # bytes
    layers: int
    minimum_challenges: int     # interactive PoRep, all partitions together
    partitions: int
    base_arity: int = 8
    sub_arity: int = 0
    top_arity: int = 0
    api_version: str = "1.1.0"
    benchmark: bool = False     # True: a small populated region in full-depth trees (see module doc)

    def __post_init__(self):
        if self.sector_size % NODE_SIZE or self.nodes & (self.nodes - 1):
            raise ValueError(f"{self.name}: sector_size must be 32 * a power of two")
        base_nodes = self.nodes // max(self.sub_arity, 1) // max(self.top_arity, 1)
        depth, n = 0, 1
        while n < base_nodes:
            n, depth = n * self.base_arity, depth + 1
        if n != base_nodes:
            raise ValueError(f"{self.name}: {base_nodes} base-tree leaves are not a power of {self.base_arity}")
        if self.challenges > MAX_CHALLENGES_PER_PARTITION:
            raise ValueError(f"{self.name}: {self.challenges} challenges a partition > {MAX_CHALLENGES_PER_PARTITION}")

    @property
    def nodes(self) -> int:
        return self.sector_size // NODE_SIZE

    @property
    def log_nodes(self) -> int:
        return self.nodes.bit_length() - 1

    @property
    def drg_parents(self) -> int:
        return DRG_PARENTS

    @property
    def exp_parents(self) -> int:
        return EXP_PARENTS

    @property
    def total_parents(self) -> int:
        return TOTAL_PARENTS

    @property
    def challenges(self) -> int:
        """Challenges a partition: ``div_ceil(minimum_challenges, partitions)`` (parameters.rs)."""
        return -(-self.minimum_challenges // self.partitions)

    @property
    def tree_d_depth(self) -> int:
        """Binary TreeD levels above the leaves (log2 nodes)."""
        return self.log_nodes

    @property
    def base_tree_leaves(self) -> int:
        return self.nodes // max(self.sub_arity, 1) // max(self.top_arity, 1)

    @property
    def base_tree_depth(self) -> int:
        """Levels of ``base_arity`` in one base tree."""
        depth, n = 0, 1
        while n < self.base_tree_leaves:
            n, depth = n * self.base_arity, depth + 1
        return depth

    @property
    def tree_r_arities(self) -> tuple[int, ...]:
        """TreeC's and TreeR's arity at each level, leaves first (they share the shape)."""
        return ((self.base_arity,) * self.base_tree_depth
                + ((self.sub_arity,) if self.sub_arity else ())
                + ((self.top_arity,) if self.top_arity else ()))

    tree_c_arities = tree_r_arities

    @property
    def column_arity(self) -> int:
        """TreeC's leaves hash a column of ``layers`` labels with Poseidon of this arity."""
        return self.layers

    @property
    def registered_proof_id(self) -> int:
        return REGISTERED_PROOF_IDS.get(self.registered_proof, TEST_PROOF_IDS.get(self.registered_proof))

    @property
    def is_test(self) -> bool:
        """A test-sized configuration (``filecoin-test-*``), not a registered proof."""
        return self.registered_proof in TEST_PROOF_IDS

    @property
    def porep_id(self) -> bytes:
        """rust-filecoin-proofs-api ``RegisteredSealProof::porep_id``: id LE | nonce 0 LE | zeros."""
        return porep_id_of(self.registered_proof)

    @property
    def synthetic_proof(self) -> str:
        """The SyntheticPoRep kind of this size (same circuit, same keys)."""
        return self.registered_proof + SYNTHETIC_SUFFIX

    def accepts(self, registered_proof: str) -> bool:
        """Whether a C1 of ``registered_proof`` is proved with this set's circuit and keys."""
        return registered_proof in (self.registered_proof, self.synthetic_proof)

    @property
    def preimage_bytes(self) -> int:
        """create_label's SHA-256 input: replica id | layer u32 BE | node u64 BE | 20 zeros | 37 labels."""
        return 32 + 4 + 8 + 20 + NODE_SIZE * TOTAL_PARENTS

    @property
    def num_public(self) -> int:
        """Public inputs without ONE, StackedCompound::generate_public_inputs (stacked/circuit/
        proof.rs): replica_id, comm_d, comm_r, then per challenge TreeD's packed index, the 6 DRG
        and 8 expander parents' TreeC indexes, the challenge as a number, TreeR's and TreeC's
        index of the challenge: 3 + 18 * 18 = 327 at 32 GiB (328 with ONE)."""
        return 3 + self.challenges * (1 + DRG_PARENTS + EXP_PARENTS + 1 + 1 + 1)


def _sets() -> dict[str, FilecoinParams]:
    small = dict(layers=2, minimum_challenges=2, partitions=1)
    big = dict(layers=11, minimum_challenges=176, partitions=10, benchmark=True)
    rows = [
        FilecoinParams("filecoin-2k", "StackedDrg2KiBV1_1", "StackedDrg2KiBV1", 2 << 10, **small),
        FilecoinParams("filecoin-8m", "StackedDrg8MiBV1_1", "StackedDrg8MiBV1", 8 << 20, **small),
        FilecoinParams("filecoin-512m", "StackedDrg512MiBV1_1", "StackedDrg512MiBV1", 512 << 20,
                       **dict(small, benchmark=True)),
        FilecoinParams("filecoin-32g", "StackedDrg32GiBV1_1", "StackedDrg32GiBV1", 32 << 30,
                       sub_arity=8, **big),
        FilecoinParams("filecoin-64g", "StackedDrg64GiBV1_1", "StackedDrg64GiBV1", 64 << 30,
                       sub_arity=8, top_arity=2, **big),
    ]
    # test-sized, as rust-fil-proofs' own circuit tests (storage-proofs-porep stacked
    # test_stacked_porep_circuit: 8 nodes, 2 layers, 1 challenge): Filecoin's circuit and gadgets
    # at a size CI proves on a CPU; named and kinded so no one takes it for a registered proof
    rows.append(FilecoinParams("filecoin-test-256b", "ZkhiveTestStackedDrg256BNotRegistered",
                               "ZkhiveTestStackedDrg256B", 256, layers=2, minimum_challenges=2,
                               partitions=2))
    return {p.name: p for p in rows}


SETS = _sets()
#: the test-sized configuration: CI's StackedDRG-shaped cluster tests
TEST = "filecoin-test-256b"
TINY = "filecoin-2k"
BIG = "filecoin-32g"


def get(name: str) -> FilecoinParams:
    try:
        return SETS[name]
    except KeyError:
        raise ValueError(f"unknown filecoin parameter set {name!r}: one of {', '.join(SETS)}") from None
