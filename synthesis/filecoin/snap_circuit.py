"""SnapDeals' EmptySectorUpdate as registered circuits (``snap-update-2k`` .. ``snap-update-64g``)
and its job document.

One parameter set a ``RegisteredUpdateProof`` (rust-filecoin-proofs-api ``registry.rs``;
go-state-types numbers them 0..4: StackedDrg{2KiB,8MiB,512MiB,32GiB,64GiB}V1), each one
``update.UpdateParams`` (its partitions, challenges, v28 parameter file stem). A proof is one
Groth16 proof a partition, in partition order, as ``generate_empty_sector_update_proof_with_vanilla``
returns them.

**The job document** (JSON; what the gateway makes of Curio's ``SNAP_DEALS_UPDATE`` request)::

    {"params": "snap-update-2k", "registered_proof": "StackedDrg2KiBV1",
     "comm_r_old": "0x..", "comm_d_new": "0x..", "comm_r_new": "0x..",   # field elements
     "h": 1,                                                            # optional: h_default
     "partition_proofs": [["<base64 of one bincode PartitionProof", "in strings of 256>"], ...]}

Every field is checked before the job is accepted (one-line ``C1Error`` naming the field): the
registered proof, the commitments (hex below r), ``h`` one of the size's ``hs``, exactly
``partition_count`` proofs, each the base64 of its bincode bytes cut in strings of ``CHUNK``
characters (a JSON string of a job is at most ``limits.string_bytes`` = 256 bytes), exactly the
byte length its shape gives (checked on the strings before decoding) and decoded by ``bincode.read_update_partition_proof`` (lengths before
allocation, errors naming the partition and the byte offset). Synthesis then runs
``snap.verify_partition`` (vanilla.rs ``verify``: errors naming partition, challenge, proof and
level) and the circuit's witness (``update.synthesize``, values mode).

**The matrices** (``build``) are kept compact (``synthesis.compact.CompactR1CS``), recorded
from the same ``update.synthesize`` in shape mode into an ordered ``TemplatingCS`` (bellperson's
row and variable order; each SHA-256 compression and Merkle Poseidon one template instance), and
only as far as they are not repeated: the header, then challenge blocks that repeat with an
affine column map. A challenge block's columns are ONE, header variables it shares (h bits,
partition bits, phi, the roots, comm_d_new, the apex leafs), its challenge's bits (allocated in
the header by ``gen_challenge_bits``, ``per_digest`` challenges a Poseidon digest) and its own
variables. With one digest (every size up to 32 KiB, 8 MiB, 16 MiB) challenge j's bits are
``bits_0 + j * top``: the block is one challenge, replicated ``challenge_count`` times. With
several (512 MiB .. 64 GiB: 86 challenges, 9 to 12 a digest) they are not affine in j, but a
group of ``per_digest`` consecutive challenges is: the block is ``per_digest`` challenges whose
bits lie in a window of one digest's variables (stride: a digest's variable count), the first
``challenge_count mod per_digest`` challenges stay in the header rows. Only the header and
challenge 0 are recorded (the other challenges' rows are challenge 0's over their own variables
and bits; seconds at 32 GiB, not the 81 M rows); every challenge's bit columns are checked
against the window map before the matrices are used. Cached on disk by the
circuit's digest (``$ZKHIVE_CACHE_DIR/r1cs/snap-<digest>.npz``); ``r1cs()`` expands them (small
sizes). The witness (``synthesize_compact``) is the header in values mode and every challenge
block in one values-mode batch, as an ``assignment.Compact``.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import field
from ..circuits import C1Error
from ..compact import CompactR1CS
from ..family.circuit import CompactMatrices
from . import bincode, snap
from . import update as upd

#: bump when the circuit's definition changes without a source change (it keys cached matrices)
CIRCUIT_VERSION = 2
#: characters of base64 a string of ``partition_proofs`` (limits.string_bytes; a multiple of 4)
CHUNK = 256
#: RegisteredUpdateProof (go-state-types abi numbering, what Curio sends as registered_proof)
REGISTERED = {0: "StackedDrg2KiBV1", 1: "StackedDrg8MiBV1", 2: "StackedDrg512MiBV1",
              3: "StackedDrg32GiBV1", 4: "StackedDrg64GiBV1"}
SHORT = {"2KiB": "2k", "8MiB": "8m", "512MiB": "512m", "32GiB": "32g", "64GiB": "64g"}
_SOURCES = ("filecoin/update.py", "filecoin/snap_circuit.py", "filecoin/stacked.py",
            "bellpepper/neptune.py", "bellpepper/sha256.py", "bellpepper/boolean.py",
            "bellpepper/num.py", "bellpepper/multipack.py", "bellpepper/neptune_params.py",
            "bellpepper/core.py", "bellpepper/insertion.py", "bellpepper/template.py",
            "bellpepper/compression.py", "bellpepper/uint32.py", "bellpepper/multieq.py",
            "sha256_spec.py", "compact.py")
FIELDS = ("params", "registered_proof", "comm_r_old", "comm_d_new", "comm_r_new", "h",
          "partition_proofs", "sector_number", "miner_id")


def name_of(registered_proof: str) -> str:
    for size, short in SHORT.items():
        if registered_proof == f"StackedDrg{size}V1":
            return f"snap-update-{short}"
    raise KeyError(registered_proof)


def proof_bytes(prm: upd.UpdateParams) -> int:
    """The exact length of one bincode ``PartitionProof`` of ``prm``."""
    def merkle(arities, shape):
        base, sub, top = shape
        groups = 1 + (1 if sub else 0) + (1 if top else 0)
        return 4 + 64 + 8 * groups + sum(16 + 32 * (a - 1) for a in arities)
    r = merkle(prm.tree_r_arities, prm.shape)
    d = merkle(snap.tree_d_arities(prm), prm.shape if prm.poseidon else (2, 0, 0))
    apex = 0 if prm.poseidon else 8 + 32 * prm.apex_leaf_count
    return 32 + apex + 8 + prm.challenge_count * (2 * r + d)


@dataclass
class UpdateJob:
    """A parsed job document."""
    registered_proof: str
    comm_r_old: int
    comm_d_new: int
    comm_r_new: int
    h: int
    proofs: list                 # bincode.UpdatePartitionProof a partition
    sector_number: int | None = None
    miner_id: int | None = None


def _felt(doc: dict, name: str) -> int:
    v = doc.get(name)
    if not isinstance(v, str) or not v.startswith("0x") or not 3 <= len(v) <= 66:
        raise C1Error("must be a 0x-prefixed hex string of at most 64 digits", field=name)
    try:
        x = int(v[2:], 16)
    except ValueError:
        raise C1Error(f"{v[:20]!r} is not hex", field=name) from None
    if x >= field.MODULUS:
        raise C1Error("is not below the BLS12-381 scalar field modulus", field=name)
    return x


def _uint(doc: dict, name: str, limit: int = 1 << 64) -> int | None:
    v = doc.get(name)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < limit:
        raise C1Error(f"must be an integer in 0..{limit - 1}", field=name)
    return v


def parse(prm: upd.UpdateParams, name: str, doc: Any) -> UpdateJob:
    """The job document, checked field by field (``C1Error`` naming the first wrong one)."""
    if not isinstance(doc, dict):
        raise C1Error("a SnapDeals update job is a JSON object")
    extra = sorted(set(doc) - set(FIELDS))
    if extra:
        raise C1Error(f"unknown field (the fields are {', '.join(FIELDS)})", field=str(extra[0])[:64])
    if doc.get("params", name) != name:
        raise C1Error(f"names {str(doc.get('params'))[:64]!r}, this circuit is {name}", field="params")
    rp = doc.get("registered_proof")
    if rp != prm.registered_proof:
        raise C1Error(f"{str(rp)[:64]!r}, {name} proves {prm.registered_proof}", field="registered_proof")
    comms = {k: _felt(doc, k) for k in ("comm_r_old", "comm_d_new", "comm_r_new")}
    h = _uint(doc, "h")
    h = upd.h_default(prm) if h is None else h
    if h not in prm.hs:
        raise C1Error(f"{h} is not one of {prm.hs} for {name}", field="h")
    proofs = doc.get("partition_proofs")
    if not isinstance(proofs, list) or len(proofs) != prm.partition_count:
        n = len(proofs) if isinstance(proofs, list) else "not a list:"
        raise C1Error(f"{n} proofs, {prm.partition_count} expected (one bincode PartitionProof a "
                      f"partition, base64)", field="partition_proofs")
    want = proof_bytes(prm)
    chars = 4 * -(-want // 3)
    parsed = []
    for k, chunks in enumerate(proofs):
        where = f"partition_proofs[{k}]"
        if not isinstance(chunks, list) or len(chunks) != -(-chars // CHUNK):
            got = f"{len(chunks)} strings" if isinstance(chunks, list) else "not a list of strings:"
            raise C1Error(f"{got}, the base64 of {want} bytes in {-(-chars // CHUNK)} strings of "
                          f"{CHUNK} characters expected", field=where, partition=k)
        for j, c in enumerate(chunks):
            last = j == len(chunks) - 1
            if not isinstance(c, str) or len(c) != (chars - CHUNK * j if last else CHUNK):
                raise C1Error(f"{len(c) if isinstance(c, str) else 'not a string:'} characters, "
                              f"{chars - CHUNK * j if last else CHUNK} expected",
                              field=f"{where}[{j}]", partition=k)
        try:
            raw = base64.b64decode("".join(chunks), validate=True)
        except (binascii.Error, ValueError):
            raise C1Error("is not base64", field=where, partition=k) from None
        try:
            parsed.append(bincode.read_update_partition_proof(prm, raw, k))
        except bincode.BincodeError as e:
            raise C1Error(f"{e.field} at byte {e.offset}: {str(e).split(': ', 2)[-1]}",
                          field=where, partition=k) from None
    return UpdateJob(rp, comms["comm_r_old"], comms["comm_d_new"], comms["comm_r_new"], h, parsed,
                     _uint(doc, "sector_number"), _uint(doc, "miner_id"))


def chunked(raw: bytes) -> list[str]:
    """A partition proof as the job document holds it: base64 in strings of ``CHUNK``."""
    text = base64.b64encode(raw).decode()
    return [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)]


def job_document(name: str, u: snap.UpdatedSector, **extra) -> dict:
    """The job document of an ``UpdatedSector`` (tests, ``zkhive`` tooling)."""
    prm = u.prm
    pp = [chunked(snap.to_bytes(prm, snap.partition_proof(u, k)))
          for k in range(prm.partition_count)]
    return {"params": name, "registered_proof": prm.registered_proof,
            "comm_r_old": hex(u.comm_r_old), "comm_d_new": hex(u.comm_d_new),
            "comm_r_new": hex(u.comm_r_new), "h": u.h, "partition_proofs": pp, **extra}


def max_document_bytes(prm: upd.UpdateParams, name: str) -> int:
    """The largest honest job document of ``prm`` as canonical JSON (sorted keys, no spaces):
    ``partition_count`` proofs of ``proof_bytes``, every commitment 66 characters, the sector
    number and miner id 2^64 - 1. Counted from one and two partitions, never built whole."""
    def size(n: int) -> int:
        top = hex(field.MODULUS - 1)
        doc = {"params": name, "registered_proof": prm.registered_proof, "comm_r_old": top, "comm_d_new": top,
               "comm_r_new": top, "h": max(prm.hs), "partition_proofs": [chunked(b"\xff" * proof_bytes(prm))] * n,
               "sector_number": (1 << 64) - 1, "miner_id": (1 << 64) - 1}
        return len(json.dumps(doc, sort_keys=True, separators=(",", ":")))
    one, two = size(1), size(2)
    return one + (prm.partition_count - 1) * (two - one)


def source_digest() -> str:
    from ..family.params import source_digest as digest_of
    return digest_of(_SOURCES)


# --- the matrices ---------------------------------------------------------------------------------

def layout(prm: upd.UpdateParams) -> tuple[int, int, int]:
    """(challenges in the header rows, challenges a block, copies of the block): one challenge
    ``challenge_count`` times when one digest holds every challenge's bits, else ``per_digest``
    challenges (``challenge_count mod per_digest`` first in the header)."""
    _, per, digests = upd.digests_of(prm)
    C = prm.challenge_count
    if digests == 1:
        return 0, 1, C
    m = C % per
    return m, per, (C - m) // per


def build(prm: upd.UpdateParams) -> CompactR1CS:
    """The partition's matrices as a ``CompactR1CS`` (see the module docstring): the header and
    challenge 0 recorded (ordered ``TemplatingCS``), challenges 1 .. m + g - 1 made from it
    (``_challenges``: every challenge block has the same rows over its own variables and its
    bits), the rows cut into the header (with m challenges) and one block of g challenges, the
    block's columns mapped to
    (ONE and shared header variables: stride 0 | the challenge-bit window: a digest's variables
    | its own variables: g blocks' aux). AssertionError when the structure is not what the
    replication assumes (every challenge's bits are checked against the map)."""
    from ..bellpepper.core import Synth
    from ..compact import CompactMatrix, Replicated, TemplatingCS, compact_matrices, expand_segments
    C = prm.challenge_count
    top, per, digests = upd.digests_of(prm)
    m, g, copies = layout(prm)
    cs = TemplatingCS(ordered=True)
    marks: list = []
    hd = upd.synthesize(Synth(cs=cs), prm, None, upto=1, marks=marks)
    npub = cs.num_public
    if npub != prm.num_public:
        raise AssertionError(f"{npub} public inputs recorded, {prm.num_public} expected")
    (h_rows, h_aux), (R, A) = marks[0], (marks[1][0] - marks[0][0], marks[1][1] - marks[0][1])
    # the challenge bits: challenge i at bits0 + (i // per) * S + (i % per) * top (S: a digest's
    # variables), which copy j of the block finds at window + j * L
    col = np.array([[npub - b.bit.key for b in ch] for ch in hd.gen], dtype=np.int64)    # (C, top)
    bits0 = int(col[0, 0])
    S = int(col[per, 0] - bits0) if digests > 1 else 0
    i = np.arange(C)[:, None]
    want = bits0 + (i // per) * S + (i % per) * top + np.arange(top)[None, :]
    if not np.array_equal(col, want):
        bad = np.argwhere(col != want)[0]
        raise AssertionError(f"challenge {bad[0]}'s bit {bad[1]} is variable {col[tuple(bad)]}, "
                             f"not {want[tuple(bad)]}")
    L = top if digests == 1 else S
    own0, own_n = 1 + npub + h_aux + m * A, g * A
    # the window: where copy 0's bits are, its copies' tiles inside the header's digest variables
    # (they end before the challenges' own variables: the device form's transposed product
    # writes each tile's columns from one task)
    used = col[m:m + g]
    w0 = min(int(used.min()), own0 - copies * L)
    if int(used.max()) >= w0 + L or w0 + copies * L > own0:
        raise AssertionError(f"challenge bits {int(used.min())}..{int(used.max())} do not fit a window of "
                             f"{L} whose {copies} copies end by variable {own0}")
    for t in range(g):
        rel = col[m + t::g][:copies] - w0 - np.arange(copies)[:, None] * L
        if np.any(rel != rel[0]) or rel.min() < 0 or rel.max() >= L:
            raise AssertionError(f"challenge {m + t} + j * {g}'s bits do not repeat in a window of {L}")
    hr = h_rows + m * R
    header, blocks, shared = [], [], set()
    for cm in compact_matrices(cs):
        cm = _challenges(cm, h_rows, m + g, col, 1 + npub + h_aux, A)
        e = int(cm.indptr[hr])
        header.append(CompactMatrix(cm.indptr[:hr + 1].copy(), cm.cols[:e].copy(), cm.coef[:e].copy(),
                                    cm.table))
        bc = cm.cols[e:].astype(np.int64)
        shared.update(np.unique(bc[((bc < w0) | (bc >= w0 + L)) & ((bc < own0) | (bc >= own0 + own_n))]).tolist())
        blocks.append((cm.indptr[hr:] - e, bc, cm.coef[e:].copy(), cm.table))
    shared_cols = np.array(sorted(shared | {0}), dtype=np.int64)
    tiles = ((w0, w0 + copies * L), (own0, own0 + copies * own_n))
    for lo, hi in tiles:
        inside = shared_cols[(shared_cols >= lo) & (shared_cols < hi)]
        if len(inside):
            raise AssertionError(f"the block reads variable {inside[0]}, inside the copies' columns")
    # local columns: the shared ones (runs of consecutive variables: a segment each), the window, own
    runs = np.flatnonzero(np.diff(shared_cols) != 1) + 1
    segs, lo = [], 0
    for run in np.split(shared_cols, runs):
        segs.append([lo, lo + len(run), int(run[0]), 0])
        lo += len(run)
    ns = lo
    segs.append([ns, ns + L, w0, L])
    segs.append([ns + L, ns + L + own_n, own0, own_n])
    if L == own_n:
        raise AssertionError("the window's stride equals the own variables' (the tiles would merge)")
    segments = np.array(segs, dtype=np.int64)
    nvar = ns + L + own_n
    base, stride = expand_segments(segments, nvar)

    def local(c: np.ndarray) -> np.ndarray:
        out = np.searchsorted(shared_cols, c)
        win = (c >= w0) & (c < w0 + L)
        own = (c >= own0) & (c < own0 + own_n)
        out[win] = ns + c[win] - w0
        out[own] = ns + L + c[own] - own0
        return out

    mats = []
    for hm, (ptr, bc, coef, table) in zip(header, blocks):
        loc = local(bc)
        if not np.array_equal(base[loc], bc):
            raise AssertionError("the block's column map does not give back its recorded columns")
        mats.append(Replicated(hm, CompactMatrix(ptr, loc.astype(np.int32), coef, table), base, stride,
                               copies))
    out = CompactR1CS(npub, h_aux + C * A, *mats, segments=segments)
    if out.num_constraints != h_rows + C * R:
        raise AssertionError(f"{out.num_constraints} rows, {h_rows + C * R} expected")
    return out


def _challenges(cm, h_rows: int, n: int, col: np.ndarray, own: int, A: int):
    """``cm`` (the header and challenge 0 recorded) with challenges 0 .. n - 1: challenge 0's
    rows again with its own variables moved by i * A and its bits replaced by challenge i's
    (``col[i]``); the header's variables and ONE as they are."""
    from ..compact import CompactMatrix
    e0 = int(cm.indptr[h_rows])
    c1 = cm.cols[e0:].astype(np.int64)
    ptr1 = cm.indptr[h_rows:] - e0
    if len(ptr1) - 1 <= 0 or int(ptr1[-1]) != len(c1):
        raise AssertionError("the recording does not end with challenge 0")
    is_own = (c1 >= own) & (c1 < own + A)
    order = np.argsort(col[0])
    pos = np.searchsorted(col[0], c1, sorter=order).clip(0, len(order) - 1)
    is_bit = col[0][order[pos]] == c1
    which = order[pos[is_bit]]
    cols, ptrs = [cm.cols[:e0]], [cm.indptr[:h_rows]]
    for i in range(n):
        c = c1.copy()
        c[is_own] += i * A
        c[is_bit] = col[i][which]
        cols.append(c.astype(np.int32))
        ptrs.append(e0 + i * len(c1) + ptr1[:-1])
    ptrs.append(np.array([e0 + n * len(c1)], dtype=np.int64))
    return CompactMatrix(np.concatenate(ptrs).astype(np.int64), np.concatenate(cols),
                         np.concatenate([cm.coef[:e0]] + [cm.coef[e0:]] * n), cm.table)


class UpdateCircuit(CompactMatrices):
    """One SnapDeals parameter set (implements ``synthesis.circuits.Circuit``)."""

    family = "filecoin-update"
    #: cuzk's proof kind (QueueStatus.proof_kind: the job's kind and its deadline, deadlines.snap_s)
    proof_kind = "snap-update"
    matrices_prefix = "snap"

    def __init__(self, name: str, prm: upd.UpdateParams):
        self.name, self.params = name, prm      # not ``prm``: that names a PoRep set's params
        self._compact: CompactR1CS | None = None
        self._r1cs = None
        self._digest: str | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"UpdateCircuit({self.name})"

    def digest(self) -> str:
        if self._digest is None:
            doc = {"family": self.family, "version": CIRCUIT_VERSION, "source": source_digest(),
                   "sector_size": self.params.sector_size, "poseidon": self.params.poseidon}
            self._digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
        return self._digest

    def max_document_bytes(self) -> int:
        """The largest honest job document (``max_document_bytes``): the kind's input bound."""
        return max_document_bytes(self.params, self.name)

    def num_partitions(self) -> int:
        return self.params.partition_count

    @property
    def file_stem(self) -> str:
        return self.params.file_stem

    def build_compact(self) -> CompactR1CS:
        return build(self.params)

    def size(self) -> dict[str, int]:
        """From the built matrices when they are built, else from the census (no build)."""
        if self.is_built():
            cr = self.compact_r1cs()
            cons, aux, nnz = cr.num_constraints, cr.num_aux, cr.nnz
        else:
            c = upd.census(self.params).synthesized
            cons, aux, nnz = c.constraints, c.aux, c.nnz
        npub = self.params.num_public
        return {"constraints": cons, "variables": 1 + npub + aux, "aux": aux, "nonzeros": nnz,
                "public_inputs": npub, "domain": 1 << (cons + npub).bit_length()}

    def parse_c1(self, doc: dict[str, Any]) -> UpdateJob:
        return parse(self.params, self.name, doc)

    def _check_k(self, k: int) -> None:
        if not isinstance(k, int) or not 0 <= k < self.params.partition_count:
            raise C1Error(f"partition index {k} is outside 0..{self.params.partition_count - 1}",
                          partition=k)

    def public_inputs(self, job: UpdateJob, partition: int) -> list[int]:
        self._check_k(partition)
        return upd.public_inputs(self.params, partition, job.h, job.comm_r_old, job.comm_d_new,
                                 job.comm_r_new)

    def witness(self, job: UpdateJob, partition: int) -> upd.PartitionWitness:
        """Partition k's vanilla proof checked (vanilla.rs ``verify``) and its circuit witness."""
        self._check_k(partition)
        try:
            return snap.verify_partition(self.params, partition, job.h, job.comm_r_old,
                                         job.comm_d_new, job.comm_r_new, job.proofs[partition])
        except snap.UpdateProofError as e:
            msg, head = str(e), f"partition {partition}"
            if msg.startswith(head):          # C1Error names the partition itself
                msg = msg[len(head):].lstrip(":, ")
            raise C1Error(msg, partition=partition) from None

    def synthesize_compact(self, job: UpdateJob, partition: int):
        """Partition k's z as an ``assignment.Compact`` (``update.witness``: the header, then every
        challenge block in one batch), its vanilla proof checked first."""
        return upd.witness(self.params, self.witness(job, partition))

    def synthesize(self, job: UpdateJob, partition: int, *, check: bool = False) -> np.ndarray:
        """z = (1, public, aux) of one partition; ``check``: held against the matrices."""
        z = self.synthesize_compact(job, partition).to_vec()
        if check:
            from ..r1cs import UnsatisfiedConstraint
            try:
                self.r1cs().check(z)
            except UnsatisfiedConstraint as e:
                raise C1Error(f"constraint {e.index} is not satisfied", partition=partition) from None
        return z


def _sets() -> dict[str, UpdateCircuit]:
    out = {}
    for size, short in SHORT.items():
        prm = upd.get(f"empty-sector-update-{size}")
        out[f"snap-update-{short}"] = UpdateCircuit(f"snap-update-{short}", prm)
    return out


SETS = _sets()
