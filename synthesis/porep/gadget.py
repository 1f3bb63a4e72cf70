"""The porep-lite gadget: one challenge's StackedDRG checks, and the per-partition header.

Per challenged node v (public: v and its parents' indices), as StackedDRG's circuit:
  1. the data leaf is in TreeD at v (root comm_d);
  2. each parent's column is in TreeC at the parent's index (root comm_c);
  3. v's label in every layer is the Poseidon hash of the replica id, (layer, v) and its parents'
     labels taken from those columns;
  4. v's column (its labels) is in TreeC at v;
  5. the replica leaf data + label_L (the encoding) is in TreeR at v (root comm_r_last);
and once per partition comm_r = H(comm_c, comm_r_last) (``header_gadget``).

Built from the one gadget library, ``synthesis.bellpepper``: neptune's Poseidon circuit for every
hash (labels, column hashes, tree nodes), storage-proofs-core's ``insert`` for a path's level
(arity 2, 4, 8), bellpepper's ``AllocatedBit`` for the index bits. porep-lite keeps its own
shape: a challenge's index bits are bound to its public input (one unpacking constraint), not
packed into new inputs as Filecoin's PoR does.

The same code runs in shape mode (records the constraints: ``matrices``) and in values mode
(computes every challenge's auxiliary values at once, one batch row per challenge: ``circuit``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bellpepper.boolean import AllocatedBit, Boolean
from ..bellpepper.core import BitBlock, FeBlock, Num, Synth
from ..bellpepper.insertion import insert
from ..bellpepper.neptune import poseidon_hash
from ..bellpepper.num import _unpacking
from . import graph
from .params import TREE_ARITY, PorepParams

SIB = TREE_ARITY - 1


@dataclass
class ChallengeWitness:
    """One partition's vanilla proofs as arrays, batch row b = challenge b."""
    data_leaf: np.ndarray       # (B, 4)
    tree_d_path: np.ndarray     # (B, depth_d, 4)
    column: np.ndarray          # (B, L, 4)   claimed labels of v (checked, not allocated)
    tree_c_path: np.ndarray     # (B, depth, 7, 4)
    tree_r_path: np.ndarray     # (B, depth, 7, 4)
    parent_columns: np.ndarray  # (B, P, L, 4)
    parent_paths: np.ndarray    # (B, P, depth, 7, 4)


def hash_nums(s: Synth, nums: list[Num]) -> Num:
    """neptune's ``poseidon_hash`` of arity len(nums) (allocated numbers only)."""
    return poseidon_hash(s, nums, len(nums))


def to_bits(s: Synth, x: Num, nbits: int, name: str = "bits") -> list[Boolean]:
    """x's ``nbits`` little-endian bits (x < 2^nbits < 2^63): ``AllocatedBit::alloc`` each, then
    bellpepper's unpacking constraint 0 * 0 = sum 2^i b_i - x, so the bits are bound to x."""
    if not 0 < nbits < 63:
        raise ValueError(f"to_bits supports 1..62 bits, not {nbits}")
    ints = x.val[:, 0] if s.computing else None
    bits = [AllocatedBit.alloc(s, (lambda i=i: ((ints >> np.uint64(i)) & np.uint64(1)).astype(np.uint8))
                               if s.computing else None, f"{name}[{i}] is boolean")
            for i in range(nbits)]
    _unpacking(s, bits, x)
    return [Boolean.is_(b) for b in bits]


def root_from_path(s: Synth, leaf: Num, bits: list[Boolean], path: list[list[Num]], arity: int) -> Num:
    """Fold ``leaf`` up ``path`` (per level: arity - 1 siblings in index order; level l uses bits
    [m l, m l + m), m = log2 arity): ``insert``, then Poseidon of the arity."""
    m = arity.bit_length() - 1
    if len(bits) != m * len(path):
        raise ValueError(f"{len(path)} levels of arity {arity} need {m * len(path)} index bits, "
                         f"got {len(bits)}")
    cur = leaf
    for level, siblings in enumerate(path):
        cur = hash_nums(s, insert(s, cur, bits[m * level:m * (level + 1)], siblings))
    return cur


def _path(s: Synth, values, depth: int, width: int) -> list[list[Num]]:
    """Allocate a Merkle path's siblings; ``values()`` gives the (B, depth, width, 4) array."""
    return [[s.alloc(lambda lv=lv, q=q: values()[:, lv, q]) for q in range(width)]
            for lv in range(depth)]


