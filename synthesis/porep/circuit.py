"""The porep-lite circuit (implements ``synthesis.circuits.Circuit``): public inputs, the checks
of a C1 input's challenges, and synthesis of one partition's witness z.

Public inputs: (replica_id, comm_d, comm_r, then per challenge: v, parent_1..parent_P). The
constraints are the gadget's (``gadget``), their matrices assembled once per parameter set
(``matrices``) and cached on disk (``r1cs_cache``). Witness: the same gadget code in values mode
computes every challenge's auxiliary values at once, one batch row per challenge; the vanilla
proof is checked natively first, so bad input fails with a C1Error naming its field.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import field
from ..circuits import C1Error
from ..family.circuit import SyntheticCircuit, cached, differs, report_first_failure
from ..assignment import values_array
from ..bellpepper.core import Synth, const_vec, small_ints_vec
from ..r1cs import R1CS
from . import c1 as c1mod
from . import graph
from .gadget import SIB, ChallengeWitness, challenge_gadget, header_gadget
from .matrices import Template, build_r1cs, template
from .params import PorepParams
from .r1cs_cache import cache_path, load_r1cs, save_r1cs


def _vec(hexes: list[str], shape: tuple[int, ...]) -> np.ndarray:
    return field.vec_from_ints(int(x, 16) for x in hexes).reshape(*shape, 4)


class PorepLite(SyntheticCircuit):
    """One porep-lite parameter set (implements ``synthesis.circuits.Circuit``)."""

    family = "porep-lite"
    document = c1mod.C1Document
    graph = graph

    def __init__(self, prm: PorepParams):
        super().__init__(prm)
        self._r1cs: R1CS | None = None

    def r1cs(self) -> R1CS:
        """Built once per parameter set and cached in $ZKHIVE_CACHE_DIR/r1cs/<digest>.npz."""
        with self._lock:
            if self._r1cs is None:
                path = cache_path(self.digest())
                # missing or unreadable (e.g. a half-copied file): rebuilt and replaced
                self._r1cs = cached(lambda: load_r1cs(path, self.prm), lambda: build_r1cs(self.prm),
                                    lambda r: save_r1cs(r, path))
            return self._r1cs

    @functools.cached_property
    def _template_pair(self) -> tuple[Template, Template]:
        return template(self.prm, header=True), template(self.prm, header=False)

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

    def _witness(self, part) -> ChallengeWitness:
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
        hvals, cvals = values_array(hs.values, 1), values_array(cs.values, B)
        if hvals.shape[1] != hdr_locals or cvals.shape[1] != ch_locals:
            raise AssertionError("values mode allocated a different number of variables "
                                 "than the template")
        public = field.vec_from_ints(pub_ints)
        z = np.concatenate([field.vec_from_ints([1]), public,
                            field.vec_from_ints([comm_c, comm_r_last]),
                            hvals.reshape(-1, 4), cvals.reshape(-1, 4)])
        if check:
            self.r1cs().check(z)
        return z

    def _check_vanilla(self, k: int, out: dict, wit: ChallengeWitness, comm_d: int, comm_c: int,
                       comm_r_last: int) -> None:
        prm = self.prm

        checks = [(differs(out["root_d"].val, comm_d), "tree_d_path",
                   "data leaf and TreeD path do not lead to comm_d")]
        for j, root in enumerate(out["parent_roots"]):
            checks.append((differs(root.val, comm_c), f"parents[{j}]",
                           f"parent {j}'s column and TreeC path do not lead to comm_c"))
        for lv, lab in enumerate(out["labels"]):
            checks.append((differs(lab.val, wit.column[:, lv]), f"column[{lv}]",
                           f"label of layer {lv + 1} does not match the labels of its parents"))
        checks.append((differs(out["root_c"].val, comm_c), "tree_c_path",
                       "column and TreeC path do not lead to comm_c"))
        checks.append((differs(out["root_r"].val, comm_r_last), "tree_r_path",
                       "replica leaf (data + key) and TreeR path do not lead to comm_r_last"))
        report_first_failure(k, prm.challenges, checks)
