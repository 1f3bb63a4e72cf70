"""Many callers at once (issue 39): N concurrent gRPC SubmitProof and M threads of the Python
client against one cluster from the real ``zkhive up``.

    python bench/concurrent_submit.py                          # 1,000 gRPC + 200 client threads
    python bench/concurrent_submit.py --grpc 64 --threads 32   # what CI runs (with squares jobs)

Every gRPC call is sent at once (``SubmitProof.future``, over 10 channels), every client thread
released at once (a barrier); meanwhile a poller in a process of its own asks GetStatus every
50 ms. Each call must be answered: a job id, or a one-line refusal (RESOURCE_EXHAUSTED from a full
gateway, DispatchBusy from a pool taken too long); none may still be waiting after ``--answer-s``.
Then every job created is awaited and its N x 192 bytes verified here against the key cache's
verifying key and the public inputs of its own C1 input. Prints the counts and GetStatus's
latencies (max must be <= 100 ms).

The cluster: ``zkhive up --devices cpu:0`` from a settings file of its own (free ports, the
gateway's defaults: 64 threads, queue 64), porep-lite-4k (``--params``), its key made once.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: calls in flight on one gRPC channel (one HTTP/2 connection)
PER_CHANNEL = 100


@dataclass
class Report:
    grpc_jobs: dict = field(default_factory=dict)         # request id -> job id
    grpc_refused: dict = field(default_factory=dict)      # request id -> (code name, one line)
    grpc_other: dict = field(default_factory=dict)        # request id -> what else happened
    client_jobs: dict = field(default_factory=dict)
    client_refused: dict = field(default_factory=dict)
    client_other: dict = field(default_factory=dict)
    unanswered: int = 0                                   # calls or threads still waiting
    status_ms: list = field(default_factory=list)         # GetStatus latencies during the load
    status_failed: list = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        st = sorted(self.status_ms) or [float("nan")]
        codes: dict[str, int] = {}
        for code, _ in list(self.grpc_refused.values()) + list(self.client_refused.values()):
            codes[code] = codes.get(code, 0) + 1
        return (f"gRPC: {len(self.grpc_jobs)} job ids, {len(self.grpc_refused)} refused, "
                f"{len(self.grpc_other)} other; client: {len(self.client_jobs)} jobs, "
                f"{len(self.client_refused)} refused, {len(self.client_other)} other; "
                f"refusals {codes or '{}'}; unanswered {self.unanswered}; all answered in "
                f"{self.seconds:.1f} s; GetStatus x{len(self.status_ms)} during the load: "
                f"median {statistics.median(st):.1f} ms, p90 {st[int(0.9 * (len(st) - 1))]:.1f} ms, "
                f"max {st[-1]:.1f} ms, over 100 ms {sum(x > 100 for x in st)}, "
                f"failed {len(self.status_failed)}")


def load(target: str, grpc_inputs: list[tuple[str, bytes]], client_inputs: list[tuple[str, dict]], *,
         token: str | None = None, answer_s: float = 300.0, status_every_s: float = 0.05) -> Report:
    """Send every gRPC SubmitProof (request id, vanilla_proof) and start every client thread
    (job id, C1 document) at once; return when all are answered or ``answer_s`` has passed.
    The client threads use this process's Celery app (``cluster.pipeline.app.configure`` first)."""
    import grpc

    from cluster.client import submit
    from cluster.errors import JobError
    from cluster.gateway.pb import proving_pb2 as pb
    from cluster.gateway.pb import proving_pb2_grpc as pb_grpc

    meta = [("authorization", f"Bearer {token}")] if token else None
    rep = Report()
    channels = [grpc.insecure_channel(target) for _ in range(max(1, -(-len(grpc_inputs) // PER_CHANNEL)))]
    stubs = [pb_grpc.ProvingEngineStub(c) for c in channels]
    for s in stubs:  # connected before the clock starts
        s.GetStatus(pb.GetStatusRequest(), metadata=meta, timeout=30)

    # GetStatus is asked from a process of its own, as Curio asks it: its latency is the
    # gateway's, not this process's threads' wait for the interpreter lock
    ctx = multiprocessing.get_context("spawn")
    stop, results = ctx.Event(), ctx.Queue()
    poller = ctx.Process(target=poll_status, args=(target, meta, status_every_s, stop, results), daemon=True)

    barrier = threading.Barrier(len(client_inputs) + 1)

    def client(job_id, doc):
        barrier.wait()
        try:
            rep.client_jobs[job_id] = submit(doc, job_id=job_id).job_id
        except JobError as e:
            rep.client_refused[job_id] = (type(e).__name__, str(e))
        except Exception as e:  # noqa: BLE001 - counted, shown
            rep.client_other[job_id] = f"{type(e).__name__}: {e}"

    poller.start()
    if not results.get(timeout=120):  # its channel connected and answered once
        raise RuntimeError("the GetStatus poller could not reach the gateway")
    threads = [threading.Thread(target=client, args=inp, daemon=True) for inp in client_inputs]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    futures = {}
    barrier.wait()
    for i, (rid, raw) in enumerate(grpc_inputs):
        req = pb.SubmitProofRequest(request_id=rid, proof_kind=pb.POREP_SEAL_COMMIT, vanilla_proof=raw)
        futures[rid] = stubs[i % len(stubs)].SubmitProof.future(req, metadata=meta, timeout=answer_s)
    end = t0 + answer_s
    for rid, f in futures.items():
        try:
            rep.grpc_jobs[rid] = f.result(timeout=max(0.0, end - time.monotonic())).job_id
        except grpc.FutureTimeoutError:
            rep.unanswered += 1
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                rep.unanswered += 1
            elif e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and len((e.details() or "").splitlines()) == 1:
                rep.grpc_refused[rid] = (e.code().name, e.details())
            else:
                rep.grpc_other[rid] = f"{e.code().name}: {e.details()}"
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    rep.unanswered += sum(t.is_alive() for t in threads)
    rep.seconds = time.monotonic() - t0
    stop.set()
    rep.status_ms, rep.status_failed = results.get(timeout=60)
    poller.join(10)
    for c in channels:
        c.close()
    return rep


def poll_status(target: str, meta, every_s: float, stop, results) -> None:
    """(in a process of its own) GetStatus every ``every_s`` until ``stop``; puts True once
    connected, then ([latency ms], [failures])."""
    import grpc

    from cluster.gateway.pb import proving_pb2 as pb
    from cluster.gateway.pb import proving_pb2_grpc as pb_grpc

    ms, failed = [], []
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.ProvingEngineStub(channel)
        stub.GetStatus(pb.GetStatusRequest(), metadata=meta, timeout=30)
        results.put(True)
        while not stop.is_set():
            t = time.monotonic()
            try:
                stub.GetStatus(pb.GetStatusRequest(), metadata=meta, timeout=5)
                ms.append(1000 * (time.monotonic() - t))
            except grpc.RpcError as e:
                failed.append(f"{e.code().name}: {e.details()}")
            stop.wait(every_s)
    results.put((ms, failed))


def await_and_verify(keys: Path, circuit, docs: dict[str, dict], job_ids, timeout_s: float) -> tuple[int, list]:
    """Wait for every job and verify its proof against its own C1 input; (verified, problems)."""
    from cluster.client import get_job
    from cluster.pipeline.keys import KeyCache
    from gpu.groth16 import Proof, verify

    vk = KeyCache(keys).load_vk(circuit)
    ok, bad = 0, []
    end = time.monotonic() + timeout_s
    for job_id in job_ids:
        try:
            res = get_job(job_id).result(timeout=max(1.0, end - time.monotonic()))
        except Exception as e:  # noqa: BLE001 - reported
            bad.append(f"{job_id}: {type(e).__name__}: {e}")
            continue
        c1 = circuit.parse_c1(docs[job_id])
        if all(verify(vk, circuit.public_inputs(c1, k), Proof.from_bytes(p))
               for k, p in enumerate(res.partition_proofs())):
            ok += 1
        else:
            bad.append(f"{job_id}: does not verify")
    return ok, bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grpc", type=int, default=1000, help="concurrent gRPC SubmitProof calls")
    ap.add_argument("--threads", type=int, default=200, help="threads calling cluster.client.submit")
    ap.add_argument("--params", default="porep-lite-4k")
    ap.add_argument("--devices", default="cpu:0")
    ap.add_argument("--answer-s", type=float, default=300.0, help="every call answered within this")
    ap.add_argument("--prove-s", type=float, default=3600.0, help="every job created proved within this")
    ap.add_argument("--param-cache", type=Path, default=None, help="a key cache to use (and fill when empty)")
    args = ap.parse_args()

    from cluster.gateway.c2input import wrap
    from bench.up import settings_file, up
    from cluster.pipeline.keys import KeyCache
    from synthesis.circuits import get_circuit
    from synthesis.porep import SETS, c1_document, generate

    tmp = Path(tempfile.mkdtemp(prefix="zkhive-bench-concurrent-"))
    keys = (args.param_cache or tmp / "keys").resolve()
    cfg = settings_file(tmp, keys, args.params, gateway_port=True)
    circuit = get_circuit(args.params)
    t0 = time.time()
    KeyCache(keys).setup(circuit)
    docs: dict[str, dict] = {}
    grpc_inputs, client_inputs = [], []
    for i in range(args.grpc + args.threads):
        seed = (100_000 + i).to_bytes(32, "little")
        doc = c1_document(generate(SETS[args.params], seed), seed)
        if i < args.grpc:
            docs[f"grpc-{i}"] = doc
            grpc_inputs.append((f"grpc-{i}", wrap(json.dumps(doc).encode(), i, 2048)))
        else:
            docs[f"client-{i}"] = doc
            client_inputs.append((f"client-{i}", doc))
    print(f"keys and {len(docs)} inputs in {time.time() - t0:.1f} s", flush=True)

    zk = [sys.executable, "-m", "cluster"]
    env = up(cfg, tmp, args.devices)
    try:
        # the gateway's default: the unix socket in up's run directory (Curio dials unix://)
        target = f"unix://{(tmp / 'run' / 'gateway.sock').resolve()}"
        rep = load(target, grpc_inputs, client_inputs, answer_s=args.answer_s)
        print(rep.summary(), flush=True)
        for what in (rep.grpc_other, rep.client_other, rep.status_failed):
            for line in list(what.items() if isinstance(what, dict) else what)[:5]:
                print("  ", line)
        for kind, refused in (("gRPC", rep.grpc_refused), ("client", rep.client_refused)):
            if refused:
                print(f"  a {kind} refusal: {next(iter(refused.values()))}")
        created = {**rep.grpc_jobs, **rep.client_jobs}
        t1 = time.monotonic()
        ok, bad = await_and_verify(keys, circuit, docs, created, args.prove_s)
        print(f"{len(created)} jobs created: {ok} verified, {len(bad)} not, in {time.monotonic() - t1:.0f} s", flush=True)
        for line in bad[:10]:
            print("  ", line)
        st = max(rep.status_ms, default=float("inf"))
        good = (rep.unanswered == 0 and not rep.grpc_other and not rep.client_other and not bad
                and not rep.status_failed and st <= 100.0)
        print("PASS" if good else "FAIL")
        return 0 if good else 1
    finally:
        subprocess.run(zk + ["down", "--run-dir", str(tmp / "run")], cwd=ROOT, env=env)


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # not sys.exit: celery's result consumer (one AsyncResult per task sent) tries to reconnect
    # to the Redis `down` just stopped at the interpreter's exit, and the process never ended
    os._exit(rc)
