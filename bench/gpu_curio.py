"""Every SNARK Curio sends, on one device (issue 37's H200 items), through the operator's path:

    python3 bench/gpu_curio.py --porep filecoin-32g --post winning-post-32g --jobs 4 --out DIR

1. The ledger (no allocation): for each 32 GiB kind (porep, window-post, winning-post,
   snap-update) the key's resident bytes and one proof's working set as gpu/budget.py books them
   (``key_shape`` from the circuit's counts, ``admit_shape`` against this device's budget), then
   which sets fit the device together and, for the first that does not, the ledger's refusal.
2. ``zkhive up --devices cuda:0`` with both keys made in the prover's own process
   (``[srs] in_process`` + ``preload``, a dev-ceremony seed): PoRep's 2^27 key and the
   WinningPoSt key resident beside it; ``zkhive status``'s residency lines.
3. ``--jobs`` PoRep benchmark sectors' C1 inputs submitted at once (cluster.client, NORMAL);
   once the device is proving them (the first partition proved), ``--winning`` WinningPoSts sent
   one after another through the gateway's unix socket by a gRPC client built from our .proto,
   the request filled as ``cuzk_funcs.go``'s ``WinningPoStCuzk`` fills it (WINNING_POST,
   CRITICAL, the vanilla proofs as bincode FallbackPoStSectorProofs of a benchmark replica:
   ``post_job.benchmark_vanilla_proofs``), as SubmitProof then AwaitProof. Each: the seconds
   from Submit to the proof bytes, the steps between (bench/winning_path.py's), the proof verified with the published .vk against public inputs derived here from the
   randomness and the sector id. A WinningPoSt is only measured while PoRep partitions are
   still queued (the report says how many were left).
4. Every PoRep partition verified (its public inputs recomputed from its C1 input); the jobs'
   timelines and `zkhive status` written to DIR; ``zkhive down``.

CPU check of the script: ``ZKHIVE_DEADLINES__WINNING_POST_S=900 python3 bench/gpu_curio.py --devices
cpu:0 --porep porep-lite-4k --post winning-post-2k --jobs 2 --winning 1`` (slow: a 2 KiB
WinningPoSt is ~40 s on one CPU prover, beyond its 25 s deadline).
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
sys.path.append(str(ROOT / "bench"))  # after the root: bench/cluster.py would shadow the package

GiB = 1 << 30
KINDS_32G = ("filecoin-32g", "window-post-32g", "winning-post-32g", "snap-update-32g")


def zkhive(*args, env=None, timeout=None, check=True) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "cluster.cli", *args], capture_output=True, text=True,
                         env=env, timeout=timeout)
    if check and res.returncode != 0:
        raise RuntimeError(f"zkhive {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr[-3000:]}")
    return res


def ledger(device: str, names=KINDS_32G, capacity: int | None = None) -> dict:
    """Each key's booking as the prover's ledger makes it (nothing allocated), and which of the
    sets fit together on ``device``: PoRep first (the one a sealing pipeline keeps), then each
    other kind added while it fits; the first that does not gets the ledger's own refusal."""
    from cluster.pipeline.devshare import key_shape
    from gpu.backends import get_backend
    from gpu.budget import DeviceBudget, DeviceMemoryExhausted, admit_shape
    from synthesis.circuits import get_circuit

    if capacity is None:
        be = get_backend(device)
        capacity = be.capacity() if hasattr(be, "capacity") else None
    rows, shapes = [], {}
    for name in names:
        shape = key_shape(get_circuit(name))
        sz = get_circuit(name).size()
        shapes[name] = shape
        rows.append({"params": name, "constraints": sz["constraints"], "domain_log2": sz["domain"].bit_length() - 1,
                     "resident_bytes": shape.resident_bytes(),
                     "resident_lean_bytes": __import__("dataclasses").replace(shape, dense_affine=False).resident_bytes(),
                     "working_set_bytes": shape.working_set_bytes()})
    out: dict = {"device": device, "capacity_bytes": capacity, "keys": rows, "together": [], "refused": None}
    if capacity is None:
        return out
    # a private ledger (its own directory): the same rule the prover books by, nothing on the device
    import tempfile
    budget = DeviceBudget(f"{device}-plan", capacity, ledger_dir=Path(tempfile.mkdtemp(prefix="zkhive-plan-")))
    try:
        for name in names:
            try:
                # the rule a prover loads by: the key and one proof alone must fit (lean where
                # only that fits), then the key is booked beside what is booked already
                booked = admit_shape(budget, shapes[name], f"the key of {name}")
                used = budget.usage()["used"]
                budget.reserve_resident(booked.resident_bytes(), f"the key of {name}")
                if budget.usage()["used"] + booked.working_set_bytes() > capacity:
                    budget.release_resident(booked.resident_bytes())
                    raise DeviceMemoryExhausted(
                        f"the key of {name} ({booked.resident_bytes() / GiB:.2f} GiB) fits beside "
                        f"{', '.join(out['together'])} ({used / GiB:.2f} GiB booked) but one proof's "
                        f"working set ({booked.working_set_bytes() / GiB:.2f} GiB) then does not "
                        f"(budget {capacity / GiB:.2f} GiB)", device=device, shape=booked.resident_bytes())
                out["together"].append(name)
                out.setdefault("booked", {})[name] = booked.resident_bytes()
            except DeviceMemoryExhausted as e:
                out.setdefault("refusals", []).append({"params": name, "error": str(e)})
                out["refused"] = out["refused"] or name
    finally:
        budget.leave()
    out["booked_bytes"] = sum(out.get("booked", {}).values())
    return out


