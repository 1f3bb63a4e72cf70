"""One partition's vanilla proofs as arrays (``PartitionVanilla``) and their checks.

fccircuit's witness synthesis reads only ``PartitionVanilla`` (never the JSON). Batch row b is
challenge b of the partition; Fr values are synthesis.field's (n, 4) uint64 vector form (the
32-byte little-endian repr of a domain viewed as four u64). Tree paths are lists with one array
per level from the leaves: TreeD's (B, depth_d, 4) holds the single sibling of each binary
level; TreeC's and TreeR's level l is (B, arity_l - 1, 4), the siblings in child order without
the node's own position (which follows from the node index and the arities: position_l =
(node // prod(arities below l)) % arity_l). Parent openings carry a parent axis P.

The ``given_*`` fields are what the document claims (paths' positions, roots, labeling and
encoding parents, column indices); ``check_partition`` compares them with what they must be.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import field
from ..bellpepper.neptune import hash_native
from .document import C1Document, FilecoinC1Error, MerkleProof
from .graph import Graph, label_parent_order
from .params import DRG_PARENTS, EXP_PARENTS, TOTAL_PARENTS, FilecoinParams
from .trees import hash_node, sha254_pairs


@dataclass
class PartitionVanilla:
    """One partition; batch row b = challenge b (B = challenges)."""
    partition: int
    replica_id: int
    comm_d: int
    comm_r: int
    comm_c: int
    comm_r_last: int
    challenges: np.ndarray          # (B,) uint64 node indices
    data_leaf: np.ndarray           # (B, 4)
    tree_d_path: np.ndarray         # (B, depth_d, 4) TreeD siblings, leaf level first
    drg_parents: np.ndarray         # (B, 6) uint64
    exp_parents: np.ndarray         # (B, 8) uint64
    column: np.ndarray              # (B, layers, 4) the challenged node's labels, layer 1 first
    tree_c_path: list               # per level: (B, arity_l - 1, 4)
    drg_columns: np.ndarray         # (B, 6, layers, 4)
    exp_columns: np.ndarray         # (B, 8, layers, 4)
    drg_paths: list                 # per level: (B, 6, arity_l - 1, 4)
    exp_paths: list                 # per level: (B, 8, arity_l - 1, 4)
    replica_leaf: np.ndarray        # (B, 4) the encoded node (TreeR's leaf)
    tree_r_path: list               # per level: (B, arity_l - 1, 4)
    benchmark: bool                 # from a benchmark sector's document
    # as the document gives them (checked by check_partition; the circuit does not read them)
    given_positions: dict           # "d" | "r": (B, levels); "c": (B, 15, levels) (c_x, 6 DRG, 8 EXP)
    given_roots: dict               # "d" | "r": (B, 4); "c": (B, 15, 4) (c_x, 6 DRG, 8 EXP)
    given_leaves_c: np.ndarray      # (B, 15, 4) the TreeC leaves the column proofs claim
    labeling_parents: np.ndarray    # (B, layers, 37, 4)
    labeling_meta: np.ndarray       # (B, layers, 2) (layer_index, node)
    encoding_parents: np.ndarray    # (B, 37, 4)
    encoding_meta: np.ndarray       # (B, 2)


def _dom(rows) -> np.ndarray:
    """Domains (lists of 32 ints) -> (..., 4) uint64."""
    a = np.asarray(rows, dtype=np.uint8)
    return np.ascontiguousarray(a).view("<u8").astype(np.uint64)


def _merkle_levels(mp: MerkleProof, kind: str, base: int):
    """(root, leaf, levels) of a MerkleProof that must be ``kind`` with ``base`` base levels."""
    d = mp.data
    kinds = [k for k in ("Single", "Sub", "Top") if getattr(d, k) is not None]
    if kinds != [kind]:
        raise ValueError(f"a MerkleProof's data is {' and '.join(kinds) or 'empty'}, this tree's is {kind}")
    p = getattr(d, kind)
    if kind == "Single":
        return p.root, p.leaf, list(p.path.path)
    parts = [p.base_proof.path, p.sub_proof.path] + ([p.top_proof.path] if kind == "Top" else [])
    if len(parts[0]) != base or any(len(x) != 1 for x in parts[1:]):
        raise ValueError(f"{kind} proof has {'/'.join(str(len(x)) for x in parts)} base/sub/top levels, "
                         f"{base}/1{'/1' if kind == 'Top' else ''} expected")
    return p.root, p.leaf, [lv for x in parts for lv in x]


def _tree_arrays(proofs, arities, where, k, prm: FilecoinParams | None = None):
    """(roots (n, 4), leaves (n, 4), per-level siblings [(n, a-1, 4)], positions (n, levels));
    ``prm`` None for TreeD (Single), else TreeC/TreeR's Single/Sub/Top shape."""
    kind = "Single" if prm is None or not prm.sub_arity else "Top" if prm.top_arity else "Sub"
    base = prm.base_tree_depth if prm is not None else len(arities)
    roots, leaves, sibs, pos = [], [], [[] for _ in arities], []
    for mp, (i, at) in zip(proofs, where):
        try:
            root, leaf, levels = _merkle_levels(mp, kind, base)
        except ValueError as e:
            raise FilecoinC1Error(str(e), partition=k, challenge=i, field=at) from None
        if len(levels) != len(arities):
            raise FilecoinC1Error(f"path has {len(levels)} levels, {len(arities)} expected", partition=k, challenge=i,
                                  field=at)
        for h, (lv, a) in enumerate(zip(levels, arities)):
            if len(lv.hashes) != a - 1 or lv.index >= a:
                raise FilecoinC1Error(f"level {h} has {len(lv.hashes)} siblings at position {lv.index}, "
                                      f"{a - 1} siblings below {a} expected", partition=k, challenge=i, field=at)
            sibs[h].append(lv.hashes)
        roots.append(root), leaves.append(leaf), pos.append([lv.index for lv in levels])
    return _dom(roots), _dom(leaves), [_dom(s) for s in sibs], np.asarray(pos, dtype=np.int64)


