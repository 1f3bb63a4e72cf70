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


def test_a_library_built_from_one_copy_of_the_sources_serves_another(tmp_path):
    """The cache key holds the sources and headers by content, not the folders they sit in: an
    image builds its libraries from /src and its workers import the installed package (with
    the paths in the key every container compiled field and Poseidon again in its first job).
    A changed header still misses the cache."""
    import shutil

    src = tmp_path / "one"
    (src / "include").mkdir(parents=True)
    (src / "include" / "k.cuh").write_text("inline int k() { return 7; }\n")
    (src / "lib.cpp").write_text('#include "k.cuh"\nextern "C" int seven() { return k(); }\n')
    other = tmp_path / "other"
    shutil.copytree(src, other)
    env = dict(os.environ, ZKHIVE_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    code = ("import sys, ctypes; from pathlib import Path; from arith import native\n"
            "d = Path(sys.argv[1]); p = native.build(d / 'lib.cpp', stem='t', include_dirs=(d / 'include',))\n"
            "print(p, ctypes.CDLL(str(p)).seven())\n")

    def build(where, **extra):
        return subprocess.run([sys.executable, "-c", code, str(where)], env=dict(env, **extra),
                              capture_output=True, text=True, timeout=120)
    first = build(src)
    assert first.returncode == 0, first.stderr
    # the other copy, with a compiler that cannot run: found in the cache, not compiled
    again = build(other, CXX="/bin/false")
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout and first.stdout.split()[1] == "7"
    # a header changed in the other copy: a new key, so the compiler is asked (and fails here)
    (other / "include" / "k.cuh").write_text("inline int k() { return 8; }\n")
    changed = build(other, CXX="/bin/false")
    assert changed.returncode != 0 and "NativeBuildError" in changed.stderr
