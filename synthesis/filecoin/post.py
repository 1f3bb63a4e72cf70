"""Filecoin's FallbackPoSt circuit (WinningPoSt and WindowPoSt), constraint for constraint.

rust-fil-proofs (mirror commit 87348a7) storage-proofs-post ``fallback/{circuit,compound,vanilla,
utils}.rs``, on the gadgets the PoRep circuit uses (``stacked.por``: storage-proofs-core's
``PoRCircuit`` with insert/pick and neptune's Poseidon; ``census.por`` for counting).

**The circuit** (``FallbackPoStCircuit::synthesize``): ``sector_count`` sector blocks, each
(``Sector::synthesize``): comm_r_last, comm_c, comm_r allocated in that order, comm_r inputized,
Poseidon(comm_c, comm_r_last) (``hash2_circuit``, arity 2) equal to comm_r, then per challenge a
``PoRCircuit`` of TreeR (the leaf allocated, ``Root::Val``; root comm_r_last; private: the root is
not an input, the packed path bits are). The extendable path (``synthesize_extendable``, sectors
in chunks on separate constraint systems) gives the same constraints in the same order.

**Parameter sets** (filecoin-proofs ``constants.rs``, ``parameters.rs``; rust-filecoin-proofs-api
``registry.rs``): WindowPoSt ``sector_count = WINDOW_POST_SECTOR_COUNT`` (2 below 32 GiB, 2,349
at 32 GiB, 2,300 at 64 GiB), ``challenge_count = WINDOW_POST_CHALLENGE_COUNT = 10``; WinningPoSt
(``winning_post_setup_params``): one sector with ``WINNING_POST_CHALLENGE_COUNT = 66`` challenges
becomes ``sector_count = 66 / 1 = 66`` circuit sectors of ``challenge_count = 1`` (the same sector
66 times, challenge i in block i). Tree shape per sector size as the PoRep family has it
(``params.SETS``: 8-0-0 below 32 GiB, 8-8-0 at 32 GiB, 8-8-2 at 64 GiB).

**Public inputs** (``FallbackPoStCompound::generate_public_inputs``): per sector comm_r, then per
challenge the challenged leaf (``PoRCompound``, private: the packed index only); a partition with
fewer sectors repeats the last sector's inputs (and ``circuit`` the last public sector).
Challenge n of the sector at ``sector_index`` in the partition's proof is leaf
``u64_le(SHA-256(randomness | sector_id u64 LE | c u64 LE)[..8]) mod nodes`` with
``c = get_challenge_index(api, sector_index, challenge_count, n)``: ``sector_index *
challenge_count + n`` for api 1.0.0/1.1.0 (Winning V1, Window V1), ``n`` for 1.2.0 (Window V1_2).

**File names** (``parameter_cache.rs cache_identifier``): ``v28-proof-of-spacetime-fallback-
<Tree::display()>-<sha256(identifier)>`` with identifier ``FallbackPoSt::PublicParams{sector_size:
S, challenge_count: C, sector_count: N}`` (vanilla.rs ``ParameterSetMetadata``).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import field
from ..bellpepper import alloc_num, equal, inputize
from ..bellpepper.core import Synth
from . import census as cen
from . import stacked
from .params import NODE_SIZE, SETS as POREP_SETS

WINNING_POST_CHALLENGE_COUNT = 66
WINNING_POST_SECTOR_COUNT = 1
WINDOW_POST_CHALLENGE_COUNT = 10
#: filecoin-proofs constants.rs WINDOW_POST_SECTOR_COUNT (published sizes)
WINDOW_POST_SECTOR_COUNT = {2 << 10: 2, 8 << 20: 2, 512 << 20: 2, 32 << 30: 2349, 64 << 30: 2300}
#: the comments beside WINDOW_POST_SECTOR_COUNT in constants.rs (not asserted by a Rust test)
RUST_WINDOW_CONSTRAINTS = {32 << 30: 125_279_217, 64 << 30: 129_887_900}
VERSION = 28
SIZES = {"2k": 2 << 10, "8m": 8 << 20, "512m": 512 << 20, "32g": 32 << 30, "64g": 64 << 30}
_SIZE_NAME = {"2k": "2KiB", "8m": "8MiB", "512m": "512MiB", "32g": "32GiB", "64g": "64GiB"}


def _porep_arities(sector_size: int) -> tuple[int, int, int]:
    p = next(p for p in POREP_SETS.values() if p.sector_size == sector_size)
    return p.base_arity, p.sub_arity, p.top_arity


@dataclass(frozen=True)
class PostParams:
    """One FallbackPoSt circuit: ``sector_count`` blocks of ``challenge_count`` TreeR PoRs."""
    name: str
    kind: str                      # "winning" | "window" | "test"
    sector_size: int
    sector_count: int              # circuit sectors (the public params' sector_count)
    challenge_count: int           # challenges a circuit sector
    shape: tuple[int, int, int]    # (base, sub, top) arity, 0 = none (Tree::display)
    registered_proofs: tuple[str, ...] = ()
    api_version: str = "1.2.0"

    def __post_init__(self):
        base, sub, top = self.shape
        leaves = self.nodes // max(sub, 1) // max(top, 1)
        n = 1
        while n < leaves:
            n *= base
        if n != leaves or self.nodes * NODE_SIZE != self.sector_size:
            raise ValueError(f"{self.name}: {self.sector_size} bytes do not fit a {self.shape} tree")

    @property
    def nodes(self) -> int:
        return self.sector_size // NODE_SIZE

    @property
    def arities(self) -> tuple[int, ...]:
        """TreeR's arity per level, leaves first."""
        base, sub, top = self.shape
        leaves, depth = self.nodes // max(sub, 1) // max(top, 1), 0
        while base ** depth < leaves:
            depth += 1
        return (base,) * depth + ((sub,) if sub else ()) + ((top,) if top else ())

    @property
    def num_public(self) -> int:
        """Inputs without ONE: per sector comm_r and one per challenge."""
        return self.sector_count * (1 + self.challenge_count)

    @property
    def tree_display(self) -> str:
        return "merkletree-poseidon_hasher-" + "-".join(str(a) for a in self.shape)

    @property
    def identifier(self) -> str:
        return (f"FallbackPoSt::PublicParams{{sector_size: {self.sector_size}, challenge_count: "
                f"{self.challenge_count}, sector_count: {self.sector_count}}}")

    @property
    def file_stem(self) -> str:
        """parameters.json's name without ``.params`` / ``.vk`` / ``.meta``."""
        return (f"v{VERSION}-proof-of-spacetime-fallback-{self.tree_display}-"
                f"{hashlib.sha256(self.identifier.encode()).hexdigest()}")


