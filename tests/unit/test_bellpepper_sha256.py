"""bellperson's sha256 gadget (synthesis.bellpepper.sha256): bellperson's constraint counts,
digests against hashlib, templates (shape) and the native replay (values) equal to the direct
gadget, and wrong witness values refused by the constraint's name."""
import hashlib

import numpy as np
import pytest

from arith import native
from synthesis import field as F
from synthesis.builder import ConstraintSystem
from synthesis.compact import TemplatingCS, compact_matrices
from synthesis.bellpepper.core import BitBlock, Synth
from synthesis.r1cs import UnsatisfiedConstraint
from synthesis.bellpepper import check as ck
from synthesis.bellpepper import sha256 as sh
from synthesis.bellpepper import template as tp
from synthesis.bellpepper.boolean import AllocatedBit, Boolean

RNG = np.random.default_rng(2024)


def alloc_message(s, data):
    bits = np.unpackbits(np.asarray(data, np.uint8), axis=1)
    return [Boolean.is_(AllocatedBit.alloc(s, (lambda i=i: bits[:, i]) if s.computing else None))
            for i in range(bits.shape[1])]


def digests(out, batch):
    return [bytes(r) for r in np.packbits(np.stack([b.value(batch) for b in out], axis=1), axis=1)]


def test_full_block_counts_25840():
    """bellperson test_full_block: 512 allocated input bits, one compression under the IV."""
    for direct in (True, False):
        s = Synth(cs=ConstraintSystem(with_values=False))
        inp = alloc_message(s, np.zeros((1, 64), np.uint8))
        comp = sh.compression_direct if direct else sh.sha256_compression_function
        comp(s, inp, sh.get_sha256_iv())
        assert s.cs.num_constraints - 512 == 25840


def test_full_hash_counts_44874_and_matches_hashlib():
    """bellperson test_full_hash: sha256 of 64 allocated bytes (the padding block with a variable
    state: 19,034 more), in both modes; the digests against hashlib."""
    data = RNG.integers(0, 256, (3, 64), dtype=np.uint8)
    s = Synth(cs=ConstraintSystem(with_values=False), batch=3)
    out = sh.sha256(s, alloc_message(s, data))
    assert s.cs.num_constraints - 512 == 44874
    assert digests(out, 3) == [hashlib.sha256(bytes(r)).digest() for r in data]
    for row in range(3):
        ck.check(s, row)


def test_blank_hash_is_all_constants():
    """bellperson test_blank_hash: a constant block under the IV: no constraint, the digest of ""."""
    s = Synth(cs=ConstraintSystem(with_values=False), batch=1)
    inp = [Boolean.constant(0)] * 512
    inp[0] = Boolean.constant(1)
    out = sh.compression_direct(s, inp, sh.get_sha256_iv())
    assert s.cs.num_constraints == 0 and s.cs.num_aux == 0
    assert bytes(np.packbits([b.const for w in out for b in w.into_bits_be()])) == hashlib.sha256(b"").digest()
    s2 = Synth(batch=1)
    assert digests(sh.sha256(s2, []), 1) == [hashlib.sha256(b"").digest()]


@pytest.mark.parametrize("nbytes", [0, 1, 55, 56, 100])
def test_against_hashlib_random_lengths_values_mode(nbytes):
    """bellperson test_against_vectors' lengths (a sample): values mode through templates and
    the native replay, a batch of random messages."""
    data = RNG.integers(0, 256, (5, nbytes), dtype=np.uint8)
    s = Synth(batch=5)
    out = sh.sha256(s, alloc_message(s, data))
    assert digests(out, 5) == [hashlib.sha256(bytes(r)).digest() for r in data]


def test_mixed_constant_and_variable_inputs_like_a_label_block():
    """A first block with constant runs (as create_label's: layer index and zero padding) and a
    negated input: template == direct (same R1CS), both modes satisfied, hashlib's digest."""
    data = RNG.integers(0, 256, (2, 64), dtype=np.uint8)
    data[:, 32:36] = [0, 0, 0, 3]
    data[:, 44:64] = 0
    results = {}
    for direct in (True, False):
        s = Synth(cs=ConstraintSystem(with_values=False), batch=2)
        bits = np.unpackbits(data, axis=1)
        inp = []
        for i in range(512):
            if 256 <= i < 288 or i >= 352:
                inp.append(Boolean.constant(int(bits[0, i])))
            elif i == 5:  # a Not input: allocate the complement, hash its negation
                b = AllocatedBit.alloc(s, lambda: 1 - bits[:, 5])
                inp.append(Boolean.not_(b))
            else:
                inp.append(Boolean.is_(AllocatedBit.alloc(s, lambda i=i: bits[:, i])))
        out = (lambda: sh.sha256(s, inp, direct=True)) if direct else (lambda: sh.sha256(s, inp))
        res = out()
        assert digests(res, 2) == [hashlib.sha256(bytes(r)).digest() for r in data]
        for row in range(2):
            ck.check(s, row)
        results[direct] = (s.cs.to_r1cs().digest(), s.cs.num_constraints, ck.assignments(s))
    assert results[True][0] == results[False][0]
    assert np.array_equal(results[True][2], results[False][2])  # replay == Python values mode
    assert results[True][1] < 44874 + 1  # the constants folded some constraints away


