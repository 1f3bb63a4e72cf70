"""WinningPoSt and WindowPoSt as registered circuits: the job document, its checks, the Circuit.

**The job document** (JSON, what ``zkhive submit`` takes and what the gateway makes of a cuzk
``WINNING_POST`` / ``WINDOW_POST_PARTITION`` request)::

    {"params": "window-post-2k",                  # the parameter set (post.SETS)
     "registered_proof": "StackedDrgWindow2KiBV1_2",
     "randomness": "0x<64 hex digits>",           # the 32 bytes, below the field modulus
     "miner_id": 1000,                            # the prover id is its ID address payload
     "partition_index": 0,                        # WindowPoSt: the partition; WinningPoSt: 0
     "sectors": [{"sector_id": 234, "comm_r": "0x..."}],
     "vanilla_proofs": [["<base64>", "<base64>", ...]]}

``sectors`` are the partition's public sectors in order; ``vanilla_proofs[i]`` is sector i's
bincode ``FallbackPoStSectorProof`` (what Curio sends, one a sector) as standard base64 cut into
pieces of at most ``PIECE`` characters (a document's strings are bounded by ``limits.string_bytes``).
WinningPoSt: exactly one sector (its 66 challenges); WindowPoSt: 1 to ``sector_count`` sectors,
a partial partition padded by repeating the last sector as ``single_partition_vanilla_proofs``
and ``generate_public_inputs`` do. The registered proof fixes the challenge rule
(rust-filecoin-proofs-api ``RegisteredPoStProof::version``: Winning V1 and Window V1 are API
1.0.0, challenge ``sector_index * challenge_count + n``; Window V1_2 is 1.2.0, challenge ``n``);
the two WindowPoSt versions share one circuit and one key (parameters.json has one file).

**Checks** (``parse``, before any synthesis; ``C1Error`` naming the field): the document's shape
and bounds; the registered proof one of the set's; randomness a canonical field element
(``as_safe_commitment``); sector ids distinct; each vanilla proof decoded by the bounded bincode
reader (``bincode.read_post_sector_proof``: its offset named), its sector id and comm_r those of
``sectors[i]``, then the vanilla verification (``post.verify``: H(comm_c, comm_r_last) = comm_r,
every challenged leaf derived from randomness and sector id, every path reaching comm_r_last;
errors name the sector, challenge and level).

**The Circuit** (``PostCircuit``): one partition a job (cuzk's request is one partition); the
matrices are ``post.build``'s, cached on disk by digest; the witness ``post.witness``; the keys'
Filecoin names ``post.PostParams.file_stem`` (v28-proof-of-spacetime-fallback-...).
"""
from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import threading
from dataclasses import asdict, dataclass
from typing import Annotated, Any

import numpy as np
from pydantic import Field, StringConstraints

from .. import field
from ..circuits import C1Error
from ..compact import CompactR1CS
from ..family.c1 import Bytes32, Fr, Strict, validate
from ..family.circuit import CompactMatrices
from . import bincode as bc
from . import post

#: base64 characters a piece of a vanilla proof in a document (under limits.string_bytes' 256)
PIECE = 192
#: bump when the circuit's definition changes without a source change (it keys cached matrices)
CIRCUIT_VERSION = 1
_SOURCES = ("filecoin/post.py", "filecoin/post_job.py", "filecoin/stacked.py", "bellpepper/num.py",
            "bellpepper/boolean.py", "bellpepper/neptune.py", "bellpepper/neptune_params.py", "bellpepper/core.py",
            "compact.py")

