"""Compile every kernel module for an architecture into the cubin cache, without a GPU.

    python -m gpu.cuda.precompile [--arch sm_90] [--jobs N]

A worker then loads the cubins instead of running nvcc at its first proof (the MSM module takes
minutes to compile); container images run this at build time. The cache key is the same as the
loader's (sources, arch, flags), so a changed kernel is compiled again, never loaded stale.
"""
from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

from gpu.cuda.loader import KERNELS, compile_cubin, module_path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="modules compiled at once (default: one per CPU; nvcc is single-threaded)")
    args = ap.parse_args(argv)

    def one(src):
        t = time.time()
        cubin = compile_cubin(module_path(src.stem), args.arch)
        print(f"{src.name}: {len(cubin)} bytes for {args.arch} in {time.time() - t:.1f} s", flush=True)
    # the largest modules first, so the longest compile starts at once
    srcs = sorted(KERNELS.glob("*.cu"), key=lambda p: -p.stat().st_size)
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(one, srcs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
