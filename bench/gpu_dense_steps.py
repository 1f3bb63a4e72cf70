"""The H query's dense engine alone (gpu.cuda.msm.DenseEngine, G1), its settings side by side in
one process on one set of resident bases: what the partition's msm_h stage runs, without the
32 GiB key around it, so it fits a card of ~78 GiB (an H100) as well as the H200.

    python3 bench/gpu_dense_steps.py --log-n 27 --runs 3 --out dense.json \
        --variant prof:ZKHIVE_MSM_PROFILE=1 \
        --variant range:ZKHIVE_MSM_AFFINE_SLICE_RANGE=1 ...

Bases with known discrete logs made on the device (gpu.cuda.msm.known_log_bases), 2^log_n - 1
random canonical scalars (the H query's count at 2^27), the engine's chunk as the prover takes
it (gpu.budget.dense_chunk, 2^25). Each variant (``name:VAR=V,VAR=V``; the first row is the
default, no variable set) runs in a fresh engine with its variables set, one warm-up and
``--runs`` timed MSMs (wall clock from the call to the point on the host; the device is idle
before and after), and every result must be the known-log identity's point: a variant that gets
another point is reported wrong and the exit status is 1. ZKHIVE_MSM_PROFILE=1 in a variant
also records the engine's stages (sort, each affine pass by round, merge, reduce; summed over
the chunks) from the last run.
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


def expected_scalar(s: np.ndarray, m: int, a: list[int], b: list[int], r: int) -> int:
    """sum_i s_i (a[i // m] + b[i % m]) mod r for scalars s (n x 4 u64 limbs), a 16-bit chunk
    at a time so that no temporary is larger than the scalars' one limb (2^27 x 8 bytes)."""
    n = len(s)
    rows = [0] * m
    cols = [0] * m
    for k in range(16):
        limb, shift = divmod(k, 4)
        c = np.zeros(m * m, dtype=np.uint64)
        c[:n] = (s[:, limb] >> np.uint64(16 * shift)) & np.uint64(0xFFFF)
        c = c.reshape(m, m)
        w = 1 << (16 * k)
        for j, v in enumerate(c.sum(axis=1).tolist()):
            rows[j] += int(v) * w
        for j, v in enumerate(c.sum(axis=0).tolist()):
            cols[j] += int(v) * w
    return (sum(x * y for x, y in zip(a, rows)) + sum(x * y for x, y in zip(b, cols))) % r


def parse_variant(v: str) -> tuple[str, dict[str, str]]:
    name, _, rest = v.partition(":")
    env = {}
    for kv in filter(None, rest.split(",")):
        k, _, val = kv.partition("=")
        if not k.startswith("ZKHIVE_"):
            raise SystemExit(f"variant {v!r}: {k!r} is not a ZKHIVE_ setting")
        env[k] = val
    return name, env


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log-n", type=int, default=27)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--variant", action="append", default=[],
                    help="name:ZKHIVE_X=v,ZKHIVE_Y=w (after the default row)")
    ap.add_argument("--out", default="gpu_dense_steps.json")
    args = ap.parse_args()

    from py_arkworks_bls12381 import G1Point, Scalar

    from gpu.budget import dense_chunk
    from gpu.cuda import loader
    from gpu.cuda.memory import DeviceBuffer
    from gpu.cuda.msm import DenseEngine, DeviceBases, known_log_bases
    from synthesis.field import MODULUS

    variants = [("default", {})] + [parse_variant(v) for v in args.variant]
    loader.init_context(0)
    rng = np.random.default_rng()
    prng = random.Random(int(rng.integers(2**63)))
    n_bases = 1 << args.log_n
    n = n_bases - 1  # the H query: 2^27 - 1 scalars over the 2^27 bases
    m = int(np.ceil(np.sqrt(n_bases)))
    a = [prng.randrange(1, MODULUS) for _ in range(m)]
    b = [prng.randrange(1, MODULUS) for _ in range(m)]
    t0 = time.perf_counter()
    xy = known_log_bases("g1", [G1Point() * Scalar(x) for x in a],
                         [G1Point() * Scalar(x) for x in b], n_bases)
    bases = DeviceBases(xy, "g1")
    del xy
    # random canonical scalars, every limb drawn (never zeros), the top limb below r's
    R = np.frombuffer(MODULUS.to_bytes(32, "little"), dtype=np.uint64)
    s = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    s[:, 3] %= R[3]
    want = G1Point() * Scalar(expected_scalar(s, m, a, b, MODULUS))
    print(f"2^{args.log_n} bases and {n} scalars ready in {time.perf_counter() - t0:.1f} s; "
          f"chunk 2^{dense_chunk().bit_length() - 1}", flush=True)
    rows = []
    ok_all = True
    with DeviceBuffer(32 * n, what="scalars") as sb:
        sb.upload(np.ascontiguousarray(s))
        del s
        for name, env in variants:
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            e = None
            try:
                live = DeviceBuffer.live
                e = DenseEngine("g1", dense_chunk())
                e.warm()
                held = DeviceBuffer.live - live   # what the engine allocated, beside the plan
                times, ok = [], True
                for i in range(args.runs + 1):
                    t = time.perf_counter()
                    got = e.msm(bases, sb, n)
                    if i:
                        times.append((time.perf_counter() - t) * 1e3)
                    ok &= got == want
                row = {"variant": name, "env": env, "ms": statistics.median(times),
                       "all_ms": times, "correct": bool(ok), "window": e.window,
                       "affine_rounds": e.affine_rounds,
                       "engine_gib": round(DenseEngine.estimate_bytes("g1", dense_chunk())
                                           / 2**30, 2),
                       "engine_held_gib": round(held / 2**30, 2),
                       "profile_ms": dict(e.last_profile) if env.get("ZKHIVE_MSM_PROFILE") == "1"
                       else {}}
            except Exception as exc:  # a variant that fails is reported, the others still run
                row = {"variant": name, "env": env, "error": f"{type(exc).__name__}: {exc}",
                       "correct": False}
            finally:
                if e is not None:
                    e.close()
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            ok_all &= row["correct"]
            rows.append(row)
            if "error" in row:
                print(f"{name}: FAILED {row['error']}", flush=True)
            else:
                prof = "".join(f"\n    {k}: {v:.1f} ms" for k, v in row["profile_ms"].items())
                print(f"{name}: {row['ms']:.1f} ms ({', '.join(f'{x:.1f}' for x in times)}), "
                      f"correct={row['correct']}, {row['affine_rounds']} rounds, engine "
                      f"{row['engine_gib']} GiB planned, {row['engine_held_gib']} held{prof}",
                      flush=True)
            Path(args.out).write_text(json.dumps(rows, indent=1))
    bases.close()
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
