"""Filecoin's SDR graph: the ChaCha8 bucket DRG and the Feistel expander, as rust-fil-proofs builds them.

Sources (rust-fil-proofs 87348a7):
- ``storage-proofs-core/src/drgraph.rs`` ``BucketGraph::parents``: nodes 0 and 1 have 6 parents 0;
  node v >= 2 seeds ChaCha8 with ``drg_seed (28 bytes) | v as u32 LE`` and draws, for each of the
  m' = 5 other parents, ``bucket = next_u64 % ceil(log2(v * m')) + 1``, then a distance in
  ``[max(2, min(v m', 2^bucket) >> 1), min(v m', 2^bucket)]`` (``next_u64 % n + lo``); the parent
  is ``(v m' - distance) / m'`` (v - 1 if that is v). From api 1.1.0 the immediate predecessor
  v - 1 is parent 0 and the drawn ones are parents 1..5 (api 1.0.0: drawn 0..4, predecessor 5).
- ``drgraph::derive_drg_seed``: the first 28 bytes of SHA-256("Filecoin_DRSample" | porep_id).
- ``stacked/vanilla/graph.rs`` ``correspondent``: expander parent i of v is
  ``feistel::permute(8 N, 8 v + i, keys) / 8``, keys = SHA-256("Filecoin_Feistel" | porep_id)
  as four u64 LE; ``crypto/feistel.rs``: 3 rounds over an even bit split of the next power of 4
  >= 8 N, round function = the first 8 bytes (BE) of BLAKE2b-512(right u64 BE | key u64 BE),
  masked; cycle-walk until the result is below 8 N.
- ``stacked/vanilla/cache.rs``: the parents cache is, per node, the 6 DRG then the 8 expander
  parents as u32 LE (56 bytes a node); ``parent_cache.json`` records its SHA-256 per graph,
  keyed by ``cache_path``'s SHA-256 over the hasher name, the graph identifier, the Feistel keys
  and the node count (tests/unit/test_filecoin_seal_graph.py checks both for our graphs).

Parents of a node's label (create_label/single.rs): layer 1 hashes the 6 DRG parents' labels
repeated to 37; layers >= 2 hash the 14 parents (DRG parents from the same layer, expander
parents from the previous one) repeated to 37: p0..p13, p0..p13, p0..p8.
"""
from __future__ import annotations

import ctypes
import hashlib
from pathlib import Path

import numpy as np

from .params import DRG_PARENTS, EXP_PARENTS, FilecoinParams

DRSAMPLE_DST = b"Filecoin_DRSample"
FEISTEL_DST = b"Filecoin_Feistel"
FEISTEL_ROUNDS = 3
PARENTS = DRG_PARENTS + EXP_PARENTS
#: rust-fil-proofs' storage-proofs-core parameter_cache VERSION (the parents cache's file name).
PARAMETER_CACHE_VERSION = 28

_M64 = (1 << 64) - 1


def porep_domain_seed(tag: bytes, porep_id: bytes) -> bytes:
    """crypto::derive_porep_domain_seed: SHA-256(tag | porep_id)."""
    return hashlib.sha256(tag + porep_id).digest()


def drg_seed(porep_id: bytes) -> bytes:
    return porep_domain_seed(DRSAMPLE_DST, porep_id)[:28]


def feistel_keys(porep_id: bytes) -> tuple[int, int, int, int]:
    raw = porep_domain_seed(FEISTEL_DST, porep_id)
    return tuple(int.from_bytes(raw[8 * i:8 * i + 8], "little") for i in range(4))


# --- ChaCha8 (rand_chacha's ChaCha8Rng, vectorised over many seeds) --------------------------

_SIGMA = np.array([0x61707865, 0x3320646E, 0x79622D32, 0x6B206574], dtype=np.uint32)


def _rotl(x: np.ndarray, n: int) -> np.ndarray:
    return (x << np.uint32(n)) | (x >> np.uint32(32 - n))


