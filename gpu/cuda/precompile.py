"""Compile every kernel module for an architecture into the cubin cache, without a GPU.

    python -m gpu.cuda.precompile [--arch sm_90] [--jobs N] [--all]

A worker then loads the cubins instead of running nvcc at its start; the host libraries a proof
calls (gpu/native ``for_prover``: g++, which a prover otherwise runs at its start) are built too.
The cache key is the same as the loader's (sources, arch, flags), so a changed kernel is
compiled again, never loaded stale. The MSM's kernels are split over several
modules (one per heavy kernel: msm_g1_acc.cu, msm_g2_acc.cu, ...) so that the modules compile in
parallel; ``*_variants.cu`` (measured-slower kernels the benchmarks compare) only with --all.
"""
from __future__ import annotations

import argparse
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor

from gpu.cuda.loader import KERNELS, compile_cubin, module_path


def compile_weight(src) -> int:
    """Which modules to start first, so the slowest compiles begin at once: G2 point code (Fq2
    arithmetic, unrolled) is what takes ptxas 30-60 s a module; the modules split off for it
    carry g2 in their names (2), others instantiate some of it (fq2_t: 1). Ordering by file
    size started the tiny msm_g2_*.cu files last: 75.5 s on the H200's 16 CPUs where the
    slowest module took 58.6 s."""
    if "g2" in src.stem:
        return 2
    return 1 if re.search(r"\bfq2_t\b", src.read_text()) else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="modules compiled at once (default: one per CPU; nvcc is single-threaded)")
    ap.add_argument("--all", action="store_true", help="also the *_variants.cu modules")
    args = ap.parse_args(argv)
    t0 = time.time()

    def one(src):
        t = time.time()
        cubin = compile_cubin(module_path(src.stem), args.arch)
        print(f"{src.name}: {len(cubin)} bytes for {args.arch} in {time.time() - t:.1f} s", flush=True)
    srcs = sorted((p for p in KERNELS.glob("*.cu") if args.all or not p.stem.endswith("_variants")),
                  key=lambda p: (-compile_weight(p), -p.stat().st_size))
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(one, srcs))
    print(f"{len(srcs)} modules for {args.arch} in {time.time() - t0:.1f} s", flush=True)
    # and the host libraries a proof calls (a prover builds them at start otherwise)
    from gpu.native import for_prover
    t = time.time()
    built = for_prover()
    print(f"host libraries ({', '.join(f'{k} {v:.1f} s' for k, v in built.items())}) "
          f"in {time.time() - t:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
