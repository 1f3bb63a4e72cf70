"""The 10-partition 32 GiB job through the real cluster on one machine (issue 16; sdr-32g, the
shape it was first written for, is retired: Filecoin's own filecoin-32g is the default):

    python3 bench/cluster_sdr32g.py --params filecoin-32g --jobs 3 --configs 1,2 --out DIR

For each config (``[worker] gpu_workers_per_device``): ``zkhive up`` in a fresh run directory
(Redis, an aggregate worker, one synthesis worker with ``--partition-workers`` processes, the
prover(s) of ``--devices``) with the key made in the prover's own process
(``[srs] in_process`` + ``preload`` + a dev-ceremony seed: the key is never a file, its vk is
published into the key directory), ``--jobs`` sectors sealed and their C1 inputs submitted at
once, every partition of every job verified against public inputs recomputed from its C1
input (the aggregate worker verifies too, with the published vk), then from the jobs' timelines:

- setup: ``zkhive up`` until ready (the in-process key made on the device; paid once a prover);
- seconds a proof in steady state: the time between the first and the last job's completion
  over ``jobs - 1`` (the first job's own latency includes the pipeline filling);
- the device busy fraction: the union of the device's own stage intervals (upload .. msm_h)
  over the device's first-to-last stage;
- per partition: synthesis, the device's stage sum, fetch;

then ``zkhive down``. Prints one table at the end; writes DIR/cluster-<config>.json and the
timelines. CPU check of the script itself: ``--devices cpu:0 --params porep-lite-4k``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpu_cluster import DEVICE_STAGES, all_verify, union_seconds  # noqa: E402


def zkhive(*args, check=True, env=None, timeout=None) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "cluster.cli", *args], capture_output=True, text=True,
                         env=env, timeout=timeout)
    if check and res.returncode != 0:
        raise RuntimeError(f"zkhive {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return res


def sectors(params: str, jobs: int) -> list[dict]:
    from synthesis.circuits import get_circuit

    circuit = get_circuit(params)
    if params.startswith("filecoin"):
        from concurrent.futures import ProcessPoolExecutor

        from synthesis.filecoin.samples import sample_c1
        # ~24 s a 32 GiB benchmark sector on the H200's host: one process each
        with ProcessPoolExecutor(min(jobs, os.cpu_count() or 1)) as pool:
            return list(pool.map(sample_c1, [circuit.prm] * jobs, range(1, jobs + 1)))
    from synthesis.porep import c1_document, generate
    return [c1_document(generate(circuit.prm, bytes([j + 1]) * 32), bytes([j + 101]) * 32) for j in range(jobs)]


def in_process_env(work: Path, keys: list[str]):
    """os.environ set for a cluster under ``work`` whose provers make ``keys`` in process and
    preload them (dev-ceremony seed); what the caller exported stays. Returns os.environ."""
    e = os.environ
    e.setdefault("ZKHIVE_STATE_DIR", str(work / "state"))
    e.setdefault("PYTHONUNBUFFERED", "1")
    e.setdefault("ZKHIVE_SRS__PARAM_CACHE", str(work / "keys"))
    e.setdefault("ZKHIVE_BLOBS__DIR", str(work / "blobs"))
    e.setdefault("ZKHIVE_CACHE_DIR", str(work / "cache"))
    e["ZKHIVE_SRS__IN_PROCESS"] = json.dumps(keys)
    e["ZKHIVE_SRS__PRELOAD"] = json.dumps(keys)
    e.setdefault("ZKHIVE_SRS__SETUP_SEED", "zkhive-bench-dev-ceremony")
    return e


def run_config(args, config: int, docs: list[dict], work: Path, out: Path) -> dict:
    from cluster.pipeline import timeline
    from cluster.pipeline.app import configure, runtime
    from cluster.client import submit
    from cluster.pipeline.keys import KeyCache
    from cluster.settings import load
    from synthesis.circuits import get_circuit

    run_dir = work / f"up-{config}"
    env = dict(os.environ)
    env["ZKHIVE_WORKER__GPU_WORKERS_PER_DEVICE"] = str(config)
    rep: dict = {"config": config, "params": args.params, "jobs": args.jobs, "devices": args.devices}
    t = time.time()
    up = zkhive("up", "--run-dir", str(run_dir), "--devices", args.devices, "--synthesis-workers", "1",
                "--ready-timeout", str(args.ready_timeout), check=False, env=env)
    rep["up_s"] = time.time() - t
    rep["up_notes"] = [ln.strip() for ln in up.stdout.splitlines() if ln.strip().startswith("note")]
    print(up.stdout, up.stderr[-3000:], flush=True)
    if up.returncode != 0:
        rep["error"] = f"up failed ({up.returncode})"
        for log in sorted((run_dir / "logs").glob("prove*.log")):
            print(f"--- {log.name}\n" + log.read_text(errors="replace")[-3000:], flush=True)
        zkhive("down", "--run-dir", str(run_dir), check=False, env=env)
        return rep
    try:
        s = load(env={k: v for k, v in env.items() if k.startswith("ZKHIVE_")})
        configure(s)
        rt = runtime()
        circuit = get_circuit(args.params)
        from cluster.pipeline import registry
        provers = registry.workers(rt.redis, role="prove")
        rep["provers"] = [{"id": w.worker_id, "resident": w.resident_keys, "makes": w.makes_keys} for w in provers]
        made = []
        for log in sorted((run_dir / "logs").glob("prove*.log")):
            made += [ln.strip()[-120:] for ln in log.read_text(errors="replace").splitlines() if "in process in" in ln or "loaded the proving key" in ln]
        rep["setup_log"] = made
        keys = KeyCache(s.srs.param_cache)
        rep["pk_file_exists"] = keys.path(circuit, "pk").exists()
        vk = keys.load_vk(circuit)  # the published one
        t_submit = time.time()
        stamp = int(t_submit)
        handles = [submit(d, job_id=f"c{config}-{args.params}-{j}-{stamp}") for j, d in enumerate(docs)]
        results = [h.result(timeout=args.timeout) for h in handles]
        rep["wall_s"] = time.time() - t_submit
        rep["all_verify"] = all_verify(circuit, vk, docs, results)
        done, iv, synth, dev_sum, fetch, tails = [], [], [], [], [], []
        for h in handles:
            ev = timeline.load(rt.redis, h.job_id)
            (out / f"timeline-{h.job_id}.txt").write_text(timeline.format_text(h.job_id, ev))
            done += [e["t"] for e in ev if e["event"] == "aggregated"]
            # the job's tail: its last partition proved to its proof stored (the aggregation:
            # every partition verified against the public inputs stored at submission)
            ends = [e["t"] for e in ev if e["event"] == "prove_end"]
            agg = [e for e in ev if e["event"] in ("aggregate_start", "aggregated")]
            if ends and agg and agg[-1]["event"] == "aggregated":
                tails.append({"job": h.job_id, "after_last_partition_s": round(agg[-1]["t"] - max(ends), 3),
                              "aggregate_s": round(agg[-1]["t"] - agg[0]["t"], 3),
                              "publics": "c1" if any(e["event"] == "publics_from_c1" for e in ev) else "stored"})
            per_part: dict = {}
            for e in ev:
                if e["event"] == "stage" and e.get("stage") in DEVICE_STAGES:
                    iv.append((e["start"], e["end"]))
                    # a union per partition: the H MSM and the witness MSMs overlap on two streams
                    per_part.setdefault(e["partition"], []).append((e["start"], e["end"]))
                if e["event"] == "stage" and e.get("stage") in ("fetch_ahead", "fetch_assignment"):
                    fetch.append(e["end"] - e["start"])
            st = {e["partition"]: e["t"] for e in ev if e["event"] == "synthesis_start"}
            en = {e["partition"]: e["t"] for e in ev if e["event"] == "synthesis_end"}
            synth += [en[k] - st[k] for k in st if k in en]
            dev_sum += [union_seconds(v) for v in per_part.values()]
        done.sort()
        rep["job_done_s"] = [round(x - t_submit, 2) for x in done]
        rep["first_job_s"] = done[0] - t_submit if done else None
        rep["s_per_proof_steady"] = (done[-1] - done[0]) / (len(done) - 1) if len(done) > 1 else None
        rep["aggregation_tails"] = tails
        if iv:
            lo, hi = min(a for a, _ in iv), max(b for _, b in iv)
            rep["device_busy_s"] = union_seconds(iv)
            rep["device_span_s"] = hi - lo
            rep["busy_fraction"] = union_seconds(iv) / (hi - lo)
        rep["device_s_per_partition"] = sum(dev_sum) / len(dev_sum) if dev_sum else None
        rep["synthesis_s_per_partition"] = sum(synth) / len(synth) if synth else None
        rep["fetch_s_per_partition"] = sum(fetch) / len(fetch) if fetch else None
        st = zkhive("status", check=False, env=env)
        (out / f"status-{config}.txt").write_text(st.stdout + st.stderr)
    except Exception as e:
        rep["error"] = f"{type(e).__name__}: {e}"
        for log in sorted((run_dir / "logs").glob("*.log")):
            print(f"--- {log.name}\n" + log.read_text(errors="replace")[-2000:], flush=True)
    finally:
        down = zkhive("down", "--run-dir", str(run_dir), check=False, env=env)
        rep["down_rc"] = down.returncode
        (out / f"cluster-{config}.json").write_text(json.dumps(rep, indent=1, default=str))
    return rep


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", default="filecoin-32g")
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--configs", default="1,2", help="gpu_workers_per_device values, one cluster each")
    ap.add_argument("--devices", default="cuda:0")
    ap.add_argument("--partition-workers", type=int, default=8)
    ap.add_argument("--out", default="cluster_sdr32g_out")
    ap.add_argument("--ready-timeout", type=float, default=400)
    ap.add_argument("--timeout", type=float, default=400)
    ap.add_argument("--budget-s", type=float, default=540, help="skip a config that cannot finish in time")
    args = ap.parse_args()
    t_start = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("ZKHIVE_BENCH_DIR", "/tmp/zkhive-sdr32g"))
    e = in_process_env(work, [args.params])
    e["ZKHIVE_WORKER__PARTITION_WORKERS"] = str(args.partition_workers)
    e.setdefault("OMP_NUM_THREADS", "2")
    from synthesis.circuits import get_circuit

    t = time.time()
    get_circuit(args.params).compact_r1cs() if hasattr(get_circuit(args.params), "compact_r1cs") else None
    print(f"matrices of {args.params} built or loaded in {time.time() - t:.1f} s (cached for the workers)", flush=True)
    t = time.time()
    docs = sectors(args.params, args.jobs)
    print(f"{args.jobs} sectors and C1 inputs in {time.time() - t:.1f} s", flush=True)
    reps = []
    for config in (int(x) for x in args.configs.split(",")):
        left = args.budget_s - (time.time() - t_start)
        need = (reps[-1]["up_s"] + reps[-1].get("wall_s", 0) + 20) if reps else 0
        if need > left:
            print(f"config {config}: skipped ({left:.0f} s left, the last config took {need:.0f} s)", flush=True)
            continue
        reps.append(run_config(args, config, docs, work, out))
        print(json.dumps(reps[-1], indent=1, default=str), flush=True)
    print(f"\n{args.params}, {args.jobs} jobs x {get_circuit(args.params).num_partitions()} partitions, "
          f"devices {args.devices}, {args.partition_workers} synthesis processes")
    print(f"{'provers/dev':>11} {'processes':>9} {'up+setup s':>10} {'first job s':>11} {'s/proof steady':>14} "
          f"{'busy':>6} {'dev s/part':>10} {'synth s/part':>12} {'fetch s':>8} {'verify':>6}")
    for r in reps:
        f = lambda k, fmt="{:.2f}": fmt.format(r[k]) if r.get(k) is not None else "-"
        print(f"{r['config']:>11} {len(r.get('provers', [])):>9} {f('up_s', '{:.1f}'):>10} {f('first_job_s', '{:.1f}'):>11} "
              f"{f('s_per_proof_steady'):>14} {f('busy_fraction', '{:.1%}'):>6} {f('device_s_per_partition'):>10} "
              f"{f('synthesis_s_per_partition'):>12} {f('fetch_s_per_partition', '{:.3f}'):>8} {str(r.get('all_verify', '-')):>6}")
        for n in r.get("up_notes", []):
            print(f"{'':>11} {n}")
        tails = r.get("aggregation_tails") or []
        if tails:
            print(f"{'':>11} after each job's last partition: "
                  + ", ".join(f"{t['after_last_partition_s']:.2f} s ({t['publics']})" for t in tails))
        if r.get("error"):
            print(f"{'':>11} error: {r['error'][:300]}")
    return 0 if reps and all(r.get("all_verify") for r in reps) else 1


if __name__ == "__main__":
    sys.exit(main())
