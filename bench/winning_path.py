"""A WinningPoSt's critical path through the gateway, step by step (issue 37), on an idle cluster:

    python3 bench/winning_path.py --devices cpu:0 --post winning-post-2k --count 3 --out DIR

``zkhive up`` on free ports with the WinningPoSt key in the key cache (made once under
``$ZKHIVE_BENCH_DIR/keys``, reused) and preloaded by the prover; a sealed 2 KiB sector's vanilla
proof; then ``--count`` WinningPoSts one after another through the gateway's unix socket, each as
``cuzk_funcs.go``'s ``WinningPoStCuzk`` fills the request (WINNING_POST, CRITICAL), sent as
SubmitProof then AwaitProof so the door's share is timed apart. The first is the first of its
kind after ``up``; the others are warm. Each proof is verified with the key cache's .vk (and a
wrong public input rejected). Each row: the client's Submit-to-proof and the steps between,
from the job's timeline (cluster.pipeline.timeline) and the job's state:

    submit       SubmitProof's call: request parse, vanilla-proof checks, job record, chord sent
    to_synth     the job recorded (``queued``) to its synthesis task picked up (``synthesis_start``)
    synthesis    synthesis_start -> synthesis_end (witness made, blob stored)
    to_prove     synthesis_end -> prove_pickup (prove task routed, sent, picked up)
    fetch        the prover's fetch_assignment stage
    prove        the prover's other stages (CPU backend: the whole proof)
    to_store     the last stage's end -> prove_end (combine, proof stored)
    to_agg       prove_end -> aggregate_start (chord unlock or the direct aggregation)
    aggregate    aggregate_start -> the job DONE (its state's finished_at: vk, public inputs,
                 verify, result stored, the state written)
    reply        finished_at -> the client holding the proof (AwaitProof noticing, reply)

Speed on a shared CPU machine varies with its load: read the rows against each other.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MINER = 1000
STEPS = ("submit", "to_synth", "synthesis", "to_prove", "fetch", "device_wait", "prove",
         "to_store", "to_agg", "aggregate", "reply")


def zkhive(*args, env, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cluster", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def settings_file(work: Path, post: str) -> Path:
    from cluster.ops.supervisor import free_ports

    redis_port, flower_port, metrics_port, gateway_port = free_ports(4)
    cfg = work / "zkhive.toml"
    cfg.write_text(f"""