def _sets() -> dict[str, PostParams]:
    out = {}
    for short, size in SIZES.items():
        shape, sz = _porep_arities(size), _SIZE_NAME[short]
        # winning_post_setup_params: 66 challenges over 1 sector -> 66 circuit sectors x 1
        sc = WINNING_POST_CHALLENGE_COUNT // WINNING_POST_SECTOR_COUNT
        out[f"winning-post-{short}"] = PostParams(
            f"winning-post-{short}", "winning", size, sc, WINNING_POST_CHALLENGE_COUNT // sc, shape,
            (f"StackedDrgWinning{sz}V1",), "1.0.0")
        out[f"window-post-{short}"] = PostParams(
            f"window-post-{short}", "window", size, WINDOW_POST_SECTOR_COUNT[size],
            WINDOW_POST_CHALLENGE_COUNT, shape,
            (f"StackedDrgWindow{sz}V1", f"StackedDrgWindow{sz}V1_2"), "1.2.0")
    return out


SETS = _sets()


def get(name: str) -> PostParams:
    try:
        return SETS[name]
    except KeyError:
        raise ValueError(f"unknown PoSt parameter set {name!r}: one of {', '.join(SETS)}") from None


def rust_test_params(shape: tuple[int, int, int], sector_count: int, challenge_count: int = 5,
                     sector_size: int | None = None) -> PostParams:
    """storage-proofs-post tests/fallback_circuit.rs: ``leaves = 64 * base tree count`` unless a
    sector size is given (the bench_cs test: 32 GiB)."""
    base, sub, top = shape
    size = sector_size or 64 * max(sub, 1) * max(top, 1) * NODE_SIZE
    return PostParams(f"fallback-test-{base}-{sub}-{top}", "test", size, sector_count,
                      challenge_count, shape)


