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

The matrices are recorded from the same ``update.synthesize`` in shape mode (bellperson's row
order), built once a process: ~30 s at 2 KiB on one core; the sizes from 8 MiB up are
registered (names, digests, file stems, census sizes) but their matrices are not practical to
build in Python.
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
from . import bincode, snap
from . import update as upd

CIRCUIT_VERSION = 1
#: characters of base64 a string of ``partition_proofs`` (limits.string_bytes; a multiple of 4)
CHUNK = 256
#: RegisteredUpdateProof (go-state-types abi numbering, what Curio sends as registered_proof)
REGISTERED = {0: "StackedDrg2KiBV1", 1: "StackedDrg8MiBV1", 2: "StackedDrg512MiBV1",
              3: "StackedDrg32GiBV1", 4: "StackedDrg64GiBV1"}
SHORT = {"2KiB": "2k", "8MiB": "8m", "512MiB": "512m", "32GiB": "32g", "64GiB": "64g"}
_SOURCES = ("filecoin/update.py", "filecoin/snap_circuit.py", "filecoin/stacked.py",
            "bellpepper/neptune.py", "bellpepper/sha256.py", "bellpepper/boolean.py",
            "bellpepper/num.py", "bellpepper/multipack.py", "bellpepper/neptune_params.py",
            "bellpepper/core.py", "bellpepper/insertion.py")
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


class UpdateCircuit:
    """One SnapDeals parameter set (implements ``synthesis.circuits.Circuit``)."""

    family = "filecoin-update"
    #: cuzk's proof kind (QueueStatus.proof_kind; the job's kind and its deadline, deadlines.snap_s)
    proof_kind = "snap-update"

    def __init__(self, name: str, prm: upd.UpdateParams):
        self.name, self.params = name, prm      # not ``prm``: that names a PoRep set's params
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

    def size(self) -> dict[str, int]:
        c = upd.census(self.params).synthesized
        npub = self.params.num_public
        return {"constraints": c.constraints, "variables": 1 + npub + c.aux, "aux": c.aux,
                "nonzeros": c.nnz, "public_inputs": npub,
                "domain": 1 << (c.constraints + npub).bit_length()}

    def r1cs(self):
        """The partition's matrices, recorded once a process (``update.synthesize``, shape)."""
        from ..builder import ConstraintSystem
        from ..bellpepper.core import Synth
        with self._lock:
            if self._r1cs is None:
                s = Synth(cs=ConstraintSystem(with_values=False))
                upd.synthesize(s, self.params, None)
                self._r1cs = s.cs.to_r1cs()
            return self._r1cs

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

    def synthesize(self, job: UpdateJob, partition: int, *, check: bool = False) -> np.ndarray:
        """z = (1, public, aux) of one partition; ``check``: held against the matrices."""
        from ..bellpepper.check import assignments
        from ..bellpepper.core import Synth
        w = self.witness(job, partition)
        s = Synth(batch=1)
        upd.synthesize(s, self.params, w)
        z = np.ascontiguousarray(assignments(s)[0])
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
