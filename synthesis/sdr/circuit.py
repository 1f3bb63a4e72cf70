"""The SDR circuit: a StackedDRG PoRep partition's per-challenge checks, with SHA-256 labels.

Per challenged node v (public: v and its parents' indices), as rust-fil-proofs'
storage-proofs-porep stacked circuit:
  1. the data leaf is in TreeD at v: a binary SHA-254 tree (root comm_d);
  2. each parent's column (its labels in every layer) is in TreeC at the parent's index: the
     column hash Poseidon(labels), then an 8-ary Poseidon path (root comm_c);
  3. v's label in layer l is SHA-254(replica_id | l u32 BE | v u64 BE | total_parents parent
     labels), base parents' labels of layer l, expander parents' of layer l - 1 (layer 1: the
     base parents only), repeated in order (synthesis.sdr.graph.preimage_parents);
  4. v's column (the labels just computed) is in TreeC at v;
  5. the encoding, replica leaf = data + label of the last layer, is in TreeR at v (root
     comm_r_last);
and once per partition comm_r = Poseidon(comm_c, comm_r_last) and the replica id's bits.
Public inputs: (replica_id, comm_d, comm_r, then per challenge: v, parent_1..parent_P).

Variables: z = (1 | public | comm_c, comm_r_last, header aux (the replica id's 254 bits first,
then comm_r's Poseidon) | challenge 0 aux | ... ). The challenge template's shared variables are
comm_c, comm_r_last and the replica id bits; everything else is per challenge.

Matrices: the header and one challenge are recorded once (``TemplatingCS``: each SHA-256
compression is an instance of one of two templates, expanded with numpy) and kept compact
(``synthesis.compact``): the challenge block replicated ``challenges`` times by column offsets.
Witness: the same gadget code in values mode, one batch row per challenge; SHA-256 values come
from sha256_host.cpp, Poseidon's from poseidon_host.cpp; the result is a ``Compact`` assignment.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import assignment, field
from ..builder import LinearCombination
from ..circuits import C1Error
from ..family.circuit import (CompactMatrices, SyntheticCircuit, block_inputs, cached, differs,
                              report_first_failure)
from ..family.circuit import vec_from_hex as _vec
from ..compact import CompactMatrix, CompactR1CS, TemplatingCS, compact_matrices, replicate
from ..gadgets import Num, Synth, hash_nums, root_from_path, to_bits
from ..gadgets.core import FeBlock, const_vec, small_ints_vec
from ..gadgets.sha256 import Bits, alloc_bits, bits_to_num, cond_swap_bits, num_to_bits, sha254_bits
from ..r1cs import R1CS
from . import c1 as c1mod
from . import graph
from .params import TREE_ARITY, SdrParams

SIB = TREE_ARITY - 1
RID_BITS = 254  # variable bits of the replica id (bits 254, 255 are constant zeros)


@dataclass
class ChallengeWitness:
    """One partition's vanilla proofs as arrays, batch row b = challenge b."""
    data_leaf: np.ndarray       # (B, 4)
    tree_d_path: np.ndarray     # (B, depth, 4)
    column: np.ndarray          # (B, L, 4)
    tree_c_path: np.ndarray     # (B, d8, 7, 4)
    tree_r_path: np.ndarray     # (B, d8, 7, 4)
    parent_columns: np.ndarray  # (B, P, L, 4)
    parent_paths: np.ndarray    # (B, P, d8, 7, 4)


def _fe_path(s: Synth, values, depth: int, width: int) -> list[list[Num]]:
    return [[s.alloc(lambda lv=lv, q=q: values()[:, lv, q]) for q in range(width)]
            for lv in range(depth)]


def _fr_bits(v: np.ndarray) -> np.ndarray:
    return np.unpackbits(np.ascontiguousarray(v, dtype="<u8").view(np.uint8), axis=1)


_VAR254 = np.array([i for i in range(256) if i not in (248, 249)])  # byte 31's top bits are 0


