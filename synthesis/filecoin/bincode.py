"""A bounded bincode reader for the vanilla proofs Curio sends cuzk (issue 37, item 2).

Curio (``lib/ffi/cuzk_funcs.go``) sends, per WindowPoSt / WinningPoSt sector, the bytes of
filecoin-proofs' ``FallbackPoStSectorProof<Tree>`` and, per SnapDeals partition, those of
storage-proofs-update's ``PartitionProof<TreeR>``, both ``bincode::serialize``d (bincode 1.x
defaults: little-endian, fixed-width integers, ``Vec`` length a u64, ``usize`` a u64, enum variant
a u32, ``[u8; 32]`` / a hasher ``Domain`` 32 raw bytes, ``PhantomData`` nothing).
The bytes are made by rust-filecoin-proofs-api: ``post.rs generate_single_vanilla_proof_inner``
(``bincode::serialize(&vanilla_proof)``, read back with ``bincode::deserialize`` in
``generate_winning_post_with_vanilla`` / ``generate_single_window_post_with_vanilla``) and
``update.rs`` (``PartitionProofBytes(bincode::serialize(&proof))``).

Layouts (rust-fil-proofs mirror commit 87348a7):

* ``FallbackPoStSectorProof`` (filecoin-proofs ``types/mod.rs``): ``sector_id: SectorId`` (u64),
  ``comm_r: Domain``, ``vanilla_proof: fallback::Proof { sectors: Vec<SectorProof> }``
  (storage-proofs-post ``fallback/vanilla.rs``; ``post_util.rs generate_single_vanilla_proof``
  makes exactly one sector), ``SectorProof { inclusion_proofs: Vec<MerkleProof>, comm_c,
  comm_r_last }``.
* ``MerkleProof`` (storage-proofs-core ``merkle/proof.rs``): ``{ data: ProofData }``, ``enum
  ProofData { Single(SingleProof) = 0, Sub(SubProof) = 1, Top(TopProof) = 2 }``;
  ``SingleProof { root, leaf, path }``, ``SubProof { base_proof, sub_proof, root, leaf }``,
  ``TopProof { base_proof, sub_proof, top_proof, root, leaf }``; ``InclusionPath { path:
  Vec<PathElement> }``, ``PathElement { hashes: Vec<Domain>, index: usize }`` (arity - 1 hashes,
  the node's position in its group).
* ``PartitionProof`` (storage-proofs-update ``vanilla.rs``): ``comm_c: Domain, apex_leafs:
  Vec<Domain>, challenge_proofs: Vec<ChallengeProof { proof_r_old, proof_d_new, proof_r_new }>``
  (TreeR proofs of the sector's shape, TreeD a binary SHA-256 tree of the sector's nodes).

Every length is checked against the exact count the registered proof and sector size give
**before** anything is allocated; the tree shape fixes the ``ProofData`` variant, the number of
path elements and of hashes; Poseidon domains must be canonical field elements; trailing bytes are
refused (bincode's own ``deserialize`` would allow them). Errors are one line naming the sector or
partition, the field and the byte offset.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import field
from . import post as fpost

VARIANTS = ("Single", "Sub", "Top")


class BincodeError(ValueError):
    """One line: where (sector / partition), the field, the byte offset, what is wrong."""

    def __init__(self, where: str, fld: str, offset: int, message: str):
        self.where, self.field, self.offset = where, fld, offset
        super().__init__(f"{where}: {fld} at byte {offset}: {message}")


class _Reader:
    def __init__(self, data: bytes, where: str):
        self.b, self.o, self.where = bytes(data), 0, where

    def fail(self, fld: str, message: str, offset: int | None = None):
        raise BincodeError(self.where, fld, self.o if offset is None else offset, message)

    def take(self, n: int, fld: str) -> bytes:
        if len(self.b) - self.o < n:
            self.fail(fld, f"truncated: {n} bytes needed, {len(self.b) - self.o} left")
        out = self.b[self.o:self.o + n]
        self.o += n
        return out

    def u32(self, fld: str) -> int:
        return struct.unpack("<I", self.take(4, fld))[0]

    def u64(self, fld: str) -> int:
        return struct.unpack("<Q", self.take(8, fld))[0]

    def length(self, fld: str, want: int, item_bytes: int) -> int:
        """A Vec length, equal to ``want``, refused before any item is read or allocated."""
        at = self.o
        n = self.u64(fld + " length")
        if n != want:
            self.fail(fld + " length", f"{n} items, {want} expected", at)
        if n * item_bytes > len(self.b) - self.o:
            self.fail(fld, f"truncated: {n} items need at least {n * item_bytes} bytes, "
                      f"{len(self.b) - self.o} left")
        return n

    def domain(self, fld: str, *, canonical: bool = True) -> bytes:
        at = self.o
        d = self.take(32, fld)
        if canonical and int.from_bytes(d, "little") >= field.MODULUS:
            self.fail(fld, "not a canonical field element (not below the Fr modulus)", at)
        return d

    def domains(self, n: int, fld: str, *, canonical: bool = True) -> bytes:
        """``n`` domains in one read (``fld[j]`` named only when one is refused)."""
        at = self.o
        raw = self.take(32 * n, fld)
        if canonical:
            for j in range(n):
                if int.from_bytes(raw[32 * j:32 * j + 32], "little") >= field.MODULUS:
                    self.fail(f"{fld}[{j}]", "not a canonical field element (not below the Fr "
                              "modulus)", at + 32 * j)
        return raw

    def end(self) -> None:
        if self.o != len(self.b):
            self.fail("end", f"{len(self.b) - self.o} trailing bytes")


@dataclass
class Path:
    """One decoded ``MerkleProof``: leaf, root, per level the siblings (arity - 1, 4) and the
    node's position; ``challenge`` the leaf index those positions spell."""
    root: bytes
    leaf: bytes
    siblings: list[np.ndarray]
    positions: list[int]
    challenge: int


