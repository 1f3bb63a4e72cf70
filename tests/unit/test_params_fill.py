"""gpu/cuda/params.py's host side: the chunk bounds of a density index (issue 40, item 3)."""
import numpy as np

from gpu.cuda.params import _bounds


def test_chunk_bounds_are_searchsorted_in_the_index_dtype():
    rng = np.random.default_rng(7)
    idx = np.flatnonzero(rng.random(200_000) < 0.3).astype(np.int32)
    for v0 in (0, 1, 777, 65_536, 199_999, 200_000):
        v1 = min(200_000, v0 + 65_536)
        assert list(_bounds(idx, v0, v1)) == list(np.searchsorted(idx, [v0, v1]))
    assert _bounds(idx, int(idx[5]))[0] == 5            # a variable in the density: its point
    assert _bounds(idx, int(idx[5]) + 1)[0] == 6           # the next variable: the next point
    assert _bounds(idx, 0, 0).dtype == np.intp and len(_bounds(idx, 3)) == 1
