"""How a 2^27 assignment travels (issue 16, Deliver 5), step by step, on this machine:

    python bench/assignment_travel.py [--n 130629241] [--full] [--dir DIR]

A synthetic assignment with sdr-32g's measured mix (51.5% zeros, 47.3% ones, 1.13% other:
docs/performance.md, issue 19) of n variables, encoded as synthesis stores it; then what the
cluster does with it: put into the ``dir`` blob store (write + rename), get (read,
size and sha256 checked), ``check_encoded`` (what the prove task does now before handing the
bytes to a backend that expands them), and for comparison ``decode_compact`` (kinds + values) and,
with ``--full``, ``decode`` to the 32-byte vector (what the prove task did before: 4.2 GB).
Each step timed once (wall, this process; no other load controlled).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=130_629_241)
    ap.add_argument("--full", action="store_true", help="also decode to the (n, 4) Fr vector (4.2 GB at 2^27)")
    ap.add_argument("--dir", default=None, help="blob store directory (default: a temporary one)")
    args = ap.parse_args()

    from cluster.pipeline.assignments import check_encoded
    from cluster.pipeline.blobs import DirBlobStore
    from synthesis import assignment

    rng = np.random.default_rng(1)
    n = args.n
    t = time.perf_counter()
    kinds = np.where(rng.random(n, dtype=np.float32) < 0.515, 0, 1).astype(np.uint8)
    other = rng.choice(n, size=int(n * 0.0113), replace=False)
    kinds[other] = 2
    m = len(other)
    fes = rng.integers(0, 2**63, size=(m, 4), dtype=np.uint64)
    fes[:, 3] >>= 3  # below r
    c = assignment.Compact(kinds, fes)
    rows = [("make the synthetic assignment", time.perf_counter() - t, "")]
    t = time.perf_counter()
    blob = assignment.encode(c)
    rows.append(("encode (synthesis)", time.perf_counter() - t, f"{len(blob) / 1e6:.1f} MB"))
    del c
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        store = DirBlobStore(Path(d))
        t = time.perf_counter()
        ref = store.put(blob, kind="assignment")
        rows.append(("blob store put (dir: write, rename)", time.perf_counter() - t, ref.short()))
        t = time.perf_counter()
        got = store.get(ref)
        rows.append(("blob store get (read, size + sha256 checked)", time.perf_counter() - t, ""))
    t = time.perf_counter()
    check_encoded(got, n)
    rows.append(("check_encoded (the prove task now)", time.perf_counter() - t, "bytes to the backend"))
    t = time.perf_counter()
    cc = assignment.decode_compact(got, n=n)
    rows.append(("decode_compact (kinds + values)", time.perf_counter() - t, f"{(cc.kinds.nbytes + cc.fes.nbytes) / 1e6:.0f} MB"))
    del cc
    if args.full:
        t = time.perf_counter()
        z = assignment.decode(got, n=n)
        rows.append(("decode to the Fr vector (the prove task before)", time.perf_counter() - t, f"{z.nbytes / 1e9:.2f} GB"))
        del z
    print(f"n = {n:,} variables, {m:,} other ({m / n:.2%}); blob {len(blob):,} bytes")
    print(f"{'step':<52} {'seconds':>8}  note")
    for name, s, note in rows:
        print(f"{name:<52} {s:>8.3f}  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