def _dom_array(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 4).astype(np.uint64)


def _merkle_proof(r: _Reader, fld: str, arities: Sequence[int], shape: tuple[int, int, int],
                  *, canonical: bool = True) -> Path:
    base, sub, top = shape
    want = 2 if top else 1 if sub else 0
    at = r.o
    v = r.u32(fld + ".data variant")
    if v != want:
        r.fail(fld + ".data variant", f"variant {v} ({VARIANTS[v] if v < 3 else 'unknown'}), "
               f"{VARIANTS[want]} expected for a {base}-{sub}-{top} tree", at)
    n_base = len(arities) - (1 if sub else 0) - (1 if top else 0)
    groups = [("path" if want == 0 else "base_proof", arities[:n_base])]
    if sub:
        groups.append(("sub_proof", arities[n_base:n_base + 1]))
    if top:
        groups.append(("top_proof", arities[n_base + 1:]))
    root = leaf = None
    if want == 0:
        root, leaf = r.domain(fld + ".root", canonical=canonical), r.domain(fld + ".leaf", canonical=canonical)
    sibs, pos = [], []
    for name, ars in groups:
        r.length(f"{fld}.{name}.path", len(ars), 8 + 32 * (min(ars) - 1) + 8)
        for lv, a in enumerate(ars):
            e = f"{fld}.{name}.path[{lv}]"
            r.length(e + ".hashes", a - 1, 32)
            hs = r.domains(a - 1, e + ".hashes", canonical=canonical)
            at = r.o
            idx = r.u64(e + ".index")
            if idx >= a:
                r.fail(e + ".index", f"{idx}, not below the arity {a}", at)
            sibs.append(_dom_array(hs))
            pos.append(idx)
    if want:
        root, leaf = r.domain(fld + ".root", canonical=canonical), r.domain(fld + ".leaf", canonical=canonical)
    c, mul = 0, 1
    for a, p in zip(arities, pos):
        c, mul = c + p * mul, mul * a
    return Path(root, leaf, sibs, pos, c)


