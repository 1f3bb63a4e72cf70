"""Sealing a Filecoin sector as rust-fil-proofs does (seal_pre_commit_phase1/2), or a benchmark sector.

Real sealing (2 KiB and 8 MiB here; filecoin-proofs/src/api/seal.rs, storage-proofs-porep
stacked/vanilla):
- the data is the fr32-padded piece bytes (``fr32_pad``: every 254 bits of input in a 32-byte
  node whose top two bits are 0), zero-filled to the sector size; comm_d is TreeD's root;
- ``replica_id = trim(SHA-256(prover_id | sector_id u64 BE | ticket | comm_d | porep_id))``
  (stacked/vanilla/params.rs ``generate_replica_id``; trim = clear the top 2 bits of byte 31);
  Lotus's prover_id is the miner's ID-address payload (the uvarint of the actor id) zero-padded;
- labels (create_label/single.rs): node v of layer l is trim(SHA-256(replica_id | l u32 BE |
  v u64 BE | 20 zero bytes | 37 parent labels)), node 0 trim(SHA-256 of the first 64 bytes);
- TreeC's leaf v is Poseidon (arity = layers) over v's labels, layer 1 first; TreeR's leaf v is
  the encoded node, last label + data in Fr; comm_r = Poseidon2(comm_c, comm_r_last).

A benchmark sector (512 MiB, 32 GiB, 64 GiB: the labels of 2^30 nodes cannot be computed here) is
a committed-capacity sector (all data zero, so comm_d is the zero TreeD root Filecoin itself uses
for CC sectors) whose trees hold only the columns that one seed's challenges open: the
challenged nodes and their 14 parents. The parents' labels are pseudo-random (not labels of their
own parents); each challenged node's labels are computed from its parents', layer by layer, so
every vanilla proof checks (paths, labels, encoding, parents, challenges) and the circuit's
witness has Filecoin's shape. It is not a replica of anything: everything that shows it says
``benchmark sector``.
"""
from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import field
from ..bellpepper import neptune_params
from ..family import sector as store
from ..family.sector import SectorError, hexfe
from . import challenges as chal
from .document import BENCHMARK_NOTE
from .graph import Graph, label_parent_order
from .params import SETS, FilecoinParams, porep_id_of
from .trees import Tree, column_hashes

SECTOR_VERSION = 1


def trim(h: bytes) -> bytes:
    """Sha256Domain::trim_to_fr32 / bytes_into_fr_repr_safe: clear the top two bits."""
    return h[:31] + bytes([h[31] & 0x3F])


def vec(b: bytes) -> np.ndarray:
    """32-byte little-endian Fr repr(s) -> (n, 4) uint64 (synthesis.field's vector form)."""
    return np.frombuffer(b, dtype="<u8").reshape(-1, 4).astype(np.uint64)


def raw(v: np.ndarray) -> bytes:
    return np.ascontiguousarray(v, dtype="<u8").tobytes()


def fr32_pad(data: bytes, sector_size: int) -> bytes:
    """Filecoin's Fr32 padding of ``data`` (at most 127/128 of the sector), zero-filled."""
    unpadded = sector_size // 128 * 127
    if len(data) > unpadded:
        raise SectorError(f"{len(data)} bytes of data do not fit a {sector_size}-byte sector "
                          f"({unpadded} bytes before padding)")
    data = data + bytes(unpadded - len(data))
    out = bytearray()
    mask = (1 << 254) - 1
    for off in range(0, unpadded, 127):
        x = int.from_bytes(data[off:off + 127], "little")
        for q in range(4):
            out += ((x >> (254 * q)) & mask).to_bytes(32, "little")
    return bytes(out)


def fr32_unpad(padded: bytes) -> bytes:
    out = bytearray()
    for off in range(0, len(padded), 128):
        x = 0
        for q in range(4):
            x |= int.from_bytes(padded[off + 32 * q:off + 32 * q + 32], "little") << (254 * q)
        out += x.to_bytes(127, "little")
    return bytes(out)


def prover_id_from_miner(miner_id: int) -> bytes:
    """Lotus's toProverID: the ID address payload (uvarint of the actor id), zero-padded to 32."""
    if miner_id < 0:
        raise SectorError("miner id must be >= 0")
    out, x = bytearray(), miner_id
    while True:
        b, x = x & 0x7F, x >> 7
        out.append(b | (0x80 if x else 0))
        if not x:
            return bytes(out) + bytes(32 - len(out))


