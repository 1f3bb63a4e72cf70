"""The prove worker's check of an encoded assignment without expanding it
(cluster/pipeline/assignments.py): accepts exactly what synthesis.assignment.decode_compact accepts, on
fresh random assignments of several sizes, and names what is wrong otherwise."""
from __future__ import annotations

import numpy as np
import pytest

from synthesis import assignment, field


def _random_z(n, rng):
    kinds = rng.choice(3, size=n, p=[0.5, 0.45, 0.05]).astype(np.uint8)
    m = int((kinds == 2).sum())
    fes = field.vec_from_ints([int(rng.integers(0, 2**62)) * 2**190 + int(rng.integers(2, 2**62)) for _ in range(m)])
    return assignment.Compact(kinds, fes)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 1000, 4099])
def test_accepts_what_decode_accepts(n):
    from cluster.pipeline.assignments import check_encoded

    rng = np.random.default_rng(n)
    c = _random_z(n, rng)
    blob = assignment.encode(c)
    assert check_encoded(blob, n) is blob
    back = assignment.decode_compact(blob, n=n)
    assert np.array_equal(back.kinds, c.kinds) and np.array_equal(back.fes, c.fes)


def test_rejects_what_decode_rejects_naming_it():
    from cluster.pipeline.assignments import check_encoded

    rng = np.random.default_rng(5)
    n = 1001
    c = _random_z(n, rng)
    blob = assignment.encode(c)
    plane = (n + 7) // 8
    cases = {
        "circuit has 1002 variables": (blob, n + 1),
        "starts with b'NOPE'": (b"NOPE" + blob[4:], n),
        "header says": (blob[:-1], n),
        "shorter than its header": (blob[:10], n),
    }
    for what, (b, count) in cases.items():
        with pytest.raises(assignment.AssignmentError, match=what):
            check_encoded(b, count)
    # value 3 marked both "other" and "one"
    bad = bytearray(blob)
    bad[20] |= 1 << 3
    bad[20 + plane] |= 1 << 3
    with pytest.raises(assignment.AssignmentError, match="value 3 is marked both"):
        check_encoded(bytes(bad), n)
    with pytest.raises(assignment.AssignmentError):
        assignment.decode_compact(bytes(bad), n=n)
    # one "other" bit cleared: the count no longer matches the header
    first_other = int(np.flatnonzero(c.kinds == 2)[0])
    bad = bytearray(blob)
    bad[20 + first_other // 8] &= ~(1 << (first_other % 8)) & 0xFF
    with pytest.raises(assignment.AssignmentError, match="field elements, its header says"):
        check_encoded(bytes(bad), n)
    # a bit past the last value (n = 1001: 7 padding bits in the last byte)
    bad = bytearray(blob)
    bad[20 + 2 * plane - 1] |= 0x80
    with pytest.raises(assignment.AssignmentError, match="past the last one"):
        check_encoded(bytes(bad), n)
    # an element >= r
    bad = bytearray(blob)
    bad[-1] = 0xFF
    with pytest.raises(field.FieldError, match="not below the Fr modulus"):
        check_encoded(bytes(bad), n)
