"""The filecoin family's circuit pieces (synthesis/filecoin/stacked.py, circuit.py) and the
ordered templating they need: insert/pick, PoR, recording order, the registry."""
from __future__ import annotations

import numpy as np
import pytest

from synthesis import field
from synthesis.bellpepper import AllocatedBit, Boolean, alloc_num, to_bits_le
from synthesis.bellpepper import neptune
from synthesis.bellpepper.check import assignments, check, set_value
from synthesis.bellpepper.sha256 import sha256
from synthesis.builder import ConstraintSystem
from synthesis.compact import TemplatingCS, compact_matrices
from synthesis.bellpepper.core import Synth
from synthesis.r1cs import UnsatisfiedConstraint
from synthesis.filecoin import stacked

rng = np.random.default_rng(7)


def both(batch: int) -> Synth:
    return Synth(cs=ConstraintSystem(with_values=False), batch=batch)


def fr_rand(n: int) -> np.ndarray:
    return field.vec_from_ints([int(x) for x in rng.integers(1, 1 << 62, n)])


@pytest.mark.parametrize("arity", [2, 4, 8])
def test_insert_places_the_element_at_the_index(arity):
    B = arity  # one batch row per position
    s = both(B)
    nb = arity.bit_length() - 1
    pos = np.arange(B, dtype=np.uint8)
    bits = [Boolean.is_(AllocatedBit.alloc(s, lambda i=i: (pos >> i) & 1)) for i in range(nb)]
    el_v, sib_v = fr_rand(B), fr_rand((arity - 1) * B).reshape(B, arity - 1, 4)
    el = alloc_num(s, lambda: el_v)
    sibs = [alloc_num(s, lambda j=j: sib_v[:, j]) for j in range(arity - 1)]
    out = stacked.insert(s, el, bits, sibs)
    want_picks = {2: 2, 4: 8, 8: 22}[arity]  # insertion.rs: picks (+ nor, and for 8)
    assert s.cs.num_constraints - nb == want_picks
    for b in range(B):
        row = [tuple(o.val[b]) for o in out]
        expect = [tuple(x) for x in np.insert(sib_v[b], b, el_v[b], axis=0)]
        assert row == expect
        check(s, b)
    # a pick result changed: the pick constraint names itself
    z = assignments(s)[1]
    with pytest.raises(UnsatisfiedConstraint, match="pick"):
        s.cs.to_r1cs().check(set_value(z, len(z) - 1, 12345))


def _tree(leaves_at: int, arity: int, depth: int, leaf: np.ndarray):
    """Siblings (depth, arity - 1, 4) and root for a leaf at ``leaves_at`` in a tree of random
    siblings (Poseidon of ``arity``)."""
    sibs, cur, pos = [], field.vec_to_ints(leaf[None])[0], leaves_at
    for _ in range(depth):
        p = pos % arity
        others = [int(x) for x in rng.integers(1, 1 << 62, arity - 1)]
        children = others[:p] + [cur] + others[p:]
        cur = neptune.hash_ints(children)
        sibs.append(field.vec_from_ints(others))
        pos //= arity
    return np.stack(sibs), cur


def test_por_poseidon_8_accepts_its_path_and_rejects_another_root():
    node, depth = 0o7315, 4
    leaf = fr_rand(1)
    sibs, root = _tree(node, 8, depth, leaf)
    s = both(1)
    lf = alloc_num(s, lambda: leaf)
    rt = alloc_num(s, lambda: field.vec_from_ints([root]))
    got = stacked.por(s, lf, rt, (8,) * depth, lambda: stacked._positions(np.array([node]), (8,) * depth),
                      lambda lv: sibs[lv][None], sha=False)
    assert field.vec_to_ints(got.val)[0] == root
    check(s, 0)
    assert field.vec_to_ints(np.stack(s.public, axis=1)[0])[0] == node  # the packed index bits
    # the same path against another root: the root equality fails, by name
    s2 = both(1)
    lf = alloc_num(s2, lambda: leaf)
    rt = alloc_num(s2, lambda: field.vec_from_ints([root + 1]))
    stacked.por(s2, lf, rt, (8,) * depth, lambda: stacked._positions(np.array([node]), (8,) * depth),
                lambda lv: sibs[lv][None], sha=False)
    with pytest.raises(UnsatisfiedConstraint, match="enforce root is correct"):
        check(s2, 0)


def _mixed(s: Synth) -> None:
    x, y = alloc_num(s), alloc_num(s)
    bits = stacked.reverse_bit_numbering(to_bits_le(s, x))
    h = neptune.poseidon_hash(s, [x, y], 2)
    d = sha256(s, bits)
    stacked.pick(s, d[3], x, h)
    neptune.poseidon_hash(s, [h, y], 2)


def _rows(m) -> list:
    sp = m.to_sparse() if hasattr(m, "to_sparse") else m
    out = []
    for i in range(sp.rows):
        lo, hi = sp.indptr[i], sp.indptr[i + 1]
        out.append(sorted((int(c), tuple(v)) for c, v in zip(sp.indices[lo:hi], sp.coeffs[lo:hi].tolist())))
    return out


def test_ordered_templating_keeps_the_recording_order():
    """Filecoin's keys are tied to bellperson's constraint order: an ordered TemplatingCS gives
    the rows of a plain recording, row for row; the default (instances grouped) does not."""
    plain = ConstraintSystem(with_values=False)
    _mixed(Synth(cs=plain))
    want = plain.to_r1cs()
    ordered = TemplatingCS(ordered=True)
    _mixed(Synth(cs=ordered))
    grouped = TemplatingCS()
    _mixed(Synth(cs=grouped))
    for w, o, g in zip((want.a, want.b, want.c), compact_matrices(ordered), compact_matrices(grouped)):
        assert _rows(o) == _rows(w)
        assert o.nnz == g.nnz
    assert any(_rows(g) != _rows(w) for w, g in zip((want.a, want.b, want.c), compact_matrices(grouped)))


def test_expand_parents_is_37_in_the_rust_order():
    one = list(range(6))
    assert stacked.expand_parents(one, 1) == one * 6 + [0]
    more = list(range(14))
    assert stacked.expand_parents(more, 2) == more + more + more[:9]
    assert all(len(stacked.expand_parents(p, layer)) == 37 for p, layer in ((one, 1), (more, 5)))


def test_filecoin_sets_are_registered_with_filecoins_sizes(tmp_path, monkeypatch):
    monkeypatch.setenv("ZKHIVE_CACHE_DIR", str(tmp_path))
    from synthesis.circuits import get_circuit, known
    assert {"filecoin-2k", "filecoin-8m", "filecoin-512m", "filecoin-32g", "filecoin-64g"} <= set(known())
    c = get_circuit("filecoin-2k")
    z = c.size()
    assert z["public_inputs"] == 39 and z["domain"] == 1 << 22
    assert (z["constraints"], z["aux"]) == (2_687_921, 2_685_673)
    with pytest.raises(KeyError, match="filecoin-3k"):
        get_circuit("filecoin-3k")