# --- challenges and public inputs ----------------------------------------------------------------

def challenge_index(api_version: str, sector_index: int, challenge_count: int, n: int) -> int:
    """utils.rs ``get_challenge_index``."""
    if api_version in ("1.0.0", "1.1.0"):
        return sector_index * challenge_count + n
    if api_version == "1.2.0":
        return n
    raise ValueError(f"unknown api version {api_version!r}")


def leaf_challenge(prm: PostParams, randomness: bytes, sector_id: int, index: int) -> int:
    """vanilla.rs ``generate_leaf_challenge_inner``."""
    h = hashlib.sha256(randomness + sector_id.to_bytes(8, "little") + index.to_bytes(8, "little"))
    return int.from_bytes(h.digest()[:8], "little") % prm.nodes


def sector_challenges(prm: PostParams, randomness: bytes, sector_id: int, sector_index: int,
                      api_version: str | None = None) -> list[int]:
    """The leaves challenged in the circuit sector at ``sector_index`` of the partition's proof
    (``api_version``: the registered proof's, when not the set's default; WindowPoSt V1 is 1.0.0,
    V1_2 1.2.0: one parameter set, one key, two challenge rules)."""
    api = api_version or prm.api_version
    return [leaf_challenge(prm, randomness, sector_id,
                           challenge_index(api, sector_index, prm.challenge_count, n))
            for n in range(prm.challenge_count)]


def _chunk(prm: PostParams, sectors: Sequence, partition: int, whole: bool) -> list:
    """Partition ``partition``'s public sectors: ``sectors[k * sector_count:][:sector_count]`` of
    every partition's (``whole``), or ``sectors`` itself, already the partition's (what
    ``generate_single_window_post_with_vanilla`` is given: the vanilla proofs of one partition,
    their sector indices still ``partition * sector_count + i``)."""
    if partition < 0:
        return []
    if not whole:
        return list(sectors) if len(sectors) <= prm.sector_count else []
    return list(sectors[partition * prm.sector_count:(partition + 1) * prm.sector_count])


def public_inputs(prm: PostParams, randomness: bytes, sectors: Sequence[tuple[int, int]],
                  partition: int = 0, *, api_version: str | None = None, whole: bool = True) -> list[int]:
    """``generate_public_inputs`` (ONE not included): ``sectors`` the public sectors (id, comm_r)
    of every partition; partition k takes ``sectors[k * sector_count:][:sector_count]`` (or, not
    ``whole``, ``sectors`` are partition k's own) and repeats its last sector's inputs up to
    ``sector_count``."""
    if len(randomness) != 32:
        raise ValueError(f"randomness: {len(randomness)} bytes, 32 expected")
    chunk = _chunk(prm, sectors, partition, whole)
    if not chunk:
        raise ValueError(f"partition {partition}: no sectors ({len(sectors)} sectors, "
                         f"{prm.sector_count} a partition)")
    out: list[int] = []
    for i, (sid, comm_r) in enumerate(chunk):
        out.append(comm_r)
        out += sector_challenges(prm, randomness, sid, partition * prm.sector_count + i, api_version)
    per = 1 + prm.challenge_count
    while len(out) // per < prm.sector_count:
        out += out[-per:]
    return out


# --- vanilla proofs ------------------------------------------------------------------------------

@dataclass
class SectorProof:
    """One circuit sector's witness (``SectorProof`` + ``PublicSector``): its commitments as
    ints and, per challenge, the TreeR leaf and path (siblings per level, (arity - 1, 4))."""
    sector_id: int
    comm_r: int
    comm_c: int
    comm_r_last: int
    challenges: list[int]
    leafs: np.ndarray            # (C, 4)
    paths: list[np.ndarray]      # per level: (C, arity - 1, 4)


def vanilla_proof(sector, challenges: Sequence[int], sector_id: int | None = None) -> SectorProof:
    """A sealed ``synthesis.filecoin.sector.Sector``'s inclusion proofs in TreeR."""
    ch = np.asarray(challenges, dtype=np.uint64)
    return SectorProof(sector.sector_id if sector_id is None else sector_id,
                       field.from_bytes(sector.comm_r), field.from_bytes(sector.comm_c),
                       field.from_bytes(sector.comm_r_last), [int(c) for c in ch],
                       sector.tree_r.nodes(0, ch), sector.tree_r.paths(ch))


