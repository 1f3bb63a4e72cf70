"""Benchmark: our CPU Groth16 prover beside snarkjs 0.7.6's ``groth16 prove`` on the same circuit.

    python bench/snarkjs_compare.py                      # 2^12, 2^14, 2^16 constraints, 5 runs
    python bench/snarkjs_compare.py --powers 12 --runs 3

The circuit is bench/mulchain.py with 2^k - 3 constraints (domain 2^k for both provers) and a
random witness. Both provers are timed two ways, each reported as the median wall time:

- in-process: ours ``prove(pk, r1cs, z)`` with the key in memory (as a cluster worker holds it),
  snarkjs ``groth16.prove(zkey, wtns)`` in one node process (bench/snarkjs_prove.mjs); each side
  runs one warm-up proof first (snarkjs builds its wasm curve and workers then).
- CLI: one fresh process per proof, timed from outside: ``snarkjs groth16 prove c.zkey w.wtns
  proof.json public.json`` against ``python bench/snarkjs_compare.py prove-once DIR`` (loads our
  key file, the matrices and the witness, proves, writes the 192-byte proof).

Before anything is timed, each side's proof passes the other side's verifier (ours exported to
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

def time_ours_inprocess(c: dict, runs: int) -> tuple[list[float], dict]:
    prove(c["pk"], c["r1cs"], c["z"])  # warm-up: the host library, thread pool
    seconds, stages = [], []
    for _ in range(runs):
        timer = StageTimer()
        t = time.perf_counter()
        prove(c["pk"], c["r1cs"], c["z"], timer=timer)
        seconds.append(time.perf_counter() - t)
        stages.append(timer.totals())
    med = {k: statistics.median(s[k] for s in stages) for k in stages[0]}
    return seconds, med


def time_cli(argv: list, cwd: Path, runs: int) -> list[float]:
    seconds = []
    for _ in range(runs):
        t = time.perf_counter()
        run(*argv, cwd=cwd)
        seconds.append(time.perf_counter() - t)
    return seconds


def bench(k: int, runs: int) -> dict:
    c = prepare(k)
    d = c["dir"]
    log(f"2^{k}: cross-checking proofs both ways")
    cross_check(c)
    load_before = os.getloadavg()  # the machine is shared: record how busy it was
    log(f"2^{k}: timing ours in-process")
    ours_in, stages = time_ours_inprocess(c, runs)
    log(f"2^{k}: timing snarkjs in-process")
    res = run("node", ROOT / "bench" / "snarkjs_prove.mjs", "c.zkey", "w.wtns", runs, cwd=d)
    snark_in = json.loads(res.stdout.strip().splitlines()[-1])["seconds"]
    log(f"2^{k}: timing both as CLI commands")
    ours_cli = time_cli([sys.executable, Path(__file__).resolve(), "prove-once", d], d, runs)
    Proof.from_bytes((d / "ours_cli_proof.bin").read_bytes())
    snark_cli = time_cli([SNARKJS, "groth16", "prove", "c.zkey", "w.wtns", "p.json", "pub.json"],
                         d, runs)
    med = statistics.median
    return {"k": k, "constraints": c["r1cs"].num_constraints, "runs": runs,
            "ours_inprocess_s": ours_in, "snarkjs_inprocess_s": snark_in,
            "ours_cli_s": ours_cli, "snarkjs_cli_s": snark_cli,
            "median": {"ours_inprocess": med(ours_in), "snarkjs_inprocess": med(snark_in),
                       "ours_cli": med(ours_cli), "snarkjs_cli": med(snark_cli)},
            "ours_stages_median_s": stages, "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(), "cpus": os.cpu_count(), **c["info"]}


def table(results: list[dict]) -> str:
    lines = ["| constraints | ours in-process | snarkjs in-process | ratio | ours CLI | snarkjs CLI | ratio |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        m = r["median"]
        lines.append(f"| 2^{r['k']} ({r['constraints']}) | {m['ours_inprocess']:.2f} s | "
                     f"{m['snarkjs_inprocess']:.2f} s | {m['ours_inprocess'] / m['snarkjs_inprocess']:.2f} | "
                     f"{m['ours_cli']:.2f} s | {m['snarkjs_cli']:.2f} s | "
                     f"{m['ours_cli'] / m['snarkjs_cli']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--powers", type=int, nargs="+", default=[12, 14, 16])
    ap.add_argument("--runs", type=int, default=5)
    sub = ap.add_subparsers(dest="cmd")
    once = sub.add_parser("prove-once", help="(internal) one proof in a fresh process")
    once.add_argument("dir", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "prove-once":
        prove_once(args.dir)
        return 0
    if not SNARKJS.exists():
        raise SystemExit(f"{SNARKJS} is missing: run `npm ci` at the repository root")
    for k in args.powers:
        if not 4 <= k <= 20:
            raise SystemExit(f"--powers: {k} is outside 4..20")
    results = []
    for k in args.powers:
        results.append(bench(k, args.runs))
        (CACHE / f"k{k}" / "results.json").write_text(json.dumps(results[-1], indent=1))
        log(f"2^{k}: {results[-1]['median']}  stages {results[-1]['ours_stages_median_s']}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