def sibling_bits(s: Synth, values) -> Bits:
    """A TreeD sibling (< 2^254) allocated directly as 254 boolean variables (no field element
    needed: it only enters a SHA-256 preimage)."""
    val = _fr_bits(values()) if s.computing else None
    b = alloc_bits(s, RID_BITS, lambda: val[:, _VAR254], "TreeD sibling bit")
    return _spread(s, b, val)


def _spread(s: Synth, b: Bits, full_val) -> Bits:
    """254 variable bits placed at every position but 248, 249 (constant zeros)."""
    cmask = np.full(256, -1, np.int8)
    cmask[[248, 249]] = 0
    lcs = None
    if s.shape:
        lcs = [LinearCombination()] * 256
        for k, i in enumerate(_VAR254):
            lcs[i] = b.lcs[k]
    val = None
    if s.computing:
        val = np.zeros((s.batch, 256), np.uint8)
        val[:, _VAR254] = b.val
    return Bits(lcs, val, cmask)


def _num_bits_as_bits(s: Synth, nums: list[Num]) -> Bits:
    """Boolean Nums (e.g. to_bits' output) as a Bits string, in the given order."""
    lcs = [n.lc for n in nums] if s.shape else None
    val = np.stack([n.val[:, 0] for n in nums], axis=1).astype(np.uint8) if s.computing else None
    return Bits(lcs, val, np.full(len(nums), -1, np.int8))


def _node_u64_be(s: Synth, bits_v: list[Num]) -> Bits:
    """v as a u64 big-endian (SHA order): its tree_depth variable bits, then constant zeros."""
    depth = len(bits_v)
    zeros = Bits.const(s, [0] * (64 - depth))
    return Bits.concat([zeros, _num_bits_as_bits(s, bits_v[::-1])])


def _parent_opening(s: Synth, prm: SdrParams, index: Num, comm_c: Num, col_values, path_values):
    bits = to_bits(s, index, prm.tree_depth, "parent bits")
    col = [s.alloc(lambda lv=lv: col_values()[:, lv]) for lv in range(prm.layers)]
    path = _fe_path(s, path_values, prm.tree_rc_depth, SIB)
    root = root_from_path(s, hash_nums(s, col), bits, path, TREE_ARITY)
    s.enforce_equal(root, comm_c, "parent TreeC root = comm_c")
    return col, root


def _parent_openings(s: Synth, prm: SdrParams, pub: dict[str, Any], wit: ChallengeWitness | None):
    """The P parent openings of every challenge (as porep-lite: shape = P copies of one opening;
    values = all B * P openings in one batch, handed out parent by parent)."""
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
        vs = Synth(batch=B * P, blocks=True)
        index = Num(None, np.stack([p.val for p in pub["parents"]], axis=1).reshape(-1, 4))
        comm_c = Num(None, np.repeat(pub["comm_c"].val, P, axis=0))
        col, root = _parent_opening(
            vs, prm, index, comm_c, lambda: wit.parent_columns.reshape(B * P, L, 4),
            lambda: wit.parent_paths.reshape(B * P, prm.tree_rc_depth, SIB, 4))
        arr = assignment.values_array(vs.values, B * P)
        per = arr.reshape(B, P, arr.shape[1], 4)
        for j in range(P):
            s.values.append(FeBlock(per[:, j]))
        vals = ([c.val.reshape(B, P, 4) for c in col], root.val.reshape(B, P, 4))
    cols, roots = [], []
    for j in range(P):
        cols.append([Num(lcs[j][0][lv].lc if s.shape else None,
                         vals[0][lv][:, j] if s.computing else None) for lv in range(L)])
        roots.append(Num(lcs[j][1].lc if s.shape else None, vals[1][:, j] if s.computing else None))
    return cols, roots


