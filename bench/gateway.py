"""Gateway benchmark: what cuzk's gRPC door adds to a job, on a cluster from the real `zkhive up`.

    python bench/gateway.py --params porep-lite-4k --jobs 5 --calls 200
    python bench/gateway.py --params filecoin-2k --devices cuda:0 --setup-backend cuda --jobs 2   # the H200

Starts `zkhive up` (cpu:0 or --devices) in a temporary run directory with free ports, makes the
key if missing, then, one job at a time (each a fresh C1 input, the key resident):

1. ``cluster.client.submit(doc).result()``: the job's latency without the gateway;
2. the same kind of job through the gateway's ``Prove`` (a Commit2 input in ``vanilla_proof``),
   from a gRPC client built from our .proto, its N x 192 bytes verified with the key cache's vk;

and ``--calls`` of each small call (GetStatus, SubmitProof of an existing request id, GetMetrics).
Prints a table for docs/performance.md; stops the cluster.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def commit2_input(name: str, seed: int) -> tuple[dict, bytes]:
    """(the cluster's C1 document, a Commit2 input as lotus-bench writes one) of a fresh sector:
    porep-lite's own sectors, or a Filecoin sector sealed by synthesis/filecoin (its
    SealCommitPhase1Output in Phase1Out, as Curio sends it)."""
    from cluster.gateway.c2input import decode, wrap
    from synthesis.limits import DEFAULT

    s = seed.to_bytes(32, "little")
    if name.startswith("filecoin-"):
        from synthesis.filecoin import c1 as fc1
        from synthesis.filecoin import sector as fs
        from synthesis.filecoin.params import SETS

        prm = SETS[name]
        sealed = fs.seal(prm, os.urandom(prm.sector_size // 128 * 127), fs.prover_id_from_miner(1000), seed, s)
        raw = fc1.commit2_input(fc1.dumps(fc1.c1_document(sealed, bytes(reversed(s)))), seed, prm.sector_size)
        return decode(raw, DEFAULT).doc, raw
    from synthesis.porep import SETS, c1_document, generate
    doc = c1_document(generate(SETS[name], s), s)
    return doc, wrap(json.dumps(doc).encode(), seed, 2048)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="porep-lite-4k")
    ap.add_argument("--jobs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--devices", default="cpu:0")
    ap.add_argument("--setup-backend", default="cpu", choices=["cpu", "cuda", "auto"],
                    help="where the development key is made (cuda: filecoin-2k in seconds on a GPU, "
                         "cpu: ~8 minutes on 2 cores)")
    ap.add_argument("--param-cache", type=Path, default=None,
                    help="a key cache to use (and fill when empty) instead of a fresh one: a key "
                         "made once serves every run")
    args = ap.parse_args()

    import grpc
    import redis

    from cluster.gateway.pb import proving_pb2 as pb
    from cluster.gateway.pb import proving_pb2_grpc as pb_grpc
    from bench.up import settings_file, up
    from cluster.pipeline.keys import KeyCache
    from synthesis.circuits import get_circuit

    tmp = Path(tempfile.mkdtemp(prefix="zkhive-bench-gateway-"))
    keys = (args.param_cache or tmp / "keys").resolve()
    cfg = settings_file(tmp, keys, args.params)
    circuit = get_circuit(args.params)
    t0 = time.time()
    KeyCache(keys).setup(circuit, backend=args.setup_backend)
    print(f"keys for {args.params} in {time.time() - t0:.1f} s")
    # the settings come from cfg alone; the rest of the environment (ZKHIVE_CACHE_DIR with the
    # carried cubins above all: without it the H200's workers ran nvcc for minutes) goes along

    zk = [sys.executable, "-m", "cluster"]
    env = up(cfg, tmp, args.devices)
    try:
        from cluster.client import submit

        # the gateway's default: a unix socket in the run directory (`up` prints it)
        stub = pb_grpc.ProvingEngineStub(grpc.insecure_channel(f"unix://{tmp / 'run' / 'gateway.sock'}"))
        direct, gateway = [], []
        from gpu.groth16 import Proof, verify

        inputs = [commit2_input(args.params, 1000 + i) for i in range(2 * args.jobs)]
        vk = KeyCache(keys).load_vk(circuit)  # read back from the bellperson .vk
        for i in range(args.jobs):
            t = time.monotonic()
            submit(inputs[2 * i][0], job_id=f"direct-{i}").result(timeout=1800)
            direct.append(time.monotonic() - t)
            doc, raw = inputs[2 * i + 1]
            c2 = tmp / f"commit2-gw-{i}.json"  # the Commit2 input file as lotus-bench writes it,
            c2.write_bytes(raw)                 # and what Curio reads back and sends
            raw = c2.read_bytes()
            req = pb.SubmitProofRequest(request_id=f"gw-{i}", proof_kind=pb.POREP_SEAL_COMMIT, vanilla_proof=raw)
            t = time.monotonic()
            res = stub.Prove(pb.ProveRequest(submit=req), timeout=1800).result
            gateway.append(time.monotonic() - t)
            assert res.status == pb.AwaitProofResponse.COMPLETED, res.error_message
            c1 = circuit.parse_c1(doc)
            n = circuit.num_partitions()
            assert len(res.proof) == 192 * n
            ok = all(verify(vk, circuit.public_inputs(c1, k), Proof.from_bytes(res.proof[192 * k:192 * (k + 1)]))
                     for k in range(n))
            print(f"gw-{i}: {n} x 192 bytes, verified: {ok}; timings (ms): queue {res.queue_wait_ms}, "
                  f"srs {res.srs_load_ms}, synthesis {res.synthesis_ms}, gpu {res.gpu_compute_ms}, total {res.total_ms}")
            assert ok
        small = {}
        again = pb.SubmitProofRequest(request_id="gw-0", proof_kind=pb.POREP_SEAL_COMMIT, vanilla_proof=inputs[1][1])
        for name, call in (("GetStatus", lambda: stub.GetStatus(pb.GetStatusRequest())),
                           ("SubmitProof (existing id)", lambda: stub.SubmitProof(again)),
                           ("GetMetrics", lambda: stub.GetMetrics(pb.GetMetricsRequest()))):
            times = []
            for _ in range(args.calls):
                t = time.monotonic()
                call()
                times.append(time.monotonic() - t)
            small[name] = times
        med = statistics.median
        print(f"\n{args.params}, {args.jobs} jobs each way, one at a time, devices {args.devices}:")
        print("| path | median job latency (s) | min (s) | max (s) |\n|---|---|---|---|")
        for name, xs in (("cluster.client.submit + result", direct), ("gateway Prove (Commit2 input)", gateway)):
            print(f"| {name} | {med(xs):.3f} | {min(xs):.3f} | {max(xs):.3f} |")
        print(f"\ngateway - direct, median: {med(gateway) - med(direct):+.3f} s")
        print(f"\n| call ({args.calls} each) | median (ms) | p90 (ms) |\n|---|---|---|")
        for name, xs in small.items():
            xs = sorted(xs)
            print(f"| {name} | {1000 * med(xs):.2f} | {1000 * xs[int(0.9 * len(xs))]:.2f} |")
    finally:
        subprocess.run(zk + ["down", "--run-dir", str(tmp / "run")], cwd=ROOT, env=env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
