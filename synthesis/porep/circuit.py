"""The porep-lite circuit: per-challenge StackedDRG checks, the matrices, and synthesis.

Per challenged node v (public: v and its parents' indices), as StackedDRG's circuit:
  1. the data leaf is in TreeD at v (root comm_d);
  2. each parent's column is in TreeC at the parent's index (root comm_c);
  3. v's label in every layer is the Poseidon hash of the replica id, (layer, v) and its parents'
     labels taken from those columns;
  4. v's column (its labels) is in TreeC at v;
  5. the replica leaf data + label_L (the encoding) is in TreeR at v (root comm_r_last);
and once per partition comm_r = H(comm_c, comm_r_last). Public inputs:
  (replica_id, comm_d, comm_r, then per challenge: v, parent_1..parent_P).

Matrices: one challenge's constraints are recorded once as a template (``gadgets`` shape mode)
and replicated for every challenge with numpy index offsets (``_assemble``). Variables:
  z = (1 | replica_id, comm_d, comm_r, (v, parents) x C | comm_c, comm_r_last, header aux,
       challenge 0 aux, ..., challenge C-1 aux)
Witness: the same gadget code in values mode computes every challenge's auxiliary values at once,
one batch row per challenge.
"""
from __future__ import annotations

import functools
import os
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import field
from ..builder import ConstraintSystem
from ..circuits import C1Error
from ..gadgets import Num, Synth, hash_nums, root_from_path, to_bits
from ..gadgets.core import const_vec, small_ints_vec
from ..r1cs import R1CS, SparseMatrix
from . import c1 as c1mod
from . import graph
from .params import TREE_ARITY, PorepParams

SIB = TREE_ARITY - 1


# --- the gadget of one challenge ---------------------------------------------------------------

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
    labels = []
    zero = s.const(0)
    for layer in range(1, L + 1):
        base = [cols[j][layer - 1] for j in range(prm.base_degree)]
        exp = [cols[j][layer - 2] if layer >= 2 else zero for j in range(prm.base_degree, P)]
        tag = s.add_const(pub["challenge"], graph.layer_tag(layer, 0))
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
        per = [v.reshape(B, P, 4) for v in vs.values]
        for j in range(P):
            s.values.extend(v[:, j] for v in per)
        vals = ([c.val.reshape(B, P, 4) for c in col], root.val.reshape(B, P, 4))
    cols, roots = [], []
    for j in range(P):
        cols.append([Num(lcs[j][0][lv].lc if s.shape else None,
                         vals[0][lv][:, j] if s.computing else None) for lv in range(L)])
        roots.append(Num(lcs[j][1].lc if s.shape else None, vals[1][:, j] if s.computing else None))
    return cols, roots


def header_gadget(s: Synth, pub: dict[str, Any]) -> Num:
    """comm_r = H(comm_c, comm_r_last), once per partition."""
    h = hash_nums(s, [pub["comm_c"], pub["comm_r_last"]])
    s.enforce_equal(h, pub["comm_r"], "comm_r = H(comm_c, comm_r_last)")
    return h


# --- templates and matrices --------------------------------------------------------------------

@dataclass(frozen=True)
class Template:
    r1cs: R1CS
    locals: int  # auxiliary variables of its own (after the shared comm_c, comm_r_last)


def _template(prm: PorepParams, *, header: bool) -> Template:
    cs = ConstraintSystem(with_values=False)
    s = Synth(cs=cs)
    pub = {k: s.input(cs.alloc_input(), None) for k in ("replica_id", "comm_d", "comm_r")}
    if not header:
        pub["challenge"] = s.input(cs.alloc_input(), None)
        pub["parents"] = [s.input(cs.alloc_input(), None) for _ in range(prm.parents)]
    pub["comm_c"] = s.input(cs.alloc(), None)
    pub["comm_r_last"] = s.input(cs.alloc(), None)
    if header:
        header_gadget(s, pub)
    else:
        challenge_gadget(s, prm, pub, None)
    r1cs = cs.to_r1cs()
    return Template(r1cs, r1cs.num_aux - 2)


