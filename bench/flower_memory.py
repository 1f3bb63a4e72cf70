"""Flower's memory under unauthenticated request bodies (issue 39): peak and after, measured.

    python bench/flower_memory.py                        # this checkout's `zkhive flower`
    python bench/flower_memory.py --code /path/to/other  # another checkout's (before/after)

Starts a Redis and ``zkhive flower`` (basic auth) from the checkout ``--code``, then sends
``--requests`` POSTs at once, each announcing and sending a ``--mb`` MB body without
credentials, and reads Flower's resident memory every 5 ms (psutil): idle, peak, 3 s after.
Prints one table row.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def post(port: int, mb: int) -> bytes:
    head = (f"POST /api/task/send-task/zkhive.submit HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {mb * 1_000_000}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        s.sendall(head)
        chunk = b" " * 1_000_000
        try:
            for _ in range(mb):
                s.sendall(chunk)
            return s.recv(64)
        except OSError:  # closed by the server: it reads no more
            return b"(closed)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose Flower runs")
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--requests", type=int, default=16)
    args = ap.parse_args()

    import psutil

    from cluster.ops.readiness import flower_check, redis_check
    from bench.rss import PeakRss
    from bench.up import bare_redis, stop
    from cluster.ops.supervisor import free_port

    tmp = Path(tempfile.mkdtemp(prefix="zkhive-bench-flowermem-"))
    fport = free_port()
    redis, rport, env = bare_redis(tmp, args.code)
    env.update(ZKHIVE_FLOWER__PORT=str(fport), ZKHIVE_FLOWER__PASSWORD="bench-pw")
    fl = None
    try:
        while redis_check("127.0.0.1", rport, None):
            time.sleep(0.1)
        fl = subprocess.Popen([sys.executable, "-m", "cluster", "flower"], cwd=tmp, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while flower_check(f"http://127.0.0.1:{fport}"):
            if fl.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("Flower did not start")
            time.sleep(0.2)
        proc = psutil.Process(fl.pid)
        with PeakRss(proc) as m:
            answers: list[bytes] = []
            senders = [threading.Thread(target=lambda: answers.append(post(fport, args.mb)))
                       for _ in range(args.requests)]
            t0 = time.monotonic()
            for s in senders:
                s.start()
            for s in senders:
                s.join()
            took = time.monotonic() - t0
            time.sleep(3)
        idle, peak = m.idle, [m.peak]
        after = proc.memory_info().rss
        codes = sorted({a[:12].decode(errors="replace") for a in answers})
        print(f"Flower of {args.code}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print("| case | idle MiB | peak MiB | 3 s after MiB | answers | s |\n|---|---|---|---|---|---|")
        print(f"| {args.requests} x {args.mb} MB, no credentials | {idle / 2**20:.0f} | {peak[0] / 2**20:.0f} | "
              f"{after / 2**20:.0f} | {', '.join(codes)} | {took:.1f} |")
    finally:
        stop(fl, redis)
    return 0


if __name__ == "__main__":
    sys.exit(main())