def challenge_gadget(s: Synth, prm: PorepParams, pub: dict[str, Any],
                     wit: ChallengeWitness | None) -> dict[str, Any]:
    """Constraints of one challenge; returns the computed roots and labels (for native checks)."""
    L, P, d8 = prm.layers, prm.parents, prm.tree_rc_depth
    w = lambda: wit  # noqa: E731 - read lazily: wit is None in shape mode
    bits_v = to_bits(s, pub["challenge"], prm.log_nodes, "challenge bits")

    # 1. data leaf in TreeD
    data = s.alloc(lambda: w().data_leaf)
    path_d = [[s.alloc(lambda lv=lv: w().tree_d_path[:, lv])] for lv in range(prm.tree_d_depth)]
    root_d = root_from_path(s, data, bits_v, path_d, 2)
    s.enforce_equal(root_d, pub["comm_d"], "TreeD root = comm_d")

    # 2. parents' columns in TreeC
    cols, parent_roots = _parent_openings(s, prm, pub, wit)

    # 3. labels: base parents from this layer, expander parents from the previous one
    # neptune's circuit hashes allocated numbers: the (layer, v) tag and layer 1's zero expander
    # inputs are allocated, each bound by one constraint
    labels = []
    zero = s.alloc(lambda: np.zeros((s.batch, 4), dtype=np.uint64)) if P > prm.base_degree else None
    if zero is not None:
        s.enforce(zero, s.one(), s.const(0), "zero expander input")
    for layer in range(1, L + 1):
        base = [cols[j][layer - 1] for j in range(prm.base_degree)]
        exp = [cols[j][layer - 2] if layer >= 2 else zero for j in range(prm.base_degree, P)]
        tag_lc = s.add_const(pub["challenge"], graph.layer_tag(layer, 0))
        tag = s.alloc(lambda t=tag_lc: t.val)
        s.enforce(tag_lc, s.one(), tag, f"layer {layer} tag")
        labels.append(hash_nums(s, [pub["replica_id"], tag, *base, *exp]))

    # 4. v's column in TreeC
    path_c = _path(s, lambda: w().tree_c_path, d8, SIB)
    root_c = root_from_path(s, hash_nums(s, labels), bits_v, path_c, TREE_ARITY)
    s.enforce_equal(root_c, pub["comm_c"], "TreeC root = comm_c")

    # 5. encoding and TreeR
    replica = s.add(data, labels[-1])
    path_r = _path(s, lambda: w().tree_r_path, d8, SIB)
    root_r = root_from_path(s, replica, bits_v, path_r, TREE_ARITY)
    s.enforce_equal(root_r, pub["comm_r_last"], "TreeR root = comm_r_last")
    return {"root_d": root_d, "parent_roots": parent_roots, "labels": labels,
            "root_c": root_c, "root_r": root_r}


def _parent_opening(s: Synth, prm: PorepParams, index: Num, comm_c: Num, col_values, path_values):
    """Parent column in TreeC at ``index``; returns (labels, computed root)."""
    bits = to_bits(s, index, prm.log_nodes, "parent bits")
    col = [s.alloc(lambda lv=lv: col_values()[:, lv]) for lv in range(prm.layers)]
    path = _path(s, path_values, prm.tree_rc_depth, SIB)
    root = root_from_path(s, hash_nums(s, col), bits, path, TREE_ARITY)
    s.enforce_equal(root, comm_c, "parent TreeC root = comm_c")
    return col, root


def _parent_openings(s: Synth, prm: PorepParams, pub: dict[str, Any], wit: ChallengeWitness | None):
    """The P parent openings of every challenge. Shape: P copies of one opening. Values: all
    B * P openings as one batch (P times fewer host calls; most of a challenge's hashes are
    here), then handed out in the shape's allocation order (parent 0's variables, parent 1's...)."""
    P, L = prm.parents, prm.layers
    lcs = []
    if s.shape:
        shape = Synth(cs=s.cs)
        for j in range(P):
            lcs.append(_parent_opening(shape, prm, Num(pub["parents"][j].lc, None),
                                       Num(pub["comm_c"].lc, None), None, None))
    vals = None
    if s.computing:
        B = s.batch
        vs = Synth(batch=B * P)
        index = Num(None, np.stack([p.val for p in pub["parents"]], axis=1).reshape(-1, 4))
        comm_c = Num(None, np.repeat(pub["comm_c"].val, P, axis=0))
        col, root = _parent_opening(
            vs, prm, index, comm_c, lambda: wit.parent_columns.reshape(B * P, L, 4),
            lambda: wit.parent_paths.reshape(B * P, prm.tree_rc_depth, SIB, 4))
        per = [_split(v, B, P) for v in vs.values]
        for j in range(P):
            s.values.extend(v(j) for v in per)
        vals = ([c.val.reshape(B, P, 4) for c in col], root.val.reshape(B, P, 4))
    cols, roots = [], []
    for j in range(P):
        cols.append([Num(lcs[j][0][lv].lc if s.shape else None,
                         vals[0][lv][:, j] if s.computing else None) for lv in range(L)])
        roots.append(Num(lcs[j][1].lc if s.shape else None, vals[1][:, j] if s.computing else None))
    return cols, roots


def _split(v, B: int, P: int):
    """One value of a (B * P)-row batch as a function j -> parent j's (B-row) value."""
    if isinstance(v, BitBlock):
        bits = v.bits.reshape(B, P, -1)
        return lambda j: BitBlock(np.ascontiguousarray(bits[:, j]))
    if isinstance(v, FeBlock):
        vals = v.vals.reshape(B, P, -1, 4)
        return lambda j: FeBlock(np.ascontiguousarray(vals[:, j]))
    per = v.reshape(B, P, 4)
    return lambda j: per[:, j]


def header_gadget(s: Synth, pub: dict[str, Any]) -> Num:
    """comm_r = H(comm_c, comm_r_last), once per partition."""
    h = hash_nums(s, [pub["comm_c"], pub["comm_r_last"]])
    s.enforce_equal(h, pub["comm_r"], "comm_r = H(comm_c, comm_r_last)")
    return h