def from_c1(prm: FilecoinParams, c1: C1Document, k: int) -> PartitionVanilla:
    """Partition k of a parsed document as arrays (shape-checked against ``prm``)."""
    proofs = c1.partitions[k]
    base = f"vanilla_proofs.{prm.shape}[{k}]"
    L, B = prm.layers, len(proofs)
    arities = prm.tree_r_arities
    for i, pr in enumerate(proofs):
        rcp = pr.replica_column_proofs
        at = f"{base}[{i}]"
        if len(rcp.drg_parents) != DRG_PARENTS or len(rcp.exp_parents) != EXP_PARENTS:
            raise FilecoinC1Error(f"{len(rcp.drg_parents)} DRG and {len(rcp.exp_parents)} expander parent "
                                  f"columns, {DRG_PARENTS} and {EXP_PARENTS} expected", partition=k,
                                  challenge=i, field=f"{at}.replica_column_proofs")
        for j, cp in enumerate([rcp.c_x, *rcp.drg_parents, *rcp.exp_parents]):
            if len(cp.column.rows) != L:
                raise FilecoinC1Error(f"column has {len(cp.column.rows)} rows, {L} layers expected",
                                      partition=k, challenge=i, field=f"{at}.replica_column_proofs.{_cp_name(j)}.column.rows")
        if len(pr.labeling_proofs) != L:
            raise FilecoinC1Error(f"{len(pr.labeling_proofs)} labeling proofs, {L} layers expected",
                                  partition=k, challenge=i, field=f"{at}.labeling_proofs")
        for lp_i, lp in enumerate([*pr.labeling_proofs, pr.encoding_proof]):
            if len(lp.parents) != TOTAL_PARENTS:
                name = f"labeling_proofs[{lp_i}]" if lp_i < L else "encoding_proof"
                raise FilecoinC1Error(f"{len(lp.parents)} parent labels, {TOTAL_PARENTS} expected", partition=k,
                                      challenge=i, layer=min(lp_i + 1, L), field=f"{at}.{name}.parents")
    d_root, d_leaf, d_sibs, d_pos = _tree_arrays([p.comm_d_proofs for p in proofs], (2,) * prm.tree_d_depth,
                                                 [(i, f"{base}[{i}].comm_d_proofs") for i in range(B)], k)
    r_root, r_leaf, r_sibs, r_pos = _tree_arrays([p.comm_r_last_proof for p in proofs], arities,
                                                 [(i, f"{base}[{i}].comm_r_last_proof") for i in range(B)], k, prm)
    cps = [[p.replica_column_proofs.c_x, *p.replica_column_proofs.drg_parents, *p.replica_column_proofs.exp_parents]
           for p in proofs]
    flat = [cp for row in cps for cp in row]
    where = [(i, f"{base}[{i}].replica_column_proofs.{_cp_name(j)}.inclusion_proof") for i in range(B) for j in range(15)]
    c_root, c_leaf, c_sibs, c_pos = _tree_arrays([cp.inclusion_proof for cp in flat], arities, where, k, prm)
    index = np.asarray([[cp.column.index for cp in row] for row in cps], dtype=np.uint64)
    columns = _dom([[cp.column.rows for cp in row] for row in cps])            # (B, 15, L, 4)
    c_sibs = [s.reshape(B, 15, *s.shape[1:]) for s in c_sibs]
    lab = _dom([[lp.parents for lp in p.labeling_proofs] for p in proofs])      # (B, L, 37, 4)
    enc = _dom([p.encoding_proof.parents for p in proofs])
    header = {}
    for name in ("replica_id", "comm_d", "comm_r"):
        try:
            header[name] = field.from_bytes(bytes(getattr(c1, name)), what=name)
        except field.FieldError:
            raise FilecoinC1Error("is not below the BLS12-381 scalar field modulus", field=name) from None
    return PartitionVanilla(
        partition=k, **header,
        comm_c=field.vec_to_ints(c_root[0])[0] % field.MODULUS,
        comm_r_last=field.vec_to_ints(r_root[0])[0] % field.MODULUS,
        challenges=index[:, 0].copy(),
        data_leaf=d_leaf,
        tree_d_path=np.stack([s[:, 0] for s in d_sibs], axis=1) if d_sibs else np.zeros((B, 0, 4), np.uint64),
        drg_parents=index[:, 1:7].copy(), exp_parents=index[:, 7:].copy(),
        column=columns[:, 0].copy(), tree_c_path=[s[:, 0] for s in c_sibs],
        drg_columns=columns[:, 1:7].copy(), exp_columns=columns[:, 7:].copy(),
        drg_paths=[s[:, 1:7] for s in c_sibs], exp_paths=[s[:, 7:] for s in c_sibs],
        replica_leaf=r_leaf, tree_r_path=r_sibs, benchmark=c1.benchmark is not None,
        given_positions={"d": d_pos, "r": r_pos, "c": c_pos.reshape(B, 15, -1)},
        given_roots={"d": d_root, "r": r_root, "c": c_root.reshape(B, 15, 4)},
        given_leaves_c=c_leaf.reshape(B, 15, 4),
        labeling_parents=lab,
        labeling_meta=np.asarray([[(lp.layer_index, lp.node) for lp in p.labeling_proofs] for p in proofs], np.uint64),
        encoding_parents=enc,
        encoding_meta=np.asarray([(p.encoding_proof.layer_index, p.encoding_proof.node) for p in proofs], np.uint64),
    )


