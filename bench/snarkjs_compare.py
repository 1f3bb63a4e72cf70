"""Benchmark: our CPU Groth16 prover beside snarkjs 0.7.6's ``groth16 prove`` on the same circuit.

    python bench/snarkjs_compare.py                      # 2^12, 2^14, 2^16 constraints, 5 runs
    python bench/snarkjs_compare.py --powers 12 --runs 3
    python bench/snarkjs_compare.py --powers 12,14,16 table          # the recorded results again
    python bench/snarkjs_compare.py --powers 16 --runs 3 profile   # our prover, step by step

The circuit is bench/mulchain.py with 2^k - 3 constraints (domain 2^k for both provers) and a
random witness. Both provers are timed two ways, each reported as the median wall time:

- in-process: ours ``prove(pk, r1cs, z)`` with the key in memory (as a cluster worker holds it),
  snarkjs ``groth16.prove(zkey, wtns)`` inside node (bench/snarkjs_prove.mjs); each side has had
  one warm-up proof in that process (snarkjs builds its wasm curve and worker threads then).
- CLI: one fresh process per proof, timed from outside: ``snarkjs groth16 prove c.zkey w.wtns
  proof.json public.json`` against ``python bench/snarkjs_compare.py prove-once DIR`` (loads our
  key file, the matrices and the witness, proves, writes the 192-byte proof).

The four are interleaved run by run, and CPU time (all threads) is recorded beside wall time,
because this 2-core machine is shared with other work. Before anything is timed, each side's proof passes the other side's verifier (ours exported to
snarkjs JSON and run through ``snarkjs groth16 verify``; snarkjs's read back into our verifier).

snarkjs's key comes from ``snarkjs groth16 setup`` on our .r1cs and a TEST-ONLY prepared ptau
whose tau is known (gpu/export/ptau.py; ``powersoftau prepare phase2`` takes 7+ minutes at 2^14
here), then ``snarkjs zkey contribute`` so delta is not 1. Everything is cached in
``.cache/bench/k<k>/`` (delete it to start over), with that size's ``results.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from gpu import prove, setup, verify  # noqa: E402
from gpu.export import iden3, ptau, snarkjs  # noqa: E402
from gpu.groth16 import Proof, ProvingKey  # noqa: E402
from gpu.timing import StageTimer  # noqa: E402
from mulchain import constraints_for_domain, mul_chain  # noqa: E402
from synthesis import field  # noqa: E402
from synthesis.r1cs import R1CS, SparseMatrix  # noqa: E402

SNARKJS = ROOT / "node_modules" / ".bin" / "snarkjs"
CACHE = ROOT / ".cache" / "bench"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(*args, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, args))} failed ({res.returncode}):\n"
                         f"{res.stdout[-2000:]}{res.stderr[-2000:]}")
    return res


# --- our circuit files (matrices .npz, witness .npy: no pickle) ------------------------------

def save_circuit(r1cs: R1CS, path: Path) -> None:
    parts = {"sizes": np.array([r1cs.num_public, r1cs.num_aux], dtype=np.int64)}
    for name, m in (("a", r1cs.a), ("b", r1cs.b), ("c", r1cs.c)):
        parts.update({f"{name}_indptr": m.indptr, f"{name}_indices": m.indices,
                      f"{name}_coeffs": m.coeffs})
    np.savez(path, **parts)


def load_circuit(path: Path) -> R1CS:
    with np.load(path, allow_pickle=False) as f:
        mats = [SparseMatrix(f[f"{n}_indptr"], f[f"{n}_indices"], f[f"{n}_coeffs"]) for n in "abc"]
        num_public, num_aux = (int(v) for v in f["sizes"])
    r1cs = R1CS(num_public, num_aux, *mats)
    r1cs.validate()
    return r1cs


def prove_once(d: Path) -> None:
    """The CLI side of ours: a fresh process loads the key, the matrices and the witness."""
    pk = ProvingKey.load(d / "ours.pk")
    r1cs = load_circuit(d / "circuit.npz")
    z = field.check_vec(np.load(d / "witness.npy", allow_pickle=False), what="witness")
    (d / "ours_cli_proof.bin").write_bytes(prove(pk, r1cs, z).to_bytes())


# --- preparing one size ----------------------------------------------------------------------

def prepare(k: int) -> dict:
    d = CACHE / f"k{k}"
    d.mkdir(parents=True, exist_ok=True)
    info: dict = {}
    if (d / "circuit.npz").exists() and (d / "witness.npy").exists():
        r1cs = load_circuit(d / "circuit.npz")
        z = np.load(d / "witness.npy", allow_pickle=False)
    else:
        r1cs, z, _ = mul_chain(constraints_for_domain(k))
        save_circuit(r1cs, d / "circuit.npz")
        np.save(d / "witness.npy", z)
    r1cs.check(z)
    public = field.vec_to_ints(z[1:1 + r1cs.num_public])

    pk = None
    if (d / "ours.pk").exists():
        pk = ProvingKey.load(d / "ours.pk")
        if pk.circuit_digest != r1cs.digest():
            pk = None
    if pk is None:
        log(f"2^{k}: our setup")
        t = time.perf_counter()
        pk, _ = setup(r1cs)
        info["ours_setup_s"] = time.perf_counter() - t
        pk.save(d / "ours.pk")

    if not (d / "test.ptau").exists():
        log(f"2^{k}: TEST-ONLY ptau of power {k} from a known tau")
        t = time.perf_counter()
        tau, alpha, beta = (field.random_element() for _ in range(3))
        ptau.write_test_ptau(d / "test.ptau", k, tau=tau, alpha=alpha, beta=beta)
        info["ptau_s"] = time.perf_counter() - t
    if not (d / "c.zkey").exists():
        iden3.write_r1cs(r1cs, d / "c.r1cs")
        log(f"2^{k}: snarkjs groth16 setup")
        t = time.perf_counter()
        run(SNARKJS, "groth16", "setup", "c.r1cs", "test.ptau", "c_0000.zkey", cwd=d)
        info["snarkjs_setup_s"] = time.perf_counter() - t
        run(SNARKJS, "zkey", "contribute", "c_0000.zkey", "c.zkey", "-n=bench",
            f"-e={os.urandom(16).hex()}", cwd=d)
        run(SNARKJS, "zkey", "export", "verificationkey", "c.zkey", "snarkjs_vk.json", cwd=d)
        (d / "c_0000.zkey").unlink()
    iden3.write_wtns(z, d / "w.wtns")
    return {"dir": d, "r1cs": r1cs, "z": z, "public": public, "pk": pk, "info": info}


def cross_check(c: dict) -> None:
    """Our proof through snarkjs's verifier, snarkjs's proof through ours, both ways also with
    a wrong input (which must fail)."""
    d, pk, public = c["dir"], c["pk"], c["public"]
    proof = prove(pk, c["r1cs"], c["z"])
    xd = d / "ours_export"
    snarkjs.export(pk.vk, proof, public, xd)
    res = run(SNARKJS, "groth16", "verify", "verification_key.json", "public.json", "proof.json",
              cwd=xd, check=False)
    if res.returncode != 0:
        raise SystemExit(f"snarkjs rejected our proof:\n{res.stdout}{res.stderr}")
    wrong = [public[0], (public[1] + 1) % field.MODULUS]
    (xd / "public.json").write_text(json.dumps(snarkjs.public_json(wrong)))
    res = run(SNARKJS, "groth16", "verify", "verification_key.json", "public.json", "proof.json",
              cwd=xd, check=False)
    if res.returncode == 0:
        raise SystemExit("snarkjs accepted our proof with a wrong public input")

    run(SNARKJS, "groth16", "prove", "c.zkey", "w.wtns", "snarkjs_proof.json",
        "snarkjs_public.json", cwd=d)
    load = lambda name: json.loads((d / name).read_text())  # noqa: E731
    vk = snarkjs.verifying_key_from_json(load("snarkjs_vk.json"))
    sp = snarkjs.proof_from_json(load("snarkjs_proof.json"))
    spub = snarkjs.public_from_json(load("snarkjs_public.json"))
    if spub != public or not verify(vk, spub, sp) or verify(vk, wrong, sp):
        raise SystemExit("our verifier disagrees with snarkjs's proof")


# --- timing ----------------------------------------------------------------------------------
# The machine is shared (other builds run beside us), so the four measurements are interleaved
# run by run rather than done in blocks, and each records CPU time (all threads) beside wall time:
# contention inflates wall time, CPU time much less.

def ours_inprocess_once(c: dict) -> tuple[float, float, dict]:
    timer = StageTimer()
    t, cpu = time.perf_counter(), time.process_time()
    prove(c["pk"], c["r1cs"], c["z"], timer=timer)
    return time.perf_counter() - t, time.process_time() - cpu, timer.totals()


def snarkjs_inprocess_once(d: Path) -> tuple[float, float]:
    res = run("node", ROOT / "bench" / "snarkjs_prove.mjs", "c.zkey", "w.wtns", 1, cwd=d)
    doc = json.loads(res.stdout.strip().splitlines()[-1])
    return doc["seconds"][0], doc["cpu_seconds"][0]


def cli_once(argv: list, cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    run(*argv, cwd=cwd)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench(k: int, runs: int) -> dict:
    c = prepare(k)
    d = c["dir"]
    log(f"2^{k}: cross-checking proofs both ways")
    cross_check(c)
    prove(c["pk"], c["r1cs"], c["z"])  # warm-up: host library, thread pool
    ours_cli = [sys.executable, Path(__file__).resolve(), "prove-once", d]
    snark_cli = [SNARKJS, "groth16", "prove", "c.zkey", "w.wtns", "p.json", "pub.json"]
    wall = {m: [] for m in MODES}
    cpu = {m: [] for m in MODES}
    stages, loads = [], [os.getloadavg()[0]]
    for i in range(runs):
        log(f"2^{k}: run {i + 1}/{runs} (load average {os.getloadavg()[0]:.1f})")
        w, t, st = ours_inprocess_once(c)
        stages.append(st)
        for mode, (w, t) in (("ours_inprocess", (w, t)),
                             ("snarkjs_inprocess", snarkjs_inprocess_once(d)),
                             ("ours_cli", cli_once(ours_cli, d)),
                             ("snarkjs_cli", cli_once(snark_cli, d))):
            wall[mode].append(w)
            cpu[mode].append(t)
        loads.append(os.getloadavg()[0])
    Proof.from_bytes((d / "ours_cli_proof.bin").read_bytes())
    med = statistics.median
    return {"k": k, "constraints": c["r1cs"].num_constraints, "runs": runs,
            "wall_s": wall, "cpu_s": cpu,
            "median": {m: med(v) for m, v in wall.items()},
            "median_cpu": {m: med(v) for m, v in cpu.items()},
            "ours_stages_median_s": {s: med(x[s] for x in stages) for s in stages[0]},
            "loadavg_1min": loads, "cpus": os.cpu_count(), **c["info"]}


MODES = ("ours_inprocess", "snarkjs_inprocess", "ours_cli", "snarkjs_cli")


def table(results: list[dict]) -> str:
    """Markdown: per mode the median wall time, the best run in brackets (the least disturbed by
    other load), and the median CPU time."""
    head = "| constraints | " + " | ".join(f"{m.replace('_', ' ')}: wall median (best), CPU"
                                          for m in MODES) + " | ours / snarkjs (median wall, CPU) |"
    lines = [head, "|---" * (len(MODES) + 2) + "|"]
    for r in results:
        cells = [f"{r['median'][m]:.2f} s ({min(r['wall_s'][m]):.2f}), {r['median_cpu'][m]:.2f} s"
                 for m in MODES]
        ratio = (f"in-process {r['median']['ours_inprocess'] / r['median']['snarkjs_inprocess']:.2f}, "
                 f"{r['median_cpu']['ours_inprocess'] / r['median_cpu']['snarkjs_inprocess']:.2f}; "
                 f"CLI {r['median']['ours_cli'] / r['median']['snarkjs_cli']:.2f}, "
                 f"{r['median_cpu']['ours_cli'] / r['median_cpu']['snarkjs_cli']:.2f}")
        lines.append(f"| 2^{r['k']} ({r['constraints']}) | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


def profile(k: int, runs: int) -> dict:
    """Where our prove time goes: each step of the CPU backend alone, one thread, median of runs
    (the prover runs the five MSMs on a pool of os.cpu_count() threads beside the NTTs)."""
    from py_arkworks_bls12381 import G1Point, G2Point

    from arith import native
    from gpu.groth16 import curve, qap

    c = prepare(k)
    pk, r1cs, z = c["pk"], c["r1cs"], c["z"]
    n = pk.domain_size
    az, bz, cz = r1cs.evaluate(z)
    a, b, cc = qap.evaluations(r1cs, z, n, az, bz, cz)
    h = native.compute_h(a, b, cc)[: n - 1]
    aux = z[1 + r1cs.num_public:]
    steps = {
        "matvec (A z, B z, C z)": lambda: r1cs.evaluate(z),
        "compute_h (6 NTTs)": lambda: native.compute_h(a, b, cc),
        "msm a_query (G1)": lambda: curve.msm(pk.a_query, z, G1Point),
        "msm b_g1_query (G1)": lambda: curve.msm(pk.b_g1_query, z, G1Point),
        "msm b_g2_query (G2)": lambda: curve.msm(pk.b_g2_query, z, G2Point),
        "msm l_query (G1)": lambda: curve.msm(pk.l_query, aux, G1Point),
        "msm h_query (G1)": lambda: curve.msm(pk.h_query, h, G1Point),
    }
    out = {}
    for name, fn in steps.items():
        seconds, cpu = [], []
        for _ in range(runs):
            t, c0 = time.perf_counter(), time.process_time()
            fn()
            seconds.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c0)
        out[name] = {"wall_s": statistics.median(seconds), "cpu_s": statistics.median(cpu)}
        log(f"2^{k}: {name}: {out[name]}")
    return out


def _powers(text: str) -> list[int]:
    try:
        powers = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    for k in powers:
        if not 4 <= k <= 20:
            raise argparse.ArgumentTypeError(f"{k} is outside 4..20")
    return powers


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--powers", type=_powers, default=[12, 14, 16],
                    help="log2 of the sizes, comma-separated (default 12,14,16)")
    ap.add_argument("--runs", type=int, default=5)
    sub = ap.add_subparsers(dest="cmd")
    once = sub.add_parser("prove-once", help="(internal) one proof in a fresh process")
    once.add_argument("dir", type=Path)
    sub.add_parser("profile", help="time each step of our prover alone (uses --powers, --runs)")
    sub.add_parser("table", help="print the table of the recorded results (uses --powers)")
    args = ap.parse_args(argv)
    if args.cmd == "table":
        print(table([json.loads((CACHE / f"k{k}" / "results.json").read_text()) for k in args.powers]))
        return 0
    if args.cmd == "prove-once":
        prove_once(args.dir)
        return 0
    if args.cmd == "profile":
        for k in args.powers:
            steps = profile(k, args.runs)
            (CACHE / f"k{k}" / "profile.json").write_text(json.dumps(steps, indent=1))
            print(f"2^{k} (median wall / CPU seconds): " + ", ".join(
                f"{n} {v['wall_s']:.3f} / {v['cpu_s']:.3f}" for n, v in steps.items())
                + f"; sum {sum(v['wall_s'] for v in steps.values()):.2f} / "
                  f"{sum(v['cpu_s'] for v in steps.values()):.2f}")
        return 0
    if not SNARKJS.exists():
        raise SystemExit(f"{SNARKJS} is missing: run `npm ci` at the repository root")
    results = []
    for k in args.powers:
        results.append(bench(k, args.runs))
        (CACHE / f"k{k}" / "results.json").write_text(json.dumps(results[-1], indent=1))
        log(f"2^{k}: {results[-1]['median']}  stages {results[-1]['ours_stages_median_s']}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