def test_templating_cs_records_the_same_matrices():
    data = RNG.integers(0, 256, (1, 80), dtype=np.uint8)
    s = Synth(cs=ConstraintSystem(with_values=False))
    sh.sha256(s, alloc_message(s, data))
    ref = s.cs.to_r1cs()
    tcs = TemplatingCS()
    st = Synth(cs=tcs)
    sh.sha256(st, alloc_message(st, data))
    assert tcs.num_constraints == ref.num_constraints and len(tcs._aux) == ref.num_aux
    z = F.vec_random(ref.num_variables)
    for m1, m2 in zip((ref.a, ref.b, ref.c), compact_matrices(tcs)):
        sp = m2.to_sparse()
        assert sp.nnz == m1.nnz
        assert np.array_equal(native.spmv(m1.indptr, m1.indices, m1.coeffs, z),
                              native.spmv(sp.indptr, sp.indices, sp.coeffs, z))


def test_every_variable_is_constrained_and_every_sum_bit_boolean():
    """Soundness by analysis (issue 26): every witness variable of a compression appears in
    some constraint; every addmany result bit (the only free bits: the rest are determined by
    xor/and/ch/maj rows) has a booleanity row (ONE - x) * x = 0."""
    s = Synth(cs=ConstraintSystem(with_values=False))
    inp = alloc_message(s, np.zeros((1, 64), np.uint8))
    s.ops = []
    sh.compression_direct(s, inp, [sh.UInt32(w.bits) for w in sh.get_sha256_iv()])
    ops = s.ops
    r1 = s.cs.to_r1cs()
    used = np.zeros(r1.num_variables, bool)
    for m in (r1.a, r1.b, r1.c):
        used[m.indices] = True
    assert used[1 + r1.num_public:].all()
    boolean_rows = {next(iter(b)) for a, b, c in s.cs._rows
                    if not c and len(b) == 1 and a == {0: 1, next(iter(b)): F.MODULUS - 1}}
    sum_bits = [k for op, _, keys in ops if op == 4 for k in keys]
    assert sum_bits and set(sum_bits) <= boolean_rows


def _single_block_both_modes():
    data = RNG.integers(0, 256, (1, 64), dtype=np.uint8)
    s = Synth(cs=ConstraintSystem(with_values=False), batch=1)
    inp = alloc_message(s, data)
    s.ops = []
    out = sh.compression_direct(s, inp, sh.get_sha256_iv())
    ops, s.ops = s.ops, None
    ck.check(s)
    return s, ops, out


def test_wrong_values_are_refused_by_name():
    """Each variable class of the compression set wrong: a 2 in a sum bit (booleanity), a flipped
    xor / and / ch / maj result (its own row), a swapped pair of sum bits (the MultiEq row)."""
    s, ops, _ = _single_block_both_modes()
    z = ck.assignments(s)[0]
    val = lambda k: F.vec_to_ints(z[s.cs._index(k):s.cs._index(k) + 1])[0]  # noqa: E731
    first = {}
    for op, args, keys in ops:
        first.setdefault(op, keys)
    sum_keys = first[4]
    last_sum = [keys for op, _, keys in ops if op == 4][-1]  # h7's bits: only the MultiEq uses them
    with pytest.raises(UnsatisfiedConstraint, match="boolean constraint"):
        ck.check(s, z=ck.set_value(z, s.cs._index(sum_keys[0]), 2))
    for op, name in ((0, "xor constraint"), (2, "ch computation"), (3, "maj computation")):
        k = first[op]
        with pytest.raises(UnsatisfiedConstraint, match=name):
            ck.check(s, z=ck.set_value(z, s.cs._index(k), 1 - val(k)))
    # and / and_not / nor results (the maj's b AND c): their rows
    k = first[1]
    with pytest.raises(UnsatisfiedConstraint, match="and"):
        ck.check(s, z=ck.set_value(z, s.cs._index(k), 1 - val(k)))
    # swap two sum bits of different values: booleanity holds, the packed sum does not
    i, j = next((i, j) for i in range(len(last_sum)) for j in range(i + 1, len(last_sum))
                if val(last_sum[i]) != val(last_sum[j]))
    zs = ck.set_value(z, s.cs._index(last_sum[i]), val(last_sum[j]))
    zs = ck.set_value(zs, s.cs._index(last_sum[j]), val(last_sum[i]))
    with pytest.raises(UnsatisfiedConstraint, match="multieq"):
        ck.check(s, z=zs)