#: go-state-types abi.RegisteredPoStProof (cuzk prover.rs ``registered_post_proof_from_u64``:
#: Go's ``..V1_1`` window proofs are rust-filecoin-proofs-api's ``..V1_2``)
REGISTERED_POST_PROOFS = {
    0: "StackedDrgWinning2KiBV1", 1: "StackedDrgWinning8MiBV1", 2: "StackedDrgWinning512MiBV1",
    3: "StackedDrgWinning32GiBV1", 4: "StackedDrgWinning64GiBV1",
    5: "StackedDrgWindow2KiBV1", 6: "StackedDrgWindow8MiBV1", 7: "StackedDrgWindow512MiBV1",
    8: "StackedDrgWindow32GiBV1", 9: "StackedDrgWindow64GiBV1",
    10: "StackedDrgWindow2KiBV1_2", 11: "StackedDrgWindow8MiBV1_2", 12: "StackedDrgWindow512MiBV1_2",
    13: "StackedDrgWindow32GiBV1_2", 14: "StackedDrgWindow64GiBV1_2",
}
#: cuzk's proof kind names (types.rs ``ProofKind`` Display: QueueStatus.proof_kind)
KINDS = {"winning": "winning-post", "window": "window-post"}


def api_version(registered_proof: str) -> str:
    """rust-filecoin-proofs-api ``RegisteredPoStProof::version``."""
    return "1.2.0" if registered_proof.endswith("V1_2") else "1.0.0"


def params_of(registered_proof: str) -> post.PostParams:
    """The parameter set proving ``registered_proof``; ValueError naming the known ones."""
    for prm in post.SETS.values():
        if registered_proof in prm.registered_proofs:
            return prm
    raise ValueError(f"registered proof {registered_proof[:64]!r} is not a PoSt proof of this cluster "
                     f"(one of {', '.join(REGISTERED_POST_PROOFS.values())})")


def max_sectors(prm: post.PostParams) -> int:
    """Vanilla proofs a request carries at most: WinningPoSt's one, a WindowPoSt partition's."""
    return post.WINNING_POST_SECTOR_COUNT if prm.kind == "winning" else prm.sector_count


def max_proof_bytes(prm: post.PostParams) -> int:
    """A FallbackPoStSectorProof's exact size for ``prm`` (fixed by the tree shape)."""
    _, sub, top = prm.shape
    groups = 1 + (1 if sub else 0) + (1 if top else 0)       # base, sub, top paths: a length each
    one = 4 + 64 + 8 * groups + sum(8 + 32 * (a - 1) + 8 for a in prm.arities)
    return 8 + 32 + 8 + 8 + bc.sector_challenge_count(prm) * one + 64


# --- the document --------------------------------------------------------------------------

def max_document_bytes(prm: post.PostParams) -> int:
    """The largest honest job document of ``prm`` as canonical JSON (sorted keys, no spaces: what
    ``submit_job`` stores): ``max_sectors`` sectors, each vanilla proof ``max_proof_bytes`` long,
    every number at its widest (ids and the miner 2^64 - 1, the partition 2^32 - 1). Counted from
    one and two sectors (a JSON array grows by the same bytes an item), never built whole."""
    def size(n: int) -> int:
        doc = document(prm, max(prm.registered_proofs, key=len), b"\xff" * 32, (1 << 64) - 1,
                       [b"\xff" * max_proof_bytes(prm)] * n, (1 << 32) - 1)
        for s in doc["sectors"]:
            s["sector_id"] = (1 << 64) - 1
        return len(json.dumps(doc, sort_keys=True, separators=(",", ":")))
    one, two = size(1), size(2)
    return one + (max_sectors(prm) - 1) * (two - one)



class SectorModel(Strict):
    sector_id: int = Field(ge=0, lt=1 << 64)
    comm_r: Fr


Piece = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9+/]*={0,2}$", max_length=PIECE)]


