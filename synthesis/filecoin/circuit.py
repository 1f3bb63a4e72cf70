"""The ``filecoin`` family's Circuit: Filecoin's StackedDRG PoRep partition (``stacked.py``) with
compact matrices and a compact assignment (``synthesis.compact``).

Variables (bellperson's numbering): z = (ONE | replica_id, comm_d, comm_r, then per challenge its
18 inputs in ``generate_public_inputs`` order | header aux | challenge 0 aux | challenge 1 aux |
...). Every challenge block has the same shape, so the matrices are the header recorded once and
one challenge block recorded once (``TemplatingCS``: each SHA-256 compression an instance of its
pattern's template) and replicated by column offsets (``CompactR1CS``, ``Replicated``): the
block's template columns are ONE, its 18 inputs (stride 18), the header's comm_d, comm_r_last,
comm_c and replica id bits (shared), and its own aux (stride = the block's aux count).

bellperson's prover appends one row per input (``input_i * 0 = 0``); zkhive's prover adds those
itself (``size()['domain']`` counts them), so the matrices here are the synthesized rows only:
130,278,541 at 32 GiB (130,278,869 with the 328 input rows, Filecoin's published count).

Witness: the same gadget code in values mode, the header with batch 1 and all challenges of a
partition as one batch; SHA-256 values come from the templates' native replay, Poseidon's from
bellpepper/neptune_host.cpp; the vanilla proofs are checked natively first (``c1.verify``: errors name the
partition, challenge and layer).
"""
from __future__ import annotations

import hashlib
import json
import threading
import zipfile
from dataclasses import asdict
from typing import Any

import numpy as np

from .. import assignment, field
from ..circuits import C1Error
from ..compact import TemplatingCS, compact_matrices, replicate
from ..bellpepper.core import Num, Synth, const_vec
from ..r1cs import R1CS
from ..compact import CompactR1CS
from ..family.circuit import CompactMatrices, cache_dir
from ..bellpepper import AllocatedBit, Boolean
from . import c1 as c1mod
from . import stacked
from .params import FilecoinParams

#: bump when the circuit's definition changes without a source change (it keys cached matrices)
CIRCUIT_VERSION = 1
CH_INPUTS = 18  # public inputs a challenge: TreeD, 6 DRG, 8 EXP, challenge, TreeR, TreeC
_SOURCES = ("filecoin/stacked.py", "filecoin/circuit.py", "bellpepper/boolean.py", "bellpepper/num.py",
            "bellpepper/uint32.py", "bellpepper/uint64.py", "bellpepper/multieq.py",
            "bellpepper/multipack.py", "bellpepper/sha256.py", "bellpepper/template.py",
            "bellpepper/neptune.py", "bellpepper/neptune_params.py", "bellpepper/compression.py",
            "bellpepper/insertion.py", "bellpepper/core.py", "sha256_spec.py", "compact.py")


def source_digest() -> str:
    from ..family.params import source_digest as digest_of
    return digest_of(_SOURCES)