# --- FallbackPoSt ---------------------------------------------------------------------------

@dataclass
class FallbackPoStSectorProof:
    sector_id: int
    comm_r: bytes
    comm_c: bytes
    comm_r_last: bytes
    inclusion_proofs: list[Path]


def sector_challenge_count(prm: fpost.PostParams) -> int:
    """Inclusion proofs in one sector's vanilla proof: WinningPoSt's 66 (the circuit spreads them
    over 66 one-challenge sectors), WindowPoSt's 10."""
    return prm.sector_count * prm.challenge_count if prm.kind == "winning" else prm.challenge_count


def read_post_sector_proof(prm: fpost.PostParams, data: bytes, sector: int | str = "?") -> FallbackPoStSectorProof:
    """Decode one ``FallbackPoStSectorProof`` (``sector``: its index in the request, for errors)."""
    r = _Reader(data, f"sector {sector}")
    sid = r.u64("sector_id")
    r.where = f"sector {sector} (id {sid})"
    comm_r = r.domain("comm_r")
    r.length("vanilla_proof.sectors", 1, 8 + 64)
    n = sector_challenge_count(prm)
    r.length("vanilla_proof.sectors[0].inclusion_proofs", n, 4 + 64)
    paths = [_merkle_proof(r, f"vanilla_proof.sectors[0].inclusion_proofs[{i}]", prm.arities, prm.shape)
             for i in range(n)]
    comm_c = r.domain("vanilla_proof.sectors[0].comm_c")
    comm_r_last = r.domain("vanilla_proof.sectors[0].comm_r_last")
    r.end()
    for i, p in enumerate(paths):
        if p.root != comm_r_last:
            raise fpost.PostProofError(f"sector {sector} (id {sid}), challenge {i}: the inclusion "
                                       f"proof's root is not comm_r_last")
    return FallbackPoStSectorProof(sid, comm_r, comm_c, comm_r_last, paths)


def to_post_proofs(prm: fpost.PostParams, d: FallbackPoStSectorProof) -> list[fpost.SectorProof]:
    """What ``post.verify`` / ``post.witness`` take: one ``SectorProof`` for a WindowPoSt sector,
    66 one-challenge ones for WinningPoSt's sector."""
    ints = lambda b: int.from_bytes(b, "little")  # noqa: E731
    levels = len(prm.arities)

    def one(paths: list[Path]) -> fpost.SectorProof:
        return fpost.SectorProof(
            d.sector_id, ints(d.comm_r), ints(d.comm_c), ints(d.comm_r_last),
            [p.challenge for p in paths], np.stack([_dom_array(p.leaf)[0] for p in paths]),
            [np.stack([p.siblings[lv] for p in paths]) for lv in range(levels)])
    if prm.kind == "winning":
        return [one([p]) for p in d.inclusion_proofs]
    return [one(d.inclusion_proofs)]


# --- write (the Rust serde layout; tests build Curio's bytes with it) -------------------------

def _u64(x: int) -> bytes:
    return struct.pack("<Q", x)


def write_merkle_proof(shape: tuple[int, int, int], arities: Sequence[int], leaf: bytes, root: bytes,
                       siblings: Sequence[np.ndarray], positions: Sequence[int]) -> bytes:
    base, sub, top = shape
    v = 2 if top else 1 if sub else 0
    n_base = len(arities) - (1 if sub else 0) - (1 if top else 0)
    bounds = [(0, n_base)] + ([(n_base, n_base + 1)] if sub else []) + ([(n_base + 1, len(arities))] if top else [])
    paths = []
    for lo, hi in bounds:
        out = [_u64(hi - lo)]
        for lv in range(lo, hi):
            s = np.ascontiguousarray(siblings[lv], dtype="<u8").reshape(-1, 4)
            out += [_u64(len(s)), s.tobytes(), _u64(int(positions[lv]))]
        paths.append(b"".join(out))
    body = (root + leaf + paths[0]) if v == 0 else (b"".join(paths) + root + leaf)
    return struct.pack("<I", v) + body


