"""Compile every kernel module for an architecture into the cubin cache, without a GPU.

    python -m gpu.cuda.precompile [--arch sm_90]

A worker then loads the cubins instead of running nvcc at its first proof (the MSM module takes
minutes to compile); container images run this at build time. The cache key is the same as the
loader's (sources, arch, flags), so a changed kernel is compiled again, never loaded stale.
"""
from __future__ import annotations

import argparse
import time

from gpu.cuda.loader import KERNELS, compile_cubin, module_path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args(argv)
    for src in sorted(KERNELS.glob("*.cu")):
        t = time.time()
        cubin = compile_cubin(module_path(src.stem), args.arch)
        print(f"{src.name}: {len(cubin)} bytes for {args.arch} in {time.time() - t:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