def test_native_replay_equals_the_python_values_mode():
    data = RNG.integers(0, 256, (4, 64), dtype=np.uint8)
    py = Synth(batch=4)
    nat = Synth(batch=4)
    for s, direct in ((py, True), (nat, False)):
        inp = alloc_message(s, data)
        (sh.compression_direct if direct else sh.sha256_compression_function)(s, inp, sh.get_sha256_iv())
    a = ck.aux_values(py.values, 4)
    b = ck.aux_values(nat.values, 4)
    assert a.shape == b.shape and np.array_equal(a, b)
    # 25,840 constraints: 25,814 variables, each with its row, and 26 MultiEq rows
    assert isinstance(nat.values[-1], BitBlock) and nat.values[-1].bits.shape == (4, 25814)


@pytest.mark.parametrize("batch", [1, 63, 64, 65, 130])
def test_bit_sliced_replay_equals_the_scalar_one(batch):
    """bits_replay64 (64 instances a word operation) == bits_replay, across group edges, for a
    pattern with constants, negated inputs and a variable state."""
    bits = [Boolean(AllocatedBit(1, None), i % 7 == 3) if i % 5 else Boolean.constant(i % 2)
            for i in range(768)]
    tmpl = tp.template(tp.kinds_of(bits).tobytes())
    sv = RNG.integers(0, 2, (batch, tmpl.slots), dtype=np.uint8)
    a = tp.replay(tmpl, sv, sliced=False)
    b = tp.replay(tmpl, sv, sliced=True)
    assert a.shape == (batch, tmpl.num_aux) and np.array_equal(a, b)
    assert a.any() and not a.all()


def test_replay_rejects_bad_slot_values():
    tmpl = tp.template(tp.kinds_of([b for w in sh.get_sha256_iv() for b in w.bits]
                                   + [Boolean(AllocatedBit(1, None))] * 512).tobytes())
    with pytest.raises(ValueError, match="not a bit"):
        tp.replay(tmpl, np.full((1, tmpl.slots), 2, np.uint8))
    with pytest.raises(ValueError, match="slots"):
        tp.replay(tmpl, np.zeros((1, 3), np.uint8))


def test_padding_and_input_checks():
    assert len(sh.padded([Boolean.constant(0)] * 440)) == 512
    assert len(sh.padded([Boolean.constant(0)] * 448)) == 1024
    with pytest.raises(ValueError, match="whole bytes"):
        sh.sha256(Synth(batch=1), [Boolean.constant(0)] * 7)
    with pytest.raises(ValueError, match="512 input bits"):
        sh.sha256_compression_function(Synth(batch=1), [Boolean.constant(0)] * 8, sh.get_sha256_iv())


def test_programs_come_back_from_the_disk_cache(tmp_path, monkeypatch):
    """The values mode's replay program is saved when a pattern is recorded and read back by a
    process that never recorded it; a damaged entry is recorded again."""
    monkeypatch.setenv("ZKHIVE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tp, "_templates", {})
    monkeypatch.setattr(tp, "_programs", {})
    bits = [b for w in sh.get_sha256_iv() for b in w.bits] + \
        [Boolean(AllocatedBit(1, None))] * 500 + [Boolean.constant(1)] * 12
    key = tp.kinds_of(bits).tobytes()
    rec = tp.template(key)
    files = list((tmp_path / "bellpepper").glob("sha256-*.npz"))
    assert len(files) == 1
    monkeypatch.setattr(tp, "_templates", {})
    monkeypatch.setattr(tp, "_programs", {})
    monkeypatch.setattr(tp, "Template", None)  # recording now would fail: it must come from disk
    p = tp.program(key)
    assert np.array_equal(p.prog, rec.prog) and np.array_equal(p.out_refs, rec.out_refs)
    assert p.num_aux == rec.num_aux and p.slots == rec.slots == 500
    files[0].write_bytes(b"not an npz")
    monkeypatch.setattr(tp, "_programs", {})
    with pytest.raises(TypeError):  # damaged: recorded again (here: Template is None)
        tp.program(key)