def replica_id(prover_id: bytes, sector_id: int, ticket: bytes, comm_d: bytes, porep_id: bytes) -> bytes:
    return trim(hashlib.sha256(prover_id + sector_id.to_bytes(8, "big") + ticket + comm_d + porep_id).digest())


def label_header(replica: bytes, layer: int, node: int) -> bytes:
    """The first 64 bytes of a label's preimage: replica id | layer u32 BE | node u64 BE | 20 zeros."""
    return replica + struct.pack(">IQ", layer, node) + bytes(20)


def create_label(replica: bytes, layer: int, node: int, parent_labels: list[bytes]) -> bytes:
    """One label from its 14 (or, in layer 1, 6) parents' labels (LabelingProof::create_label)."""
    if node == 0:
        return trim(hashlib.sha256(label_header(replica, layer, 0)).digest())
    order = label_parent_order(layer)
    return trim(hashlib.sha256(label_header(replica, layer, node)
                               + b"".join(parent_labels[i] for i in order)).digest())


def label_all(graph: Graph, replica: bytes, layers: int, parents: np.ndarray | None = None) -> np.ndarray:
    """Every label of a real sector: (layers, nodes, 4) uint64, in C++ (seal_host.cpp's fc_labels);
    ``label_all_py`` is the definition it is tested against."""
    from .graph import native
    cache = np.ascontiguousarray(graph.cache() if parents is None else parents, dtype=np.uint32)
    out = np.empty((layers, graph.size, 32), dtype=np.uint8)
    native().fc_labels(graph.size, layers, bytes(replica), cache.ctypes.data, out.ctypes.data)
    return out.view("<u8").reshape(layers, graph.size, 4).astype(np.uint64)


def label_all_py(graph: Graph, replica: bytes, layers: int) -> np.ndarray:
    """Every label of a real sector: (layers, nodes, 4) uint64. Sequential in each layer (a
    node's DRG parents precede it), one hashlib call a node."""
    n = graph.size
    parents = graph.cache().tolist()
    out = np.empty((layers, n, 4), dtype=np.uint64)
    prev = b""
    for layer in range(1, layers + 1):
        cur = bytearray(32 * n)
        view = memoryview(cur)
        for v in range(n):
            if v == 0:
                h = hashlib.sha256(label_header(replica, layer, 0)).digest()
            else:
                p = parents[v]
                base = b"".join([view[32 * q:32 * q + 32] for q in p[:6]])
                if layer == 1:
                    tail = base * 6 + base[:32]
                else:
                    blocks = base + b"".join([prev[32 * q:32 * q + 32] for q in p[6:]])
                    tail = blocks * 2 + blocks[:288]
                h = hashlib.sha256(label_header(replica, layer, v) + tail).digest()
            cur[32 * v:32 * v + 31] = h[:31]
            cur[32 * v + 31] = h[31] & 0x3F
        prev = bytes(cur)
        out[layer - 1] = vec(prev)
    return out


def encode(labels_last: np.ndarray, data: np.ndarray) -> np.ndarray:
    """encode(key, value) = key + value in Fr, for (n, 4) batches."""
    from arith import native
    return native.add(np.ascontiguousarray(labels_last, dtype=np.uint64),
                      np.ascontiguousarray(data, dtype=np.uint64))