def challenge_gadget(s: Synth, prm: SdrParams, pub: dict[str, Any],
                     wit: ChallengeWitness | None) -> dict[str, Any]:
    """Constraints of one challenge; returns computed roots and labels (for the native checks)."""
    L, P, db = prm.layers, prm.parents, prm.base_degree
    w = lambda: wit  # noqa: E731 - read lazily: wit is None in shape mode
    bits_v = to_bits(s, pub["challenge"], prm.tree_depth, "challenge bits")

    # 1. the data leaf in TreeD (SHA-254, binary)
    data = s.alloc(lambda: w().data_leaf)
    cur = num_to_bits(s, data, "data bits")
    for lv in range(prm.tree_depth):
        sib = sibling_bits(s, lambda lv=lv: w().tree_d_path[:, lv])
        left, right = cond_swap_bits(s, bits_v[lv], cur, sib)
        cur = sha254_bits(s, Bits.concat([left, right]))
    root_d = bits_to_num(s, cur)
    s.enforce_equal(root_d, pub["comm_d"], "TreeD root = comm_d")

    # 2. the parents' columns in TreeC
    cols, parent_roots = _parent_openings(s, prm, pub, wit)

    # 3. labels: SHA-254 over bits; parents' labels (field elements in their columns) to bits
    node_bits = _node_u64_be(s, bits_v)
    labels = []
    for layer in range(1, L + 1):
        pbits = {}
        for j in range(db):
            pbits[j] = num_to_bits(s, cols[j][layer - 1], "parent label bits")
        if layer >= 2:
            for j in range(db, P):
                pbits[j] = num_to_bits(s, cols[j][layer - 2], "parent label bits")
        msg = Bits.concat([pub["rid_bits"], Bits.of_bytes(s, layer.to_bytes(4, "big")), node_bits,
                           *[pbits[j] for j in graph.preimage_parents(prm, layer)]])
        lab_bits = sha254_bits(s, msg)
        packed = bits_to_num(s, lab_bits)
        label = s.alloc(lambda packed=packed: packed.val)
        s.enforce_equal(packed, label, "label = its SHA-254 bits")
        labels.append(label)

    # 4. v's column in TreeC
    path_c = _fe_path(s, lambda: w().tree_c_path, prm.tree_rc_depth, SIB)
    root_c = root_from_path(s, hash_nums(s, labels), bits_v, path_c, TREE_ARITY)
    s.enforce_equal(root_c, pub["comm_c"], "TreeC root = comm_c")

    # 5. the encoding and TreeR
    replica = s.add(data, labels[-1])
    path_r = _fe_path(s, lambda: w().tree_r_path, prm.tree_rc_depth, SIB)
    root_r = root_from_path(s, replica, bits_v, path_r, TREE_ARITY)
    s.enforce_equal(root_r, pub["comm_r_last"], "TreeR root = comm_r_last")
    return {"root_d": root_d, "parent_roots": parent_roots, "labels": labels,
            "root_c": root_c, "root_r": root_r}


def header_gadget(s: Synth, pub: dict[str, Any]) -> tuple[Bits, Num]:
    """The replica id's bits (shared by every label) and comm_r = H(comm_c, comm_r_last)."""
    rid_bits = num_to_bits(s, pub["replica_id"], "replica id bits")
    h = hash_nums(s, [pub["comm_c"], pub["comm_r_last"]])
    s.enforce_equal(h, pub["comm_r"], "comm_r = H(comm_c, comm_r_last)")
    return rid_bits, h


# --- templates and matrices --------------------------------------------------------------------

@dataclass(frozen=True)
class Block:
    """A recorded template: its compact matrices over its own variables."""
    mats: tuple[CompactMatrix, CompactMatrix, CompactMatrix]
    num_public: int
    num_aux: int

    @property
    def num_constraints(self) -> int:
        return self.mats[0].rows


def record(prm: SdrParams, *, header: bool) -> Block:
    cs = TemplatingCS()
    s = Synth(cs=cs)
    pub = block_inputs(s, cs, prm.parents, header=header)
    if header:
        header_gadget(s, pub)
    else:
        rid = Bits([cs.alloc().lc() for _ in range(RID_BITS)], None, np.full(RID_BITS, -1, np.int8))
        pub["rid_bits"] = _spread(s, rid, None)
        challenge_gadget(s, prm, pub, None)
    return Block(compact_matrices(cs), cs.num_public, cs.num_aux)