def _cp_name(j: int) -> str:
    return "c_x" if j == 0 else f"drg_parents[{j - 1}]" if j < 7 else f"exp_parents[{j - 7}]"


def positions(nodes: np.ndarray, arities) -> np.ndarray:
    """Each node's position at each level: (..., levels)."""
    nodes = np.asarray(nodes, dtype=np.uint64)
    out = []
    for a in arities:
        out.append((nodes % np.uint64(a)).astype(np.int64))
        nodes = nodes // np.uint64(a)
    return np.stack(out, axis=-1)


def _roots(leaves: np.ndarray, sibs: list, pos: np.ndarray, *, sha: bool) -> np.ndarray:
    """Batched InclusionPath::root: leaves (n, 4), sibs[h] (n, a-1, 4), pos (n, levels)."""
    h = np.ascontiguousarray(leaves, dtype=np.uint64)
    for lv, s in enumerate(sibs):
        p = pos[:, lv][:, None]
        kids = []
        for slot in range(s.shape[1] + 1):
            below = s[:, min(slot, s.shape[1] - 1)]
            above = s[:, max(slot - 1, 0)]
            kids.append(np.where(p == slot, h, np.where(slot < p, below, above)))
        kids = np.ascontiguousarray(np.stack(kids, axis=1))
        h = sha254_pairs(kids) if sha else hash_native(kids)
    return h


def _first_bad(mask: np.ndarray):
    idx = np.argwhere(mask)
    return tuple(int(x) for x in idx[0]) if len(idx) else None


