"""A 32 GiB partition's matvec and upload alone (issue 40): the compact matrices on the device
and a real partition's compact assignment, without the proving key, so it fits a ~78 GiB card
(an H100) as well as the H200.

    python3 bench/gpu_matvec.py --params filecoin-32g --runs 5 --out matvec.json

Steps: the compact matrices (``circuit.compact_r1cs()``) up (``DeviceCompactR1CS``), a
benchmark sector's C1 and partition 0's compact assignment (the blob the cluster stores), then

- the upload stage both ways: ``expand_assignment`` from the blob (the host lays the planes out,
  then one copy and the expansion: what a proof does on its own) and from a blob staged ahead
  (``stage_assignment``: what the prove-ahead fetcher leaves for the cluster's proofs), wall
  clock, median of ``--runs``; the staging's own time beside it;
- A z, B z, C z over the expanded z and over the assignment's planes (``spmv(planes=)``,
  ZKHIVE_MATVEC_PLANES' path), CUDA events, median of ``--runs`` each; the two products must be
  equal word for word (the exit status is 1 where any differs).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", default="filecoin-32g")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default="gpu_matvec.json")
    args = ap.parse_args()

    from bench.gpu_prover import c1_doc
    from gpu.cuda import loader
    from gpu.cuda.compact import DeviceCompactR1CS, expand_assignment, planes_bytes, \
        stage_assignment
    from gpu.cuda.memory import DeviceBuffer
    from synthesis import assignment
    from synthesis.circuits import get_circuit

    loader.init_context(0)
    cuda = loader.driver()
    circuit = get_circuit(args.params)
    row: dict = {"params": args.params}
    t = time.time()
    cr = circuit.compact_r1cs()
    row["matrices_s"] = time.time() - t
    c1 = circuit.parse_c1(c1_doc(circuit, 5))
    comp = circuit.synthesize_compact(c1, 0)
    blob = assignment.encode(comp)
    row["witness"] = comp.stats()
    del comp
    nv, m = cr.num_variables, cr.num_constraints
    row.update(variables=nv, constraints=m, nnz=cr.nnz, blob_bytes=len(blob))
    print(f"{args.params}: {m:,} constraints, {nv:,} variables, {cr.nnz:,} nonzeros, blob "
          f"{len(blob) / 1e6:.1f} MB ({row['witness']})", flush=True)
    mats = DeviceCompactR1CS(cr)
    ok = True
    try:
        with DeviceBuffer(32 * nv, what="z") as zb, \
                DeviceBuffer(planes_bytes(blob, nv), what="planes") as keep, \
                DeviceBuffer(32 * m, what="product over z") as out_z, \
                DeviceBuffer(32 * m, what="product over the planes") as out_p:
            # the upload stage, from the blob and from a blob staged ahead
            direct, staged, staging = [], [], []
            for i in range(args.runs + 1):
                cuda.Context.synchronize()
                t = time.perf_counter()
                expand_assignment(blob, nv, zb)
                if i:
                    direct.append((time.perf_counter() - t) * 1e3)
                t = time.perf_counter()
                st = stage_assignment(blob, nv)
                t1 = time.perf_counter()
                got = expand_assignment(st, nv, zb, keep=keep)
                if i:
                    staging.append((t1 - t) * 1e3)
                    staged.append((time.perf_counter() - t1) * 1e3)
            planes = got["planes"]
            row["upload_ms"] = {"blob": statistics.median(direct),
                                "staged": statistics.median(staged),
                                "staging_ahead": statistics.median(staging)}
            print("upload (wall, median of {}): from the blob {blob:.1f} ms; staged ahead "
                  "{staged:.1f} ms (+ {staging_ahead:.1f} ms of staging off the device's path)"
                  .format(args.runs, **row["upload_ms"]), flush=True)
            row["matvec_ms"] = {}
            for name in "abc":
                times = {"z": [], "planes": []}
                for i in range(args.runs + 1):
                    for kind, out, pl in (("z", out_z, None), ("planes", out_p, planes)):
                        a, b = cuda.Event(), cuda.Event()
                        a.record()
                        mats.spmv(name, zb, out, planes=pl)
                        b.record()
                        b.synchronize()
                        if i:
                            times[kind].append(a.time_till(b))
                # the two products, word for word (host copies: 4.2 GB each at 2^27)
                hz = np.empty((m, 4), np.uint64)
                hp = np.empty((m, 4), np.uint64)
                out_z.download(hz)
                out_p.download(hp)
                same = bool(np.array_equal(hz, hp))
                nonzero = bool(hz.any())
                del hz, hp
                ok &= same and nonzero
                row["matvec_ms"][name] = {k: statistics.median(v) for k, v in times.items()}
                row["matvec_ms"][name]["equal"] = same
                print(f"{name.upper()} z: over z {row['matvec_ms'][name]['z']:.2f} ms, over the "
                      f"planes {row['matvec_ms'][name]['planes']:.2f} ms; equal={same}, "
                      f"nonzero={nonzero}", flush=True)
            tz = sum(v["z"] for v in row["matvec_ms"].values())
            tp = sum(v["planes"] for v in row["matvec_ms"].values())
            row["matvec_total_ms"] = {"z": tz, "planes": tp}
            print(f"A z + B z + C z: over z {tz:.1f} ms, over the planes {tp:.1f} ms", flush=True)
    finally:
        mats.free()
    row["ok"] = ok
    Path(args.out).write_text(json.dumps(row, indent=1, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
