"""An assignment staged ahead (gpu.cuda.compact.StagedAssignment, duck-typed by
``is_staged_assignment``) is taken everywhere a blob is: gpu.backends.forms reads its blob (its
count checked as a blob's), and the CPU backend's ``stage`` prepares nothing."""
from __future__ import annotations

import numpy as np
import pytest

from gpu.backends.forms import assignment_blob, assignment_vector, is_compact_assignment
from synthesis import assignment
from tests.compact_circuits import random_z


class Staged:
    is_staged_assignment = True

    def __init__(self, blob):
        self.blob = blob


def test_a_staged_blob_is_read_as_its_blob():
    z = random_z(77, np.random.default_rng())
    blob = assignment.encode(z)
    st = Staged(blob)
    assert is_compact_assignment(st)
    assert assignment_blob(st) is blob
    assert np.array_equal(assignment_vector(st, 77), z)
    with pytest.raises(assignment.AssignmentError):
        assignment_vector(st, 78)  # the count is the blob's, checked as a blob's
    assert not is_compact_assignment(object())


def test_the_cpu_backend_stages_nothing():
    from gpu.backends import get_backend
    blob = assignment.encode(random_z(5, np.random.default_rng()))
    assert get_backend("cpu").stage(blob, 5) is blob
