"""Filecoin's StackedDRG PoRep circuit, one partition, over ``synthesis.bellpepper.core.Synth``:
rust-fil-proofs' storage-proofs-porep ``stacked/circuit/{proof,params,create_label,hash}.rs`` and
storage-proofs-core's ``gadgets/{por,insertion,encode,constraint}.rs``, gadget call by gadget
call, on ``synthesis.bellpepper``'s bellpepper/bellperson/neptune gadgets. The same constraints,
the same linear combinations and the same variables in bellperson's allocation order.

Header (``StackedCircuit::synthesize``): replica_id (alloc, inputize, 255 bits LE with
``reverse_bit_numbering``), comm_d (alloc, inputize), comm_r (alloc, inputize), comm_r_last,
comm_c (alloc), Poseidon(comm_c, comm_r_last) (arity 2) equal to comm_r.

One challenge (``Proof::synthesize``), in order:
  data_leaf; its TreeD inclusion (binary SHA-256 PoR);
  6 DRG parents then 8 expander parents: the column (``layers`` nums), its Poseidon hash
    (``hash_single_column``: arity 11, or 2 for 2-layer sectors), its TreeC inclusion;
  the challenge as a UInt64 (64 bits) and its packed public input;
  per layer 1..L: the DRG parents' labels of this layer and (layer > 1) the expander parents'
    labels of the layer below, each to 255 bits LE (``to_bits_le``) in SHA order
    (``reverse_bit_numbering``), repeated to 37 (``expand_parents``); create_label: SHA-256 of
    replica id | layer u32 BE | node u64 BE | zeros to 64 bytes | 37 parents, the first 254 bits
    packed (``pack_bits``);
  encode: replica = label_L + data_leaf (``constraint::add``); its TreeR inclusion;
  the column hash of the L labels and its TreeC inclusion.
A PoR (``PoRCircuit::synthesize`` with the leaf and root already allocated, private): per level
the index bits (``AllocatedBit``, LE), the arity - 1 siblings (``AllocatedNum``), ``insert``
(arity 2, 4, 8: ``insert_2/4/8`` with ``pick``), the node hash (SHA-256 ``hash_multi_leaf`` for
TreeD, Poseidon of the arity for TreeC/TreeR); then all index bits packed into public inputs
(``multipack::pack_into_inputs``: one input, the node's index) and computed root == root.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..bellpepper.core import Num, Synth
from ..bellpepper import AllocatedBit, Boolean, UInt64, alloc_num, equal, inputize, to_bits_le
from ..bellpepper import multipack
from ..bellpepper.insertion import insert, pick  # noqa: F401 (stacked.pick/insert: update.py)
from ..bellpepper.num import alloc_input
from ..bellpepper.num import add as num_add
from ..bellpepper.sha256 import sha256
from ..bellpepper.uint32 import UInt32
from .params import TOTAL_PARENTS

CAPACITY = 254


def poseidon(s: Synth, nums: Sequence[Num]) -> Num:
    """neptune ``circuit::poseidon_hash`` of arity len(nums) (filecoin-hashers'
    ``hash_multi_leaf_circuit`` / ``hash2_circuit``, storage-proofs-porep's ``hash_single_column``)."""
    from ..bellpepper.neptune import poseidon_hash
    return poseidon_hash(s, list(nums), len(nums))


def _bit_values(s: Synth, bits: Sequence[Boolean]) -> np.ndarray:
    """(B, 4) Fr: the integer sum 2^j bits[j] (j < 254), computed with numpy."""
    B = s.batch
    out = np.zeros((B, 256), dtype=np.uint8)
    for j, b in enumerate(bits):
        out[:, j] = b.value(B)
    return np.packbits(out, axis=1, bitorder="little").view("<u8").astype(np.uint64)


def pack_bits(s: Synth, bits: Sequence[Boolean]) -> Num:
    """bellperson ``multipack::pack_bits`` (shape: ``synthesis.bellpepper.multipack``; values
    only: the same single allocation, its value packed with numpy)."""
    if s.shape:
        return multipack.pack_bits(s, bits)
    val = _bit_values(s, bits[:CAPACITY])
    return s.alloc(lambda: val)


def pack_into_inputs(s: Synth, bits: Sequence[Boolean]) -> list[Num]:
    """bellperson ``multipack::pack_into_inputs`` (values only: numpy packing, as pack_bits)."""
    if s.shape:
        return multipack.pack_into_inputs(s, bits)
    return [alloc_input(s, lambda lo=lo: _bit_values(s, bits[lo:lo + CAPACITY]))
            for lo in range(0, len(bits), CAPACITY)]


# --- storage-proofs-core gadgets (``pick``, ``insert``: ``synthesis.bellpepper.insertion``) ----------

def reverse_bit_numbering(bits: Sequence[Boolean]) -> list[Boolean]:
    """storage-proofs-core util: pad to whole bytes with Constant(false), reverse each byte."""
    padded = list(bits) + [Boolean.constant(0)] * (-len(bits) % 8)
    return [b for i in range(0, len(padded), 8) for b in padded[i:i + 8][::-1]]


def sha256_hash_multi_leaf(s: Synth, leaves: Sequence[Num]) -> Num:
    """filecoin-hashers ``Sha256Function::hash_multi_leaf_circuit``: each leaf ``to_bits_le``,
    padded to a whole byte, bytes reversed to SHA order; ``hash_circuit``: SHA-256, the digest's
    bytes read LE, the first 254 bits packed."""
    bits: list[Boolean] = []
    for leaf in leaves:
        bits += reverse_bit_numbering(to_bits_le(s, leaf))
    be = sha256(s, bits)
    le = [b for i in range(0, 256, 8) for b in be[i:i + 8][::-1]]
    return pack_bits(s, le[:CAPACITY])


def por(s: Synth, leaf: Num, root: Num, arities: Sequence[int], positions: Callable[[], np.ndarray],
        siblings: Callable[[int], np.ndarray], *, sha: bool) -> Num:
    """PoRCircuit::synthesize (leaf and root allocated, private). ``positions()``: (B, levels)
    the node's position in each level's group; ``siblings(l)``: (B, arity_l - 1, 4). Returns the
    computed root (its values: the native check's input)."""
    cur, path_bits = leaf, []
    for lv, arity in enumerate(arities):
        nb = arity.bit_length() - 1
        pos = positions()[:, lv].astype(np.uint64) if s.computing else None
        bits = [Boolean.is_(AllocatedBit.alloc(
            s, (lambda i=i: ((pos >> np.uint64(i)) & np.uint64(1)).astype(np.uint8))
            if s.computing else None, "index bit")) for i in range(nb)]
        path_bits += bits
        sib = siblings(lv) if s.computing else None
        sibs = [alloc_num(s, (lambda j=j: sib[:, j]) if s.computing else None) for j in range(arity - 1)]
        ins = insert(s, cur, bits, sibs)
        cur = sha256_hash_multi_leaf(s, ins) if sha else poseidon(s, ins)
    pack_into_inputs(s, path_bits)
    equal(s, cur, root, "enforce root is correct")
    return cur


# --- create_label ------------------------------------------------------------------------------

def create_label(s: Synth, replica_id: Sequence[Boolean], parents: Sequence[Sequence[Boolean]],
                 layer: int, node: UInt64) -> Num:
    """create_label_circuit: the 1,248-byte preimage as bits (constant zero padding folds in the
    SHA-256 gadget), SHA-256, the bits reversed per byte, the first 254 packed."""
    if len(parents) != TOTAL_PARENTS:
        raise ValueError(f"create_label takes {TOTAL_PARENTS} parents, not {len(parents)}")
    zero = Boolean.constant(0)
    msg = list(replica_id) + [zero] * (256 - len(replica_id))
    msg += UInt32.constant(layer).into_bits_be()
    msg += node.to_bits_be()
    msg += [zero] * (512 - len(msg))
    for p in parents:
        msg += list(p)
        msg += [zero] * (-len(msg) % 256)
    be = sha256(s, msg)
    return pack_bits(s, reverse_bit_numbering(be)[:CAPACITY])


def expand_parents(parents: list, layer: int) -> list:
    """Proof::synthesize's repetition to 37: layer 1 (6 DRG parents) 6 times and the first once;
    layer > 1 (14 parents) twice and the first 9."""
    if layer > 1:
        return parents + parents + parents[:9]
    return parents * 6 + [parents[0]]


# --- the partition's blocks ---------------------------------------------------------------------

@dataclass
class Shared:
    """What every challenge block reads from the header: comm_d, comm_c, comm_r_last (aux nums)
    and the replica id's 256 bits in SHA order."""
    comm_d: Num
    comm_c: Num
    comm_r_last: Num
    replica_id_bits: list


def header_gadget(s: Synth, values: dict | None) -> tuple[Shared, Num, Num]:
    """StackedCircuit::synthesize before the challenges; ``values``: replica_id, comm_d, comm_r,
    comm_r_last, comm_c as (B, 4) (values mode). Returns (shared, comm_r, H(comm_c, comm_r_last))."""
    v = (lambda k: (lambda: values[k])) if s.computing else (lambda k: None)
    rid = alloc_num(s, v("replica_id"))
    inputize(s, rid)
    rid_bits = reverse_bit_numbering(to_bits_le(s, rid))
    comm_d = alloc_num(s, v("comm_d"))
    inputize(s, comm_d)
    comm_r = alloc_num(s, v("comm_r"))
    inputize(s, comm_r)
    comm_r_last = alloc_num(s, v("comm_r_last"))
    comm_c = alloc_num(s, v("comm_c"))
    h = poseidon(s, [comm_c, comm_r_last])
    equal(s, comm_r, h, "enforce comm_r = H(comm_c || comm_r_last)")
    return Shared(comm_d, comm_c, comm_r_last, rid_bits), comm_r, h


def _positions(nodes: np.ndarray, arities: Sequence[int]) -> np.ndarray:
    """(..., levels) the position of each node's ancestor within its group at each level."""
    out = []
    n = np.asarray(nodes, dtype=np.uint64)
    for a in arities:
        out.append(n % np.uint64(a))
        n = n // np.uint64(a)
    return np.stack(out, axis=-1)


def mark(s: Synth, label: str) -> None:
    """Shape mode with ``s.marks`` (a list): note where the constraints of ``label`` begin (how a
    failing constraint's index is named)."""
    marks = getattr(s, "marks", None)
    if marks is not None and s.shape:
        marks.append((s.cs.num_constraints, label))


def challenge_gadget(s: Synth, prm, sh: Shared, w) -> dict:
    """Proof::synthesize for one challenge (a batch of them in values mode: ``w`` a
    ``PartitionVanilla``). Returns the computed roots and labels (values mode: the native
    checks' inputs)."""
    L = prm.layers
    comp = s.computing
    arities = tuple(prm.tree_c_arities)
    d_arities = (2,) * prm.tree_d_depth
    mark(s, "TreeD inclusion of the data leaf")
    data_leaf = alloc_num(s, (lambda: w.data_leaf) if comp else None)
    root_d = por(s, data_leaf, sh.comm_d, d_arities,
                 lambda: _positions(w.challenges, d_arities),
                 lambda lv: w.tree_d_path[:, lv][:, None], sha=True)

    cols, parent_roots = [], []
    for kind, P in (("drg", prm.drg_parents), ("exp", prm.exp_parents)):
        for j in range(P):
            col_v = (w.drg_columns if kind == "drg" else w.exp_columns) if comp else None
            nodes = (w.drg_parents if kind == "drg" else w.exp_parents) if comp else None
            paths = (w.drg_paths if kind == "drg" else w.exp_paths) if comp else None
            mark(s, f"{kind.upper()} parent {j}: column hash and TreeC inclusion")
            col = [alloc_num(s, (lambda j=j, r=r: col_v[:, j, r]) if comp else None) for r in range(L)]
            h = poseidon(s, col)
            parent_roots.append(por(s, h, sh.comm_c, arities,
                                    lambda j=j, nodes=nodes: _positions(nodes[:, j], arities),
                                    lambda lv, j=j, paths=paths: paths[lv][:, j], sha=False))
            cols.append(col)
    drg, exp = cols[:prm.drg_parents], cols[prm.drg_parents:]

    mark(s, "the challenge's 64 bits and input")
    node = UInt64.alloc(s, (lambda: w.challenges) if comp else None)
    pack_into_inputs(s, node.to_bits_le())  # UInt64::pack_into_input
    labels = []
    for layer in range(1, L + 1):
        mark(s, f"layer {layer}: parent label bits")
        parents = [reverse_bit_numbering(to_bits_le(s, col[layer - 1])) for col in drg]
        if layer > 1:
            parents += [reverse_bit_numbering(to_bits_le(s, col[layer - 2])) for col in exp]
        mark(s, f"layer {layer}: label (SHA-256 of the preimage)")
        labels.append(create_label(s, sh.replica_id_bits, expand_parents(parents, layer), layer, node))

    mark(s, f"encoding (layer {L} label + data) and TreeR inclusion")
    encoded = num_add(s, labels[-1], data_leaf)
    root_r = por(s, encoded, sh.comm_r_last, tuple(prm.tree_r_arities),
                 lambda: _positions(w.challenges, prm.tree_r_arities),
                 lambda lv: w.tree_r_path[lv], sha=False)
    mark(s, "column hash of the labels and TreeC inclusion")
    h = poseidon(s, labels)
    root_c = por(s, h, sh.comm_c, arities, lambda: _positions(w.challenges, arities),
                 lambda lv: w.tree_c_path[lv], sha=False)
    return {"root_d": root_d, "parent_roots": parent_roots, "labels": labels, "encoded": encoded,
            "root_r": root_r, "root_c": root_c}
