"""Cluster benchmark: latency breakdown of one job and throughput of many, on real processes.

    python bench/cluster.py --params porep-lite-4k --provers 2 --jobs 4 --png /tmp/timeline.png

Starts its own Redis (cluster.ops.redis_server) and ``python -m cluster worker`` processes (one
synthesis worker with ``--partition-workers`` processes, one aggregate worker, ``--provers`` CPU
provers), makes the proving key if missing, then:

1. local baseline: synthesis + prove of every partition in this process, one after another;
2. one job on the idle cluster: per-partition stage times from its timeline, and the cluster's
   overhead = job latency - the critical path of its compute;
3. ``--jobs`` jobs submitted at once: wall time, jobs/min, partitions/s.

Prints a table (paste into docs/performance.md) and writes the first job's Gantt chart.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def make_c1(circuit, seed: int) -> dict:
    if circuit.name.startswith("porep-lite"):
        from synthesis.porep import SETS, c1_document, generate
        s = seed.to_bytes(32, "little")
        return c1_document(generate(SETS[circuit.name], s), s)
    raise SystemExit(f"no C1 generator for {circuit.name}")


def start_worker(env, log_dir, role, device=None):
    argv = [sys.executable, "-m", "cluster", "worker", role, "--loglevel", "WARNING"]
    if device:
        argv += ["--device", device]
    log = open(log_dir / f"{role}-{(device or '').replace(':', '')}.log", "wb")
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(r, procs, timeout_s=180):
    from cluster.pipeline import registry

    pids = {p.pid for p in procs}
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        ready = {w.pid for w in registry.workers(r) if w.ready}
        if pids <= ready:
            return
        dead = [p for p in procs if p.poll() is not None]
        if dead:
            raise SystemExit(f"a worker exited with {dead[0].returncode}")
        time.sleep(0.2)
    raise SystemExit("workers not ready in time")


def breakdown(events: list[dict]) -> dict[str, float]:
    """Mean seconds per partition for each span label, plus the job's latency."""
    from cluster.pipeline.timeline import spans

    per: dict[str, list[float]] = {}
    for p, label, a, b in spans(events):
        per.setdefault(label, []).append(b - a)
    out = {k: statistics.mean(v) for k, v in per.items()}
    t0 = min(e["t"] for e in events)
    t1 = max(e["t"] for e in events if e["event"] == "aggregated")
    out["job_latency"] = t1 - t0
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="porep-lite-4k")
    ap.add_argument("--provers", type=int, default=2)
    ap.add_argument("--partition-workers", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--keys", default=str(ROOT / "var" / "bench-keys"), help="key cache (kept between runs)")
    ap.add_argument("--png", default=None)
    args = ap.parse_args()

    from cluster import settings
    from cluster.pipeline.app import configure, runtime
    from cluster.ops.redis_server import RedisServer
    from synthesis.circuits import get_circuit

    circuit = get_circuit(args.params)
    tmp = Path(tempfile.mkdtemp(prefix="zkhive-bench-"))
    pw = secrets.token_hex(8)
    srv = RedisServer(password=pw, data_dir=tmp / "redis").start()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "ZKHIVE_REDIS__URL": srv.url, "ZKHIVE_REDIS__PASSWORD": pw,
           "ZKHIVE_BLOBS__DIR": str(tmp / "blobs"), "ZKHIVE_SRS__PARAM_CACHE": args.keys,
           "ZKHIVE_SRS__PRELOAD": json.dumps([args.params]),
           "ZKHIVE_WORKER__PARTITION_WORKERS": str(args.partition_workers),
           "ZKHIVE_DELIVERY__WATCHDOG_INTERVAL_S": "1"}
    configure(settings.load(env={k: v for k, v in env.items() if k.startswith("ZKHIVE_")}))
    rt = runtime()
    t = time.time()
    rt.keys.setup(circuit)
    print(f"# {args.params}: {circuit.num_partitions()} partitions, {circuit.r1cs().num_constraints} constraints "
          f"each; key ready in {time.time() - t:.1f} s; {os.cpu_count()} cores")

    # 1. local baseline
    from gpu import prove
    pk = rt.keys.load_pk(circuit)
    doc = make_c1(circuit, 0)
    c1 = circuit.parse_c1(doc)
    t = time.time()
    synth = prove_s = 0.0
    for k in range(circuit.num_partitions()):
        a = time.time()
        z = circuit.synthesize(c1, k)
        b = time.time()
        prove(pk, circuit.r1cs(), z)
        synth, prove_s = synth + b - a, prove_s + time.time() - b
    local = time.time() - t
    print(f"local, one process: {local:.2f} s (synthesis {synth:.2f} s, prove {prove_s:.2f} s)")
    del pk

    procs = [start_worker(env, tmp, "synthesis"), start_worker(env, tmp, "aggregate")]
    procs += [start_worker(env, tmp, "prove", f"cpu:{i}") for i in range(args.provers)]
    try:
        t = time.time()
        wait_ready(srv.client(), procs)
        print(f"workers ready in {time.time() - t:.1f} s ({args.provers} provers)")
        from cluster.pipeline import timeline
        from cluster.client import submit

        # 2. one job, idle cluster (after a warm-up job: first-use imports and C1 parsing)
        submit(make_c1(circuit, 2), job_id="bench-warmup").result(timeout=600)
        job = submit(make_c1(circuit, 1), job_id="bench-single")
        job.result(timeout=600)
        ev = timeline.load(rt.redis, "bench-single")
        bd = breakdown(ev)
        print("one job, mean seconds per partition:")
        for k in ("queued", "synthesis", "wait_prover", "fetch_assignment", "matvec", "msm_witness_submit",
                  "ntt_h", "msm", "combine", "aggregate"):
            if k in bd:
                print(f"  {k:<20} {bd[k]:.3f}")
        print(f"  {'job latency':<20} {bd['job_latency']:.3f}")
        if args.png:
            timeline.gantt_png("bench-single", ev, args.png)
            print(f"gantt: {args.png}")

        # 3. throughput
        docs = [make_c1(circuit, 100 + i) for i in range(args.jobs)]
        t = time.time()
        jobs = [submit(d, job_id=f"bench-{i}") for i, d in enumerate(docs)]
        for j in jobs:
            j.result(timeout=1800)
        wall = time.time() - t
        parts = args.jobs * circuit.num_partitions()
        print(f"{args.jobs} jobs at once: {wall:.2f} s, {60 * args.jobs / wall:.1f} jobs/min, "
              f"{parts / wall:.2f} partitions/s")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