def build_compact(prm: SdrParams) -> CompactR1CS:
    hdr, ch = record(prm, header=True), record(prm, header=False)
    C, P = prm.challenges, prm.parents
    aux0 = 1 + prm.num_public
    hdr_locals = hdr.num_aux - 2
    ch_locals = ch.num_aux - 2 - RID_BITS
    hmap = np.concatenate([np.arange(4), aux0 + np.arange(hdr.num_aux)]).astype(np.int64)
    nvar = 1 + ch.num_public + ch.num_aux
    shared = 5 + P  # comm_c, comm_r_last, the replica id bits = the header's first locals
    first = shared + 2 + RID_BITS
    segments = np.array([
        [0, 4, 0, 0],                          # one, replica_id, comm_d, comm_r
        [4, 5 + P, 4, 1 + P],                  # this challenge's v and parents
        [shared, first, aux0, 0],              # shared aux
        [first, nvar, aux0 + 2 + hdr_locals, ch_locals],  # this challenge's own variables
    ], dtype=np.int64)
    mats = replicate(hdr.mats, ch.mats, hmap, segments, nvar, C)
    return CompactR1CS(prm.num_public, 2 + hdr_locals + C * ch_locals, *mats, segments=segments)


def cache_dir() -> Path:
    return Path(os.environ.get("ZKHIVE_CACHE_DIR", Path.home() / ".cache" / "zkhive"))


def cache_path(digest: str) -> Path:
    return cache_dir() / "r1cs" / f"sdr-{digest}.npz"


# --- the Circuit implementation ---------------------------------------------------------------

