"""A multi-partition job through the real cluster on a GPU machine (issues 8 and 9).

    python3 bench/gpu_cluster.py --params porep-lite-1m --jobs 1 --synthesis-workers 6 --out DIR

Steps: keys for the parameter set made with setup on the device (in a child process, so this
one never opens a CUDA context); `zkhive up` with one prover per device (`--devices`, default
cuda:0; a CPU-only run with `--devices cpu:0` checks the script itself) and N synthesis
workers; `--jobs` sectors sealed and
submitted at once (saturating load); every proof checked against public inputs recomputed from
its C1 input; then, from the jobs' timelines: each device's busy fraction (the union of its
device-stage intervals over the span from the first prove pickup to the last prove end), the
queue depth per device over time (sampled from Redis), proofs per hour; `nvidia-smi`'s
utilization sampled alongside; `zkhive status` and `zkhive timeline` captured; `zkhive down`.
Writes DIR/cluster.json, DIR/status.txt, DIR/timeline-*.txt/.png, DIR/queues.png.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEVICE_STAGES = {"upload", "matvec", "ntt_h", "msm_a", "msm_b_g1", "msm_b_g2", "msm_l", "msm_h"}


def zkhive(*args, check=True, **kw) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "cluster.cli", *args], capture_output=True, text=True, **kw)
    if check and res.returncode != 0:
        raise SystemExit(f"zkhive {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return res


def make_keys(params: str, backend: str) -> None:
    """Child process: setup (on the device for GPU runs), stored in the key cache under the
    cluster's names."""
    from cluster.pipeline.keys import KeyCache
    from cluster.settings import load
    from gpu import setup
    from synthesis.circuits import get_circuit

    circuit = get_circuit(params)
    cache = KeyCache(load().srs.param_cache)
    if cache.has(circuit):
        print(f"keys for {params} already in {cache.root}")
        return
    t = time.time()
    pk, vk = setup(circuit.r1cs(), backend=backend)
    t_setup = time.time() - t
    cache.root.mkdir(parents=True, exist_ok=True)
    pk.save(cache.path(circuit, "pk"))
    vk.save(cache.path(circuit, "vk"))
    print(f"keys for {params}: setup ({backend}) {t_setup:.1f} s, written in {time.time() - t - t_setup:.1f} s")


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def sample_gpu(stop: threading.Event, out: list) -> None:
    while not stop.is_set():
        try:
            res = subprocess.run(["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5)
            for line in res.stdout.strip().splitlines():
                i, util, mem = (x.strip() for x in line.split(","))
                out.append((time.time(), int(i), float(util), float(mem)))
        except Exception:
            pass
        stop.wait(0.2)


def sample_queues(stop: threading.Event, rt, out: list) -> None:
    from cluster.pipeline.registry import workers
    from cluster.pipeline.queues import queue_depth

    while not stop.is_set():
        try:
            queues = {q for w in workers(rt.redis, role="prove") for q in w.queues if q.startswith("prove.")}
            out.append((time.time(), {q: queue_depth(rt.redis, q) for q in sorted(queues)}))
        except Exception as e:  # keep sampling; a transient Redis error costs one sample
            out.append((time.time(), {"error": str(e)}))
        stop.wait(0.25)


def all_verify(circuit, vk, docs, results) -> bool:
    """Every job's result: one proof a partition, each verifying against the public inputs of
    its C1 document (docs[j] for results[j])."""
    from gpu import verify
    from gpu.groth16 import split_proofs
    ok = []
    for d, res in zip(docs, results):
        c1 = circuit.parse_c1(d)
        proofs = split_proofs(res.proof)
        ok.append(len(proofs) == circuit.num_partitions() and all(
            verify(vk, circuit.public_inputs(c1, k), p) for k, p in enumerate(proofs)))
    return all(ok)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", default="porep-lite-1m")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--synthesis-workers", type=int, default=6)
    ap.add_argument("--devices", default="cuda:0")
    ap.add_argument("--out", default="gpu_cluster_out")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--provers-per-device", type=int, default=1,
                    help="[worker] gpu_workers_per_device: provers sharing each device")
    ap.add_argument("--prove-ahead", type=int, default=1,
                    help="partitions each prover proves ahead (cluster/pipeline/prefetch.py; 0: off)")
    ap.add_argument("--keys-only", help=argparse.SUPPRESS)  # child: the setup backend
    args = ap.parse_args()
    if args.keys_only:
        make_keys(args.params, args.keys_only)
        return 0

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("ZKHIVE_BENCH_DIR", "/tmp/zkhive-bench"))
    env = os.environ
    env.setdefault("ZKHIVE_SRS__PARAM_CACHE", str(work / "keys"))
    env.setdefault("ZKHIVE_SRS__PRELOAD", json.dumps([args.params]))
    env.setdefault("ZKHIVE_BLOBS__DIR", str(work / "blobs"))
    env.setdefault("ZKHIVE_CACHE_DIR", str(work / "cache"))
    env["ZKHIVE_WORKER__GPU_WORKERS_PER_DEVICE"] = str(args.provers_per_device)
    env["ZKHIVE_PROVE_AHEAD"] = str(args.prove_ahead)
    report: dict = {"params": args.params, "jobs": args.jobs, "devices": args.devices,
                    "synthesis_workers": args.synthesis_workers,
                    "provers_per_device": args.provers_per_device, "prove_ahead": args.prove_ahead}
    t = time.time()
    setup_backend = "cuda" if "cuda" in args.devices else "cpu"
    subprocess.run([sys.executable, __file__, "--params", args.params, "--keys-only", setup_backend],
                   check=True)
    report["keys_s"] = time.time() - t

    run_dir = work / "up"
    t = time.time()
    up = zkhive("up", "--run-dir", str(run_dir), "--devices", args.devices,
                "--synthesis-workers", str(args.synthesis_workers), "--ready-timeout", "600", check=False)
    print(up.stdout, up.stderr, flush=True)
    report["up_s"] = time.time() - t
    if up.returncode != 0:
        (out / "cluster.json").write_text(json.dumps(report, indent=1))
        return 1
    gpu_samples, queue_samples = [], []
    stop = threading.Event()
    try:
        from cluster.pipeline import timeline
        from cluster.pipeline.app import runtime
        from cluster.client import submit
        from synthesis.circuits import get_circuit
        from synthesis.porep import c1_document, generate
        from cluster.pipeline.keys import KeyCache
        from cluster.settings import load

        rt = runtime()
        circuit = get_circuit(args.params)
        vk = KeyCache(load().srs.param_cache).load_vk(circuit)
        docs = []
        t = time.time()
        for j in range(args.jobs):
            docs.append(c1_document(generate(circuit.prm, bytes([j + 1]) * 32), bytes([j + 101]) * 32))
        report["sectors_s"] = time.time() - t
        threading.Thread(target=sample_gpu, args=(stop, gpu_samples), daemon=True).start()
        threading.Thread(target=sample_queues, args=(stop, rt, queue_samples), daemon=True).start()
        t_submit = time.time()
        jobs = [submit(d, job_id=f"bench-{args.params}-{j}-{int(t_submit)}") for j, d in enumerate(docs)]
        results = [job.result(timeout=args.timeout) for job in jobs]
        t_done = time.time()
        stop.set()
        report["wall_s"] = t_done - t_submit
        report["proofs_per_hour"] = args.jobs * 3600 / report["wall_s"]
        report["all_verify"] = all_verify(circuit, vk, docs, results)
        # busy fraction per device, from the timelines
        per_device: dict[str, list] = {}
        first_pickup, last_end = None, None
        part_rows = []
        for job in jobs:
            events = timeline.load(rt.redis, job.job_id)
            (out / f"timeline-{job.job_id}.txt").write_text(timeline.format_text(job.job_id, events))
            for e in events:
                if e["event"] == "stage" and e.get("stage") in DEVICE_STAGES and e.get("device"):
                    per_device.setdefault(e["device"], []).append((e["start"], e["end"]))
                if e["event"] == "prove_pickup":
                    first_pickup = e["t"] if first_pickup is None else min(first_pickup, e["t"])
                if e["event"] == "prove_end":
                    last_end = e["t"] if last_end is None else max(last_end, e["t"])
            starts = {e["partition"]: e["t"] for e in events if e["event"] == "synthesis_start"}
            ends = {e["partition"]: e["t"] for e in events if e["event"] == "synthesis_end"}
            part_rows += [ends[k] - starts[k] for k in starts if k in ends]
        span = (last_end - first_pickup) if first_pickup and last_end else None
        report["prove_span_s"] = span
        # the same from the device's own first stage (a partition proved ahead starts before
        # any pickup) to its last: the busy fraction of the saturated stretch
        for d, iv in per_device.items():
            lo, hi = min(a for a, _ in iv), max(b for _, b in iv)
            report.setdefault("busy_fraction_device_span", {})[d] = union_seconds(iv) / (hi - lo)
            report.setdefault("device_span_s", {})[d] = hi - lo
        report["seconds_per_proof"] = span / (args.jobs * circuit.num_partitions()) if span else None
        report["busy_fraction"] = {d: union_seconds(iv) / span for d, iv in per_device.items()} if span else {}
        report["device_busy_s"] = {d: union_seconds(iv) for d, iv in per_device.items()}
        report["synthesis_s_per_partition"] = sorted(part_rows)
        if gpu_samples:
            window = [s for s in gpu_samples if first_pickup and first_pickup <= s[0] <= last_end]
            report["nvidia_smi_util_mean"] = (sum(s[2] for s in window) / len(window)) if window else None
        report["queue_depth_samples"] = [(round(t - t_submit, 2), d) for t, d in queue_samples]
        st = zkhive("status", check=False)
        (out / "status.txt").write_text(st.stdout + st.stderr)
        zkhive("timeline", jobs[0].job_id, "--png", str(out / "timeline.png"), check=False)
        _plot_queues(queue_samples, t_submit, out / "queues.png")
    finally:
        stop.set()
        down = zkhive("down", "--run-dir", str(run_dir), check=False)
        print(down.stdout, down.stderr, flush=True)
        report["down_rc"] = down.returncode
        (out / "cluster.json").write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps({k: v for k, v in report.items() if k != "queue_depth_samples"}, indent=1, default=str))
    return 0 if report.get("all_verify") else 1


def _plot_queues(samples, t0, path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    queues = sorted({q for _, d in samples for q in d if q != "error"})
    fig, ax = plt.subplots(figsize=(8, 3))
    for q in queues:
        ax.step([t - t0 for t, _ in samples], [d.get(q, 0) for _, d in samples], where="post", label=q)
    ax.set_xlabel("seconds since submit")
    ax.set_ylabel("messages queued")
    ax.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
