"""gpu/native ``for_prover``: the host libraries a CUDA proof calls, built before the first proof
(the CUDA backend's start, ``python -m gpu.cuda.precompile``, the images' build), not by it."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_for_prover_loads_the_libraries_a_cuda_proof_calls():
    from gpu import native
    from gpu.native import compact, curve

    built = native.for_prover()
    assert set(built) == {"compact_host.cpp", "curve_host.cpp"}
    assert all(s >= 0 for s in built.values())
    # loaded in this process: the upload's planes and the MSM's host combine find them
    assert compact._lib is not None and curve._lib is not None
    assert hasattr(compact._lib, "host_planes") and hasattr(curve._lib, "g1_combine")


@pytest.mark.parametrize("compiler", ["/bin/false", "/nonexistent/g++"])
def test_for_prover_fails_naming_the_build_where_nothing_compiles(tmp_path, compiler):
    """A fresh cache and a compiler that fails (or is missing): the error names what failed or
    what to install, instead of a first proof that fails later."""
    env = dict(os.environ, ZKHIVE_CACHE_DIR=str(tmp_path), CXX=compiler,
               PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", "from gpu.native import for_prover; for_prover()"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert "NativeBuildError" in res.stderr
    assert "_host.cpp" in res.stderr      # the source that did not build
    assert not list(tmp_path.glob("*.so"))  # nothing half-built left to load