@dataclass
class Sector:
    prm: FilecoinParams
    prover_id: bytes
    sector_id: int
    ticket: bytes
    replica_id: bytes
    nodes: np.ndarray        # (n,) uint64 sorted: every node, or a benchmark sector's populated ones
    data: np.ndarray         # (n, 4) the data (fr32 nodes) at ``nodes``
    columns: np.ndarray      # (n, layers, 4) the labels at ``nodes``, layer 1 first
    benchmark: bool
    seed: bytes | None = None   # a benchmark sector is populated for this interactive seed
    #: the kind it was sealed as: None for the set's V1_1 kind, or its SyntheticPoRep kind
    #: (its own porep id, so its own replica id; C1 opens the synthetic challenges)
    registered_proof: str | None = None

    def __post_init__(self):
        p = self.prm
        self.graph = Graph.for_params(p, self.registered_proof)
        self.tree_d = Tree.build((2,) * p.tree_d_depth, self.nodes, self.data, sha=True)
        self.tree_c = Tree.build(p.tree_c_arities, self.nodes, column_hashes(self.columns), sha=False)
        self.tree_r = Tree.build(p.tree_r_arities, self.nodes,
                                 encode(self.columns[:, -1], self.data), sha=False)

    # --- commitments (32-byte little-endian reprs, as C1 writes them) -------------------------
    @property
    def comm_d(self) -> bytes:
        return raw(self.tree_d.root_vec)

    @property
    def comm_c(self) -> bytes:
        return raw(self.tree_c.root_vec)

    @property
    def comm_r_last(self) -> bytes:
        return raw(self.tree_r.root_vec)

    @property
    def comm_r(self) -> bytes:
        return field.to_bytes(neptune_params.hash_ints([field.from_bytes(self.comm_c), field.from_bytes(self.comm_r_last)]))

    def position(self, nodes) -> np.ndarray:
        """Rows of ``nodes`` in this sector's arrays; a SectorError for a node it does not hold."""
        nodes = np.asarray(nodes, dtype=np.uint64).reshape(-1)
        k = np.minimum(np.searchsorted(self.nodes, nodes), len(self.nodes) - 1)
        missing = self.nodes[k] != nodes
        if missing.any():
            raise SectorError(f"node {int(nodes[missing][0])} is not populated in this benchmark sector "
                              f"(it was populated for another seed's challenges)")
        return k

    def challenges(self, seed: bytes) -> np.ndarray:
        p = self.prm
        return chal.all_challenges(self.replica_id, seed, p.partitions, p.challenges, p.nodes)

    # --- persistence (synthesis.family.sector's directory store) ------------------------------
    def save(self, directory) -> Path:
        meta = {
            "version": SECTOR_VERSION, "family": "filecoin", "params": self.prm.name,
            "registered_proof": self.registered_proof or self.prm.registered_proof, "benchmark": self.benchmark,
            "note": BENCHMARK_NOTE if self.benchmark else "sealed as rust-fil-proofs seals",
            # seed: a real sector's data seed, a benchmark sector's interactive seed
            "seed": "0x" + (self.seed or bytes(32)).hex(),
            "replica_id": hexfe(int.from_bytes(self.replica_id, "little")),
            "prover_id": self.prover_id.hex(), "sector_id": self.sector_id, "ticket": self.ticket.hex(),
            "comm_d": "0x" + self.comm_d.hex(), "comm_r": hexfe(int.from_bytes(self.comm_r, "little")),
            "populated_nodes": len(self.nodes),
        }
        return store.save(directory, {"nodes": self.nodes, "data": self.data, "columns": self.columns}, meta)

    @classmethod
    def load(cls, directory) -> "Sector":
        meta, prm, seed, rid = store.read_meta(directory, SETS)
        z = store.read_arrays(directory, ["nodes", "data", "columns"])
        n = len(z["nodes"])
        if z["data"].shape != (n, 4) or z["columns"].shape != (n, prm.layers, 4) or not 0 < n <= prm.nodes:
            raise SectorError(f"{Path(directory) / 'sector.npz'}: arrays do not match {prm.name}")
        try:
            sector = cls(prm, bytes.fromhex(meta["prover_id"]), int(meta["sector_id"]), bytes.fromhex(meta["ticket"]),
                         rid.to_bytes(32, "little"), z["nodes"].astype(np.uint64), z["data"].astype(np.uint64),
                         z["columns"].astype(np.uint64), bool(meta["benchmark"]), seed,
                         registered_proof=_kind(prm, meta.get("registered_proof")))
        except (KeyError, ValueError, TypeError) as e:
            raise SectorError(f"{Path(directory) / 'sector.json'}: malformed ({e!r})") from None
        store.check_commitment(directory, meta, int.from_bytes(sector.comm_r, "little"))
        return sector


def _kind(prm: FilecoinParams, rp) -> str | None:
    """A saved sector's kind: None for the set's V1_1 kind, its SyntheticPoRep kind, else an error."""
    if rp in (None, prm.registered_proof):
        return None
    if rp == prm.synthetic_proof:
        return rp
    raise ValueError(f"registered_proof {str(rp)[:64]!r} is not {prm.name}'s")


def seal(prm: FilecoinParams, data: bytes, prover_id: bytes, sector_id: int, ticket: bytes,
         seed: bytes | None = None, *, registered_proof: str | None = None) -> Sector:
    """Seal ``data`` (unpadded piece bytes) as rust-fil-proofs does: every node, every layer.
    ``seed``: what the data was drawn from, if it was (kept in sector.json). ``registered_proof``:
    the set's SyntheticPoRep kind to seal as that (its porep id), default the V1_1 kind."""
    if prm.benchmark:
        raise SectorError(f"{prm.name} is sealed as a benchmark sector here (seal_benchmark)")
    rp = registered_proof or prm.registered_proof
    if not prm.accepts(rp):
        raise SectorError(f"{prm.name} seals {prm.registered_proof} or {prm.synthetic_proof}, not {rp}")
    padded = fr32_pad(data, prm.sector_size)
    nodes = np.arange(prm.nodes, dtype=np.uint64)
    data_vec = vec(padded)
    comm_d = raw(Tree.build((2,) * prm.tree_d_depth, nodes, data_vec, sha=True).root_vec)
    rid = replica_id(prover_id, sector_id, ticket, comm_d, porep_id_of(rp))
    labels = label_all(Graph.for_params(prm, rp), rid, prm.layers)
    return Sector(prm, prover_id, sector_id, ticket, rid, nodes, data_vec,
                  np.ascontiguousarray(labels.transpose(1, 0, 2)), benchmark=False, seed=seed,
                  registered_proof=registered_proof)


