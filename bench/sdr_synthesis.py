"""SDR synthesis benchmark: compact matrices, sealing, and one partition's witness.

    OMP_NUM_THREADS=1 taskset -c 0 python bench/sdr_synthesis.py --params sdr-32g --stage matrices
    OMP_NUM_THREADS=1 taskset -c 0 python bench/sdr_synthesis.py --params sdr-32g --stage synth

Stages run in their own process so each peak RSS is its own:
  matrices  build the compact matrices from the templates (no cache: a private cache dir unless
            --cache), save, load again; constraints, variables, nonzeros, bytes
  synth     seal the sector, write its C1, parse it, then synthesize partition 0 (--repeat runs;
            the first includes one-time costs: kernel loading, Poseidon constants); the compact
            assignment's statistics and bytes against 32 bytes a value
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB -> GB


def stage_matrices(name: str, cache: bool) -> dict:
    if not cache:
        os.environ["ZKHIVE_CACHE_DIR"] = tempfile.mkdtemp(prefix="zkhive-sdr-bench-")
    from synthesis.circuits import get_circuit
    from synthesis.sdr.circuit import CompactR1CS, build_compact, cache_path
    c = get_circuit(name)
    t, u = time.perf_counter(), time.process_time()
    cr = build_compact(c.prm)
    build_s, build_cpu = time.perf_counter() - t, time.process_time() - u
    path = cache_path(c.digest())
    t = time.perf_counter()
    cr.save(path)
    save_s = time.perf_counter() - t
    t = time.perf_counter()
    cr2 = CompactR1CS.load(path)
    load_s = time.perf_counter() - t
    assert cr2.nnz == cr.nnz
    return {"stage": "matrices", "params": name, "constraints": cr.num_constraints,
            "variables": cr.num_variables, "nonzeros": cr.nnz, "public": c.prm.num_public,
            "domain_log2": (cr.num_constraints + c.prm.num_public).bit_length(),
            "nnz": {"a": cr.a.nnz, "b": cr.b.nnz, "c": cr.c.nnz},
            "compact_bytes": cr.nbytes, "file_bytes": path.stat().st_size,
            "full_csr_bytes_estimate": cr.nnz * 40 + 3 * 8 * (cr.num_constraints + 1),
            "build_s": round(build_s, 2), "build_cpu_s": round(build_cpu, 2),
            "load_avg": os.getloadavg()[0], "save_s": round(save_s, 2), "load_s": round(load_s, 2),
            "peak_rss_gb": round(peak_rss_gb(), 2)}


def stage_synth(name: str, repeat: int, partition: int) -> dict:
    from synthesis import assignment
    from synthesis.circuits import get_circuit
    from synthesis.sdr import c1_document, generate, interactive_seed
    c = get_circuit(name)
    t = time.perf_counter()
    sector = generate(c.prm, b"\x5a" * 32)
    seal_s = time.perf_counter() - t
    t = time.perf_counter()
    text = json.dumps(c1_document(sector, interactive_seed(sector)))
    c1_s = time.perf_counter() - t
    t = time.perf_counter()
    c1 = c.parse_c1(json.loads(text))
    parse_s = time.perf_counter() - t
    del sector
    rss_before = peak_rss_gb()
    times, cpu = [], []
    for _ in range(repeat):
        t, u = time.perf_counter(), time.process_time()
        ca = c.synthesize_compact(c1, partition)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - u)
    t = time.perf_counter()
    blob = assignment.encode(ca)
    encode_s = time.perf_counter() - t
    t = time.perf_counter()
    back = assignment.decode_compact(blob)
    decode_compact_s = time.perf_counter() - t
    assert len(back) == len(ca)
    st = ca.stats()
    n = st["variables"]
    return {"stage": "synth", "params": name, "partition": partition, "seal_s": round(seal_s, 2),
            "c1_json_bytes": len(text), "c1_s": round(c1_s, 2), "parse_s": round(parse_s, 2),
            "synth_s": [round(x, 2) for x in times], "synth_cpu_s": [round(x, 2) for x in cpu],
            "load_avg": os.getloadavg()[0], "variables": n,
            "share": {k: round(st[k] / n, 4) for k in ("zeros", "ones", "other")}, "counts": st,
            "assignment_fr_bytes": 32 * n, "assignment_compact_bytes": len(blob),
            "encode_s": round(encode_s, 2), "decode_compact_s": round(decode_compact_s, 2),
            "peak_rss_gb_before_synth": round(rss_before, 2), "peak_rss_gb": round(peak_rss_gb(), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="sdr-32g")
    ap.add_argument("--stage", choices=("matrices", "synth"), required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--partition", type=int, default=0)
    ap.add_argument("--cache", action="store_true", help="matrices: build into the real cache")
    ap.add_argument("--json", help="append the result to this file")
    a = ap.parse_args()
    out = stage_matrices(a.params, a.cache) if a.stage == "matrices" else \
        stage_synth(a.params, a.repeat, a.partition)
    out.update({"machine": platform.node(), "cpus_allowed": len(os.sched_getaffinity(0)),
                "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    print(json.dumps(out))
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
