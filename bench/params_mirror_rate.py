"""The .params mirror's host side without a device (issue 40 item 3): a synthetic .params (the
layout of a real one, random coordinates: the writer does not check points) of h = l = a = 2^N
G1 points, b_g1 2^N / 4 G1, b_g2 2^N / 4 G2, mirrored by ``gpu/groth16/mirror.py``
``write_mirror`` with 1..T threads, then every block of the mirror read and verified on one
thread (the reader's hashing). Page cache warm: the CPU's share, not the disk's.

    python3 bench/params_mirror_rate.py [--log2 21] [--threads 1,2] [--dir /tmp]
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2", type=int, default=21)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dir", default="/tmp")
    args = ap.parse_args()
    from gpu.groth16 import bellperson as bp, mirror as mr
    p = Path(args.dir) / f"mirror-rate-{os.getpid()}.params"
    out = p.with_suffix(".mirror")
    n = 1 << args.log2
    rng = np.random.default_rng(1)
    try:
        with open(p, "wb") as f:
            f.write(bytes(bp.IC_LEN_AT) + struct.pack(">I", 2) + b"\1" * 192)
            for kind, count in ((1, n), (1, n), (1, n), (1, n // 4), (2, n // 4)):
                f.write(struct.pack(">I", count))
                for lo in range(0, count, 1 << 18):
                    b = rng.integers(0, 256, (min(1 << 18, count - lo), 96 * kind), dtype=np.uint8)
                    b[:, 0] &= 0x1F
                    b[:, 1] |= 1
                    f.write(b.tobytes())
        size = p.stat().st_size
        for th in (int(x) for x in args.threads.split(",")):
            t = time.perf_counter()
            mr.write_mirror(p, out, threads=th)
            s = time.perf_counter() - t
            print(f"write, {th} thread(s): {size / 1e9:.2f} GB .params -> {out.stat().st_size / 1e9:.2f} "
                  f"GB mirror in {s:.2f} s ({size / 1e9 / s:.2f} GB/s of .params)")
        m = mr.open_mirror(out, p)
        t = time.perf_counter()
        with open(out, "rb") as f:
            for name, sec in m.sections.items():
                for _ in mr.read_blocks(m, name, f, 0, len(sec.blocks)):
                    pass
        s = time.perf_counter() - t
        body = sum(x.count * x.width for x in m.sections.values())
        print(f"read + SHA-256 every block, one thread: {body / 1e9:.2f} GB in {s:.2f} s "
              f"({body / 1e9 / s:.2f} GB/s)")
    finally:
        p.unlink(missing_ok=True)
        out.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