def _assemble(hm: SparseMatrix, hmap: np.ndarray, cm: SparseMatrix, copies: int,
              base: np.ndarray, stride: np.ndarray) -> SparseMatrix:
    """Header rows (template variable x -> hmap[x]), then ``copies`` instances of the challenge
    rows (instance j maps x to base[x] + j stride[x]). Written into preallocated arrays one
    instance at a time, so the peak memory is the result itself (~8 GB at porep-lite-16m)."""
    rows, nnz = hm.rows + copies * cm.rows, hm.nnz + copies * cm.nnz
    indptr = np.empty(rows + 1, dtype=np.int64)
    indices = np.empty(nnz, dtype=np.int64)
    coeffs = np.empty((nnz, 4), dtype=np.uint64)
    indptr[:hm.rows] = hm.indptr[:-1]
    indices[:hm.nnz] = hmap[hm.indices]
    coeffs[:hm.nnz] = hm.coeffs.reshape(-1, 4)
    t_base, t_stride, t_ptr = base[cm.indices], stride[cm.indices], cm.indptr[:-1]
    for j in range(copies):
        lo, row = hm.nnz + j * cm.nnz, hm.rows + j * cm.rows
        out = indices[lo:lo + cm.nnz]
        np.multiply(t_stride, j, out=out)  # in place: no temporaries the size of a copy
        out += t_base
        coeffs[lo:lo + cm.nnz] = cm.coeffs
        indptr[row:row + cm.rows] = lo + t_ptr
    indptr[rows] = nnz
    return SparseMatrix(indptr, indices, coeffs)


def build_r1cs(prm: PorepParams) -> R1CS:
    hdr, ch = _template(prm, header=True), _template(prm, header=False)
    C, P = prm.challenges, prm.parents
    aux0 = 1 + prm.num_public  # index of comm_c in z
    # header: inputs 1..3 keep their index; aux a -> aux0 + a
    hmap = np.concatenate([np.arange(4), aux0 + np.arange(hdr.r1cs.num_aux)]).astype(np.int64)
    # challenge template: 0..3 shared, 4..4+P per challenge, then comm_c, comm_r_last, locals
    nvar = ch.r1cs.num_variables
    base = np.zeros(nvar, dtype=np.int64)
    stride = np.zeros(nvar, dtype=np.int64)
    base[:4] = np.arange(4)
    base[4:5 + P] = 4 + np.arange(1 + P)
    stride[4:5 + P] = 1 + P
    base[5 + P], base[6 + P] = aux0, aux0 + 1
    base[7 + P:] = aux0 + 2 + hdr.locals + np.arange(ch.locals)
    stride[7 + P:] = ch.locals
    mats = [_assemble(hm, hmap, cm, C, base, stride)
            for hm, cm in ((hdr.r1cs.a, ch.r1cs.a), (hdr.r1cs.b, ch.r1cs.b), (hdr.r1cs.c, ch.r1cs.c))]
    r1cs = R1CS(prm.num_public, 2 + hdr.locals + C * ch.locals, *mats)
    r1cs.validate()
    return r1cs


# --- the on-disk cache of matrices -------------------------------------------------------------

def cache_path(digest: str) -> Path:
    from arith.native import cache_dir
    return cache_dir("r1cs") / f"{digest}.npz"