[redis]
url = "redis://127.0.0.1:{redis_port}/0"
password = "bench-{os.urandom(4).hex()}"
[blobs]
dir = "{work / 'blobs'}"
[srs]
param_cache = "{work / 'keys'}"
preload = ["{post}"]
[flower]
port = {flower_port}
password = "bench-flower"
[metrics]
port = {metrics_port}
[gateway]
port = {gateway_port}
[deadlines]
winning_post_s = 900
""")
    return cfg


def steps(events: list[dict], t_call: float, t_submitted: float, t_done: float,
          t_finished: float | None) -> dict[str, float]:
    """The seconds of each step of STEPS from one job's timeline (one partition)."""
    first = lambda name: min((e["t"] for e in events if e["event"] == name), default=None)  # noqa: E731
    stages = [e for e in events if e["event"] == "stage"]
    fetch = sum(e["seconds"] for e in stages if e.get("stage") == "fetch_assignment")
    work = [e for e in stages if e.get("stage") != "fetch_assignment"]
    prove = sum(e["seconds"] for e in work)
    last_stage = max((e["end"] for e in stages), default=None)
    q, s0, s1 = first("queued"), first("synthesis_start"), first("synthesis_end")
    pick, pend = first("prove_pickup"), first("prove_end")
    # the state says DONE before the ``aggregated`` event is written: a poll can see it first
    a0, a1 = first("aggregate_start"), t_finished if t_finished is not None else first("aggregated")
    # a unit proved ahead has no pickup of its own: its first stage starts its device work
    pick = pick if pick is not None else min((e["start"] for e in stages), default=s1)
    d = lambda a, b: None if a is None or b is None else round(b - a, 4)  # noqa: E731
    # picked up, its assignment fetched, then waiting for the device: the partition another job
    # has on it (one proof at a time), the device lock
    fetched = max((e["end"] for e in stages if e.get("stage") == "fetch_assignment"), default=pick)
    begun = min((e["start"] for e in work), default=None)
    wait = None if begun is None or fetched is None else round(max(0.0, begun - fetched), 4)
    return {"submit": round(t_submitted - t_call, 4), "to_synth": d(q, s0), "synthesis": d(s0, s1),
            "to_prove": d(s1, pick), "fetch": round(fetch, 4), "device_wait": wait,
            "prove": round(prove, 4),
            "to_store": d(last_stage, pend), "to_agg": d(pend, a0), "aggregate": d(a0, a1),
            "reply": d(a1, t_done), "total": round(t_done - t_call, 4)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--post", default="winning-post-2k")
    ap.add_argument("--devices", default="cpu:0")
    ap.add_argument("--count", type=int, default=3)
    ap.add_argument("--out", default="winning_path_out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("ZKHIVE_BENCH_DIR", "/tmp/zkhive-winning-path"))
    work.mkdir(parents=True, exist_ok=True)

    import grpc

    from cluster.gateway.pb import proving_pb2 as pb
    from cluster.gateway.pb import proving_pb2_grpc as pb_grpc
    from cluster.pipeline.keys import KeyCache
    from gpu.groth16 import Proof
    from gpu.groth16 import verify as groth16_verify
    from synthesis import field
    from synthesis.circuits import get_circuit
    from synthesis.filecoin import bincode as bc
    from synthesis.filecoin import params as fp
    from synthesis.filecoin import post
    from synthesis.filecoin import post_job as pj
    from synthesis.filecoin import sector as fs

    circuit = get_circuit(args.post)
    keys = KeyCache(work / "keys")
    if keys.find(circuit, "vk") is None:
        t = time.time()
        keys.setup(circuit)
        print(f"{args.post}: key made in {time.time() - t:.1f} s (kept for later runs)", flush=True)
    vk = keys.load_vk(circuit)
    prm = post.get(args.post)
    sealed = fs.seal(fp.get("filecoin-2k"), bytes([1]) * 1016, fs.prover_id_from_miner(MINER), 234, bytes([2] * 32))
    registered = next(k for k, v in pj.REGISTERED_POST_PROOFS.items() if v == prm.registered_proofs[-1])

    cfg = settings_file(work, args.post)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKHIVE_")}
    env["ZKHIVE_STATE_DIR"] = str(work / "state")
    env["PYTHONPATH"] = str(ROOT)
    run_dir = work / "run"
    t = time.time()
    up = zkhive("up", "--run-dir", str(run_dir), "--devices", args.devices, "--config", str(cfg), env=env)
    rep: dict = {"post": args.post, "devices": args.devices, "up_s": round(time.time() - t, 1), "rows": []}
    print(up.stdout[-2000:], up.stderr[-2000:], flush=True)
    if up.returncode != 0:
        zkhive("down", "--run-dir", str(run_dir), "--config", str(cfg), env=env)
        return 1
    ok = True
    try:
        import redis as redis_lib

        from cluster.pipeline import timeline
        from cluster.pipeline.jobkeys import key as job_key
        from cluster.settings import load

        s = load(cfg)
        r = redis_lib.Redis.from_url(s.redis.url, password=s.redis.secret())
        channel = grpc.insecure_channel(f"unix://{(run_dir / 'gateway.sock').resolve()}")
        stub = pb_grpc.ProvingEngineStub(channel)
        stamp = int(time.time()) & 0xFFFF
        for k in range(args.count):
            randomness = bytes([(stamp >> 8) & 0xFF, stamp & 0xFF, k + 1]) + bytes(range(40, 68)) + b"\x1f"
            sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, randomness, sealed.sector_id, i))
                  for i in range(prm.sector_count)]
            raw = bc.write_post_sector_proof(prm, sp)
            public = post.public_inputs(prm, randomness, [(sealed.sector_id, field.from_bytes(raw[8:40]))]
                                        * prm.sector_count, 0, api_version=prm.api_version)
            req = pb.SubmitProofRequest(
                request_id=f"winpost-{MINER}-{randomness[:8].hex()}", proof_kind=pb.WINNING_POST,
                sector_size=prm.sector_size, registered_proof=registered, priority=pb.CRITICAL,
                vanilla_proofs=[raw], miner_id=MINER, randomness=randomness)
            t_call = time.time()
            sub = stub.SubmitProof(req, timeout=60)
            t_submitted = time.time()
            res = stub.AwaitProof(pb.AwaitProofRequest(job_id=sub.job_id), timeout=900)
            t_done = time.time()
            proof = bytes(res.proof)
            good = len(proof) == 192 and groth16_verify(vk, public, Proof.from_bytes(proof))
            bad = list(public)
            bad[0] = (bad[0] + 1) % field.MODULUS
            rejects = len(proof) == 192 and not groth16_verify(vk, bad, Proof.from_bytes(proof))
            events = timeline.load(r, sub.job_id)
            fin = r.hget(job_key(sub.job_id, "state"), "finished_at")
            (out / f"timeline-{k}.json").write_text(json.dumps(events, indent=1))
            row = steps(events, t_call, t_submitted, t_done, float(fin) if fin else None)
            row.update(verified=good, rejects_wrong_input=rejects, server_total_ms=res.total_ms)
            rep["rows"].append(row)
            ok = ok and good and rejects
            print(f"WinningPoSt {k}: " + ", ".join(f"{n} {row[n]}" for n in (*STEPS, "total"))
                  + f"; verified={good} rejects={rejects}", flush=True)
        channel.close()
    finally:
        down = zkhive("down", "--run-dir", str(run_dir), "--config", str(cfg), env=env)
        rep["down_rc"] = down.returncode
        (out / "winning_path.json").write_text(json.dumps(rep, indent=1))
    rows = rep["rows"]
    if len(rows) > 1:
        warm = {n: round(statistics.median(x[n] for x in rows[1:] if x[n] is not None), 4)
                for n in (*STEPS, "total")}
        print("warm median: " + json.dumps(warm), flush=True)
    print(json.dumps(rep, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
