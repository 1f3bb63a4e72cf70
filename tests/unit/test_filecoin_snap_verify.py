"""``snap.verify_partition`` (EmptySectorUpdate's native vanilla check) named exactly: the
partition bound, each count alone, challenge 0's roots as the reference, a level's siblings
and index (what ``python -m tools.mutate snap`` asked for, issue 35). The updated 2 KiB CC
sector is test_filecoin_snap's."""
from __future__ import annotations

import copy

import pytest

from synthesis import field
from synthesis.filecoin import bincode, snap
from synthesis.filecoin import update as upd
from tests.unit.test_filecoin_snap import cc  # noqa: F401 - the fixture


def _pp(cc):  # noqa: F811
    return bincode.read_update_partition_proof(cc["prm"], cc["bytes"], 0)


def _refused(cc, pp, message, k=0):  # noqa: F811
    u = cc["u"]
    with pytest.raises(snap.UpdateProofError) as e:
        snap.verify_partition(cc["prm"], k, u.h, u.comm_r_old, u.comm_d_new, u.comm_r_new, pp)
    assert str(e.value) == message


def test_the_partition_must_be_below_the_count(cc):  # noqa: F811
    n = cc["prm"].partition_count
    _refused(cc, _pp(cc), f"partition {n}: not below the {n} partitions of {cc['prm'].name}", k=n)
    _refused(cc, _pp(cc), f"partition -1: not below the {n} partitions of {cc['prm'].name}", k=-1)


@pytest.mark.parametrize("what", ["apex_leafs", "challenge_proofs"])
def test_one_apex_leaf_or_one_challenge_proof_too_few_alone_is_named(cc, what):  # noqa: F811
    prm, pp = cc["prm"], _pp(cc)
    setattr(pp, what, getattr(pp, what)[:-1])
    a, c = prm.apex_leaf_count - (what == "apex_leafs"), prm.challenge_count - (what == "challenge_proofs")
    _refused(cc, pp, f"partition 0: {a} apex leafs and {c} challenge proofs, {prm.apex_leaf_count} and "
                     f"{prm.challenge_count} expected")


@pytest.mark.parametrize("which, name", [(0, "root_r_old"), (2, "root_r_new")])
def test_challenge_0s_roots_are_the_reference(cc, which, name):  # noqa: F811
    """Challenge 0's proof_r_old (proof_r_new) root changed: H(comm_c, root) is checked against
    comm_r_old (comm_r_new) with that root, not another challenge's (which still holds the
    right one)."""
    u, pp = cc["u"], _pp(cc)
    p = pp.challenge_proofs[0][which]
    p.root = field.to_bytes(field.from_bytes(p.root) ^ 1)
    comm = {"root_r_old": ("comm_r_old", u.comm_r_old), "root_r_new": ("comm_r_new", u.comm_r_new)}[name]
    _refused(cc, pp, f"partition 0: H(comm_c, {name}) differs from {comm[0]} {comm[1]:#x}")


def test_a_level_with_one_sibling_fewer_or_another_index_is_named(cc):  # noqa: F811
    prm, u = cc["prm"], cc["u"]
    c0 = upd.challenges(prm, u.comm_r_new, 0)[0]
    a = prm.tree_r_arities[0]
    pp = _pp(cc)
    pp.challenge_proofs[0][0].siblings[0] = pp.challenge_proofs[0][0].siblings[0][:-1]
    _refused(cc, pp, f"partition 0, challenge 0 (node {c0}), proof_r_old, level 0: {a - 2} siblings, "
                     f"{a - 1} expected")
    pp = _pp(cc)
    pp.challenge_proofs[0][0].positions[0] ^= 1
    _refused(cc, pp, f"partition 0, challenge 0 (node {c0}), proof_r_old, level 0: index "
                     f"{(c0 % a) ^ 1}, the challenge's is {c0 % a}")
    pp = _pp(cc)                     # level 1: the position of c0's parent, c0 // a
    pp.challenge_proofs[0][0].positions[1] ^= 1
    _refused(cc, pp, f"partition 0, challenge 0 (node {c0}), proof_r_old, level 1: index "
                     f"{(c0 // a % a) ^ 1}, the challenge's is {c0 // a % a}")


def test_a_field_element_equal_to_the_modulus_is_refused(cc):  # noqa: F811
    """comm_c = p (the modulus itself, one past the largest field element) is refused, named."""
    pp = _pp(cc)
    pp.comm_c = field.MODULUS.to_bytes(32, "little")
    _refused(cc, pp, "partition 0: comm_c is not below the BLS12-381 scalar field modulus")
    pp.comm_c = (field.MODULUS - 1).to_bytes(32, "little")   # below it: on to the comm_r_old check
    with pytest.raises(snap.UpdateProofError, match=r"^partition 0: H\(comm_c, root_r_old\) differs"):
        snap.verify_partition(cc["prm"], 0, cc["u"].h, cc["u"].comm_r_old, cc["u"].comm_d_new,
                              cc["u"].comm_r_new, pp)


@pytest.mark.parametrize("what", ["siblings", "positions"])
def test_a_path_one_level_short_in_siblings_or_positions_alone_is_named(cc, what):  # noqa: F811
    prm, u = cc["prm"], cc["u"]
    c0 = upd.challenges(prm, u.comm_r_new, 0)[0]
    pp = _pp(cc)
    p = pp.challenge_proofs[0][0]
    setattr(p, what, getattr(p, what)[:-1])
    n = len(prm.tree_r_arities)
    _refused(cc, pp, f"partition 0, challenge 0 (node {c0}), proof_r_old: {len(p.siblings)} levels, {n} expected")
    assert len(p.siblings) == (n - 1 if what == "siblings" else n)