def check_partition(prm: FilecoinParams, pv: PartitionVanilla, expect: np.ndarray, graph: Graph, k: int) -> None:
    """Every check rust-fil-proofs' Proof::verify makes, vectorised; FilecoinC1Error on the first failure."""
    base = f"vanilla_proofs.{prm.shape}[{k}]"
    B, L = len(pv.challenges), prm.layers
    nodes = pv.challenges

    def fail(msg, i, fld, layer=None):
        raise FilecoinC1Error(msg, partition=k, challenge=i, node=int(nodes[i]), layer=layer, field=f"{base}[{i}].{fld}")

    # challenges against the seed
    bad = _first_bad(nodes != expect)
    if bad:
        i = bad[0]
        fail(f"challenges node {int(nodes[i])}, the seed gives {int(expect[i])}", i,
             "replica_column_proofs.c_x.column.index")
    # parents against the graph
    for name, got, want in (("drg_parents", pv.drg_parents, graph.drg(nodes)),
                            ("exp_parents", pv.exp_parents, graph.exp(nodes))):
        bad = _first_bad(got != want)
        if bad:
            i, j = bad
            fail(f"parent {j} is node {int(got[i, j])}, the graph gives {int(want[i, j])}", i,
                 f"replica_column_proofs.{name}[{j}].column.index")
    _check_vec_canonical(pv, fail)
    # labels: each labeling proof's parents are the parents' columns, and hash to the label
    for layer in range(1, L + 1):
        drg = pv.drg_columns[:, :, layer - 1]
        exp = pv.exp_columns[:, :, layer - 2] if layer > 1 else np.zeros((B, 0, 4), np.uint64)
        want = np.concatenate([drg, exp], axis=1)[:, label_parent_order(layer)]
        got = pv.labeling_parents[:, layer - 1]
        bad = _first_bad((got != want).any(axis=2))
        if bad:
            i, s = bad
            src = "DRG" if label_parent_order(layer)[s] < 6 else "expander"
            fail(f"parent label {s} is not the opened {src} parent column's label", i,
                 f"labeling_proofs[{layer - 1}].parents[{s}]", layer)
        meta = pv.labeling_meta[:, layer - 1]
        bad = _first_bad((meta[:, 0] != layer) | (meta[:, 1] != nodes))
        if bad:
            fail(f"labeling proof is for layer {int(meta[bad[0], 0])} node {int(meta[bad[0], 1])}", bad[0],
                 f"labeling_proofs[{layer - 1}]", layer)
        labels = _labels(pv.replica_id, layer, nodes, got)
        bad = _first_bad((labels != pv.column[:, layer - 1]).any(axis=1))
        if bad:
            fail("label does not match its preimage (replica id, layer, node, parents)", bad[0],
                 f"replica_column_proofs.c_x.column.rows[{layer - 1}]", layer)
    # encoding: the key is the last layer's label, TreeR's leaf = key + data in Fr
    bad = _first_bad((pv.encoding_parents != pv.labeling_parents[:, L - 1]).any(axis=(1, 2))
                     | (pv.encoding_meta[:, 0] != L) | (pv.encoding_meta[:, 1] != nodes))
    if bad:
        fail("encoding proof is not the last layer's labeling proof", bad[0], "encoding_proof", L)
    from arith import native
    enc = native.add(pv.column[:, L - 1].copy(), pv.data_leaf)
    bad = _first_bad((enc != pv.replica_leaf).any(axis=1))
    if bad:
        fail("TreeR leaf is not the last label + the data in Fr", bad[0], "comm_r_last_proof", L)
    # TreeD: positions, root, path
    arities = prm.tree_r_arities
    bad = _first_bad(pv.given_positions["d"] != positions(nodes, (2,) * prm.tree_d_depth))
    if bad:
        fail(f"TreeD path position at level {bad[1]} does not lead to the challenged node", bad[0],
             f"comm_d_proofs.data.Single.path.path[{bad[1]}].index")
    bad = _first_bad((pv.given_roots["d"] != field.vec_from_ints([pv.comm_d])).any(axis=1))
    if bad:
        fail("TreeD root is not comm_d", bad[0], "comm_d_proofs.data.Single.root")
    d_sibs = [pv.tree_d_path[:, h:h + 1] for h in range(prm.tree_d_depth)]
    got = _roots(pv.data_leaf, d_sibs, pv.given_positions["d"], sha=True)
    bad = _first_bad((got != pv.given_roots["d"]).any(axis=1))
    if bad:
        fail("TreeD path does not hash from the data leaf to comm_d", bad[0], "comm_d_proofs")
    # TreeR
    bad = _first_bad(pv.given_positions["r"] != positions(nodes, arities))
    if bad:
        fail(f"TreeR path position at level {bad[1]} does not lead to the challenged node", bad[0],
             "comm_r_last_proof")
    bad = _first_bad((pv.given_roots["r"] != pv.given_roots["r"][:1]).any(axis=1))
    if bad:
        fail("TreeR root differs from challenge 0's", bad[0], "comm_r_last_proof")
    got = _roots(pv.replica_leaf, pv.tree_r_path, pv.given_positions["r"], sha=False)
    bad = _first_bad((got != pv.given_roots["r"]).any(axis=1))
    if bad:
        fail("TreeR path does not hash from the replica leaf to comm_r_last", bad[0], "comm_r_last_proof")
    # TreeC: 15 column openings a challenge
    all_nodes = np.concatenate([nodes[:, None], pv.drg_parents, pv.exp_parents], axis=1)
    bad = _first_bad(pv.given_positions["c"] != positions(all_nodes, arities))
    if bad:
        fail(f"TreeC path position at level {bad[2]} does not lead to the opened column's node", bad[0],
             f"replica_column_proofs.{_cp_name(bad[1])}.inclusion_proof")
    bad = _first_bad((pv.given_roots["c"] != pv.given_roots["c"][:1, :1]).any(axis=2))
    if bad:
        fail("TreeC root differs from challenge 0's c_x", bad[0],
             f"replica_column_proofs.{_cp_name(bad[1])}.inclusion_proof")
    cols = np.concatenate([pv.column[:, None], pv.drg_columns, pv.exp_columns], axis=1)   # (B, 15, L, 4)
    hashes = hash_native(cols.reshape(B * 15, L, 4)).reshape(B, 15, 4)
    bad = _first_bad((hashes != pv.given_leaves_c).any(axis=2))
    if bad:
        fail("TreeC leaf is not the Poseidon hash of the column", bad[0],
             f"replica_column_proofs.{_cp_name(bad[1])}.column.rows")
    c_sibs = [np.concatenate([s[:, None], d, e], axis=1).reshape(B * 15, *s.shape[1:])
              for s, d, e in zip(pv.tree_c_path, pv.drg_paths, pv.exp_paths)]
    got = _roots(hashes.reshape(B * 15, 4), c_sibs, pv.given_positions["c"].reshape(B * 15, -1), sha=False)
    bad = _first_bad((got.reshape(B, 15, 4) != pv.given_roots["c"]).any(axis=2))
    if bad:
        fail("TreeC path does not hash from the column to comm_c", bad[0],
             f"replica_column_proofs.{_cp_name(bad[1])}.inclusion_proof")


