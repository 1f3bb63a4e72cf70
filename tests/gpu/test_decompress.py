"""Key-file point decompression on the device == the host build == arkworks (fresh points)."""
from __future__ import annotations

import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from synthesis.field import MODULUS

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("kind,P", [(1, G1Point), (2, G2Point)])
def test_device_decompression_matches_host_and_names_bad_points(cuda_ctx, kind, P):
    from gpu.groth16 import KeyFormatError
    from gpu.groth16.compress import compress, decompress
    from gpu.groth16.points import PointArray

    rnd = random.Random()
    pts = [P() * Scalar(rnd.randrange(MODULUS)) for _ in range(500)] + [P.identity(), -P()]
    pa = PointArray.from_points(P, pts)
    c = compress(pa.raw, kind)
    assert np.array_equal(decompress(c, kind, device=True), pa.raw)
    bad = c.copy()
    bad[321, 0] &= 0x7F  # compression flag cleared
    with pytest.raises(KeyFormatError, match="point 321 "):
        decompress(bad, kind, device=True)
