"""Partition prove time on the GPU backend, stage by stage (issue 8), and key generation time.

    python3 bench/gpu_prover.py --params porep-lite-64k,porep-lite-1m --runs 5 --out prover.json
    python3 bench/gpu_prover.py --params porep-lite-16m --runs 3 --save-keys /tmp/keys

For each parameter set: build (or load) the matrices, make the keys with setup on the device
(timed: setup's host part and the device's fixed-base multiplication), synthesize one partition,
load key and matrices onto the device (timed), prove once to warm up, then time ``--runs`` proofs
(medians; each stage from device events, see gpu/backends/cuda.py) and check that the last one
verifies and that the CPU backend agrees with the device when both use the same r and s (sets of
up to 2^16 constraints; beyond, the CPU prover is minutes a proof). Writes JSON after every set,
prints a table last.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def c1_doc(circuit, seed: int) -> dict:
    """A sealed sector's C1 document for any family (porep-lite, filecoin), or a PoSt job over a
    benchmark replica (a full partition: ``post_job.benchmark_vanilla_proofs``)."""
    from synthesis.filecoin.post_job import PostCircuit
    if isinstance(circuit, PostCircuit):
        from synthesis.filecoin import post_job as pj
        prm = circuit.prm
        randomness = bytes([seed] * 31) + b"\x01"
        ids = list(range(1000, 1000 + (1 if prm.kind == "winning" else pj.max_sectors(prm))))
        rp = prm.registered_proofs[-1]
        raws = pj.benchmark_vanilla_proofs(prm, randomness, ids, registered_proof=rp)
        return pj.document(prm, rp, randomness, 1000, raws, 0)
    if getattr(circuit, "family", "porep-lite") == "filecoin":
        from synthesis.filecoin.samples import sample_c1
        return sample_c1(circuit.prm, seed)
    from synthesis.porep import c1_document, generate
    return c1_document(generate(circuit.prm, bytes([seed]) * 32), bytes([seed + 1]) * 32)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", default="porep-lite-64k,porep-lite-1m")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default="gpu_prover.json")
    ap.add_argument("--save-keys", help="also write the keys there (times the streaming writer)")
    ap.add_argument("--split", default="auto",
                    help="MSM paths to time, comma-separated: off (plain Pippenger, as before the "
                         "split MSM), auto (chosen per query from the witness), on")
    args = ap.parse_args()

    from gpu import prove, setup, verify
    from gpu.backends import get_backend
    from gpu.timing import StageTimer
    from synthesis import field as F
    from synthesis.circuits import get_circuit

    be = get_backend("cuda:0")
    print(f"device: {be.device}, memory (free, total): {be.memory_info()}", flush=True)
    results = []
    for name in args.params.split(","):
        row: dict = {"params": name}
        circuit = get_circuit(name)
        t = time.time()
        r1cs = circuit.r1cs()
        row["matrices_s"] = time.time() - t
        row.update(constraints=r1cs.num_constraints, variables=r1cs.num_variables, nnz=r1cs.nnz)
        print(f"{name}: {r1cs.num_constraints} constraints, matrices in {row['matrices_s']:.1f} s", flush=True)
        t = time.time()
        pk, vk = setup(r1cs, backend="cuda")
        row["setup_s"] = time.time() - t
        row["domain"] = pk.domain_size
        print(f"  setup on the device: {row['setup_s']:.1f} s (domain 2^{pk.domain_size.bit_length() - 1})", flush=True)
        if args.save_keys:
            d = Path(args.save_keys)
            d.mkdir(parents=True, exist_ok=True)
            t = time.time()
            pk.save(d / f"{name}.pk")
            vk.save(d / f"{name}.vk")
            row["save_keys_s"] = time.time() - t
            row["pk_bytes"] = (d / f"{name}.pk").stat().st_size
            t = time.time()
            from gpu.groth16 import ProvingKey
            pk = ProvingKey.load(d / f"{name}.pk")
            row["load_keys_s"] = time.time() - t
            print(f"  keys: saved in {row['save_keys_s']:.1f} s, loaded in {row['load_keys_s']:.1f} s "
                  f"({row['pk_bytes'] / 2**30:.2f} GiB)", flush=True)
        t = time.time()
        c1 = circuit.parse_c1(c1_doc(circuit, 5))
        row["sector_s"] = time.time() - t
        t = time.time()
        z = circuit.synthesize(c1, 0)
        row["synthesis_s"] = time.time() - t
        pub = circuit.public_inputs(c1, 0)
        t = time.time()
        be.load(pk, r1cs)
        row["device_load_s"] = time.time() - t
        print(f"  synthesis {row['synthesis_s']:.2f} s, key+matrices onto the device "
              f"{row['device_load_s']:.2f} s", flush=True)
        row["modes"] = {}
        for mode in args.split.split(","):
            os.environ["ZKHIVE_SPLIT_MSM"] = mode  # read per MSM (gpu/cuda/split_msm.py)
            prove(pk, r1cs, z, backend=be)  # warm-up: workspaces, module loads
            totals, stages = [], {}
            proof = None
            for _ in range(args.runs):
                timer = StageTimer()
                t = time.time()
                proof = prove(pk, r1cs, z, backend=be, timer=timer)
                totals.append(time.time() - t)
                for k, v in timer.totals().items():
                    stages.setdefault(k, []).append(v)
            m = {"prove_s": statistics.median(totals), "prove_all_s": totals,
                 "stages_s": {k: statistics.median(v) for k, v in stages.items()},
                 "msm_paths": dict(be.last_msm),
                 "verifies": verify(vk, pub, proof),
                 "rejects_wrong_input": not verify(vk, [pub[0] ^ 1, *pub[1:]], proof)}
            row["modes"][mode] = m
            print(f"  [{mode}] prove median {m['prove_s'] * 1e3:.1f} ms over {args.runs}: "
                  + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in m["stages_s"].items())
                  + f"; verifies={m['verifies']} rejects_wrong_input={m['rejects_wrong_input']}", flush=True)
            print("    witness and paths: " + "; ".join(
                f"{q}: {i['path']} 0={i['zeros']} 1={i['ones']} other={i['tail']} chunks={i['chunks']}"
                for q, i in m["msm_paths"].items()), flush=True)
        last = row["modes"][args.split.split(",")[-1]]
        row.update(prove_s=last["prove_s"], stages_s=last["stages_s"])
        row["verifies"] = all(m["verifies"] for m in row["modes"].values())
        row["rejects_wrong_input"] = all(m["rejects_wrong_input"] for m in row["modes"].values())
        if r1cs.num_constraints <= 1 << 16:
            r, s = F.random_element(), F.random_element()
            row["backends_agree"] = (prove(pk, r1cs, z, backend=be, r=r, s=s).to_bytes()
                                     == prove(pk, r1cs, z, backend="cpu", r=r, s=s).to_bytes())
        if "backends_agree" in row:
            print(f"  backends_agree={row['backends_agree']}", flush=True)
        results.append(row)
        Path(args.out).write_text(json.dumps(results, indent=1))
        be.unload(pk.circuit_digest)
        del pk, vk, r1cs, z
    print("\n| set | constraints | MSM path | setup s | prove ms | " + " | ".join(
        ["upload", "matvec", "ntt_h", "msm_a", "msm_b_g1", "msm_b_g2", "msm_l", "msm_h", "combine"]) + " |")
    for row in results:
        for mode, m in row["modes"].items():
            st = m["stages_s"]
            print(f"| {row['params']} | {row['constraints']} | {mode} | {row['setup_s']:.1f} | {m['prove_s'] * 1e3:.1f} | "
                  + " | ".join(f"{st.get(k, 0) * 1e3:.1f}" for k in
                               ["upload", "matvec", "ntt_h", "msm_a", "msm_b_g1", "msm_b_g2", "msm_l", "msm_h", "combine"]) + " |")
    ok = all(r["verifies"] and r["rejects_wrong_input"] and r.get("backends_agree", True) for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