def seal_benchmark(prm: FilecoinParams, prover_id: bytes, sector_id: int, ticket: bytes, seed: bytes) -> Sector:
    """A benchmark sector for ``seed``'s interactive challenges (see the module docstring)."""
    comm_d = raw(Tree.build((2,) * prm.tree_d_depth, np.zeros(0, np.uint64), np.zeros((0, 4), np.uint64),
                            sha=True).root_vec)
    rid = replica_id(prover_id, sector_id, ticket, comm_d, prm.porep_id)
    challenged = np.unique(chal.all_challenges(rid, seed, prm.partitions, prm.challenges, prm.nodes))
    graph = Graph.for_params(prm)
    parents = graph.parents(challenged)
    nodes = np.unique(np.concatenate([challenged, parents.reshape(-1).astype(np.uint64)]))
    pos = {int(v): i for i, v in enumerate(nodes)}
    labels = {}   # (layer, node) -> 32 bytes
    for i, v in enumerate(nodes.tolist()):
        for layer in range(1, prm.layers + 1):
            labels[layer, v] = trim(hashlib.sha256(b"zkhive filecoin benchmark label\0" + rid
                                                   + struct.pack(">IQ", layer, v)).digest())
    for layer in range(1, prm.layers + 1):
        for c, ps in zip(challenged.tolist(), parents.tolist()):   # ascending: DRG parents first
            plabels = [labels[layer, q] for q in ps[:6]] + [labels[layer - 1, q] if layer > 1 else b""
                                                            for q in ps[6:]]
            labels[layer, c] = create_label(rid, layer, c, plabels)
    columns = np.empty((len(nodes), prm.layers, 4), dtype=np.uint64)
    for v, i in pos.items():
        columns[i] = vec(b"".join(labels[layer, v] for layer in range(1, prm.layers + 1)))
    return Sector(prm, prover_id, sector_id, ticket, rid, nodes, np.zeros((len(nodes), 4), np.uint64),
                  columns, benchmark=True, seed=seed)


# --- the family interface (synthesis.family: generate, interactive_seed, c1_document) -------------

def randomness(tag: str, seed: bytes) -> bytes:
    """32 bytes from a seed, trimmed to 254 bits as Lotus's chain randomness is."""
    return trim(hashlib.sha256(tag.encode() + b"\0" + seed).digest())


def data_from_seed(seed: bytes, n: int) -> bytes:
    """n pseudo-random piece bytes (SHA-256 in counter mode)."""
    key = hashlib.sha256(b"filecoin sector data\0" + seed).digest()
    return b"".join(hashlib.sha256(key + i.to_bytes(8, "little")).digest() for i in range(-(-n // 32)))[:n]


def generate(prm: FilecoinParams, seed: bytes, *, miner: int = 1000, sector_id: int = 1,
             ticket: bytes | None = None, challenge_seed: bytes | None = None) -> Sector:
    """A sector from a seed: real data sealed (2 KiB, 8 MiB), or a benchmark sector populated for
    ``challenge_seed`` (default: derived from ``seed``)."""
    ticket = ticket or randomness("filecoin ticket", seed)
    prover = prover_id_from_miner(miner)
    if prm.benchmark:
        return seal_benchmark(prm, prover, sector_id, ticket,
                              challenge_seed or randomness("filecoin interactive seed", seed))
    return seal(prm, data_from_seed(seed, prm.sector_size // 128 * 127), prover, sector_id, ticket, seed=seed)


def interactive_seed(sector: Sector) -> bytes:
    """A benchmark sector's own seed; for a real sector one derived from its seed (or replica id)."""
    if sector.benchmark:
        return sector.seed
    return randomness("filecoin interactive seed", sector.seed or sector.replica_id)


def c1_document(sector: Sector, seed: bytes) -> dict:
    from .c1 import c1_document as doc
    return doc(sector, seed)