def winning_inputs(name: str, sector_id: int, randomness: bytes):
    """One WinningPoSt's vanilla proof (bincode) over a benchmark replica, and its public inputs."""
    from synthesis import field
    from synthesis.filecoin import post, post_job as pj

    prm = post.get(name)
    raw = pj.benchmark_vanilla_proofs(prm, randomness, [sector_id])[0]
    comm_r = field.from_bytes(raw[8:40])
    public = post.public_inputs(prm, randomness, [(sector_id, comm_r)] * prm.sector_count, 0,
                                api_version=prm.api_version)
    return prm, raw, public


def registered_of(prm) -> int:
    from synthesis.filecoin import post_job as pj

    return next(k for k, v in pj.REGISTERED_POST_PROOFS.items() if v == prm.registered_proofs[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--porep", default="filecoin-32g")
    ap.add_argument("--post", default="winning-post-32g")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--winning", type=int, default=3, help="WinningPoSts sent during the PoRep load")
    ap.add_argument("--spacing", type=float, default=2.0,
                    help="seconds between WinningPoSts (8 with --winning 10 spreads them over four "
                         "32 GiB jobs' whole run, their aggregations included)")
    ap.add_argument("--devices", default="cuda:0")
    ap.add_argument("--partition-workers", type=int, default=8)
    ap.add_argument("--out", default="gpu_curio_out")
    ap.add_argument("--timeout", type=float, default=420)
    ap.add_argument("--skip-ledger", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("ZKHIVE_BENCH_DIR", "/tmp/zkhive-curio"))
    from bench.cluster_sdr32g import in_process_env
    e = in_process_env(work, [args.porep, args.post])
    e["ZKHIVE_WORKER__PARTITION_WORKERS"] = str(args.partition_workers)
    e.setdefault("OMP_NUM_THREADS", "2")
    rep: dict = {"porep": args.porep, "post": args.post, "jobs": args.jobs, "devices": args.devices}

    if not args.skip_ledger and args.devices.startswith("cuda"):
        t = time.time()
        rep["ledger"] = ledger(args.devices)
        print(f"ledger ({time.time() - t:.1f} s): capacity {rep['ledger']['capacity_bytes'] / GiB:.2f} GiB", flush=True)
        for r in rep["ledger"]["keys"]:
            print(f"  {r['params']:>17}: 2^{r['domain_log2']}, {r['constraints']:,} constraints, key "
                  f"{r['resident_bytes'] / GiB:.2f} GiB (lean {r['resident_lean_bytes'] / GiB:.2f}), "
                  f"a proof {r['working_set_bytes'] / GiB:.2f} GiB", flush=True)
        print(f"  together: {rep['ledger']['together']}; refusals: "
              + json.dumps(rep["ledger"].get("refusals", []), indent=1), flush=True)

    from bench.gpu_cluster import DEVICE_STAGES, all_verify, union_seconds
    from synthesis.circuits import get_circuit

    porep = get_circuit(args.porep)
    t = time.time()
    for c in (porep, get_circuit(args.post)):
        if hasattr(c, "compact_r1cs"):  # cached for the workers (porep-lite has none)
            c.compact_r1cs()
    print(f"matrices built or loaded in {time.time() - t:.1f} s", flush=True)

    # the PoRep sectors while the cluster starts (the key is made on the device meanwhile)
    from bench.cluster_sdr32g import sectors
    run_dir = work / "up"
    up_box: dict = {}

    def start():
        t0 = time.time()
        up_box["res"] = zkhive("up", "--run-dir", str(run_dir), "--devices", args.devices,
                               "--synthesis-workers", "1", "--ready-timeout", "400", check=False, env=dict(e))
        up_box["s"] = time.time() - t0
    th = threading.Thread(target=start)
    th.start()
    t = time.time()
    docs = sectors(args.porep, args.jobs)
    rep["sectors_s"] = time.time() - t
    randomness = [bytes([7 * (k + 1)] * 31) + bytes([k + 1]) for k in range(args.winning)]
    wins = [winning_inputs(args.post, 4000 + k, r) for k, r in enumerate(randomness)]
    print(f"{args.jobs} PoRep C1 inputs in {rep['sectors_s']:.1f} s; {args.winning} WinningPoSt inputs", flush=True)
    th.join()
    up = up_box["res"]
    rep["up_s"] = up_box["s"]
    print(up.stdout, up.stderr[-3000:], flush=True)
    if up.returncode != 0:
        for log in sorted((run_dir / "logs").glob("prove*.log")):
            print(f"--- {log.name}\n" + log.read_text(errors="replace")[-3000:], flush=True)
        zkhive("down", "--run-dir", str(run_dir), check=False, env=dict(e))
        (out / "curio.json").write_text(json.dumps(rep, indent=1, default=str))
        return 1
    ok = False
    try:
        import grpc

        from cluster.client import submit
        from cluster.gateway.pb import proving_pb2 as pb
        from cluster.gateway.pb import proving_pb2_grpc as pb_grpc
        from cluster.pipeline import registry, timeline
        from cluster.pipeline.app import configure, runtime
        from cluster.pipeline.jobkeys import key as job_key
        from winning_path import STEPS, steps  # bench/winning_path.py: the same steps, defined there
        from cluster.pipeline.keys import KeyCache
        from cluster.settings import load
        from gpu.groth16 import Proof
        from gpu.groth16 import verify as groth16_verify

        s = load(env={k: v for k, v in e.items() if k.startswith("ZKHIVE_")})
        configure(s)
        rt = runtime()
        rep["provers"] = [{"id": w.worker_id, "resident": w.resident_keys, "makes": w.makes_keys}
                          for w in registry.workers(rt.redis, role="prove")]
        st = zkhive("status", check=False, env=dict(e))
        (out / "status-ready.txt").write_text(st.stdout + st.stderr)
        print("--- status at ready\n" + st.stdout[-2500:], flush=True)
        keys = KeyCache(s.srs.param_cache)
        porep_vk = keys.load_vk(porep)
        post_c = get_circuit(args.post)
        post_vk = keys.load_vk(post_c)
        channel = grpc.insecure_channel(f"unix://{(run_dir / 'gateway.sock').resolve()}")
        stub = pb_grpc.ProvingEngineStub(channel)

        t_submit = time.time()
        stamp = int(t_submit)
        handles = [submit(d, job_id=f"curio-{args.porep}-{j}-{stamp}") for j, d in enumerate(docs)]
        # wait for the device to be proving PoRep: the first partition proved
        first = None
        while time.time() - t_submit < args.timeout:
            ev = timeline.load(rt.redis, handles[0].job_id)
            ends = [x["t"] for x in ev if x["event"] == "prove_end"]
            if ends:
                first = min(ends)
                break
            time.sleep(0.2)
        rep["first_porep_partition_s"] = (first - t_submit) if first else None
        print(f"first PoRep partition proved {rep['first_porep_partition_s']} s after submit", flush=True)
        rows = []
        sector_size = 32 << 30 if "32g" in args.post else (64 << 30 if "64g" in args.post else 2048)
        for k, (prm, raw, public) in enumerate(wins):
            time.sleep(args.spacing)
            proved_before = sum(1 for h in handles for x in timeline.load(rt.redis, h.job_id) if x["event"] == "prove_end")
            req = pb.SubmitProofRequest(
                request_id=f"winpost-1000-{randomness[k][:8].hex()}", proof_kind=pb.WINNING_POST,
                sector_size=sector_size, registered_proof=registered_of(prm), priority=pb.CRITICAL,
                vanilla_proofs=[raw], miner_id=1000, randomness=randomness[k])
            # SubmitProof then AwaitProof (Prove's two halves) so the door's share is timed apart
            t0 = time.time()
            sub = stub.SubmitProof(req, timeout=60)
            t_sub = time.time()
            awaited = stub.AwaitProof(pb.AwaitProofRequest(job_id=sub.job_id), timeout=120)
            dt = time.time() - t0
            res = pb.ProveResponse(result=awaited)
            proof = bytes(res.result.proof) if res.HasField("result") else b""
            good = len(proof) == 192 and groth16_verify(post_vk, public, Proof.from_bytes(proof))
            bad_pub = list(public)
            bad_pub[1] = (bad_pub[1] + 1) % (1 << 255)
            rejects = len(proof) == 192 and not groth16_verify(post_vk, bad_pub, Proof.from_bytes(proof))
            left = args.jobs * porep.num_partitions() - proved_before
            fin = rt.redis.hget(job_key(sub.job_id, "state"), "finished_at")
            path = steps(timeline.load(rt.redis, sub.job_id), t0, t_sub, t0 + dt, float(fin) if fin else None)
            rows.append({"submit_to_proof_s": round(dt, 3), "verified": good, "rejects_wrong_input": rejects,
                         "steps_s": path,
                         "porep_partitions_left_at_submit": left, "status": int(res.result.status),
                         "queue_wait_ms": res.result.queue_wait_ms, "synthesis_ms": res.result.synthesis_ms,
                         "gpu_compute_ms": res.result.gpu_compute_ms, "srs_load_ms": res.result.srs_load_ms,
                         "total_ms": res.result.total_ms})
            print(f"WinningPoSt {k}: {dt:.3f} s Submit to proof, verified={good}, wrong input rejected={rejects}, "
                  f"{left} PoRep partitions not yet proved at submit; steps (s): "
                  + ", ".join(f"{n} {path[n]}" for n in STEPS), flush=True)
        rep["winning"] = rows
        if rows:   # the Must is every WinningPoSt's (<= 5 s), so the worst one counts
            took = sorted(r["submit_to_proof_s"] for r in rows)
            rep["winning_summary"] = {"n": len(took), "max_s": took[-1], "median_s": took[len(took) // 2],
                                      "over_5_s": sum(1 for t in took if t > 5.0),
                                      "over_1_s": sum(1 for t in took if t > 1.0)}
            print(f"WinningPoSts: {rep['winning_summary']}", flush=True)
        for k in range(len(rows)):  # each WinningPoSt's own timeline: where its seconds went
            jid = f"winpost-1000-{randomness[k][:8].hex()}"
            (out / f"timeline-{jid}.txt").write_text(timeline.format_text(jid, timeline.load(rt.redis, jid)))
        results = [h.result(timeout=args.timeout) for h in handles]
        rep["wall_s"] = time.time() - t_submit
        rep["porep_all_verify"] = all_verify(porep, porep_vk, docs, results)
        iv, done = [], []
        for h in handles:
            ev = timeline.load(rt.redis, h.job_id)
            (out / f"timeline-{h.job_id}.txt").write_text(timeline.format_text(h.job_id, ev))
            iv += [(x["start"], x["end"]) for x in ev if x["event"] == "stage" and x.get("stage") in DEVICE_STAGES]
            done += [x["t"] for x in ev if x["event"] == "aggregated"]
        done.sort()
        rep["job_done_s"] = [round(x - t_submit, 2) for x in done]
        if len(done) > 1:
            rep["s_per_proof_steady"] = (done[-1] - done[0]) / (len(done) - 1)
        if iv:
            lo, hi = min(a for a, _ in iv), max(b for _, b in iv)
            rep["busy_fraction"] = union_seconds(iv) / (hi - lo)
        gs = stub.GetStatus(pb.GetStatusRequest(), timeout=10)
        (out / "getstatus.txt").write_text(str(gs))
        st = zkhive("status", check=False, env=dict(e))
        (out / "status-end.txt").write_text(st.stdout + st.stderr)
        channel.close()
        ok = rep["porep_all_verify"] and all(r["verified"] and r["rejects_wrong_input"] for r in rows)
    except Exception as ex:  # the report says what broke; the cluster still goes down
        import traceback
        rep["error"] = f"{type(ex).__name__}: {ex}"
        traceback.print_exc()
        for log in sorted((run_dir / "logs").glob("*.log")):
            print(f"--- {log.name}\n" + log.read_text(errors="replace")[-2000:], flush=True)
    finally:
        down = zkhive("down", "--run-dir", str(run_dir), check=False, env=dict(e))
        rep["down_rc"] = down.returncode
        (out / "curio.json").write_text(json.dumps(rep, indent=1, default=str))
    print(json.dumps({k: v for k, v in rep.items() if k != "ledger"}, indent=1, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
