"""porep-lite synthesis benchmark: matrix build time and witness-generation speed per set.

    python bench/synthesis.py                       # porep-lite-4k .. porep-lite-1m
    python bench/synthesis.py --sets porep-lite-4m --repeat 1 --json out.json

Per parameter set: the sector's generation, the C1 document, building the matrices from the
templates (no cache), loading them from the on-disk cache, and synthesizing one partition
(median of --repeat runs, after a warm-up that builds the per-width Poseidon templates);
constraints per second per core = constraints / synthesis seconds / cores used (the host library
runs OpenMP over every core it is given: OMP_NUM_THREADS or os.cpu_count()).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_SETS = ["porep-lite-4k", "porep-lite-16k", "porep-lite-64k", "porep-lite-256k",
                "porep-lite-1m"]


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def bench_set(name: str, repeat: int, check: bool, tmp: Path | None) -> dict:
    from synthesis.circuits import get_circuit
    from synthesis.porep import c1_document, generate
    from synthesis.porep.matrices import build_r1cs
    from synthesis.porep.r1cs_cache import load_r1cs, save_r1cs

    circuit = get_circuit(name)
    prm = circuit.prm
    sector, t_sector = timed(lambda: generate(prm, b"\x01" * 32))
    doc, t_c1 = timed(lambda: c1_document(sector, b"\x02" * 32))
    c1, t_parse = timed(lambda: circuit.parse_c1(json.loads(json.dumps(doc))))
    r1cs, t_build = timed(lambda: build_r1cs(prm))
    t_save = t_load = float("nan")
    if tmp is not None:
        path = tmp / f"{circuit.digest()}.npz"  # the cache's file format, outside the real cache
        _, t_save = timed(lambda: save_r1cs(r1cs, path))
        _, t_load = timed(lambda: load_r1cs(path, prm))
        cache_bytes = path.stat().st_size
        path.unlink()
    circuit._r1cs = r1cs
    circuit.synthesize(c1, 0)  # warm-up: per-width Poseidon templates, block-diagonal MDS
    runs = []
    for i in range(repeat):
        _, t = timed(lambda: circuit.synthesize(c1, i % prm.partitions))
        runs.append(t)
    t_synth = statistics.median(runs)
    row = {"set": name, "partitions": prm.partitions, "challenges": prm.challenges,
           "constraints": r1cs.num_constraints, "variables": r1cs.num_variables,
           "nonzeros": r1cs.nnz, "sector_s": t_sector, "c1_s": t_c1, "c1_bytes": len(json.dumps(doc)),
           "parse_s": t_parse, "build_s": t_build, "cache_save_s": t_save, "cache_load_s": t_load,
           "cache_bytes": cache_bytes if tmp is not None else None, "synth_s": t_synth,
           "synth_runs": runs}
    if check:
        z = circuit.synthesize(c1, 0)
        _, row["check_s"] = timed(lambda: r1cs.check(z))
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=DEFAULT_SETS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check", action="store_true", help="also time r1cs.check(z)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--no-cache", action="store_true",
                    help="skip the cache save/load timing (a second copy of the matrices: "
                    "porep-lite-16m's are ~7.7 GB)")
    args = ap.parse_args()
    cores = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
    tmp = Path(tempfile.mkdtemp(prefix="zkhive-bench-"))
    from arith import native
    native.lib()  # build (or load) the host library before timing anything
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {cores} cores, "
          f"python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'set':<17}{'constraints':>12}{'variables':>11}{'nonzeros':>11}{'sector s':>9}"
          f"{'build s':>9}{'load s':>8}{'synth s':>9}{'constr/s/core':>15}")
    rows = []
    for name in args.sets:
        row = bench_set(name, args.repeat, args.check, None if args.no_cache else tmp)
        row["constraints_per_s_per_core"] = row["constraints"] / row["synth_s"] / cores
        row["cores"] = cores
        rows.append(row)
        print(f"{name:<17}{row['constraints']:>12}{row['variables']:>11}{row['nonzeros']:>11}"
              f"{row['sector_s']:>9.2f}{row['build_s']:>9.2f}{row['cache_load_s']:>8.2f}"
              f"{row['synth_s']:>9.2f}{row['constraints_per_s_per_core']:>15.0f}"
              + (f"  (check {row['check_s']:.2f} s)" if "check_s" in row else ""), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    tmp.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