def _check_vec_canonical(pv: PartitionVanilla, fail) -> None:
    """Every value the document gives must be a canonical Fr (rust-fil-proofs converts each with
    Fr::from_repr_vartime(..).expect(..)); names the first that is not."""
    B = len(pv.challenges)
    arrays = [("comm_d_proofs.data.Single.leaf", pv.data_leaf), ("comm_d_proofs.data.Single.root", pv.given_roots["d"]),
              ("comm_d_proofs.data.Single.path", pv.tree_d_path),
              ("comm_r_last_proof (leaf)", pv.replica_leaf), ("comm_r_last_proof (root)", pv.given_roots["r"]),
              ("comm_r_last_proof (path)", np.concatenate([s.reshape(B, -1, 4) for s in pv.tree_r_path], axis=1)),
              ("replica_column_proofs.c_x.column.rows", pv.column),
              ("replica_column_proofs.drg_parents (column rows)", pv.drg_columns),
              ("replica_column_proofs.exp_parents (column rows)", pv.exp_columns),
              ("replica_column_proofs (inclusion roots)", pv.given_roots["c"]),
              ("replica_column_proofs (inclusion leaves)", pv.given_leaves_c),
              ("replica_column_proofs (inclusion paths)",
               np.concatenate([np.concatenate([s.reshape(B, -1, 4), d.reshape(B, -1, 4), e.reshape(B, -1, 4)], axis=1)
                               for s, d, e in zip(pv.tree_c_path, pv.drg_paths, pv.exp_paths)], axis=1)),
              ("labeling_proofs (parents)", pv.labeling_parents), ("encoding_proof.parents", pv.encoding_parents)]
    for name, arr in arrays:
        a = np.ascontiguousarray(arr).reshape(B, -1, 4)
        ok = field.vec_is_canonical(a.reshape(-1, 4)).reshape(a.shape[:2])
        bad = _first_bad(~ok)
        if bad:
            fail(f"value {bad[1]} is not below the BLS12-381 scalar field modulus", bad[0], name)


def _labels(replica_id: int, layer: int, nodes: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """trim(SHA-256(replica_id | layer BE | node BE | 20 zeros | 37 parents)) for each row."""
    import hashlib
    import struct
    rid = field.to_bytes(replica_id)
    blob = np.ascontiguousarray(parents, dtype="<u8").reshape(len(nodes), -1).view(np.uint8)
    out = bytearray()
    for i, v in enumerate(nodes.tolist()):
        h = hashlib.sha256(rid + struct.pack(">IQ", layer, v) + bytes(20) + blob[i].tobytes()).digest()
        out += h[:31] + bytes([h[31] & 0x3F])
    return np.frombuffer(bytes(out), dtype="<u8").reshape(-1, 4).astype(np.uint64)