def save_r1cs(r1cs: R1CS, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {"sizes": np.array([r1cs.num_public, r1cs.num_aux], dtype=np.int64)}
    for name, m in (("a", r1cs.a), ("b", r1cs.b), ("c", r1cs.c)):
        arrays.update({f"{name}_indptr": m.indptr, f"{name}_indices": m.indices,
                       f"{name}_coeffs": m.coeffs})
    fd, tmp = tempfile.mkstemp(suffix=".npz.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)  # readers never see a partial file
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_r1cs(path: Path, prm: PorepParams) -> R1CS:
    with np.load(path, allow_pickle=False) as z:
        num_public, num_aux = (int(x) for x in z["sizes"])
        mats = [SparseMatrix(z[f"{n}_indptr"], z[f"{n}_indices"], z[f"{n}_coeffs"]) for n in "abc"]
    if num_public != prm.num_public:
        raise ValueError(f"{path}: cached matrices have {num_public} public inputs, "
                         f"{prm.name} has {prm.num_public}")
    for m in mats:
        if m.indptr.dtype != np.int64 or m.indices.dtype != np.int64 or m.coeffs.dtype != np.uint64:
            raise ValueError(f"{path}: cached matrices have the wrong dtypes")
    r1cs = R1CS(num_public, num_aux, *mats)
    r1cs.validate()
    return r1cs


# --- the Circuit implementation ---------------------------------------------------------------

def _vec(hexes: list[str], shape: tuple[int, ...]) -> np.ndarray:
    return field.vec_from_ints(int(x, 16) for x in hexes).reshape(*shape, 4)


class PorepLite:
    """One porep-lite parameter set (implements ``synthesis.circuits.Circuit``)."""

    def __init__(self, prm: PorepParams):
        self.prm = prm
        self.name = prm.name
        self._r1cs: R1CS | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PorepLite({self.name})"

    def digest(self) -> str:
        return self.prm.digest()

    def num_partitions(self) -> int:
        return self.prm.partitions

    def r1cs(self) -> R1CS:
        """Built once per parameter set and cached in $ZKHIVE_CACHE_DIR/r1cs/<digest>.npz."""
        with self._lock:
            if self._r1cs is None:
                path = cache_path(self.digest())
                try:
                    self._r1cs = load_r1cs(path, self.prm)
                except (ValueError, KeyError, OSError, zipfile.BadZipFile):
                    # missing or unreadable (e.g. a half-copied file): rebuild and replace it
                    self._r1cs = build_r1cs(self.prm)
                    save_r1cs(self._r1cs, path)
            return self._r1cs

    @functools.cached_property
    def _template_pair(self) -> tuple[Template, Template]:
        return _template(self.prm, header=True), _template(self.prm, header=False)

    @property
    def _templates(self) -> tuple[int, int]:
        hdr, ch = self._template_pair
        return hdr.locals, ch.locals

    def size(self) -> dict[str, int]:
        """Constraints, variables and nonzeros per partition, from the templates alone (no
        matrices built: cheap even for porep-lite-16m)."""
        hdr, ch = self._template_pair
        C = self.prm.challenges
        return {"constraints": hdr.r1cs.num_constraints + C * ch.r1cs.num_constraints,
                "variables": 1 + self.prm.num_public + 2 + hdr.locals + C * ch.locals,
                "nonzeros": hdr.r1cs.nnz + C * ch.r1cs.nnz,
                "public_inputs": self.prm.num_public}

    def parse_c1(self, doc: dict[str, Any]) -> c1mod.C1Document:
        return c1mod.parse(self.prm, doc)

    def _partition(self, c1: c1mod.C1Document, k: int) -> c1mod.PartitionProof:
        if not isinstance(c1, c1mod.C1Document):
            raise TypeError("pass the result of parse_c1")
        if not 0 <= k < self.prm.partitions:
            raise C1Error(f"partition index {k} is outside 0..{self.prm.partitions - 1}",
                          partition=k)
        return c1.partitions[k]

    def public_inputs(self, c1: c1mod.C1Document, partition: int) -> list[int]:
        part = self._partition(c1, partition)
        out = [int(c1.replica_id, 16), int(c1.comm_d, 16), int(c1.comm_r, 16)]
        for ch in part.challenges:
            out += [ch.node, *(p.node for p in ch.parents)]
        return out

    def check_challenges(self, c1: c1mod.C1Document, k: int) -> None:
        """Every challenge is the one the seed gives, every parent the graph's."""
        prm, part = self.prm, self._partition(c1, k)
        seed, rid = bytes.fromhex(c1.seed[2:]), int(c1.replica_id, 16)
        nodes = [ch.node for ch in part.challenges]
        want_parents = graph.parents(prm, np.array(nodes)).tolist()
        for i, ch in enumerate(part.challenges):
            at = f"partitions[{k}].challenges[{i}]"
            want = graph.challenge(prm, seed, rid, k, i)
            if ch.node != want:
                raise C1Error(f"challenge {i}: node {ch.node} is not the challenge derived from "
                              f"the seed ({want})", field=f"{at}.node", partition=k)
            for j, p in enumerate(ch.parents):
                if p.node != want_parents[i][j]:
                    raise C1Error(f"challenge {i}: parent {j} of node {ch.node} is "
                                  f"{want_parents[i][j]}, not {p.node}",
                                  field=f"{at}.parents[{j}].node", partition=k)

    def _witness(self, part: c1mod.PartitionProof) -> ChallengeWitness:
        prm, B = self.prm, self.prm.challenges
        L, P, dd, d8 = prm.layers, prm.parents, prm.tree_d_depth, prm.tree_rc_depth
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

    def synthesize(self, c1: c1mod.C1Document, partition: int, *, check: bool = False) -> np.ndarray:
        """z for one partition. The vanilla proof is checked natively first (C1Error naming the
        partition, challenge and field); ``check=True`` also checks z against the matrices."""
        prm, k = self.prm, partition
        part = self._partition(c1, k)
        self.check_challenges(c1, k)
        B = prm.challenges
        pub_ints = self.public_inputs(c1, k)
        rid, comm_d, comm_r = pub_ints[:3]
        comm_c, comm_r_last = int(c1.comm_c, 16), int(c1.comm_r_last, 16)

        hs = Synth(batch=1)
        hpub = {"comm_c": hs.input(None, const_vec(comm_c, 1)),
                "comm_r_last": hs.input(None, const_vec(comm_r_last, 1)),
                "comm_r": hs.input(None, const_vec(comm_r, 1))}
        h = header_gadget(hs, hpub)
        if field.vec_to_ints(h.val)[0] != comm_r:
            raise C1Error("comm_r is not H(comm_c, comm_r_last)", field="comm_r", partition=k)

        wit = self._witness(part)
        nodes = np.array([ch.node for ch in part.challenges], dtype=np.int64)
        parents = np.array([[p.node for p in ch.parents] for ch in part.challenges],
                           dtype=np.int64).reshape(B, prm.parents)
        cs = Synth(batch=B)
        pub = {"replica_id": cs.input(None, const_vec(rid, B)),
               "comm_d": cs.input(None, const_vec(comm_d, B)),
               "comm_c": cs.input(None, const_vec(comm_c, B)),
               "comm_r_last": cs.input(None, const_vec(comm_r_last, B)),
               "challenge": cs.input(None, small_ints_vec(nodes)),
               "parents": [cs.input(None, small_ints_vec(parents[:, j])) for j in range(prm.parents)]}
        out = challenge_gadget(cs, prm, pub, wit)
        self._check_vanilla(k, out, wit, comm_d, comm_c, comm_r_last)

        hdr_locals, ch_locals = self._templates
        if len(hs.values) != hdr_locals or len(cs.values) != ch_locals:
            raise AssertionError("values mode allocated a different number of variables "
                                 "than the template")
        public = field.vec_from_ints(pub_ints)
        z = np.concatenate([field.vec_from_ints([1]), public,
                            field.vec_from_ints([comm_c, comm_r_last]),
                            np.stack(hs.values, axis=1).reshape(-1, 4),
                            np.stack(cs.values, axis=1).reshape(-1, 4)])
        if check:
            self.r1cs().check(z)
        return z

    def _check_vanilla(self, k: int, out: dict, wit: ChallengeWitness, comm_d: int, comm_c: int,
                       comm_r_last: int) -> None:
        prm = self.prm

        def bad(val: np.ndarray, want: int | np.ndarray) -> np.ndarray:
            want = const_vec(want, len(val)) if isinstance(want, int) else want
            return np.any(val != want, axis=1)

        checks = [(bad(out["root_d"].val, comm_d), "tree_d_path",
                   "data leaf and TreeD path do not lead to comm_d")]
        for j, root in enumerate(out["parent_roots"]):
            checks.append((bad(root.val, comm_c), f"parents[{j}]",
                           f"parent {j}'s column and TreeC path do not lead to comm_c"))
        for lv, lab in enumerate(out["labels"]):
            checks.append((bad(lab.val, wit.column[:, lv]), f"column[{lv}]",
                           f"label of layer {lv + 1} does not match the labels of its parents"))
        checks.append((bad(out["root_c"].val, comm_c), "tree_c_path",
                       "column and TreeC path do not lead to comm_c"))
        checks.append((bad(out["root_r"].val, comm_r_last), "tree_r_path",
                       "replica leaf (data + key) and TreeR path do not lead to comm_r_last"))
        for i in range(prm.challenges):
            for mask, where, msg in checks:
                if mask[i]:
                    raise C1Error(f"challenge {i}: {msg}",
                                  field=f"partitions[{k}].challenges[{i}].{where}", partition=k)