class SdrCircuit(SyntheticCircuit, CompactMatrices):
    """One SDR parameter set (implements ``synthesis.circuits.Circuit``)."""

    family = "sdr"
    document = c1mod.C1Document
    graph = graph

    def __init__(self, prm: SdrParams):
        super().__init__(prm)
        self._compact: CompactR1CS | None = None
        self._r1cs: R1CS | None = None

    def compact_r1cs(self) -> CompactR1CS:
        """Built once per parameter set, cached in $ZKHIVE_CACHE_DIR/r1cs/sdr-<digest>.npz."""
        with self._lock:
            if self._compact is None:
                path = cache_path(self.digest())
                self._compact = cached(lambda: CompactR1CS.load(path), lambda: build_compact(self.prm),
                                       lambda c: c.save(path))
            return self._compact

    def matrices_path(self) -> Path:
        return cache_path(self.digest())

    def size(self) -> dict[str, int]:
        cr = self.compact_r1cs()
        cons = cr.num_constraints
        return {"constraints": cons, "variables": cr.num_variables, "nonzeros": cr.nnz,
                "public_inputs": self.prm.num_public,
                "domain": 1 << (cons + self.prm.num_public).bit_length()}

    def parse_c1(self, doc: dict[str, Any]) -> c1mod.C1Document:
        return c1mod.parse(self.prm, doc)

    def _witness(self, part) -> ChallengeWitness:
        prm, B = self.prm, self.prm.challenges
        L, P, dd, d8 = prm.layers, prm.parents, prm.tree_depth, prm.tree_rc_depth
        chs = part.challenges
        return ChallengeWitness(
            data_leaf=_vec([c.data_leaf for c in chs], (B,)),
            tree_d_path=_vec([x for c in chs for x in c.tree_d_path], (B, dd)),
            column=_vec([x for c in chs for x in c.column], (B, L)),
            tree_c_path=_vec([x for c in chs for lv in c.tree_c_path for x in lv], (B, d8, SIB)),
            tree_r_path=_vec([x for c in chs for lv in c.tree_r_path for x in lv], (B, d8, SIB)),
            parent_columns=_vec([x for c in chs for p in c.parents for x in p.column], (B, P, L)),
            parent_paths=_vec([x for c in chs for p in c.parents for lv in p.tree_c_path for x in lv],
                              (B, P, d8, SIB)))

    def synthesize_compact(self, c1: c1mod.C1Document, partition: int) -> assignment.Compact:
        """One partition's assignment in compact form (bits as bits). The vanilla proof is
        checked natively first: C1Error naming the partition, the challenge and the layer."""
        prm, k = self.prm, partition
        part = self._partition(c1, k)
        self.check_challenges(c1, k)
        B = prm.challenges
        pub_ints = self.public_inputs(c1, k)
        rid, comm_d, comm_r = pub_ints[:3]
        comm_c, comm_r_last = int(c1.comm_c, 16), int(c1.comm_r_last, 16)

        hs = Synth(batch=1, blocks=True)
        hpub = {"replica_id": hs.input(None, const_vec(rid, 1)),
                "comm_c": hs.input(None, const_vec(comm_c, 1)),
                "comm_r_last": hs.input(None, const_vec(comm_r_last, 1)),
                "comm_r": hs.input(None, const_vec(comm_r, 1))}
        rid_bits, h = header_gadget(hs, hpub)
        if field.vec_to_ints(h.val)[0] != comm_r:
            raise C1Error("comm_r is not H(comm_c, comm_r_last)", field="comm_r", partition=k)

        wit = self._witness(part)
        nodes = np.array([ch.node for ch in part.challenges], dtype=np.int64)
        parents = np.array([[p.node for p in ch.parents] for ch in part.challenges],
                           dtype=np.int64).reshape(B, prm.parents)
        cs = Synth(batch=B, blocks=True)
        pub = {"replica_id": cs.input(None, const_vec(rid, B)),
               "comm_d": cs.input(None, const_vec(comm_d, B)),
               "comm_c": cs.input(None, const_vec(comm_c, B)),
               "comm_r_last": cs.input(None, const_vec(comm_r_last, B)),
               "rid_bits": Bits(None, np.repeat(rid_bits.val, B, axis=0), rid_bits.cmask),
               "challenge": cs.input(None, small_ints_vec(nodes)),
               "parents": [cs.input(None, small_ints_vec(parents[:, j])) for j in range(prm.parents)]}
        out = challenge_gadget(cs, prm, pub, wit)
        self._check_vanilla(k, out, wit, comm_d, comm_c, comm_r_last)

        head = field.vec_from_ints([1, *pub_ints, comm_c, comm_r_last])
        return assignment.from_blocks(head, hs.values, cs.values, B)

    def synthesize(self, c1: c1mod.C1Document, partition: int, *, check: bool = False) -> np.ndarray:
        """z for one partition as an (n, 4) Fr vector; ``check=True`` also checks the matrices."""
        z = self.synthesize_compact(c1, partition).to_vec()
        if check:
            self.r1cs().check(z)
        return z

    def _check_vanilla(self, k: int, out: dict, wit: ChallengeWitness, comm_d: int, comm_c: int,
                       comm_r_last: int) -> None:
        prm = self.prm

        checks = [(differs(out["root_d"].val, comm_d), "tree_d_path",
                   "TreeD: data leaf and TreeD path do not lead to comm_d")]
        for lv, lab in enumerate(out["labels"]):
            checks.append((differs(lab.val, wit.column[:, lv]), f"column[{lv}]",
                           f"layer {lv + 1}: the label does not match SHA-254 of the replica id, "
                           f"layer, node and its parents' labels"))
        for j, root in enumerate(out["parent_roots"]):
            checks.append((differs(root.val, comm_c), f"parents[{j}]",
                           f"layers 1..{prm.layers}: parent {j}'s column and TreeC path do not "
                           "lead to comm_c"))
        checks.append((differs(out["root_c"].val, comm_c), "tree_c_path",
                       f"layers 1..{prm.layers}: column and TreeC path do not lead to comm_c"))
        checks.append((differs(out["root_r"].val, comm_r_last), "tree_r_path",
                       f"layer {prm.layers}: the encoding (data + label) and TreeR path do not "
                       "lead to comm_r_last"))
        report_first_failure(k, prm.challenges, checks)
