"""``post.verify`` (the native FallbackPoSt vanilla verification) on a whole WindowPoSt
partition of two sectors: the failing sector, challenge and shape named exactly (what
``python -m tools.mutate post`` asked for, issue 35). The sealed 2 KiB sector is
test_filecoin_post's; the partition's two public sectors are that sector twice (a sector's
challenges follow its index in the partition, so the two proofs differ)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from synthesis import field
from synthesis.filecoin import post
from tests.unit.test_filecoin_post import RANDOMNESS, sealed  # noqa: F401 - the fixture

PRM = post.get("window-post-2k")           # 2 sectors a partition, 10 challenges, arities (8, 8)


@pytest.fixture(scope="module")
def two(sealed):  # noqa: F811
    comm_r = field.from_bytes(sealed.comm_r)
    secs = [(sealed.sector_id, comm_r)] * PRM.sector_count
    proofs = [post.vanilla_proof(sealed, post.sector_challenges(PRM, RANDOMNESS, sealed.sector_id, i))
              for i in range(PRM.sector_count)]
    post.verify(PRM, RANDOMNESS, secs, proofs)
    return secs, proofs, sealed.sector_id, comm_r


def _refused(secs, proofs, message, **kw):
    with pytest.raises(post.PostProofError) as e:
        post.verify(PRM, RANDOMNESS, secs, proofs, **kw)
    assert str(e.value) == message


def test_every_partitions_sectors_by_default_or_the_partitions_own(two):
    """``whole`` (the default): the sectors of every partition, partition 0 takes the first two;
    not whole: the list is the partition's own, and three sectors are too many."""
    secs, proofs, sid, comm_r = two
    post.verify(PRM, RANDOMNESS, secs + secs[:1], proofs)
    _refused(secs + secs[:1], proofs, "partition 0: 2 sector proofs for 0 public sectors", whole=False)
    post.verify(PRM, RANDOMNESS, secs, proofs, whole=False)


def test_the_second_sectors_comm_c_is_named_with_its_comm_r(two):
    secs, proofs, sid, comm_r = two
    bad = copy.deepcopy(proofs)
    bad[1].comm_c += 1
    _refused(secs, bad, f"partition 0, sector 1 (id {sid}): H(comm_c, comm_r_last) differs from comm_r {comm_r:#x}")


def test_the_first_failing_path_is_named(two):
    """Sector 1's challenges 4 and 6 both fail to reach comm_r_last: challenge 4 is named, with
    its leaf."""
    secs, proofs, sid, comm_r = two
    bad = copy.deepcopy(proofs)
    bad[1].paths[1][4, 2, 0] ^= 1
    bad[1].paths[0][6, 3, 1] ^= 1
    leaf = post.sector_challenges(PRM, RANDOMNESS, sid, 1)[4]
    _refused(secs, bad, f"partition 0, sector 1 (id {sid}), challenge 4 (leaf {leaf}): the path does not "
                        f"reach comm_r_last {proofs[1].comm_r_last:#x}")


@pytest.mark.parametrize("what", ["challenges", "paths", "leafs"])
def test_a_proof_with_one_challenge_or_level_too_few_is_named(two, what):
    """Each count alone: one challenge fewer, one path level fewer, one leaf fewer."""
    secs, proofs, sid, _ = two
    bad = copy.deepcopy(proofs)
    setattr(bad[1], what, getattr(bad[1], what)[:-1])
    n = 9 if what == "challenges" else 10
    levels = 1 if what == "paths" else 2
    _refused(secs, bad, f"partition 0, sector 1 (id {sid}): {n} challenges and {levels} path levels, "
                        "10 and 2 expected")


@pytest.mark.parametrize("shape, shown", [
    ("one sibling fewer", "(6, 4)"),          # (10, 6, 4)
    ("one challenge more", "(7, 4)"),         # (11, 7, 4): each challenge's shape is right
    ("no sibling axis", "(4,)"),              # (10, 4)
    ("a number", "()"),                       # not an array at all
])
def test_a_path_level_of_the_wrong_shape_is_named(two, shape, shown):
    """Level 1 of sector 1's paths of the wrong shape: refused before any hash, naming the level
    and the shape of one challenge's siblings (challenge 0: a level's array has one shape)."""
    secs, proofs, sid, _ = two
    bad = copy.deepcopy(proofs)
    p = bad[1].paths[1]
    bad[1].paths[1] = {"one sibling fewer": lambda: p[:, :-1], "one challenge more": lambda: np.concatenate([p, p[:1]]),
                       "no sibling axis": lambda: p[:, 0], "a number": lambda: 7}[shape]()
    _refused(secs, bad, f"partition 0, sector 1 (id {sid}), challenge 0, level 1: siblings of shape {shown}, "
                        "(7, 4) expected")
