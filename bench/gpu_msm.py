"""Benchmark of the device MSM (gpu.cuda.msm) with the arithmetic floor of METHOD.md.

    python bench/gpu_msm.py --out msm.json              # G1 2^16..2^26, G2 2^16..2^22
    python bench/gpu_msm.py --quick                     # G1 2^20 and 2^24 only

Inputs: bases with known discrete logs made on the device (P_i = (a_{i // m} + b_{i % m}) G),
fresh random scalars, three scalar sets rotated between runs (the buckets and sorted lists are
far larger than L2, but the rotation keeps any cache of one input out of the numbers). Every
timed configuration is checked once against the known-log identity. Times: CUDA-event medians
of 5 runs after a warm-up; "resident" = scalars already on the device (as H from compute_h and
as sppark's own benchmark), "host" = from pageable host memory, including the copy.

Floor: Fq products of the bucket phase (n W mixed additions x 10 products: 8M + 2S) plus the
window reduction (2 W B full additions x 14) over the measured Fq product rate (fq_mul_rate:
two independent chains a thread); G2's Fq2 product is 3 Fq products and its squaring 2.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from py_arkworks_bls12381 import G1Point, G2Point, Scalar  # noqa: E402

from gpu import msm as M  # noqa: E402
from gpu.cuda import loader  # noqa: E402
from gpu.cuda.memory import DeviceBuffer  # noqa: E402
from synthesis.field import MODULUS  # noqa: E402

GROUPS = {"g1": G1Point, "g2": G2Point}
#: Fq products per mixed addition / per full addition (G1); Fq2 costs 3 per product, 2 per
#: square: madd 8M + 2S -> 28, add 12M + 2S -> 40.
FQ_MULS = {"g1": (10, 14), "g2": (28, 40)}
sppark_g1_ms = {20: 21, 22: 53, 24: 155, 26: 557}   # sppark's G1 MSM on the same H200 type (issue 7; 2^26: the brief)


def rand_scalars(n: int, rng) -> np.ndarray:
    """Uniform canonical Fr elements (top limb below r's)."""
    s = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    s[:, 3] = rng.integers(0, 0x73EDA753299D7D48, size=n, dtype=np.uint64)
    return s


def expected(group, s, m, a, b):
    """(sum s_i (a_{i // m} + b_{i % m})) G, the 16-bit chunk sums of tests/gpu/test_msm.py."""
    n_rows = -(-len(s) // m)  # the rows of the m x m table this size uses
    pad = np.zeros((n_rows * m, 4), dtype=np.uint64)
    pad[: len(s)] = s
    ch = pad.view(np.uint16).reshape(n_rows, m, 16)
    rows = ch.sum(axis=1, dtype=np.uint64)
    cols = ch.sum(axis=0, dtype=np.uint64)
    w = [1 << (16 * k) for k in range(16)]

    def val(v):
        return sum(int(x) * wk for x, wk in zip(v, w))
    k = (sum(a[j] * val(rows[j]) for j in range(n_rows)) + sum(b[j] * val(cols[j]) for j in range(m)))
    return GROUPS[group]() * Scalar(k % MODULUS)


def timed(cuda, fn, repeat=5) -> list[float]:
    times = []
    for i in range(repeat):
        start, end = cuda.Event(), cuda.Event()
        start.record()
        fn(i)
        end.record()
        end.synchronize()
        times.append(end.time_since(start))
    return times


def fq_mul_rate(cuda, name: str = "fq_mul_rate") -> float:
    """Fq products a second (``fq_sqr_rate``: squares, ff_eo::mont_sqr)."""
    dev = cuda.Context.get_device()
    sms = dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
    threads, block, iters = sms * 1024, 256, 256
    from gpu.cuda.msm import kernel
    k = kernel(name)
    rng = np.random.default_rng()
    data = rng.integers(0, 2**32, size=(threads * 4, 12), dtype=np.uint32)
    data[:, 11] &= 0x0FFFFFFF  # below p
    with DeviceBuffer(data.nbytes) as d:
        d.upload(np.ascontiguousarray(data))
        run = lambda i: k(np.int32(iters), np.uintp(d.ptr), block=(block, 1, 1),  # noqa: E731
                          grid=(threads // block, 1))
        run(0)
        ms = statistics.median(timed(cuda, run))
    return threads * iters * 4 / ms * 1e3


def floor_ms(group, n, c, rate) -> dict:
    W, B = M.windows(c), 1 << (c - 1)
    madd, add = FQ_MULS[group]
    muls = n * W * madd + 2 * W * B * add
    return {"fq_muls": muls, "floor_ms": muls / rate * 1e3}


#: kernel variants chosen by environment at DeviceBases construction (gpu/cuda/msm.py)
VARIANTS = {"g1": {"lb168": {"ZKHIVE_MSM_G1_LB": "1"},
                   "seg x4": {"ZKHIVE_MSM_SEG_FACTOR": "4"}},
            "g2": {"prefetch": {"ZKHIVE_MSM_G2_PREFETCH": "1"},
                   "lean": {"ZKHIVE_MSM_G2_LEAN": "1"},
                   "seg x4": {"ZKHIVE_MSM_SEG_FACTOR": "4"}}}


def kernel_info(bases) -> dict:
    f = bases._f["accumulate_bases"]
    return {"accumulate_regs": f.num_regs, "accumulate_local_bytes": f.local_size_bytes}


@contextmanager
def resident(sets):
    """The scalar sets on the device (as H from compute_h), freed after."""
    dev = [DeviceBuffer(s.nbytes, what="bench scalars") for s in sets]
    try:
        for d, s in zip(dev, sets):
            d.upload(s)
        yield dev
    finally:
        for d in dev:
            d.free()


def run_dense(cuda, group, log_n, bases, sets, want, rate) -> list[dict]:
    """The chunked dense engine (gpu.cuda.msm.DenseEngine: the H query's path) on the same
    bases: chunks of n, n/2 and n/8 scalars into one set of buckets, its three sorts (radix,
    one level without and with the warp match); each configuration checked by the known-log
    identity first."""
    from gpu.cuda.msm import DenseEngine
    n, rows = 1 << log_n, []
    with resident(sets) as dev:
        for div in (1, 2, 8):
            e = DenseEngine(group, n // div)
            try:
                for sort in ("radix", "plain", "match"):
                    os.environ["ZKHIVE_MSM_DENSE_SORT"] = sort
                    ok = e.msm(bases, dev[0], n) == want
                    e.msm(bases, dev[1], n)
                    t = statistics.median(timed(cuda, lambda i: e.msm(bases, dev[i % 3], n)))
                    fl = floor_ms(group, n, e.window, rate)
                    rows.append({"group": group, "log_n": log_n, "window": e.window,
                                 "inputs": f"random, dense engine, chunk n/{div}, sort {sort}",
                                 "ok": bool(ok), "resident_ms": t, **fl})
                    print(f"  {group} 2^{log_n} dense chunk n/{div} sort {sort}: {t:.2f} ms "
                          f"(floor {fl['floor_ms']:.2f}), ok={ok}", flush=True)
            finally:
                os.environ.pop("ZKHIVE_MSM_DENSE_SORT", None)
                e.close()
    return rows


def run_sorts(cuda, group, log_n, bases, sets, want, windows, rate) -> list[dict]:
    """The plain MSM with each sort (ZKHIVE_MSM_SORT=atomic, the counting sort; =radix, the
    default) at each window, with its stage profile; checked by the known-log identity first."""
    n, rows = 1 << log_n, []
    with resident(sets) as dev:
        for kind in ("atomic", "radix"):
            os.environ["ZKHIVE_MSM_SORT"] = kind
            try:
                for c in windows:
                    ok = bases.msm(dev[0], window=c) == want
                    bases.msm(dev[1], window=c)
                    t = statistics.median(timed(cuda, lambda i: bases.msm(dev[i % 3], window=c)))
                    os.environ["ZKHIVE_MSM_PROFILE"] = "1"
                    bases.msm(dev[2], window=c)
                    prof = dict(bases.last_profile)
                    os.environ.pop("ZKHIVE_MSM_PROFILE")
                    rows.append({"group": group, "log_n": log_n, "window": c,
                                 "inputs": f"random, {kind} sort", "ok": bool(ok),
                                 "resident_ms": t, "profile_ms": prof,
                                 **floor_ms(group, n, c, rate)})
                    print(f"  {group} 2^{log_n} c={c} {kind} sort: {t:.2f} ms, ok={ok}, stages "
                          f"{', '.join(f'{k} {v:.2f}' for k, v in prof.items())}", flush=True)
            finally:
                os.environ.pop("ZKHIVE_MSM_SORT", None)
    return rows


def run_precomputed(cuda, group, log_n, bases, sets, want, windows, rate,
                    rounds=(None,)) -> list[dict]:
    """gpu.cuda.precomputed.PrecomputedBases (every window's multiples made once, one set of
    buckets) at each window and each count of affine rounds (None: the default; 0: the XYZZ
    accumulation): table time and bytes, then checked by the known-log identity, timed, and
    one profiled run. Floor: n W mixed additions + one reduction of 2^(c-1) buckets, at 10 Fq
    products an addition (XYZZ) and at 6 (batched affine)."""
    from gpu.cuda.precomputed import PrecomputedBases, table_bytes
    n, rows = 1 << log_n, []
    with resident(sets) as dev:
        for c in windows:
            for r in rounds:
                t0 = time.perf_counter()
                with PrecomputedBases(bases, c, affine_rounds=r) as pre:
                    made = time.perf_counter() - t0
                    ok = pre.msm(dev[0]) == want
                    pre.msm(dev[1])
                    t = statistics.median(timed(cuda, lambda i: pre.msm(dev[i % 3])))
                    os.environ["ZKHIVE_MSM_PROFILE"] = "1"
                    try:
                        pre.msm(dev[2])
                        prof = dict(pre.last_profile)
                    finally:
                        os.environ.pop("ZKHIVE_MSM_PROFILE")
                    used = pre.affine.rounds if pre.affine is not None else 0
                    if used:
                        print(f"  affine kernels (registers, local bytes): "
                              f"{pre.affine.kernel_info()}", flush=True)
                    extra = pre.affine.nbytes if pre.affine is not None else 0
                W = M.windows(c)
                madd, add = FQ_MULS[group]
                red = 2 * (1 << (c - 1)) * add
                muls, amuls = n * W * madd + red, n * W * 6 + red
                rows.append({"group": group, "log_n": log_n, "window": c,
                             "affine_rounds": used, "affine_bytes": extra,
                             "inputs": "random, precomputed", "ok": bool(ok), "resident_ms": t,
                             "profile_ms": prof, "table_s": made,
                             "table_bytes": table_bytes(n, c), "fq_muls": muls,
                             "floor_ms": muls / rate * 1e3, "floor_affine_ms": amuls / rate * 1e3})
                print(f"  {group} 2^{log_n} c={c} precomputed ({W} tables, "
                      f"{table_bytes(n, c) / 2**30:.2f} GiB, made in {made:.2f} s), "
                      f"{used} affine rounds ({extra / 2**30:.2f} GiB): {t:.2f} ms "
                      f"(floor {muls / rate * 1e3:.2f} XYZZ, {amuls / rate * 1e3:.2f} affine), "
                      f"ok={ok}, stages {', '.join(f'{k} {v:.2f}' for k, v in prof.items())}",
                      flush=True)
    return rows


def run_size(cuda, group, log_n, tables, rate, windows=None, skewed=False, variants=False,
             dense=False, sorts=False, precomputed=None, rounds=(None,)):
    from gpu.cuda.msm import DeviceBases, known_log_bases
    m, a, b, pa, pb = tables[group]
    n = 1 << log_n
    rng = np.random.default_rng()
    t0 = time.perf_counter()
    xy = known_log_bases(group, pa, pb, n)
    gen_s = time.perf_counter() - t0
    rows = []
    if variants:  # each kernel variant: checked by the identity, then timed (random scalars)
        s = rand_scalars(n, rng)
        want = expected(group, s, m, a, b)
        for label, env in VARIANTS[group].items():
            os.environ.update(env)
            try:
                with DeviceBases(xy, group) as vb, DeviceBuffer(s.nbytes) as d:
                    ok = vb.msm(s) == want
                    d.upload(s)
                    t = statistics.median(timed(cuda, lambda i: vb.msm(d)))
                    info = kernel_info(vb)
            finally:
                for k in env:
                    os.environ.pop(k)
            rows.append({"group": group, "log_n": log_n, "window": M.window_bits(n),
                         "inputs": f"random, variant {label}", "ok": bool(ok),
                         "resident_ms": t, **info})
            print(f"  {group} 2^{log_n} variant {label}: {t:.2f} ms, ok={ok}, {info}", flush=True)
    with DeviceBases(xy, group) as bases:
        del xy
        print(f"  {group} kernels: {kernel_info(bases)}", flush=True)
        sets = [rand_scalars(n, rng) for _ in range(3)]
        want0 = expected(group, sets[0], m, a, b)
        for c in windows or [M.window_bits(n)]:
            # correctness of this exact configuration first (known logs)
            ok = bases.msm(sets[0], window=c) == want0
            with resident(sets) as dev:
                bases.msm(dev[1], window=c)  # warm-up (workspace allocated by the check)
                on_dev = timed(cuda, lambda i: bases.msm(dev[i % 3], window=c))
                host = timed(cuda, lambda i: bases.msm(sets[i % 3], window=c), repeat=3)
                os.environ["ZKHIVE_MSM_PROFILE"] = "1"
                bases.msm(dev[2], window=c)
                prof = dict(bases.last_profile)
                os.environ.pop("ZKHIVE_MSM_PROFILE")
            row = {"group": group, "log_n": log_n, "window": c, "ok": bool(ok),
                   "resident_ms": statistics.median(on_dev), "resident_all": on_dev,
                   "host_ms": statistics.median(host), "profile_ms": prof,
                   "bases_gen_s": gen_s, **floor_ms(group, n, c, rate)}
            rows.append(row)
            print(f"  {group} 2^{log_n} c={c}: {row['resident_ms']:.2f} ms resident, "
                  f"{row['host_ms']:.2f} ms from host, ok={ok}, "
                  f"stages {', '.join(f'{k} {v:.2f}' for k, v in prof.items())}", flush=True)
        if sorts:
            rows += run_sorts(cuda, group, log_n, bases, sets, want0,
                              windows or [M.window_bits(n)], rate)
        if precomputed:
            rows += run_precomputed(cuda, group, log_n, bases, sets, want0, precomputed, rate,
                                    rounds)
        if dense:
            rows += run_dense(cuda, group, log_n, bases, sets, want0, rate)
        if skewed:
            # PoRep-like: half zeros, a quarter ones, the rest random; and all-equal scalars
            for name in ("porep-like", "all equal"):
                s = sets[0].copy()
                if name == "porep-like":
                    s[: n // 2] = 0
                    s[n // 2: 3 * n // 4] = 0
                    s[n // 2: 3 * n // 4, 0] = 1
                else:
                    s[:] = s[0]
                ok = bases.msm(s) == expected(group, s, m, a, b)
                with DeviceBuffer(s.nbytes) as d:
                    d.upload(s)
                    t = statistics.median(timed(cuda, lambda i: bases.msm(d)))
                rows.append({"group": group, "log_n": log_n, "window": M.window_bits(n),
                             "inputs": name, "ok": bool(ok), "resident_ms": t})
                print(f"  {group} 2^{log_n} {name}: {t:.2f} ms, ok={ok}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write all results as JSON here")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rates", action="store_true",
                    help="only the Fq product and square rates (median of the timed runs)")
    ap.add_argument("--sweep", default="16,18,19,20,21", help="window sizes tried at G1 2^24")
    ap.add_argument("--plan", help="comma list of group:log_n[:s][:v][:d][:r][:w=c/c/c][:p=c/c]"
                    "[:a=r/r] (s: skewed scalars too, v: kernel variants, d: the chunked dense "
                    "engine, r: both sorts with stage profiles, w: windows, p: precomputed "
                    "tables at these windows, a: with these counts of affine rounds, 0 = XYZZ, "
                    "- = the default), e.g. g1:24:s:v:w=19/20/21, g1:24:r:p=22/24:a=0/-/6")
    args = ap.parse_args()
    loader.init_context(0)
    cuda = loader.driver()
    dev = cuda.Context.get_device()
    # the rates first: --rates needs nothing else (the known-log tables below take seconds)
    rate = fq_mul_rate(cuda)
    sqr_rate = fq_mul_rate(cuda, "fq_sqr_rate")
    print(f"device {dev.name()}, Fq product rate {rate / 1e9:.2f} G/s, square rate "
          f"{sqr_rate / 1e9:.2f} G/s", flush=True)
    if args.rates:
        if args.out:
            Path(args.out).write_text(json.dumps({"device": dev.name(), "fq_mul_per_s": rate,
                                                  "fq_sqr_per_s": sqr_rate}, indent=1))
        return
    rows = []
    plan = ([("g1", 20, None, False), ("g1", 24, None, True)] if args.quick else
            [("g1", 16, None, False), ("g1", 20, None, False), ("g1", 22, None, False),
             ("g1", 24, [int(c) for c in args.sweep.split(",")], True), ("g1", 26, None, False),
             ("g2", 16, None, False), ("g2", 20, None, False), ("g2", 22, None, True)])
    if args.plan:
        plan = []
        for item in args.plan.split(","):
            f = item.split(":")
            w = next((x[2:] for x in f[2:] if x.startswith("w=")), None)
            pre = next((x[2:] for x in f[2:] if x.startswith("p=")), None)
            aff = next((x[2:] for x in f[2:] if x.startswith("a=")), None)
            plan.append((f[0], int(f[1]), [int(c) for c in w.split("/")] if w else None,
                         "s" in f[2:], "v" in f[2:], "d" in f[2:], "r" in f[2:],
                         [int(c) for c in pre.split("/")] if pre else None,
                         tuple(None if r == "-" else int(r) for r in aff.split("/"))
                         if aff else (None,)))
    else:
        plan = [(*p, False, False, False, None, (None,)) for p in plan]
    # m x m known-log bases per group, m = 2^ceil(log/2) for the plan's largest size (the fixed
    # 4096 x 4096 of G1 stopped the benchmark at 2^24: 2^26 needs 8192 x 8192)
    prng = random.Random()
    tables = {}
    for group, P in GROUPS.items():
        sizes = [log_n for g, log_n, *_ in plan if g == group]
        if not sizes:
            continue
        m = 1 << ((max(sizes) + 1) // 2)
        a = [prng.randrange(1, MODULUS) for _ in range(m)]
        b = [prng.randrange(1, MODULUS) for _ in range(m)]
        tables[group] = (m, a, b, [P() * Scalar(x) for x in a], [P() * Scalar(x) for x in b])
    for group, log_n, windows, skewed, variants, dense, sorts, pre, rounds in plan:
        rows += run_size(cuda, group, log_n, tables, rate, windows, skewed, variants, dense,
                         sorts, pre, rounds)
        if args.out:  # after every size, so a run cut short keeps its numbers
            Path(args.out).write_text(json.dumps({"device": dev.name(), "fq_mul_per_s": rate,
                                                  "rows": rows}, indent=1))
    result = {"device": dev.name(), "fq_mul_per_s": rate, "date": time.strftime("%F %T UTC",
              time.gmtime()), "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"\nFq product rate {rate / 1e9:.2f} G/s ({dev.name()})")
    print("| group | n | window | inputs | resident ms | host ms | floor ms | ok | sppark |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['group']} | 2^{r['log_n']} | {r['window']} | {r.get('inputs', 'random')} | "
              f"{r['resident_ms']:.2f} | {r.get('host_ms', float('nan')):.2f} | "
              f"{r.get('floor_ms', float('nan')):.2f} | {r['ok']} | "
              f"{sppark_g1_ms.get(r['log_n'], '') if r['group'] == 'g1' else ''} |")


if __name__ == "__main__":
    main()