def pad_partition(proofs: Sequence[SectorProof], sector_count: int) -> list[SectorProof]:
    """A partial partition: the last sector repeated (compound.rs ``circuit``)."""
    if not proofs or len(proofs) > sector_count:
        raise ValueError(f"{len(proofs)} sector proofs for a partition of {sector_count}")
    return list(proofs) + [proofs[-1]] * (sector_count - len(proofs))


class PostProofError(ValueError):
    """A vanilla PoSt proof that does not check: one line naming partition, sector, challenge."""


def verify(prm: PostParams, randomness: bytes, sectors: Sequence[tuple[int, int]],
           proofs: Sequence[SectorProof], partition: int = 0, *, api_version: str | None = None,
           whole: bool = True) -> None:
    """vanilla.rs ``FallbackPoSt::verify`` of one partition, natively, before a proof reaches a
    prover: ``proofs`` one a public sector of the partition (before padding); each sector's id and
    comm_r those of its public sector, the challenged leaves the derived ones, every path of the
    right length, H(comm_c, comm_r_last) = comm_r and every path reaching comm_r_last. The hashes
    are batched (one native Poseidon call a tree level for every path of the partition: a 32 GiB
    partition's 23,490 paths in seconds, not minutes); the first failure is named, sector order."""
    from .trees import poseidon_groups
    chunk = _chunk(prm, sectors, partition, whole)
    if not chunk or len(proofs) != len(chunk):
        raise PostProofError(f"partition {partition}: {len(proofs)} sector proofs for "
                             f"{len(chunk)} public sectors")
    arities, C = prm.arities, prm.challenge_count

    def where(i: int, sid: int, n: int | None = None) -> str:
        # WinningPoSt: circuit sector i is challenge i of the one sector
        if prm.kind == "winning":
            return f"sector 0 (id {sid}), challenge {i}"
        return f"partition {partition}, sector {i} (id {sid})" + ("" if n is None else f", challenge {n}")

    leaves = []
    for i, ((sid, comm_r), w) in enumerate(zip(chunk, proofs)):
        if w.sector_id != sid or w.comm_r != comm_r:
            raise PostProofError(f"{where(i, sid)}: the proof is for sector {w.sector_id} with comm_r "
                                 f"{w.comm_r:#x}, the public sector's comm_r is {comm_r:#x}")
        want = sector_challenges(prm, randomness, sid, partition * prm.sector_count + i, api_version)
        if len(w.challenges) != C or len(w.paths) != len(arities) or np.shape(w.leafs) != (C, 4):
            raise PostProofError(f"{where(i, sid)}: {len(w.challenges)} challenges and {len(w.paths)} path "
                                 f"levels, {C} and {len(arities)} expected")
        for n, (got, leaf) in enumerate(zip(w.challenges, want)):
            if got != leaf:
                raise PostProofError(f"{where(i, sid, n)}: the inclusion proof is of leaf {got}, the "
                                     f"randomness and sector id {sid} challenge leaf {leaf} (another "
                                     f"randomness or sector id?)")
        for lv, a in enumerate(arities):
            if np.shape(w.paths[lv]) != (C, a - 1, 4):
                n = 0 if np.ndim(w.paths[lv]) != 3 else next(
                    (n for n in range(len(w.paths[lv])) if np.shape(w.paths[lv][n]) != (a - 1, 4)), 0)
                raise PostProofError(f"{where(i, sid, n)}, level {lv}: siblings of shape "
                                     f"{np.shape(w.paths[lv])[1:]}, {(a - 1, 4)} expected")
        leaves.append(want)
    S = len(proofs)
    # H(comm_c, comm_r_last) = comm_r, every sector in one call
    pairs = np.stack([field.vec_from_ints([w.comm_c, w.comm_r_last]) for w in proofs])
    bad = np.any(poseidon_groups(pairs) != field.vec_from_ints([c for _, c in chunk]), axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        raise PostProofError(f"{where(i, chunk[i][0])}: H(comm_c, comm_r_last) differs from comm_r "
                             f"{chunk[i][1]:#x}")
    # every path of the partition, a level at a time: children with the node inserted at its position
    h = np.concatenate([np.asarray(w.leafs, dtype=np.uint64) for w in proofs])          # (S * C, 4)
    pos = np.asarray(leaves, dtype=np.uint64).reshape(-1)
    rows = np.arange(len(h))
    for lv, a in enumerate(arities):
        sibs = np.concatenate([np.asarray(w.paths[lv], dtype=np.uint64) for w in proofs])  # (S * C, a - 1, 4)
        p = (pos % a).astype(np.int64)
        j = np.arange(a)[None, :]
        src = np.clip(np.where(j < p[:, None], j, j - 1), 0, a - 2)
        children = np.take_along_axis(sibs, src[:, :, None], axis=1)
        children[rows, p] = h
        h = poseidon_groups(np.ascontiguousarray(children))
        pos //= a
    roots = field.vec_from_ints([w.comm_r_last for w in proofs])
    bad = np.any(h.reshape(S, C, 4) != roots[:, None, :], axis=2)
    if bad.any():
        i, n = (int(x) for x in np.argwhere(bad)[0])
        sid = chunk[i][0]
        raise PostProofError(f"{where(i, sid, n)} (leaf {leaves[i][n]}): the path does not reach "
                             f"comm_r_last {proofs[i].comm_r_last:#x}")


@dataclass
class SectorBatch:
    """B circuit sectors' witnesses stacked (one batch row a sector): what the gadget reads."""
    comm_r: np.ndarray           # (B, 4)
    comm_c: np.ndarray
    comm_r_last: np.ndarray
    challenges: np.ndarray       # (B, C) uint64
    leafs: np.ndarray            # (B, C, 4)
    paths: list[np.ndarray]      # per level: (B, C, arity - 1, 4)


def stack(prm: PostParams, proofs: Sequence[SectorProof]) -> SectorBatch:
    for k, w in enumerate(proofs):
        if len(w.challenges) != prm.challenge_count or len(w.paths) != len(prm.arities):
            raise ValueError(f"sector proof {k} (sector {w.sector_id}): {len(w.challenges)} challenges "
                             f"and {len(w.paths)} path levels, {prm.challenge_count} and "
                             f"{len(prm.arities)} expected")
    fe = lambda name: field.vec_from_ints([getattr(w, name) for w in proofs])  # noqa: E731
    return SectorBatch(fe("comm_r"), fe("comm_c"), fe("comm_r_last"),
                       np.array([w.challenges for w in proofs], dtype=np.uint64),
                       np.stack([w.leafs for w in proofs]),
                       [np.stack([w.paths[lv] for w in proofs]) for lv in range(len(prm.arities))])


# --- the circuit ---------------------------------------------------------------------------------

def sector_gadget(s: Synth, prm: PostParams, w: SectorBatch | None) -> None:
    """``Sector::synthesize`` (values mode: ``w`` a batch of sectors, one row each)."""
    comp = s.computing
    comm_r_last = alloc_num(s, (lambda: w.comm_r_last) if comp else None)
    comm_c = alloc_num(s, (lambda: w.comm_c) if comp else None)
    comm_r = alloc_num(s, (lambda: w.comm_r) if comp else None)
    inputize(s, comm_r)
    h = stacked.poseidon(s, [comm_c, comm_r_last])
    equal(s, comm_r, h, "enforce_comm_c_comm_r_last_hash_comm_r")
    arities = prm.arities
    for i in range(prm.challenge_count):
        leaf = alloc_num(s, (lambda i=i: np.ascontiguousarray(w.leafs[:, i])) if comp else None)
        stacked.por(s, leaf, comm_r_last, arities,
                    lambda i=i: stacked._positions(w.challenges[:, i], arities),
                    lambda lv, i=i: w.paths[lv][:, i], sha=False)


def synthesize(s: Synth, prm: PostParams, proofs: Sequence[SectorProof] | None) -> None:
    """``FallbackPoStCircuit::synthesize`` over a partition's (padded) sector proofs, sector by
    sector (batch 1: shape and values at once, for tests; ``witness`` is the batched path)."""
    if s.computing and len(proofs) != prm.sector_count:
        raise ValueError(f"{len(proofs)} sector proofs, {prm.sector_count} expected "
                         f"(pad_partition repeats the last)")
    for k in range(prm.sector_count):
        sector_gadget(s, prm, stack(prm, [proofs[k]]) if s.computing else None)


def witness(prm: PostParams, proofs: Sequence[SectorProof]):
    """z of a partition (``assignment.Compact``) in ``build``'s numbering: every sector block in
    one values-mode batch (a row a sector), inputs then aux, block-major."""
    from .. import assignment
    if len(proofs) != prm.sector_count:
        raise ValueError(f"{len(proofs)} sector proofs, {prm.sector_count} expected "
                         f"(pad_partition repeats the last)")
    B = prm.sector_count
    s = Synth(batch=B, blocks=True)
    sector_gadget(s, prm, stack(prm, proofs))
    pub = np.stack(s.public, axis=1).reshape(-1, 4)                 # (B * (1 + C), 4)
    kinds, fes, _ = assignment.from_values(s.values, B)
    pre = assignment.from_vec(np.concatenate([field.vec_from_ints([1]), pub]))
    return assignment.Compact(np.concatenate([pre.kinds, kinds.reshape(-1)]),
                              np.concatenate([pre.fes, fes]))


# --- matrices ------------------------------------------------------------------------------------

def build(prm: PostParams | str):
    """The partition's matrices as a ``CompactR1CS``: one sector block recorded (ordered
    ``TemplatingCS``: bellperson's row order) and replicated ``sector_count`` times. Blocks share
    no variable: block k's template columns are ONE, its 1 + C inputs (global 1 + k (1 + C)) and its
    own aux (global 1 + inputs + k * block aux), as bellperson (and ``synthesize_extendable``'s
    chunks, extended in order) numbers them."""
    from ..compact import (CompactMatrix, CompactR1CS, Replicated, TemplatingCS, compact_matrices,
                           expand_segments)
    prm = get(prm) if isinstance(prm, str) else prm
    cs = TemplatingCS(ordered=True)
    sector_gadget(Synth(cs=cs), prm, None)
    per = 1 + prm.challenge_count
    if cs.num_public != per:
        raise AssertionError(f"a sector block has {cs.num_public} inputs, {per} expected")
    nvar = 1 + per + cs.num_aux
    segments = np.array([[0, 1, 0, 0], [1, 1 + per, 1, per],
                         [1 + per, nvar, 1 + prm.num_public, cs.num_aux]], dtype=np.int64)
    base, stride = expand_segments(segments, nvar)
    empty = lambda: CompactMatrix(np.zeros(1, np.int64), np.zeros(0, np.int32),  # noqa: E731
                                  np.zeros(0, np.int32), np.zeros((0, 4), np.uint64))
    mats = [Replicated(empty(), m, base, stride, prm.sector_count) for m in compact_matrices(cs)]
    return CompactR1CS(prm.num_public, prm.sector_count * cs.num_aux, *mats, segments=segments)


# --- counts ----------------------------------------------------------------------------------------

@dataclass
class PostCensus:
    name: str
    synthesized: cen.Tally        # what FallbackPoStCircuit::synthesize allocates (ONE in inputs)
    sector: cen.Tally             # one sector block

    @property
    def with_input_rows(self) -> cen.Tally:
        return self.synthesized.with_input_rows()


def census(prm: PostParams | str) -> PostCensus:
    """Count one partition by the PoRep census's replay (``census.por``, ``poseidon_hash``): the
    sector header (comm_r = H(comm_c, comm_r_last)) and one PoR counted, a sector block = header +
    ``challenge_count`` PoRs, the partition ``sector_count`` blocks (every PoR and every block has
    the same shape)."""
    prm = get(prm) if isinstance(prm, str) else prm
    cs = cen.CountCS()
    comm_r_last, comm_c, comm_r = cen.alloc_num(cs), cen.alloc_num(cs), cen.alloc_num(cs)
    cen.inputize(cs, comm_r)
    cen.equal(cs, comm_r, cen.poseidon_hash(cs, [comm_c, comm_r_last]))
    head = cs.total.minus(cen.Tally(inputs=1))
    before = cs.total.copy()
    cen.por(cs, cen.alloc_num(cs), comm_r_last, prm.arities, sha=False)
    one = head.copy()
    one.add(cs.total.minus(before), prm.challenge_count)
    total = cen.Tally(inputs=1)
    total.add(one, prm.sector_count)
    return PostCensus(prm.name, total, one)
