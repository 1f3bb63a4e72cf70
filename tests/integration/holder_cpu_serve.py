"""A key holder process over the CPU backend, for the protocol and lifecycle tests of
cluster/pipeline/keyholder.py on machines without a GPU: the real server, socket and request
handling; ``hold`` answers the CPU backend's one-line refusal (nothing to lend through CUDA IPC).

    python tests/integration/holder_cpu_serve.py SOCKET_PATH
"""
from __future__ import annotations

import signal
import sys
from pathlib import Path

# the checkout's root first: run as a script, this file's directory is sys.path[0]
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import threading
from concurrent.futures import ThreadPoolExecutor


def main(path: str) -> None:
    from cluster.pipeline.keyholder import HolderServer, KeyHolder
    from cluster.pipeline.keys import KeyCache
    from cluster.pipeline.prover import Device, Prover

    pool = ThreadPoolExecutor(max_workers=1)
    prover = pool.submit(Prover, Device("cpu", 0), KeyCache("/nonexistent-keys")).result()
    server = HolderServer(path, KeyHolder(Device("cpu", 0), prover, pool))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("serving", flush=True)
    done.wait()
    server.shutdown()
    server.server_close()


if __name__ == "__main__":
    main(sys.argv[1])
