"""SnapDeals for small sectors: the update "sealer" (encode), the vanilla partition proofs and
their native verification, as storage-proofs-update builds and checks them.

rust-fil-proofs (mirror commit 87348a7) ``storage-proofs-update/src/vanilla.rs``:

* **encode** (``EmptySectorUpdate::encode_into``): TreeD over the new data (binary SHA-256;
  the Poseidon variant a Poseidon tree of TreeR's shape), ``comm_d_new`` its root;
  ``comm_r_old = H(comm_c, comm_r_last_old)``; ``phi = H_gen(comm_d_new, comm_r_old)``; node i of
  the new replica = sector key node i + data node i * ``rho(phi, i >> (bits - h))``
  (``Rhos``); TreeR-new (Poseidon, the sector's shape) over it; ``comm_r_new = H(comm_c,
  root_r_new)``. A CC sector's sector key is its replica (TreeR's leaves).
* **prove** (``prove_inner``): partition k's ``apex_leafs`` (TreeD's row of
  ``partition_count * apex_leaf_count`` nodes, this partition's slice), per challenge
  (``Challenges::new``) ``ChallengeProof { proof_r_old, proof_d_new, proof_r_new }``.
* **verify** (``EmptySectorUpdate::verify``): ``verify_partition`` below, every check of the Rust
  plus the circuit's own asserts (one partition path, leaves below the field modulus), each
  failure one line naming the partition, the challenge, the proof and the level; on success the
  partition's ``update.PartitionWitness``.

The proofs are ``bincode.UpdatePartitionProof`` (what ``bincode.read_update_partition_proof``
decodes from Curio's bytes); ``to_bytes`` writes them as ``bincode::serialize`` does.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import field
from ..bellpepper.neptune_params import hash_ints
from . import bincode
from . import update as upd
from .trees import Tree, root_from_path, sha254_pairs


class UpdateProofError(ValueError):
    """A vanilla update proof that does not check: one line naming partition, challenge, level."""


def _int(v) -> int:
    return field.vec_to_ints(np.asarray(v, np.uint64).reshape(1, 4))[0]


def _bytes(v) -> bytes:
    return np.ascontiguousarray(v, dtype="<u8").reshape(4).tobytes()


def tree_d_arities(prm: upd.UpdateParams) -> tuple[int, ...]:
    return prm.tree_r_arities if prm.poseidon else (2,) * prm.challenge_bit_len


@dataclass
class UpdatedSector:
    """A sector after ``encode``: the sector key, the new data and replica, the three trees."""
    prm: upd.UpdateParams
    h: int
    comm_c: int
    sector_key: np.ndarray     # (n, 4) the old replica
    data: np.ndarray           # (n, 4) the new data's fr32 nodes
    replica: np.ndarray        # (n, 4) the new replica
    tree_r_old: Tree
    tree_d_new: Tree
    tree_r_new: Tree

    @property
    def comm_r_old(self) -> int:
        return hash_ints([self.comm_c, self.tree_r_old.root])

    @property
    def comm_d_new(self) -> int:
        return self.tree_d_new.root

    @property
    def comm_r_new(self) -> int:
        return hash_ints([self.comm_c, self.tree_r_new.root])

    def public(self, k: int) -> dict:
        return {"k": k, "h": self.h, "comm_r_old": self.comm_r_old,
                "comm_d_new": self.comm_d_new, "comm_r_new": self.comm_r_new}


def encode(prm: upd.UpdateParams, sector_key: np.ndarray, comm_c: int, data: np.ndarray,
           h: int | None = None) -> UpdatedSector:
    """``encode_into`` for a sector held in memory (small sizes): ``sector_key`` and ``data``
    (n, 4) Fr nodes (``data`` fr32-padded, every node below 2^254)."""
    from arith import native
    n = prm.sector_nodes
    sector_key = np.ascontiguousarray(sector_key, dtype=np.uint64)
    data = np.ascontiguousarray(data, dtype=np.uint64)
    if sector_key.shape != (n, 4) or data.shape != (n, 4):
        raise ValueError(f"{prm.name}: sector key {sector_key.shape} and data {data.shape}, "
                         f"({n}, 4) each expected")
    h = upd.h_default(prm) if h is None else h
    upd.h_select(prm, h)                                    # refuses an h of another size
    nodes = np.arange(n, dtype=np.uint64)
    tree_r_old = Tree.build(prm.tree_r_arities, nodes, sector_key, sha=False)
    tree_d = Tree.build(tree_d_arities(prm), nodes, data, sha=not prm.poseidon)
    phi = upd.phi(tree_d.root, hash_ints([comm_c, tree_r_old.root]))
    shr = prm.challenge_bit_len - h
    rhos = field.vec_from_ints([upd.rho(phi, high) for high in range(1 << h)])
    replica = native.add(sector_key, native.mul(data, rhos[(nodes >> np.uint64(shr)).astype(np.int64)]))
    tree_r_new = Tree.build(prm.tree_r_arities, nodes, replica, sha=False)
    return UpdatedSector(prm, h, comm_c, sector_key, data, replica, tree_r_old, tree_d, tree_r_new)


def update_sector(prm: upd.UpdateParams, sealed, data: bytes, h: int | None = None) -> UpdatedSector:
    """Update a sealed ``sector.Sector`` (a CC sector: its replica is the sector key) with
    ``data`` (unpadded piece bytes, fr32-padded here)."""
    from .sector import fr32_pad, vec
    if sealed.prm.sector_size != prm.sector_size or sealed.benchmark:
        raise ValueError(f"{prm.name} updates a real sealed {prm.sector_size}-byte sector")
    return encode(prm, sealed.tree_r.values[0], field.from_bytes(sealed.comm_c),
                  vec(fr32_pad(data, prm.sector_size)), h)


def _merkle(tree: Tree, c: int) -> bincode.Path:
    path = tree.path(c)
    return bincode.Path(_bytes(tree.root_vec), _bytes(tree.node(0, c)),
                        [np.asarray(s, np.uint64) for s, _ in path], [p for _, p in path], c)


def partition_proof(u: UpdatedSector, k: int) -> bincode.UpdatePartitionProof:
    """``prove_inner`` for partition k."""
    prm = u.prm
    cs = upd.challenges(prm, u.comm_r_new, k)
    apex = np.zeros((0, 4), np.uint64)
    if not prm.poseidon:
        height = prm.challenge_bit_len - prm.partition_bit_len - prm.apex_leaf_bit_len
        row = np.arange(k * prm.apex_leaf_count, (k + 1) * prm.apex_leaf_count, dtype=np.uint64)
        apex = u.tree_d_new.nodes(height, row)
    proofs = [(_merkle(u.tree_r_old, c), _merkle(u.tree_d_new, c), _merkle(u.tree_r_new, c))
              for c in cs]
    return bincode.UpdatePartitionProof(field.to_bytes(u.comm_c), apex, proofs)


def to_bytes(prm: upd.UpdateParams, pp: bincode.UpdatePartitionProof) -> bytes:
    """``bincode::serialize(&PartitionProof)``."""
    ar, ad = prm.tree_r_arities, tree_d_arities(prm)
    sd = prm.shape if prm.poseidon else (2, 0, 0)

    def one(p, arities, shape):
        return bincode.write_merkle_proof(shape, arities, p.leaf, p.root, p.siblings, p.positions)
    cps = [(one(a, ar, prm.shape), one(d, ad, sd), one(b, ar, prm.shape))
           for a, d, b in pp.challenge_proofs]
    return bincode.write_update_partition_proof(prm, pp.comm_c, np.ascontiguousarray(
        pp.apex_leafs, dtype="<u8").tobytes(), cps)


def _below_modulus(where: str, name: str, raw: bytes) -> int:
    x = int.from_bytes(raw, "little")
    if x >= field.MODULUS:
        raise UpdateProofError(f"{where}: {name} is not below the BLS12-381 scalar field modulus")
    return x


def verify_partition(prm: upd.UpdateParams, k: int, h: int, comm_r_old: int, comm_d_new: int,
                     comm_r_new: int, pp: bincode.UpdatePartitionProof) -> upd.PartitionWitness:
    """``EmptySectorUpdate::verify`` of partition k, natively, before the proof reaches a prover
    (the Poseidon variant: ``poseidon/vanilla.rs``, no apex tree). Returns the circuit's witness."""
    where = f"partition {k}"
    if not 0 <= k < prm.partition_count:
        raise UpdateProofError(f"{where}: not below the {prm.partition_count} partitions of {prm.name}")
    if h not in prm.hs:
        raise UpdateProofError(f"{where}: h = {h} is not one of {prm.hs} for {prm.name}")
    if len(pp.apex_leafs) != prm.apex_leaf_count or len(pp.challenge_proofs) != prm.challenge_count:
        raise UpdateProofError(f"{where}: {len(pp.apex_leafs)} apex leafs and "
                               f"{len(pp.challenge_proofs)} challenge proofs, {prm.apex_leaf_count} "
                               f"and {prm.challenge_count} expected")
    comm_c = _below_modulus(where, "comm_c", pp.comm_c)
    root_r_old = _below_modulus(where, "challenge 0 proof_r_old root", pp.challenge_proofs[0][0].root)
    root_r_new = _below_modulus(where, "challenge 0 proof_r_new root", pp.challenge_proofs[0][2].root)
    if hash_ints([comm_c, root_r_old]) != comm_r_old:
        raise UpdateProofError(f"{where}: H(comm_c, root_r_old) differs from comm_r_old {comm_r_old:#x}")
    if hash_ints([comm_c, root_r_new]) != comm_r_new:
        raise UpdateProofError(f"{where}: H(comm_c, root_r_new) differs from comm_r_new {comm_r_new:#x}")
    phi = upd.phi(comm_d_new, comm_r_old)
    apex_rows = [np.asarray(pp.apex_leafs, np.uint64).reshape(-1, 4)]
    for _ in range(prm.apex_leaf_bit_len):
        prev = apex_rows[-1]
        apex_rows.append(sha254_pairs(prev.reshape(-1, 2, 4)))
    apex_height = prm.challenge_bit_len - prm.partition_bit_len - prm.apex_leaf_bit_len
    roots = {"proof_r_old": root_r_old, "proof_d_new": comm_d_new, "proof_r_new": root_r_new}
    arities = {"proof_r_old": prm.tree_r_arities, "proof_d_new": tree_d_arities(prm),
               "proof_r_new": prm.tree_r_arities}
    shr = prm.challenge_bit_len - h
    out, part_path = [], None
    for i, (c, proofs) in enumerate(zip(upd.challenges(prm, comm_r_new, k), pp.challenge_proofs)):
        at = f"{where}, challenge {i} (node {c})"
        leaves = {}
        for name, p in zip(("proof_r_old", "proof_d_new", "proof_r_new"), proofs):
            ars = arities[name]
            if len(p.siblings) != len(ars) or len(p.positions) != len(ars):
                raise UpdateProofError(f"{at}, {name}: {len(p.siblings)} levels, {len(ars)} expected")
            pos = c
            for lv, a in enumerate(ars):
                if np.asarray(p.siblings[lv]).shape != (a - 1, 4):
                    raise UpdateProofError(f"{at}, {name}, level {lv}: {len(p.siblings[lv])} "
                                           f"siblings, {a - 1} expected")
                if p.positions[lv] != pos % a:
                    raise UpdateProofError(f"{at}, {name}, level {lv}: index {p.positions[lv]}, "
                                           f"the challenge's is {pos % a}")
                pos //= a
            root = _below_modulus(at, f"{name} root", p.root)
            if root != roots[name]:
                raise UpdateProofError(f"{at}, {name}: root {root:#x}, {roots[name]:#x} expected")
            leaf = _below_modulus(at, f"{name} leaf", p.leaf)
            sha = name == "proof_d_new" and not prm.poseidon
            got = root_from_path(np.frombuffer(p.leaf, "<u8").astype(np.uint64),
                                 list(zip(p.siblings, p.positions)), sha=sha)
            if _int(got) != root:
                raise UpdateProofError(f"{at}, {name}: the path does not reach its root {root:#x}")
            leaves[name] = leaf
        want = (leaves["proof_r_old"] + leaves["proof_d_new"] * upd.rho(phi, c >> shr)) % field.MODULUS
        if leaves["proof_r_new"] != want:
            raise UpdateProofError(f"{at}: leaf_r_new is not leaf_r_old + leaf_d_new * rho "
                                   f"(rho of high bits {c >> shr})")
        d = proofs[1]
        if not prm.poseidon:
            for j in range(prm.apex_leaf_bit_len):
                sib = np.asarray(d.siblings[apex_height + j], np.uint64).reshape(4)
                if not (apex_rows[j] == sib).all(axis=1).any():
                    raise UpdateProofError(f"{at}, proof_d_new, level {apex_height + j}: the "
                                           f"sibling is not in the apex tree's row {j}")
            upper = [np.asarray(s, np.uint64) for s in d.siblings[prm.challenge_bit_len - prm.partition_bit_len:]]
            if part_path is None:
                part_path = upper
            elif not all(np.array_equal(a, b) for a, b in zip(part_path, upper)):
                raise UpdateProofError(f"{at}, proof_d_new: its partition path differs from "
                                       f"challenge 0's")
        out.append(upd.ChallengeWitness(c, leaves["proof_r_old"], leaves["proof_d_new"],
                                        leaves["proof_r_new"], list(proofs[0].siblings),
                                        list(d.siblings), list(proofs[2].siblings)))
    return upd.PartitionWitness(k, h, comm_r_old, comm_d_new, comm_r_new, comm_c, root_r_old,
                                root_r_new, field.vec_to_ints(np.asarray(pp.apex_leafs, np.uint64)
                                                              .reshape(-1, 4)) if len(pp.apex_leafs) else [],
                                out)
