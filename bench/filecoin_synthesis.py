"""filecoin synthesis benchmark: compact matrices, one partition's witness, its statistics.

    OMP_NUM_THREADS=1 taskset -c 0 python bench/filecoin_synthesis.py --params filecoin-32g --stage matrices --cache
    OMP_NUM_THREADS=1 taskset -c 0 python bench/filecoin_synthesis.py --params filecoin-32g --stage synth

Stages run in their own process so each peak RSS is its own:
  matrices  record the header and one challenge block (ordered TemplatingCS), replicate, save,
            load; the sizes beside the census and Filecoin's published numbers (32 GiB)
  synth     make the sample sector's C1 (a benchmark sector from 512 MiB up), parse it, check
            partition 0's vanilla proofs (timed apart), then its witness (--repeat runs; the
            first includes loading kernels and constants); the compact assignment's statistics:
            share of 0, 1 and other values overall and for the L (aux), A and B_G1 queries
            (the variables with a nonzero in A, in B), inputs apart
Results print as one JSON object per stage (--json appends them to a file).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB -> GB


def stage_matrices(name: str, cache: bool) -> dict:
    if not cache:
        os.environ["ZKHIVE_CACHE_DIR"] = tempfile.mkdtemp(prefix="zkhive-filecoin-bench-")
    from synthesis.circuits import get_circuit
    from synthesis.filecoin.census import FILECOIN_32G
    c = get_circuit(name)
    t, u = time.perf_counter(), time.process_time()
    cr = c.compact_r1cs()  # builds (and caches) unless --cache found it built
    build_s, build_cpu = time.perf_counter() - t, time.process_time() - u
    census = c.census()
    npub = c.prm.num_public
    out = {"stage": "matrices", "params": name, "constraints": cr.num_constraints,
           "aux": cr.num_aux, "inputs_with_one": npub + 1, "nonzeros": cr.nnz,
           "with_input_rows": {"constraints": cr.num_constraints + npub + 1, "nonzeros": cr.nnz + npub + 1},
           "census": census, "census_equal": census["constraints"] == cr.num_constraints
           and census["aux"] == cr.num_aux and census["nonzeros"] == cr.nnz,
           "nnz": {"a": cr.a.nnz, "b": cr.b.nnz, "c": cr.c.nnz},
           "compact_bytes": cr.nbytes, "build_or_load_s": round(build_s, 2), "build_or_load_cpu_s": round(build_cpu, 2),
           "load_avg": os.getloadavg()[0], "peak_rss_gb": round(peak_rss_gb(), 2)}
    if name == "filecoin-32g":
        out["filecoin"] = FILECOIN_32G
        out["filecoin_equal"] = (cr.num_constraints + npub + 1, cr.num_aux, npub + 1, cr.nnz + npub + 1) == \
            (FILECOIN_32G["constraints"], FILECOIN_32G["aux"], FILECOIN_32G["inputs"], FILECOIN_32G["nonzeros"])
    return out


def density(m, nvar: int) -> np.ndarray:
    """Variables with a nonzero in the Replicated matrix m."""
    used = np.zeros(nvar, dtype=bool)
    used[m.header.cols] = True
    cols = np.unique(m.block.cols)
    for j in range(m.copies):
        used[m.base[cols] + j * m.stride[cols]] = True
    return used


def shares(kinds: np.ndarray) -> dict:
    c = np.bincount(kinds, minlength=3)
    n = max(int(c.sum()), 1)
    return {"count": int(c.sum()), "zero": round(c[0] / n, 4), "one": round(c[1] / n, 4),
            "other": round(c[2] / n, 4), "other_count": int(c[2])}


def stage_synth(name: str, repeat: int, partition: int, stats: bool) -> dict:
    from synthesis import assignment
    from synthesis.circuits import get_circuit
    from synthesis.filecoin.samples import sample_c1
    c = get_circuit(name)
    t = time.perf_counter()
    doc = sample_c1(c.prm, 5)
    seal_s = time.perf_counter() - t
    text = json.dumps(doc)
    t = time.perf_counter()
    c1 = c.parse_c1(json.loads(text))
    parse_s = time.perf_counter() - t
    t, u = time.perf_counter(), time.process_time()
    pv = c.vanilla(c1, partition, check=True)
    check_s, check_cpu = time.perf_counter() - t, time.process_time() - u
    times, cpu = [], []
    for _ in range(repeat):
        t, u = time.perf_counter(), time.process_time()
        ca = c.assignment_of(pv)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - u)
    t = time.perf_counter()
    blob = assignment.encode(ca)
    encode_s = time.perf_counter() - t
    npub = c.prm.num_public
    out = {"stage": "synth", "params": name, "partition": partition, "benchmark_sector": c.prm.benchmark,
           "seal_and_c1_s": round(seal_s, 2), "c1_json_bytes": len(text), "parse_s": round(parse_s, 2),
           "vanilla_check_s": round(check_s, 2), "vanilla_check_cpu_s": round(check_cpu, 2),
           "synth_s": [round(x, 2) for x in times], "synth_cpu_s": [round(x, 2) for x in cpu],
           "load_avg": os.getloadavg()[0], "variables": len(ca),
           "overall": shares(ca.kinds), "inputs": shares(ca.kinds[1:1 + npub]),
           "L_aux": shares(ca.kinds[1 + npub:]),
           "assignment_fr_bytes": 32 * len(ca), "assignment_compact_bytes": len(blob),
           "encode_s": round(encode_s, 2), "peak_rss_gb": round(peak_rss_gb(), 2)}
    if stats:
        cr = c.compact_r1cs()
        nvar = cr.num_variables
        aux = np.zeros(nvar, dtype=bool)
        aux[1 + npub:] = True
        a_used, b_used = density(cr.a, nvar), density(cr.b, nvar)
        out["A_aux"] = shares(ca.kinds[a_used & aux])
        out["B_G1_aux"] = shares(ca.kinds[b_used & aux])
        out["B_inputs_with_one"] = int(b_used[:1 + npub].sum())
        out["peak_rss_gb"] = round(peak_rss_gb(), 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="filecoin-32g")
    ap.add_argument("--stage", choices=("matrices", "synth"), required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--partition", type=int, default=0)
    ap.add_argument("--cache", action="store_true", help="matrices: use (and fill) the real cache")
    ap.add_argument("--no-stats", action="store_true", help="synth: skip the A / B_G1 densities (loads the matrices)")
    ap.add_argument("--json", help="append the result to this file")
    a = ap.parse_args()
    out = stage_matrices(a.params, a.cache) if a.stage == "matrices" else \
        stage_synth(a.params, a.repeat, a.partition, not a.no_stats)
    out.update({"machine": platform.node(), "cpus": os.cpu_count(), "cpus_allowed": len(os.sched_getaffinity(0)),
                "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    print(json.dumps(out))
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
