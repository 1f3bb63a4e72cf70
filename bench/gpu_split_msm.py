"""The split MSM against plain Pippenger on the same resident bases, by witness mix.

    python3 bench/gpu_split_msm.py --g1 24 --g2 22 --runs 5 --out split.json
    python3 bench/gpu_split_msm.py --g1 0 --g2 22 --mixes sdr-b,dense --g2-lean  # lean vs default
    python3 bench/gpu_split_msm.py --g1 25 --g2 0 --modes on,dense,auto \
        --mixes sdr-l,p50,p75,p90,p97,dense          # a query larger than a chunk: the choice
    python3 bench/gpu_split_msm.py --g1 27 --g2 26 --modes on,on+ones --mixes fil  # the 1s

Mixes: ``sdr-l`` (a 32 GiB partition's L query: 12 M of 130 M scalars neither 0 nor 1, the rest
0 or 1 half and half), ``sdr-b`` (B: 6 M of 130 M), ``bits`` (0 and 1 only), ``dense`` (all
random: the split must fall back to Pippenger at no cost), ``pNN`` (NN% full-size scalars, the
rest 0 or 1 half and half). --modes: ZKHIVE_SPLIT_MSM for each row (off: plain Pippenger where
the query fits a chunk; on: the split, its tail in chunks; dense: the chunked dense engine for
G1 above a chunk; auto: the choice, by the counts; a ``+ones`` suffix, e.g. ``on+ones``: the
1s by affine chains, ZKHIVE_MSM_ONES_AFFINE=1, else 0; ``on+ones64``: 64 chains a thread,
ZKHIVE_MSM_ONES_CHAINS; ``on+ones64@lean3``: the chains' kernel form, ZKHIVE_MSM_ONES_KERNEL
set for the row's group, gpu/affine_plan.py ONES_KERNELS). Bases with known discrete logs made on
the device (gpu.cuda.msm.known_log_bases), so every result is checked by the identity
MSM(P, s) = (sum s_i k_i) G. Times: wall clock of the call after one warm-up, median of --runs
(each call ends with the point on the host: the device is idle before and after).
--g2-lean: G2 also through the lean kernels (ZKHIVE_MSM_G2_LEAN=1: the ones-sum and the tail's
level 1, msm_g2_lean.cu) on a second resident copy of the bases, row key "lean";
--g1 0 leaves G1 out.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MIXES = {"sdr-l": 12.0 / 130, "sdr-b": 6.0 / 130, "bits": 0.0, "dense": 1.0,
         # filecoin-32g's witness (1,693,311 of 130,170,221 neither 0 nor 1; 61.5 M 1s)
         "fil": 1_693_311 / 130_170_221,
         # the share of full-size scalars between (where the paths' choice is made)
         "p25": 0.25, "p50": 0.50, "p75": 0.75, "p90": 0.90, "p97": 0.97, "p99": 0.99}


def fr_dot_mod(s, m, a, b, r):
    """sum_i s_i (a[i // m] + b[i % m]) mod r, in numpy (16-bit chunks cannot overflow)."""
    n = len(s)
    pad = np.zeros((m * m, 4), dtype=np.uint64)
    pad[:n] = s
    ch = pad.view(np.uint16).reshape(m, m, 16).astype(np.uint64)
    rows, cols = ch.sum(axis=1), ch.sum(axis=0)
    w = [1 << (16 * k) for k in range(16)]
    val = lambda v: sum(int(x) * wk for x, wk in zip(v, w))
    return (sum(a[j] * val(rows[j]) for j in range(m)) + sum(b[l] * val(cols[l]) for l in range(m))) % r


def scalars(rng, n, other, R):
    s = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    s[:, 3] %= R[3]
    u = rng.random(n)
    rest = u >= other
    s[rest] = 0
    ones = rest & (rng.random(n) < 0.5)
    s[ones, 0] = 1
    return s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--g1", type=int, default=24)
    ap.add_argument("--g2", type=int, default=22)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mixes", default=",".join(MIXES))
    ap.add_argument("--modes", default="off,auto",
                    help="ZKHIVE_SPLIT_MSM values, one row each (the first is the baseline)")
    ap.add_argument("--out", default="gpu_split_msm.json")
    ap.add_argument("--g2-lean", action="store_true",
                    help="G2 also with ZKHIVE_MSM_G2_LEAN=1 (split, the same scalars)")
    args = ap.parse_args()

    from py_arkworks_bls12381 import G1Point, G2Point, Scalar

    from gpu.cuda import loader
    from gpu.cuda.memory import DeviceBuffer
    from gpu.cuda.msm import DeviceBases, known_log_bases
    from gpu.cuda.split_msm import SplitMsm
    from synthesis.field import MODULUS

    loader.init_context(0)
    rng = np.random.default_rng()
    prng = random.Random(int(rng.integers(2**63)))
    R = np.frombuffer(MODULUS.to_bytes(32, "little"), dtype=np.uint64)
    rows = []
    split = SplitMsm()
    for group, logn, P in (("g1", args.g1, G1Point), ("g2", args.g2, G2Point)):
        if logn <= 0:
            continue
        n = 1 << logn
        m = int(np.ceil(np.sqrt(n)))
        a = [prng.randrange(1, MODULUS) for _ in range(m)]
        b = [prng.randrange(1, MODULUS) for _ in range(m)]
        xy = known_log_bases(group, [P() * Scalar(x) for x in a], [P() * Scalar(x) for x in b], n)
        bases = DeviceBases(xy, group)
        lean = None  # (SplitMsm, DeviceBases) bound to the lean kernels
        if group == "g2" and args.g2_lean:
            os.environ["ZKHIVE_MSM_G2_LEAN"] = "1"
            try:
                lean = (SplitMsm(), DeviceBases(xy, group))
            finally:
                os.environ.pop("ZKHIVE_MSM_G2_LEAN")
        del xy
        with DeviceBuffer(32 * n, what="scalars") as sb, DeviceBuffer(4 * n, what="lists") as lb:
            for mix in args.mixes.split(","):
                s = scalars(rng, n, MIXES[mix], R)
                want = P() * Scalar(fr_dot_mod(s, m, a, b, MODULUS))
                sb.upload(s)
                row = {"group": group, "log_n": logn, "mix": mix}
                modes = args.modes.split(",")
                for mode in modes + (["lean"] if lean else []):
                    spec, _, form = mode.partition("@")
                    base, _, ones = spec.partition("+ones")
                    os.environ["ZKHIVE_SPLIT_MSM"] = "auto" if mode == "lean" else base
                    os.environ["ZKHIVE_MSM_ONES_AFFINE"] = "1" if "+ones" in spec else "0"
                    os.environ["ZKHIVE_MSM_ONES_CHAINS"] = ones
                    os.environ["ZKHIVE_MSM_ONES_KERNEL"] = f"{group}={form}" if form else ""
                    sp, bs = lean if mode == "lean" else (split, bases)
                    times, ok = [], True
                    for i in range(args.runs + 1):
                        t = time.perf_counter()
                        cls = sp.classify(sb, n, lb)
                        got = sp.msm(bs, cls, name="q")
                        if i:
                            times.append(time.perf_counter() - t)
                        ok &= got == want
                    row[mode] = {"ms": statistics.median(times) * 1e3, "correct": bool(ok),
                                 **sp.last["q"]}
                base, last = modes[0], modes[-1]
                row["speedup"] = row[base]["ms"] / row[last]["ms"]
                if lean:
                    print(f"{group} 2^{logn} {mix}: lean {row['lean']['path']} "
                          f"{row['lean']['ms']:.1f} ms against {row[last]['ms']:.1f}; "
                          f"correct={row['lean']['correct']}", flush=True)
                cols = ", ".join(f"{m} ({row[m]['path']}) {row[m]['ms']:.1f} ms" for m in modes)
                print(f"{group} 2^{logn} {mix}: {cols} (x{row['speedup']:.2f} {last} against "
                      f"{base}); 0={row[last]['zeros']} 1={row[last]['ones']} "
                      f"other={row[last]['tail']}; "
                      f"correct={all(row[m]['correct'] for m in modes)}", flush=True)
                rows.append(row)
                Path(args.out).write_text(json.dumps(rows, indent=1))
        bases.close()
        split.close()
        if lean:
            lean[1].close()
            lean[0].close()
        split = SplitMsm()
    split.close()
    return 0 if all(v["correct"] for r in rows for v in r.values() if isinstance(v, dict)) \
        else 1


if __name__ == "__main__":
    sys.exit(main())
