"""Benchmark of the device field arithmetic, NTT and compute_h, with the two floors of METHOD.md.

    python bench/gpu_ntt.py --out bench.json            # full run, prints a table last
    python bench/gpu_ntt.py --quick --label portable    # NTT 2^24 only (for build variants)
    python bench/gpu_ntt.py --variants                  # full run, then each variant in a
                                                        # subprocess with its build flags

Ceilings measured in the same run: device-to-device copy bandwidth (bytes read + written) and
the 32-bit integer multiply-add rate (8 independent chains per thread). Floors: the Fr products
an operation needs x 256 (a Montgomery product of 8-limb values is 2 * 2 * 8^2 mad.lo/mad.hi
instructions) over that rate; the bytes it must move (each input read once, each output written
once) over the copy bandwidth. Times are CUDA-event medians after warm-up, on fresh random
inputs (never zeros); 2^16 data (2 MiB) sits in L2, 2^20 and 2^24 do not.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu.cuda import loader  # noqa: E402
from gpu.cuda.memory import DeviceBuffer, pinned  # noqa: E402
from synthesis import field as fr  # noqa: E402

IMAD_PER_FR_MUL = 256
#: placeholder ceilings of --quick runs (floors are left to the main run; 1 avoids division by 0)
QUICK_CEILINGS = {"copy_GBps": 1.0, "h2d_pinned_GBps": 1.0, "imad_per_s": 1.0, "fr_mul_per_s": 1.0}
VARIANTS = {  # label -> environment (tN: ZKHIVE_NTT_TILE_BITS; radix-2: the pass of 2 elements
    # a thread; the previous build, radix-2 with the CIOS product, is docs/performance.md's 6.92 ms)
    "radix-2 t9": {"ZKHIVE_NTT_RADIX4": "0"},
    "radix-4 t10": {"ZKHIVE_NTT_TILE_BITS": "10"},
}


def rand_vec(n: int) -> np.ndarray:
    """n random canonical elements, fast (numpy's generator; values below 2^254 < r). Timing
    data only: the correctness checks use synthesis.field.vec_random."""
    v = np.random.default_rng().integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    v[:, 3] &= np.uint64((1 << 62) - 1)
    return v


def timed(cuda, fn, warmup=3, repeat=10) -> float:
    """Median milliseconds of fn() between CUDA events, after warm-up."""
    for _ in range(warmup):
        fn()
    cuda.Context.synchronize()
    times = []
    for _ in range(repeat):
        start, end = cuda.Event(), cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(end.time_since(start))
    return statistics.median(times)


def ceilings(cuda, dev) -> dict:
    sms = dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
    out = {"sms": sms}
    nbytes = 2 << 30
    with DeviceBuffer(nbytes) as src, DeviceBuffer(nbytes) as dst:
        cuda.memcpy_htod(src.ptr, np.frombuffer(os.urandom(1 << 20), dtype=np.uint8))
        ms = timed(cuda, lambda: cuda.memcpy_dtod(dst.ptr, src.ptr, nbytes))
        out["copy_GBps"] = 2 * nbytes / ms / 1e6
    host_n = 1 << 24
    with pinned((host_n, 4)) as h, DeviceBuffer(32 * host_n) as d:
        h[:] = rand_vec(host_n)
        ms = timed(cuda, lambda: cuda.memcpy_htod(d.ptr, h), warmup=1, repeat=3)
        out["h2d_pinned_GBps"] = 32 * host_n / ms / 1e6
    mod = loader.load_module("ntt_field")
    threads, block = sms * 2048, 256
    iters = 4096
    with DeviceBuffer(4 * threads) as a, DeviceBuffer(4 * threads) as o:
        a.upload(np.frombuffer(os.urandom(4 * threads), dtype=np.uint32).copy())
        k = loader.get_function(mod, "field_imad_rate")
        ms = timed(cuda, lambda: k(np.uintp(a.ptr), np.uintp(o.ptr), np.int32(iters),
                                   block=(block, 1, 1), grid=(threads // block, 1)))
        out["imad_per_s"] = threads * iters * 8 / ms * 1e3
    iters = 512
    with DeviceBuffer(64 * threads) as a, DeviceBuffer(32 * threads) as o:
        a.upload(rand_vec(2 * threads))
        k = loader.get_function(mod, "field_fr_mul_rate")
        ms = timed(cuda, lambda: k(np.uintp(a.ptr), np.uintp(o.ptr), np.int32(iters),
                                   block=(block, 1, 1), grid=(threads // block, 1)))
        out["fr_mul_per_s"] = threads * iters * 4 / ms * 1e3
    return out


def ntt_floors(log_n: int, ceil: dict, passes: int, extra_muls_per_elem: float = 0) -> dict:
    n = 1 << log_n
    muls = n // 2 * log_n + extra_muls_per_elem * n
    return {
        "fr_muls": muls,
        "floor_ops_ms": muls * IMAD_PER_FR_MUL / ceil["imad_per_s"] * 1e3,
        "floor_frmul_ms": muls / ceil["fr_mul_per_s"] * 1e3,
        "floor_bytes_ms": 2 * 32 * n / (ceil["copy_GBps"] * 1e6),
        "pass_bytes_ms": passes * 2 * 32 * n / (ceil["copy_GBps"] * 1e6),
    }


def bench_ntt(cuda, eng, sizes, ceil, quick=False) -> list[dict]:
    from gpu.cuda.ntt import plan
    rows = []
    for log_n in sizes:
        n = 1 << log_n
        t0 = time.perf_counter()
        eng.domain(log_n)
        cuda.Context.synchronize()
        setup_ms = (time.perf_counter() - t0) * 1e3
        with DeviceBuffer(32 * n, what="bench data") as d:
            d.upload(rand_vec(n))
            cases = [("forward N->R", dict(order="NR"))]
            if not quick:
                cases += [("forward N->N", dict(order="NN")),
                          ("inverse R->N", dict(order="RN", inverse=True)),
                          ("coset forward N->R", dict(order="NR", coset=True)),
                          ("inverse coset R->N", dict(order="RN", inverse=True, coset=True))]
            for name, kw in cases:
                eng.transform(d, log_n, **kw)  # builds scale tables outside the timing
                ms = timed(cuda, lambda: eng.transform(d, log_n, **kw))
                extra = 2 if kw.get("coset") or kw.get("inverse") else 0
                rows.append({"op": f"ntt {name}", "log_n": log_n, "ms": ms,
                             "table_setup_ms": setup_ms,
                             **ntt_floors(log_n, ceil, len(plan(log_n)), extra)})
    return rows


def check(eng) -> None:
    """A variant's results must be the host's before its times count."""
    from arith import native
    a = fr.vec_random(1 << 20)
    assert np.array_equal(eng.ntt(a), native.ntt(a)), "variant: NTT 2^20 differs from host"
    a, b, c = (fr.vec_random(1 << 16) for _ in range(3))
    assert np.array_equal(eng.compute_h(a, b, c), native.compute_h(a, b, c)), "variant: H"


def bench_h(cuda, eng, sizes, ceil, quick=False) -> list[dict]:
    from gpu.cuda.ntt import plan
    from arith import native
    rows = []
    for log_n in sizes:
        n = 1 << log_n
        a, b = rand_vec(n), rand_vec(n)
        c = native.mul(a, b)
        eng.prepare_h(log_n)
        bufs = [DeviceBuffer(32 * n) for _ in range(3)]
        try:
            def run():
                for buf, v in zip(bufs, (a, b, c)):
                    buf.upload(v)
            run()
            # device-only time: the inputs are rewritten between runs outside the events
            times = []
            for i in range(8):
                run()
                cuda.Context.synchronize()
                start, end = cuda.Event(), cuda.Event()
                start.record()
                eng.compute_h_device(*bufs, log_n)
                end.record()
                end.synchronize()
                if i >= 2:
                    times.append(end.time_since(start))
            ms = statistics.median(times)
        finally:
            for buf in bufs:
                buf.free()
        # six NTTs (gpu/cuda/ntt.py compute_h_device): n/2 log n butterflies each; the scalings
        # on store (a, b, the last inverse: a factor built and applied, 2 products; c: 2) and
        # the pointwise a b / Z (2). Trimmed (the default): bit 0's n/2 products by 1 left out
        # of each NTT, c's constant factor 1 product, the pointwise step 1.
        from gpu.cuda.ntt import trimmed
        if trimmed():
            muls = 6 * (n // 2 * (log_n - 1)) + n * (2 + 2 + 2 + 1 + 1)
        else:
            muls = 6 * (n // 2 * log_n) + n * (2 + 2 + 2 + 2 + 2)
        passes = len(plan(log_n))
        row = {"op": "compute_h (device)", "log_n": log_n, "ms": ms, "fr_muls": muls,
               "floor_ops_ms": muls * IMAD_PER_FR_MUL / ceil["imad_per_s"] * 1e3,
               "floor_frmul_ms": muls / ceil["fr_mul_per_s"] * 1e3,
               "floor_bytes_ms": 4 * 32 * n / (ceil["copy_GBps"] * 1e6),
               "pass_bytes_ms": (6 * passes * 2 + 3 + 3) * 32 * n / (ceil["copy_GBps"] * 1e6)}
        rows.append(row)
        if quick:
            continue
        # the host driver with pinned inputs: uploads of b and c overlap a's transforms
        with pinned((n, 4)) as pa, pinned((n, 4)) as pb, pinned((n, 4)) as pc, \
                pinned((n, 4)) as out:
            pa[:], pb[:], pc[:] = a, b, c
            walls = []
            for i in range(4):
                t0 = time.perf_counter()
                eng.compute_h(pa, pb, pc, out=out)
                walls.append((time.perf_counter() - t0) * 1e3)
            rows.append({"op": "compute_h (pinned host in/out)", "log_n": log_n,
                         "ms": statistics.median(walls[1:]),
                         "floor_bytes_ms": 4 * 32 * n / (ceil["h2d_pinned_GBps"] * 1e6)})
            if log_n <= 20:
                assert np.array_equal(out, native.compute_h(a, b, c)), "bench: wrong H"
    return rows


def bench_trim_ab(cuda, eng, sizes, runs=5) -> list[dict]:
    """compute_h_device and one forward NTT with the trimmed products (ZKHIVE_NTT_TRIM=1, the
    default) against all of them (=0), in one process on the same inputs, alternating; the two
    H must be equal word for word (and equal to the host's at 2^20 and below)."""
    from arith import native
    rows = []
    for log_n in sizes:
        n = 1 << log_n
        a, b = rand_vec(n), rand_vec(n)
        c = native.mul(a, b) if log_n <= 24 else rand_vec(n)  # unsatisfied at 2^27: any H
        bufs = [DeviceBuffer(32 * n) for _ in range(3)]
        times = {"h0": [], "h1": [], "ntt0": [], "ntt1": []}
        outs = {}
        try:
            for i in range(2 * (runs + 1)):
                mode = "01"[i % 2]
                os.environ["ZKHIVE_NTT_TRIM"] = mode
                eng.prepare_h(log_n)  # this mode's tables, outside the timing
                for buf, v in zip(bufs, (a, b, c)):
                    buf.upload(v)
                cuda.Context.synchronize()
                ev = [cuda.Event() for _ in range(3)]
                ev[0].record()
                eng.compute_h_device(*bufs, log_n)
                ev[1].record()
                eng.transform(bufs[1], log_n, order="NR")
                ev[2].record()
                ev[2].synchronize()
                if i >= 2:
                    times["h" + mode].append(ev[1].time_since(ev[0]))
                    times["ntt" + mode].append(ev[2].time_since(ev[1]))
                if mode not in outs:
                    outs[mode] = np.empty_like(a)
                    bufs[0].download(outs[mode])
        finally:
            os.environ.pop("ZKHIVE_NTT_TRIM", None)
            for buf in bufs:
                buf.free()
        same = bool(np.array_equal(outs["0"], outs["1"]))
        host = None
        if log_n <= 20:
            host = bool(np.array_equal(outs["1"], native.compute_h(a, b, c)))
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {"op": "compute_h trimmed/full", "log_n": log_n, "ms": med["h1"],
               "full_ms": med["h0"], "ntt_ms": med["ntt1"], "ntt_full_ms": med["ntt0"],
               "runs": times, "equal": same, "equal_host": host}
        print(f"2^{log_n}: compute_h full {med['h0']:.3f} ms, trimmed {med['h1']:.3f} ms "
              f"({med['h1'] - med['h0']:+.3f}); forward NTT full {med['ntt0']:.3f}, trimmed "
              f"{med['ntt1']:.3f} ({med['ntt1'] - med['ntt0']:+.3f}); H equal: {same}"
              + ("" if host is None else f", equal to the host's: {host}"), flush=True)
        if not same or host is False:
            raise SystemExit(f"compute_h 2^{log_n}: the trimmed H differs")
        rows.append(row)
    return rows


def table(res: dict) -> str:
    c = res["ceilings"]
    lines = [f"device {res['device']}  copy {c['copy_GBps']:.0f} GB/s  h2d(pinned) "
             f"{c['h2d_pinned_GBps']:.1f} GB/s  IMAD {c['imad_per_s'] / 1e12:.2f} T/s  "
             f"Fr mul {c['fr_mul_per_s'] / 1e9:.1f} G/s  [{res['label']}]",
             f"{'op':34} {'n':>5} {'ms':>9} {'floor ops':>10} {'floor mul':>10} {'floor B':>9}"]
    for r in res["rows"]:
        f = lambda k: f"{r[k]:10.3f}" if k in r else f"{'':>10}"  # noqa: E731
        lines.append(f"{r['op']:34} 2^{r['log_n']:<3} {r['ms']:9.3f} {f('floor_ops_ms')} "
                     f"{f('floor_frmul_ms')} {f('floor_bytes_ms')}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--quick", action="store_true",
                    help="check against the host, then NTT and compute_h at 2^24 only")
    ap.add_argument("--label", default="default (radix-4 t9, even/odd product)")
    ap.add_argument("--variants", action="store_true", help="also run each build variant")
    ap.add_argument("--trim-ab", action="store_true",
                    help="only compute_h and a forward NTT, ZKHIVE_NTT_TRIM=1 against =0, at --sizes")
    ap.add_argument("--sizes", default="16,20,24",
                    help="log2 sizes of the full run (27: the 32 GiB partition's domain, 4 GiB a vector)")
    args = ap.parse_args()
    loader.init_context()
    cuda = loader.driver()
    from gpu.cuda.ntt import NttEngine
    res = {"device": loader.device_name(), "arch": loader.device_arch(), "label": args.label,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    # quick runs (the variants) skip the ceilings: their floors are the main run's
    res["ceilings"] = QUICK_CEILINGS if args.quick or args.trim_ab else \
        ceilings(cuda, cuda.Context.get_device())
    with NttEngine() as eng:
        if args.trim_ab:
            res["rows"] = bench_trim_ab(cuda, eng, [int(x) for x in args.sizes.split(",")])
            if args.out:
                args.out.write_text(json.dumps(res, indent=1))
            return 0
        if args.quick:
            check(eng)
            res["rows"] = bench_ntt(cuda, eng, [24], res["ceilings"], quick=True)
            res["rows"] += bench_h(cuda, eng, [24], res["ceilings"], quick=True)
        else:
            sizes = [int(x) for x in args.sizes.split(",")]
            res["rows"] = bench_ntt(cuda, eng, sizes, res["ceilings"])
            res["rows"] += bench_h(cuda, eng, sizes, res["ceilings"])
    def save():  # after every stage, so a run cut short still leaves its numbers
        if args.out and str(args.out) != "/dev/stdout":
            args.out.write_text(json.dumps(res, indent=1))
    save()
    if args.variants:
        print(table(res), flush=True)
        res["variants"] = {}
        for label, env in VARIANTS.items():
            p = subprocess.run([sys.executable, __file__, "--quick", "--label", label, "--out",
                                "/dev/stdout"], env={**os.environ, **env}, capture_output=True,
                               text=True)
            if p.returncode:
                res["variants"][label] = {"error": p.stderr[-2000:]}
            else:
                res["variants"][label] = json.loads(p.stdout[p.stdout.index("{"):p.stdout.rindex("}") + 1])
            save()
            print(variant_line(label, res["variants"][label]), flush=True)
    if args.out and str(args.out) == "/dev/stdout":
        print(json.dumps(res, indent=1))
        return 0
    save()
    if not args.variants:
        print(table(res))
    return 0


def variant_line(label: str, v: dict) -> str:
    if "error" in v:
        return f"variant {label}: FAILED {v['error'][-300:]}"
    r, h = v["rows"][0], v["rows"][1]
    return (f"variant {label:18} ntt forward N->R 2^24 {r['ms']:7.3f} ms   "
            f"compute_h 2^24 {h['ms']:7.3f} ms   (checked against the host)")


if __name__ == "__main__":
    sys.exit(main())