def chacha_blocks(keys: np.ndarray, blocks, rounds: int, *, nonce: bytes | None = None) -> np.ndarray:
    """ChaCha keystream words for each 32-byte key: (K, 16 * len(blocks)) uint32, for the block
    numbers in ``blocks``. ``nonce`` None: rand_chacha's layout (64-bit block counter in words
    12-13, stream 0); a 12-byte ``nonce``: RFC 8439's (32-bit counter in word 12, nonce 13-15)."""
    keys = np.ascontiguousarray(keys, dtype=np.uint8).reshape(-1, 32)
    k = keys.view("<u4").astype(np.uint32)
    blocks = list(blocks)
    out = np.empty((len(k), 16 * len(blocks)), dtype=np.uint32)
    for n, b in enumerate(blocks):
        init = np.empty((16, len(k)), dtype=np.uint32)
        init[0:4] = _SIGMA[:, None]
        init[4:12] = k.T
        if nonce is None:
            init[12], init[13], init[14:16] = b & 0xFFFFFFFF, b >> 32, 0
        else:
            init[12] = b
            init[13:16] = np.frombuffer(nonce, dtype="<u4")[:, None]
        x = [init[i].copy() for i in range(16)]

        def qr(a, bb, c, d):
            x[a] += x[bb]; x[d] = _rotl(x[d] ^ x[a], 16)
            x[c] += x[d]; x[bb] = _rotl(x[bb] ^ x[c], 12)
            x[a] += x[bb]; x[d] = _rotl(x[d] ^ x[a], 8)
            x[c] += x[d]; x[bb] = _rotl(x[bb] ^ x[c], 7)

        for _ in range(rounds // 2):
            qr(0, 4, 8, 12); qr(1, 5, 9, 13); qr(2, 6, 10, 14); qr(3, 7, 11, 15)
            qr(0, 5, 10, 15); qr(1, 6, 11, 12); qr(2, 7, 8, 13); qr(3, 4, 9, 14)
        for i in range(16):
            out[:, 16 * n + i] = x[i] + init[i]
    return out


def chacha8_blocks(keys: np.ndarray, blocks: int) -> np.ndarray:
    """The first ``blocks`` 64-byte ChaCha8 blocks for each 32-byte key: (K, 16 * blocks) uint32.

    rand_chacha: state = constants | key (8 LE words) | 64-bit block counter (words 12, 13) |
    stream 0 (words 14, 15); 8 rounds = 4 double rounds; output = rounds(state) + state, and
    ``next_u64`` reads two consecutive words, low word first.
    """
    return chacha_blocks(keys, range(blocks), 8)


# --- the bucket DRG ---------------------------------------------------------------------------

def drg_parents(nodes: np.ndarray, porep_id: bytes, api_version: str = "1.1.0") -> np.ndarray:
    """BucketGraph::parents for each node in ``nodes``: (len, 6) uint32."""
    nodes = np.asarray(nodes, dtype=np.uint64).reshape(-1)
    out = np.zeros((len(nodes), DRG_PARENTS), dtype=np.uint32)
    big = nodes >= 2
    v = nodes[big]
    if not len(v):
        return out
    seeds = np.empty((len(v), 32), dtype=np.uint8)
    seeds[:, :28] = np.frombuffer(drg_seed(porep_id), dtype=np.uint8)
    seeds[:, 28:] = v.astype("<u4").view(np.uint8).reshape(-1, 4)
    # 5 parents x 2 draws x 2 words = 20 words: two ChaCha blocks
    words = chacha8_blocks(seeds, 2).astype(np.uint64)
    draws = words[:, 0::2] | (words[:, 1::2] << np.uint64(32))
    m_prime = np.uint64(DRG_PARENTS - 1)
    meta = v * m_prime
    # ceil(log2(meta)) as Rust computes it in f64; exact for meta < 2^53 (meta <= 5 * 2^31)
    n_buckets = np.ceil(np.log2(meta.astype(np.float64))).astype(np.uint64)
    drawn = np.empty((len(v), DRG_PARENTS - 1), dtype=np.uint64)
    for j in range(DRG_PARENTS - 1):
        bucket = draws[:, 2 * j] % n_buckets + np.uint64(1)
        largest = np.minimum(meta, np.left_shift(np.uint64(1), bucket))
        smallest = np.maximum(np.uint64(2), largest >> np.uint64(1))
        distance = smallest + draws[:, 2 * j + 1] % (largest - smallest + np.uint64(1))
        parent = (meta - distance) // m_prime
        drawn[:, j] = np.where(parent == v, v - np.uint64(1), parent)
    rows = np.empty((len(v), DRG_PARENTS), dtype=np.uint64)
    if api_version == "1.0.0":
        rows[:, :5], rows[:, 5] = drawn, v - np.uint64(1)
    else:
        rows[:, 0], rows[:, 1:] = v - np.uint64(1), drawn
    out[big] = rows.astype(np.uint32)
    return out


# --- the Feistel expander ----------------------------------------------------------------------

def feistel_precompute(num_elements: int) -> tuple[int, int, int]:
    """(left_mask, right_mask, half_bits) for the smallest power of 4 >= num_elements (>= 4)."""
    next_pow4, log4 = 4, 1
    while next_pow4 < num_elements:
        next_pow4, log4 = next_pow4 * 4, log4 + 1
    return ((1 << log4) - 1) << log4, (1 << log4) - 1, log4


def _feistel_round(right: int, key: int, right_mask: int) -> int:
    digest = hashlib.blake2b(right.to_bytes(8, "big") + key.to_bytes(8, "big")).digest()
    return int.from_bytes(digest[:8], "big") & right_mask


def _feistel_encode(index: int, keys, pre) -> int:
    left_mask, right_mask, half_bits = pre
    left, right = (index & left_mask) >> half_bits, index & right_mask
    for key in keys[:FEISTEL_ROUNDS]:
        left, right = right, left ^ _feistel_round(right, key, right_mask)
    return (left << half_bits) | right


def feistel_permute(num_elements: int, index: int, keys, pre) -> int:
    u = _feistel_encode(index, keys, pre)
    while u >= num_elements:
        u = _feistel_encode(u, keys, pre)
    return u


def native() -> ctypes.CDLL:
    """seal_host.cpp (the expander and the labeling loop), compiled on first use."""
    from arith import native as host
    v, u64 = ctypes.c_void_p, ctypes.c_uint64
    return host.load(Path(__file__).with_name("seal_host.cpp"), stem="filecoin_seal",
                     include_dirs=(Path(__file__).parent.parent,), signatures={
        "fc_exp_parents": ([u64, v, u64, u64, ctypes.c_int, v], ctypes.c_int),
        "fc_labels": ([u64, ctypes.c_int, ctypes.c_char_p, v, v], ctypes.c_int)})


def exp_parents_range(first: int, count: int, size: int, porep_id: bytes, api_version: str = "1.1.0") -> np.ndarray:
    """expanded_parents of nodes first..first+count in C++ (seal_host.cpp): (count, 8) uint32."""
    keys = np.array(feistel_keys(porep_id), dtype=np.uint64)
    out = np.empty((count, EXP_PARENTS), dtype=np.uint32)
    native().fc_exp_parents(size, keys.ctypes.data, first, count, int(api_version == "1.0.0"), out.ctypes.data)
    return out


def exp_parents(nodes, size: int, porep_id: bytes, api_version: str = "1.1.0") -> np.ndarray:
    """StackedGraph::expanded_parents for each node: (len, 8) uint32 (the Python definition;
    ``Graph.cache`` takes the C++ loop for a whole sector)."""
    nodes = np.asarray(nodes, dtype=np.uint64).reshape(-1)
    keys = feistel_keys(porep_id)
    n = size * EXP_PARENTS
    pre = feistel_precompute(n)
    out = np.empty((len(nodes), EXP_PARENTS), dtype=np.uint32)
    for row, v in enumerate(nodes.tolist()):
        for i in range(EXP_PARENTS):
            t = feistel_permute(n, v * EXP_PARENTS + i, keys, pre)
            # api 1.0.0 truncated the permuted index to u32 before dividing (storage-proofs
            # graph.rs); for < 2^29 nodes both agree
            out[row, i] = ((t & 0xFFFFFFFF) if api_version == "1.0.0" else t) // EXP_PARENTS
    return out


class Graph:
    """One sector's parents: ``parents(nodes)`` -> (len, 14) uint32, 6 DRG then 8 expander."""

    def __init__(self, size: int, porep_id: bytes, api_version: str = "1.1.0"):
        if size < 2 or size & (size - 1) or size > 1 << 31:
            raise ValueError(f"graph size must be a power of two in 2..2^31, got {size}")
        self.size, self.porep_id, self.api_version = size, bytes(porep_id), api_version

    @classmethod
    def for_params(cls, p: FilecoinParams, registered_proof: str | None = None) -> "Graph":
        """The set's graph, or that of its SyntheticPoRep kind: the graph's seed is the porep id
        (api 1.2.0: the same rules as 1.1.0)."""
        if registered_proof and registered_proof != p.registered_proof:
            from .params import porep_id_of
            return cls(p.nodes, porep_id_of(registered_proof), "1.2.0")
        return cls(p.nodes, p.porep_id, p.api_version)

    def drg(self, nodes) -> np.ndarray:
        return drg_parents(nodes, self.porep_id, self.api_version)

    def exp(self, nodes) -> np.ndarray:
        return exp_parents(nodes, self.size, self.porep_id, self.api_version)

    def parents(self, nodes) -> np.ndarray:
        nodes = np.asarray(nodes, dtype=np.uint64).reshape(-1)
        return np.concatenate([self.drg(nodes), self.exp(nodes)], axis=1)

    def cache(self) -> np.ndarray:
        """The whole parents cache: (size, 14) uint32 (cache.rs's file is its LE bytes); the
        expander from seal_host.cpp (22 s in Python at 8 MiB)."""
        drg = self.drg(np.arange(self.size, dtype=np.uint64))
        return np.concatenate([drg, exp_parents_range(0, self.size, self.size, self.porep_id, self.api_version)],
                              axis=1)

    def identifier(self) -> str:
        """StackedGraph's ParameterSetMetadata::identifier (PoseidonHasher trees)."""
        base = f"drgraph::BucketGraph{{size: {self.size}; degree: {DRG_PARENTS}; hasher: poseidon_hasher}}"
        return f"stacked_graph::StackedGraph{{expansion_degree: {EXP_PARENTS} base_graph: {base} }}"

    def cache_id(self) -> str:
        """cache.rs ``cache_path``'s name: v28-sdr-parent-<hex> (its key in parent_cache.json)."""
        h = hashlib.sha256(b"poseidon_hasher" + self.identifier().encode())
        for key in feistel_keys(self.porep_id):
            h.update(key.to_bytes(8, "little"))
        h.update(self.size.to_bytes(4, "little"))
        return f"v{PARAMETER_CACHE_VERSION}-sdr-parent-{h.hexdigest()}"

    @staticmethod
    def cache_digest(cache: np.ndarray) -> str:
        return hashlib.sha256(np.ascontiguousarray(cache, dtype="<u4").tobytes()).hexdigest()


def label_parent_order(layer: int) -> list[int]:
    """Which of a node's 14 parents fill the 37 parent slots of its label preimage."""
    base = list(range(DRG_PARENTS)) if layer == 1 else list(range(PARENTS))
    return [base[i % len(base)] for i in range(37)]