def write_post_sector_proof(prm: fpost.PostParams, proofs: Sequence[fpost.SectorProof]) -> bytes:
    """The bytes ``bincode::serialize(&FallbackPoStSectorProof)`` gives for ``proofs`` (one
    WindowPoSt sector proof, or WinningPoSt's 66 one-challenge ones of the same sector)."""
    w = proofs[0]
    fb = field.to_bytes
    incl = []
    for sp in proofs:
        for n, c in enumerate(sp.challenges):
            pos, x = [], int(c)
            for a in prm.arities:
                pos.append(x % a)
                x //= a
            leaf = np.ascontiguousarray(sp.leafs[n], dtype="<u8").tobytes()
            incl.append(write_merkle_proof(prm.shape, prm.arities, leaf, fb(sp.comm_r_last),
                                           [sp.paths[lv][n] for lv in range(len(prm.arities))], pos))
    return (_u64(w.sector_id) + fb(w.comm_r) + _u64(1) + _u64(len(incl)) + b"".join(incl)
            + fb(w.comm_c) + fb(w.comm_r_last))


# --- SnapDeals update -------------------------------------------------------------------------

@dataclass
class UpdatePartitionProof:
    comm_c: bytes
    apex_leafs: np.ndarray                      # (A, 4)
    challenge_proofs: list[tuple[Path, Path, Path]]   # (proof_r_old, proof_d_new, proof_r_new)


def tree_d_arities(prm) -> tuple[int, ...]:
    return (2,) * (prm.sector_nodes.bit_length() - 1)


def read_update_partition_proof(prm, data: bytes, partition: int | str = "?") -> UpdatePartitionProof:
    """Decode one storage-proofs-update ``PartitionProof`` (``prm``: ``update.UpdateParams``).
    EmptySectorUpdate: TreeD is SHA-256 (its domains not range-checked), ``apex_leafs`` present;
    the Poseidon variant (``poseidon/vanilla.rs``): no ``apex_leafs``, proof_d_new a TreeR-shaped
    Poseidon proof."""
    r = _Reader(data, f"partition {partition}")
    comm_c = r.domain("comm_c")
    apex = b""
    if not prm.poseidon:
        n_apex = r.length("apex_leafs", prm.apex_leaf_count, 32)
        apex = r.domains(n_apex, "apex_leafs", canonical=False)
    n = r.length("challenge_proofs", prm.challenge_count, 3 * (4 + 64))
    ar = prm.tree_r_arities
    ad, sd = (ar, prm.shape) if prm.poseidon else (tree_d_arities(prm), (2, 0, 0))
    cps = []
    for i in range(n):
        f = f"challenge_proofs[{i}]"
        cps.append((_merkle_proof(r, f + ".proof_r_old", ar, prm.shape),
                    _merkle_proof(r, f + ".proof_d_new", ad, sd, canonical=prm.poseidon),
                    _merkle_proof(r, f + ".proof_r_new", ar, prm.shape)))
    r.end()
    return UpdatePartitionProof(comm_c, _dom_array(apex), cps)


def write_update_partition_proof(prm, comm_c: bytes, apex_leafs: bytes,
                                 challenge_proofs: Sequence[tuple[bytes, bytes, bytes]]) -> bytes:
    """``bincode::serialize(&PartitionProof)`` from already-written MerkleProofs (no
    ``apex_leafs`` field for the Poseidon variant)."""
    apex = b"" if prm.poseidon else _u64(len(apex_leafs) // 32) + apex_leafs
    return (comm_c + apex + _u64(len(challenge_proofs))
            + b"".join(a + b + c for a, b, c in challenge_proofs))