def params_digest(prm: FilecoinParams) -> str:
    doc = {"family": "filecoin", "version": CIRCUIT_VERSION, "source": source_digest(), **asdict(prm)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


# --- recording ---------------------------------------------------------------------------------

class Recorded:
    """A recorded block: its compact matrices over its own columns and where things are."""

    def __init__(self, cs: TemplatingCS, keys: dict, marks: list | None = None):
        self.marks = marks or [(0, "header")]
        self.mats = compact_matrices(cs)
        self.num_public = cs.num_public
        self.num_aux = cs.num_aux
        self.keys = keys  # name -> aux index (0-based) in this block

    @property
    def num_constraints(self) -> int:
        return self.mats[0].rows


def _aux_index(num: Num) -> int:
    (k, c), = num.lc.terms.items()
    assert k < 0 and c == 1
    return -k - 1


def record_header() -> Recorded:
    cs = TemplatingCS(ordered=True)
    s = Synth(cs=cs)
    sh, comm_r, _ = stacked.header_gadget(s, None)
    rid_bits = [b for b in sh.replica_id_bits if not b.is_constant]
    keys = {"comm_d": _aux_index(sh.comm_d), "comm_c": _aux_index(sh.comm_c),
            "comm_r_last": _aux_index(sh.comm_r_last),
            "rid_bits": [-b.bit.key - 1 for b in _le_bits(sh.replica_id_bits)]}
    assert len(rid_bits) == 255
    return Recorded(cs, keys)


def _le_bits(sha_order: list) -> list:
    """The 255 replica id bits back in to_bits_le order (undo reverse_bit_numbering)."""
    le = [b for i in range(0, 256, 8) for b in sha_order[i:i + 8][::-1]]
    assert le[255].is_constant
    return le[:255]


def _shared_placeholders(s: Synth) -> stacked.Shared:
    """comm_d, comm_r_last, comm_c, then the 255 replica id bits (LE), allocated first."""
    cs = s.cs
    comm_d = Num(cs.alloc().lc(), None)
    comm_r_last = Num(cs.alloc().lc(), None)
    comm_c = Num(cs.alloc().lc(), None)
    bits = [Boolean.is_(AllocatedBit(next(iter(cs.alloc().lc().terms)), None)) for _ in range(255)]
    return stacked.Shared(comm_d, comm_c, comm_r_last, stacked.reverse_bit_numbering(bits))


SHARED = 3 + 255


def record_challenge(prm: FilecoinParams) -> Recorded:
    cs = TemplatingCS(ordered=True)
    s = Synth(cs=cs)
    s.marks = []
    sh = _shared_placeholders(s)
    stacked.challenge_gadget(s, prm, sh, None)
    if cs.num_public != CH_INPUTS:
        raise AssertionError(f"a challenge block has {cs.num_public} inputs, {CH_INPUTS} expected")
    return Recorded(cs, {}, s.marks)


def build_compact(prm: FilecoinParams) -> CompactR1CS:
    return build(prm)[0]


def build(prm: FilecoinParams) -> tuple[CompactR1CS, dict]:
    """The compact matrices and the row map (header rows, block rows, the block's marks)."""
    hdr, ch = record_header(), record_challenge(prm)
    C = prm.challenges
    npub = 3 + C * CH_INPUTS
    assert npub == prm.num_public
    aux0 = 1 + npub
    hmap = np.concatenate([np.arange(4), aux0 + np.arange(hdr.num_aux)]).astype(np.int64)
    ch_locals = ch.num_aux - SHARED
    g = lambda name: aux0 + hdr.keys[name]  # noqa: E731
    rid0 = aux0 + hdr.keys["rid_bits"][0]
    if hdr.keys["rid_bits"] != list(range(hdr.keys["rid_bits"][0], hdr.keys["rid_bits"][0] + 255)):
        raise AssertionError("the replica id bits are not contiguous in the header")
    a = 1 + CH_INPUTS  # the block's first aux column
    nvar = 1 + ch.num_public + ch.num_aux
    segments = np.array([
        [0, 1, 0, 0],                                   # ONE
        [1, a, 4, CH_INPUTS],                           # this challenge's inputs
        [a, a + 1, g("comm_d"), 0],
        [a + 1, a + 2, g("comm_r_last"), 0],
        [a + 2, a + 3, g("comm_c"), 0],
        [a + 3, a + SHARED, rid0, 0],                   # the replica id bits
        [a + SHARED, nvar, aux0 + hdr.num_aux, ch_locals],  # this challenge's own variables
    ], dtype=np.int64)
    mats = replicate(hdr.mats, ch.mats, hmap, segments, nvar, C)
    rows = {"header": hdr.num_constraints, "block": ch.num_constraints, "marks": ch.marks}
    return CompactR1CS(npub, hdr.num_aux + C * ch_locals, *mats, segments=segments), rows


# --- the Circuit ---------------------------------------------------------------------------------

class FilecoinCircuit(CompactMatrices):
    """One Filecoin PoRep parameter set (implements ``synthesis.circuits.Circuit``)."""

    family = "filecoin"
    matrices_prefix = "filecoin"

    def __init__(self, prm: FilecoinParams):
        self.prm = prm
        self.name = prm.name
        self._compact: CompactR1CS | None = None
        self._r1cs: R1CS | None = None
        self._lock = threading.Lock()
        self._digest: str | None = None
        self._rows: dict | None = None

    def __repr__(self) -> str:
        return f"FilecoinCircuit({self.name})"

    def digest(self) -> str:
        if self._digest is None:
            self._digest = params_digest(self.prm)
        return self._digest

    def num_partitions(self) -> int:
        return self.prm.partitions

    def compact_r1cs(self) -> CompactR1CS:
        """Built once per parameter set, cached in $ZKHIVE_CACHE_DIR/r1cs/filecoin-<digest>.npz."""
        with self._lock:
            if self._compact is None:
                path = self.matrices_path()
                rows_path = path.with_suffix(".rows.json")
                try:
                    compact = CompactR1CS.load(path)
                    self._rows = json.loads(rows_path.read_text())
                except (ValueError, KeyError, OSError, zipfile.BadZipFile):
                    compact, self._rows = build(self.prm)
                    compact.save(path)
                    rows_path.write_text(json.dumps(self._rows))
                self._compact = compact
            return self._compact

    def describe_row(self, i: int) -> str:
        """Where constraint ``i`` of a partition comes from: the header, or challenge c's gadget."""
        self.compact_r1cs()
        h, b = self._rows["header"], self._rows["block"]
        if i < h:
            return f"header constraint {i} (replica id bits, comm_r = H(comm_c, comm_r_last))"
        c, local = divmod(i - h, b)
        label = "?"
        for start, name in self._rows["marks"]:
            if start <= local:
                label = name
        return f"challenge {c}, {label} (constraint {i}, row {local} of the challenge block)"

    def check(self, z: np.ndarray, partition: int | None = None) -> None:
        """Hold z against the full matrices (small sets); C1Error naming the partition, the
        challenge and the gadget of the first failing constraint."""
        from ..r1cs import UnsatisfiedConstraint
        try:
            self.r1cs().check(z)
        except UnsatisfiedConstraint as e:
            raise C1Error(f"{self.describe_row(e.index)} is not satisfied", partition=partition) from None

    def size(self) -> dict[str, int]:
        """From the built matrices when they are built, else from the census (no build)."""
        if self.is_built():
            cr = self.compact_r1cs()
            cons, aux, nnz = cr.num_constraints, cr.num_aux, cr.nnz
        else:
            cons, aux, nnz = (self.census()[k] for k in ("constraints", "aux", "nonzeros"))
        npub = self.prm.num_public
        return {"constraints": cons, "variables": 1 + npub + aux, "aux": aux, "nonzeros": nnz,
                "public_inputs": npub, "domain": 1 << (cons + npub).bit_length()}

    def census(self) -> dict[str, int]:
        """The census's synthesized counts (no input rows), cached beside the matrices."""
        path = cache_dir() / "r1cs" / f"filecoin-{self.digest()}.census.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            from .census import census
            t = census(self.prm).synthesized
            row = {"constraints": t.constraints, "aux": t.aux, "inputs": t.inputs, "nonzeros": t.nnz}
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(row))
            return row

    # -- C1 ------------------------------------------------------------------------------------
    def parse_c1(self, doc: dict[str, Any]) -> c1mod.C1Document:
        if isinstance(doc, dict) and "params" in doc:
            if doc["params"] != self.name:
                raise C1Error(f"names {str(doc['params'])[:64]!r}, this circuit is {self.name}",
                              field="params")
            doc = {k: v for k, v in doc.items() if k != "params"}
        return c1mod.parse(self.prm, doc)

    def _check_k(self, k: int) -> None:
        if not isinstance(k, int) or not 0 <= k < self.prm.partitions:
            raise C1Error(f"partition index {k} is outside 0..{self.prm.partitions - 1}", partition=k)

    def vanilla(self, c1: c1mod.C1Document, k: int, *, check: bool = True):
        """Partition k's PartitionVanilla; ``check``: every vanilla check first (FilecoinC1Error
        naming partition, challenge and layer)."""
        self._check_k(k)
        if check:
            return c1mod.verify(self.prm, c1, partitions=[k])[0]
        from .vanilla import from_c1
        return from_c1(self.prm, c1, k)

    def public_inputs(self, c1: c1mod.C1Document, partition: int) -> list[int]:
        """StackedCompound::generate_public_inputs: replica_id, comm_d, comm_r, then per challenge
        the packed index bits of each inclusion proof (= the node's index) in circuit order.
        The challenges are derived again from the document's replica id, seed (and comm_r for
        SyntheticPoRep), their parents from the graph, as seal_commit_phase2's verifier does:
        never the indices the vanilla proofs carry (a proof of other nodes does not verify)."""
        from .graph import Graph
        self._check_k(partition)
        ch = np.asarray(c1mod.expected_challenges(self.prm, c1, partition), dtype=np.uint64)
        par = Graph.for_params(self.prm, c1.registered_proof).parents(ch)
        head = []
        for name in ("replica_id", "comm_d", "comm_r"):
            try:
                head.append(field.from_bytes(bytes(getattr(c1, name)), what=name))
            except field.FieldError:
                raise c1mod.FilecoinC1Error("is not below the BLS12-381 scalar field modulus", field=name) from None
        out = list(head)
        for i, c in enumerate(ch.tolist()):
            out += [c, *par[i, :6].tolist(), *par[i, 6:].tolist(), c, c, c]
        return [int(x) for x in out]

    @staticmethod
    def _public(pv) -> list[int]:
        out = [pv.replica_id, pv.comm_d, pv.comm_r]
        for i, c in enumerate(pv.challenges.tolist()):
            out += [c, *pv.drg_parents[i].tolist(), *pv.exp_parents[i].tolist(), c, c, c]
        return [int(x) for x in out]

    # -- witness -------------------------------------------------------------------------------
    def witness_blocks(self, pv) -> tuple[Synth, Synth, dict]:
        """The header (batch 1) and the challenges (batch B) in values mode."""
        prm, B = self.prm, len(pv.challenges)
        hv = {k: const_vec(getattr(pv, k), 1)
              for k in ("replica_id", "comm_d", "comm_r", "comm_r_last", "comm_c")}
        hs = Synth(batch=1, blocks=True)
        sh1, _, h = stacked.header_gadget(hs, hv)
        rep = lambda n: Num(None, np.repeat(n.val, B, axis=0))  # noqa: E731
        bits = [b if b.is_constant else Boolean(AllocatedBit(None, np.repeat(b.bit.val, B)), b.neg)
                for b in sh1.replica_id_bits]
        sh = stacked.Shared(rep(sh1.comm_d), rep(sh1.comm_c), rep(sh1.comm_r_last), bits)
        cs = Synth(batch=B, blocks=True)
        out = stacked.challenge_gadget(cs, prm, sh, pv)
        out["comm_r_hash"] = h
        return hs, cs, out

    def synthesize_compact(self, c1: c1mod.C1Document, partition: int, *, check: bool = True) -> assignment.Compact:
        pv = self.vanilla(c1, partition, check=check)
        return self.assignment_of(pv)

    def assignment_of(self, pv) -> assignment.Compact:
        B = len(pv.challenges)
        hs, cs, _ = self.witness_blocks(pv)
        pub_h = np.concatenate(getattr(hs, "public", []), axis=0)            # (3, 4)
        pub_c = np.stack(getattr(cs, "public", []), axis=1).reshape(-1, 4)  # (B * 18, 4)
        head = np.concatenate([field.vec_from_ints([1]), pub_h, pub_c])
        return assignment.from_blocks(head, hs.values, cs.values, B)

    def synthesize(self, c1: c1mod.C1Document, partition: int, *, check: bool = False) -> np.ndarray:
        """z for one partition as an (n, 4) Fr vector; ``check=True`` also checks the matrices."""
        z = self.synthesize_compact(c1, partition).to_vec()
        if check:
            self.check(z, partition)
        return z
