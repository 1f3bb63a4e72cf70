"""The SDR family on its smallest set: sealing against hashlib, the matrices against the
witness, the vanilla-proof checks (every tamper named by partition, challenge and layer), the
compact assignment encoding, and proofs on the CPU backend checked by our verifier."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from synthesis import assignment, field
from synthesis.circuits import C1Error, get_circuit
from synthesis.gadgets.sha256 import sha254
from synthesis.sdr import TINY, c1_document, generate, graph, interactive_seed
from synthesis.sdr.sector import label_preimage

SEED = b"\x41" * 32


@pytest.fixture(scope="module")
def tiny():
    circuit = get_circuit(TINY)
    sector = generate(circuit.prm, SEED)
    doc = json.loads(json.dumps(c1_document(sector, interactive_seed(sector))))
    return circuit, sector, doc


def test_labels_are_sha254_of_the_spec_preimage(tiny):
    circuit, sector, _ = tiny
    prm = circuit.prm
    par = graph.parents(prm)
    v, layer = prm.nodes - 1, prm.layers
    lab = lambda l, u: field.to_bytes(field.vec_to_ints(sector.labels[l - 1, u])[0])  # noqa: E731
    pl = [lab(layer, p) for p in par[v, :prm.base_degree]] + \
         [lab(layer - 1, p) for p in par[v, prm.base_degree:]]
    pre = label_preimage(prm, sector.replica_id, layer, v, pl)
    assert len(pre) == prm.preimage_bytes == 32 + 4 + 8 + 32 * prm.total_parents
    assert pre[32:36] == layer.to_bytes(4, "big") and pre[36:44] == v.to_bytes(8, "big")
    assert lab(layer, v) == sha254(pre)
    # the 32 GiB shape's preimage: 1,228 bytes (37 parents)
    big = get_circuit("sdr-32g").prm
    assert big.preimage_bytes == 1228 and len(graph.preimage_parents(big, 2)) == 37
    assert graph.preimage_parents(big, 1)[:7] == [0, 1, 2, 3, 4, 5, 0]
    assert graph.preimage_parents(big, 2)[13:16] == [13, 0, 1]


def test_every_partition_satisfies_the_matrices_and_a_flipped_bit_does_not(tiny):
    circuit, _, doc = tiny
    c1 = circuit.parse_c1(doc)
    r1cs = circuit.r1cs()
    size = circuit.size()
    assert (size["constraints"], size["variables"], size["nonzeros"]) == \
        (r1cs.num_constraints, r1cs.num_variables, r1cs.nnz)
    assert size["domain"] == 1 << 18
    for k in range(circuit.num_partitions()):
        z = circuit.synthesize(c1, k)
        assert len(z) == r1cs.num_variables
        r1cs.check(z)
        assert field.vec_to_ints(z[1:1 + circuit.prm.num_public]) == circuit.public_inputs(c1, k)
    rng = np.random.default_rng()
    ones = np.flatnonzero((z[:, 0] <= 1) & ~np.any(z[:, 1:], axis=1))
    for i in rng.choice(ones[ones > circuit.prm.num_public], 5, replace=False):
        bad = z.copy()
        bad[i, 0] ^= np.uint64(1)
        assert not r1cs.is_satisfied(bad)


def test_compact_matrices_expand_to_the_full_ones(tiny):
    circuit, _, _ = tiny
    cr = circuit.compact_r1cs()
    full = circuit.r1cs()
    for rep, m in ((cr.a, full.a), (cr.b, full.b), (cr.c, full.c)):
        assert rep.nnz == m.nnz and rep.rows == m.rows
        assert rep.block.coef.dtype == np.uint16 and rep.block.cols.dtype == np.int32
        lo = rep.header.nnz
        assert np.array_equal(rep.copy_columns(0), m.indices[lo:lo + rep.block.nnz])
    assert cr.nbytes < full.nnz * 40 / 2  # 6 bytes a nonzero + row pointers and the column map


def _expect(circuit, doc, match):
    with pytest.raises(C1Error, match=match):
        c1 = circuit.parse_c1(doc)
        for k in range(circuit.num_partitions()):
            circuit.synthesize_compact(c1, k)


def _bump(x: str) -> str:
    return f"0x{int(x, 16) ^ 1:064x}"


def test_tampered_inputs_are_named_by_partition_challenge_and_layer(tiny):
    circuit, _, doc = tiny
    L = circuit.prm.layers
    d = copy.deepcopy(doc)
    d["partitions"][1]["challenges"][0]["column"][L - 1] = _bump(d["partitions"][1]["challenges"][0]["column"][L - 1])
    _expect(circuit, d, rf"partition 1; field partitions\[1\]\.challenges\[0\]\.column\[{L - 1}\]: "
                        rf"challenge 0, layer {L}: the label does not match")
    d = copy.deepcopy(doc)
    p = d["partitions"][0]["challenges"][0]["parents"][0]
    p["column"][0] = _bump(p["column"][0])  # the parent's layer-1 label feeds layer 1
    _expect(circuit, d, r"partition 0; .*challenges\[0\]\.column\[0\]: challenge 0, layer 1: the label")
    d = copy.deepcopy(doc)
    p = d["partitions"][0]["challenges"][0]["parents"][0]
    p["node"] = (p["node"] + 1) % circuit.prm.nodes
    _expect(circuit, d, r"partition 0; field .*parents\[0\]\.node: challenge 0, layers 1\.\.1: parent 0")
    d = copy.deepcopy(doc)
    ch = d["partitions"][1]["challenges"][0]
    ch["tree_d_path"][1] = _bump(ch["tree_d_path"][1])
    _expect(circuit, d, r"partition 1; .*tree_d_path: challenge 0, TreeD")
    d = copy.deepcopy(doc)
    ch = d["partitions"][0]["challenges"][0]
    ch["tree_c_path"][0][3] = _bump(ch["tree_c_path"][0][3])
    _expect(circuit, d, r"partition 0; .*tree_c_path: challenge 0, layers 1\.\.1: column and TreeC")
    d = copy.deepcopy(doc)
    ch = d["partitions"][1]["challenges"][0]
    ch["tree_r_path"][0][6] = _bump(ch["tree_r_path"][0][6])
    _expect(circuit, d, rf"partition 1; .*tree_r_path: challenge 0, layer {L}: the encoding")
    d = copy.deepcopy(doc)
    d["partitions"][0]["challenges"][0]["data_leaf"] = _bump(d["partitions"][0]["challenges"][0]["data_leaf"])
    _expect(circuit, d, r"partition 0; .*tree_d_path: challenge 0, TreeD: data leaf")
    d = copy.deepcopy(doc)
    d["partitions"][0]["challenges"][0]["column"][0] = "0x" + "f" * 64  # not a SHA-254 value
    _expect(circuit, d, r"partitions\[0\]\.challenges\[0\]\.column\[0\]: SHA-254 value")
    d = copy.deepcopy(doc)
    d["partitions"][0]["challenges"][0]["tree_d_path"].pop()
    _expect(circuit, d, r"partition 0; field partitions\[0\]\.challenges\[0\]\.tree_d_path: has 2 levels, 3 expected")
    d = copy.deepcopy(doc)
    d["circuit"] = "porep-lite"
    _expect(circuit, d, r"field circuit")


def test_compact_assignment_round_trips_and_rejects_malformed_blobs(tiny):
    circuit, _, doc = tiny
    c1 = circuit.parse_c1(doc)
    ca = circuit.synthesize_compact(c1, 0)
    z = ca.to_vec()
    blob = assignment.encode(ca)
    assert blob == assignment.encode(z)
    assert np.array_equal(assignment.decode(blob, n=len(z)), z)
    st = ca.stats()
    assert st["zeros"] + st["ones"] + st["other"] == len(z)
    assert len(blob) == 20 + 2 * ((len(z) + 7) // 8) + 32 * st["other"] < len(z) * 32 / 10
    with pytest.raises(assignment.AssignmentError, match="circuit has"):
        assignment.decode(blob, n=len(z) + 1)
    with pytest.raises(assignment.AssignmentError, match="starts with"):
        assignment.decode(b"NOPE" + blob[4:])
    with pytest.raises(assignment.AssignmentError, match="header says"):
        assignment.decode(blob[:-1])
    with pytest.raises(assignment.AssignmentError, match="header says"):
        assignment.decode(blob[:20] + bytes(len(blob) - 20))  # no element marked, m > 0
    bad = bytearray(blob)
    bad[-1] = 0xFF  # the last element's top byte: >= r
    with pytest.raises(field.FieldError, match="not below the Fr modulus"):
        assignment.decode(bytes(bad))
    # porep-lite's full-size values survive too
    rnd = field.vec_from_ints([0, 1, field.MODULUS - 1, 2, 1 << 200])
    assert np.array_equal(assignment.decode(assignment.encode(rnd)), rnd)