@functools.lru_cache(maxsize=None)
def _model(prm: post.PostParams) -> type[Strict]:
    """The document's pydantic model for ``prm`` (its bounds: sectors, base64 pieces), made once."""
    n, pieces = max_sectors(prm), -(-((max_proof_bytes(prm) + 2) // 3 * 4) // PIECE)

    class PostDocument(Strict):
        params: Annotated[str, Field(max_length=64)]
        registered_proof: Annotated[str, Field(max_length=64)]
        randomness: Bytes32
        miner_id: int = Field(ge=0, lt=1 << 64)
        partition_index: int = Field(ge=0, lt=1 << 32)
        sectors: list[SectorModel] = Field(min_length=1, max_length=n)
        vanilla_proofs: list[Annotated[list[Piece], Field(min_length=1, max_length=pieces)]] = \
            Field(min_length=1, max_length=n)
    return PostDocument


@dataclass
class PostJob:
    """A parsed, checked PoSt job: the public sectors and the circuit sectors' witnesses."""
    prm: post.PostParams
    registered_proof: str
    api_version: str
    randomness: bytes
    miner_id: int
    partition_index: int
    sectors: list[tuple[int, int]]        # the partition's public sectors (id, comm_r)
    proofs: list[post.SectorProof]        # one a sector (WinningPoSt: 66 one-challenge ones)


def document(prm: post.PostParams, registered_proof: str, randomness: bytes, miner_id: int,
             vanilla_proofs: list[bytes], partition_index: int = 0) -> dict:
    """A job document from Curio's fields (the gateway's, and ``zkhive`` users' way to make one):
    each vanilla proof's sector id and comm_r read from its first 40 bytes (``parse`` checks the
    rest); ValueError naming ``vanilla_proofs[i]`` when one is shorter."""
    sectors = []
    for i, raw in enumerate(vanilla_proofs):
        if len(raw) < 40:
            raise ValueError(f"vanilla_proofs[{i}]: {len(raw)} bytes, a FallbackPoStSectorProof has "
                             f"at least 40 (sector_id, comm_r)")
        sectors.append({"sector_id": int.from_bytes(raw[:8], "little"),
                        "comm_r": "0x" + raw[8:40][::-1].hex()})
    pieces = []
    for raw in vanilla_proofs:
        text = base64.b64encode(raw).decode()
        pieces.append([text[j:j + PIECE] for j in range(0, len(text), PIECE)] or [""])
    return {"params": prm.name, "registered_proof": registered_proof, "randomness": "0x" + randomness.hex(),
            "miner_id": miner_id, "partition_index": partition_index, "sectors": sectors,
            "vanilla_proofs": pieces}


def parse(prm: post.PostParams, doc: Any) -> PostJob:
    """Validate a job document for ``prm`` and verify its vanilla proofs; C1Error naming the field."""
    m = validate(_model(prm), doc, partition_of=lambda loc: None)
    if m.params != prm.name:
        raise C1Error(f"names {m.params!r}, this circuit is {prm.name}", field="params")
    if m.registered_proof not in prm.registered_proofs:
        raise C1Error(f"{m.registered_proof!r} is not proved by {prm.name} (its registered proofs: "
                      f"{', '.join(prm.registered_proofs)})", field="registered_proof")
    randomness = bytes.fromhex(m.randomness[2:])
    if int.from_bytes(randomness, "little") >= field.MODULUS:
        raise C1Error("not a canonical field element (as_safe_commitment refuses it): "
                      f"0x{randomness.hex()[:16]}...", field="randomness")
    if prm.kind == "winning" and m.partition_index:
        raise C1Error(f"{m.partition_index}: a WinningPoSt is one partition, 0", field="partition_index")
    if len(m.vanilla_proofs) != len(m.sectors):
        raise C1Error(f"{len(m.vanilla_proofs)} vanilla proofs for {len(m.sectors)} sectors",
                      field="vanilla_proofs")
    seen: dict[int, int] = {}
    for i, s in enumerate(m.sectors):
        if s.sector_id in seen:
            raise C1Error(f"sector id {s.sector_id} again (sectors[{seen[s.sector_id]}] has it)",
                          field=f"sectors[{i}].sector_id")
        seen[s.sector_id] = i
    api = api_version(m.registered_proof)
    pub = [(s.sector_id, int(s.comm_r, 16)) for s in m.sectors]
    proofs: list[post.SectorProof] = []
    for i, pieces in enumerate(m.vanilla_proofs):
        at = f"vanilla_proofs[{i}]"
        try:
            raw = base64.b64decode("".join(pieces), validate=True)
        except (binascii.Error, ValueError) as e:
            raise C1Error(f"not standard base64 ({e})", field=at) from None
        try:
            d = bc.read_post_sector_proof(prm, raw, i)
        except (bc.BincodeError, post.PostProofError) as e:
            raise C1Error(str(e), field=at) from None
        sid, comm_r = pub[i]
        if d.sector_id != sid:
            raise C1Error(f"the vanilla proof is of sector id {d.sector_id}, sectors[{i}] is {sid}",
                          field=f"sectors[{i}].sector_id")
        if int.from_bytes(d.comm_r, "little") != comm_r:
            raise C1Error(f"sector {i} (id {sid}): the vanilla proof's comm_r is "
                          f"0x{int.from_bytes(d.comm_r, 'little'):064x}, not this one",
                          field=f"sectors[{i}].comm_r")
        proofs += bc.to_post_proofs(prm, d)
    job = PostJob(prm, m.registered_proof, api, randomness, m.miner_id, m.partition_index, pub, proofs)
    try:
        post.verify(prm, randomness, _public(job), proofs, job.partition_index, api_version=api, whole=False)
    except post.PostProofError as e:
        raise C1Error(str(e), field="vanilla_proofs") from None
    return job


@dataclass
class BenchmarkReplica:
    """What ``post.vanilla_proof`` reads of a sealed sector, for a PoSt benchmark: a sparse TreeR
    (``trees.Tree``) holding only the challenged leaves (pseudo-random field elements from the
    seed; every other leaf 0), comm_c from the seed, comm_r = H(comm_c, comm_r_last). The vanilla
    proofs of every sector id given share this one replica (the PoSt circuit checks no replica
    id), as a 32 GiB PoRep benchmark sector holds only its challenged nodes."""
    sector_id: int
    comm_c: bytes
    comm_r_last: bytes
    comm_r: bytes
    tree_r: Any


def benchmark_vanilla_proofs(prm: post.PostParams, randomness: bytes, sector_ids: list[int], *,
                             registered_proof: str | None = None, partition_index: int = 0,
                             seed: bytes = b"zkhive post benchmark") -> list[bytes]:
    """Curio's bytes (one bincode FallbackPoStSectorProof a sector) for a partition of
    ``sector_ids`` over one ``BenchmarkReplica``: a valid WindowPoSt / WinningPoSt input at any
    size without sealing (a 32 GiB window partition: 23,490 leaves of 2^30 held)."""
    from ..bellpepper.neptune_params import hash_ints
    from .trees import Tree
    api = api_version(registered_proof) if registered_proof else prm.api_version
    if prm.kind == "winning":
        if len(sector_ids) != 1:
            raise ValueError("a WinningPoSt benchmark is one sector")
        per = [[post.sector_challenges(prm, randomness, sector_ids[0], i, api)[0] for i in range(prm.sector_count)]]
    else:
        per = [post.sector_challenges(prm, randomness, sid, partition_index * prm.sector_count + i, api)
               for i, sid in enumerate(sector_ids)]
    leaves = np.unique(np.asarray(per, dtype=np.uint64).reshape(-1))
    digests = b"".join(hashlib.sha256(seed + b"\0" + int(x).to_bytes(8, "little")).digest() for x in leaves)
    vals = np.frombuffer(digests, dtype="<u8").reshape(-1, 4).astype(np.uint64)
    vals[:, 3] &= np.uint64((1 << 62) - 1)                       # below 2^254 < r: canonical
    tree = Tree.build(prm.arities, leaves, vals, sha=False)
    comm_c = int.from_bytes(hashlib.sha256(seed + b"\0comm_c").digest(), "little") >> 2
    comm_r_last = tree.root
    rep = BenchmarkReplica(0, field.to_bytes(comm_c), field.to_bytes(comm_r_last),
                           field.to_bytes(hash_ints([comm_c, comm_r_last])), tree)
    out = []
    for sid, chs in zip(sector_ids, per):
        if prm.kind == "winning":
            sps = [post.vanilla_proof(rep, [c], sid) for c in chs]
        else:
            sps = [post.vanilla_proof(rep, chs, sid)]
        out.append(bc.write_post_sector_proof(prm, sps))
    return out


def _public(job: PostJob) -> list[tuple[int, int]]:
    """The public sectors ``post.verify`` / ``public_inputs`` take: WinningPoSt's one sector once
    a circuit sector (as ``verify_winning_post`` lists it 66 times)."""
    return job.sectors * job.prm.sector_count if job.prm.kind == "winning" else job.sectors


# --- the Circuit -----------------------------------------------------------------------------

def source_digest() -> str:
    from ..family.params import source_digest as digest_of
    return digest_of(_SOURCES)


class PostCircuit(CompactMatrices):
    """One FallbackPoSt parameter set (implements ``synthesis.circuits.Circuit``)."""

    family = "filecoin"
    matrices_prefix = "post"

    def __init__(self, prm: post.PostParams):
        self.prm = prm
        self.name = prm.name
        #: cuzk's proof kind (QueueStatus.proof_kind), the job record's ``kind``
        self.proof_kind = KINDS[prm.kind]
        #: Filecoin's name of the keys (parameters.json), without .params / .vk
        self.filecoin_file_stem = prm.file_stem
        self._compact: CompactR1CS | None = None
        self._r1cs = None
        self._lock = threading.Lock()
        self._digest: str | None = None

    def __repr__(self) -> str:
        return f"PostCircuit({self.name})"

    def digest(self) -> str:
        if self._digest is None:
            doc = {"family": "filecoin-post", "version": CIRCUIT_VERSION, "source": source_digest(),
                   **asdict(self.prm)}
            self._digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
        return self._digest

    def num_partitions(self) -> int:
        return 1

    def max_document_bytes(self) -> int:
        """The largest honest job document (``max_document_bytes``): the kind's input bound."""
        return max_document_bytes(self.prm)

    def build_compact(self) -> CompactR1CS:
        return post.build(self.prm)

    def size(self) -> dict[str, int]:
        if self.is_built():
            cr = self.compact_r1cs()
            cons, aux, nnz = cr.num_constraints, cr.num_aux, cr.nnz
        else:
            t = post.census(self.prm).synthesized
            cons, aux, nnz = t.constraints, t.aux, t.nnz
        npub = self.prm.num_public
        return {"constraints": cons, "variables": 1 + npub + aux, "aux": aux, "nonzeros": nnz,
                "public_inputs": npub, "domain": 1 << (cons + npub).bit_length()}

    def describe(self) -> str:
        """``zkhive circuits``' line: the kind, the shape, the counts (census or built matrices)."""
        p, z = self.prm, self.size()
        return (f"{self.proof_kind} ({', '.join(p.registered_proofs)}), {p.sector_count} sectors x "
                f"{p.challenge_count} challenges, tree {'-'.join(map(str, p.shape))}; {z['constraints']} "
                f"constraints, {z['public_inputs'] + 1} inputs (ONE included), {z['nonzeros']} nonzeros, "
                f"domain 2^{z['domain'].bit_length() - 1}; keys {p.file_stem}")

    # -- the job -----------------------------------------------------------------------------
    def parse_c1(self, doc: dict[str, Any]) -> PostJob:
        return parse(self.prm, doc)

    def _check_k(self, k: int) -> None:
        if k != 0:
            raise C1Error(f"partition index {k}: a PoSt job is one partition, 0", partition=k)

    def public_inputs(self, job: PostJob, partition: int) -> list[int]:
        """``FallbackPoStCompound::generate_public_inputs`` of the request's partition: per
        circuit sector comm_r and its challenged leaves, derived again from the randomness and
        the sector ids (never the leaves the vanilla proofs carry)."""
        self._check_k(partition)
        return post.public_inputs(self.prm, job.randomness, _public(job), job.partition_index,
                                  api_version=job.api_version, whole=False)

    def synthesize_compact(self, job: PostJob, partition: int):
        self._check_k(partition)
        return post.witness(self.prm, post.pad_partition(job.proofs, self.prm.sector_count))

    def synthesize(self, job: PostJob, partition: int, *, check: bool = False) -> np.ndarray:
        z = self.synthesize_compact(job, partition).to_vec()
        if check:
            self.r1cs().check(z)
        return z


CIRCUITS = {name: PostCircuit(prm) for name, prm in post.SETS.items()}
