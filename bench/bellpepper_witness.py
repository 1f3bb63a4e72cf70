"""Values-mode cost of the bellpepper gadgets for one 32 GiB Filecoin partition's witness.

Runs the gadget calls a StackedCircuit partition makes (rust-fil-proofs' per-challenge work:
11 labels of 1,248-byte SHA-256 preimages with 14 parent labels decomposed by to_bits_le, a
30-level SHA-256 TreeD path, 15 column hashes (arity 11), 15 TreeC paths and one TreeR path of
10 octal Poseidon hashes) through ``synthesis.bellpepper`` in values mode, one batch row per
challenge (18), and prints CPU and wall seconds per part. Random field elements stand in for the
sector's data: the cost does not depend on the values.

    .venv/bin/python bench/bellpepper_witness.py [--challenges 18] [--threads N]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if sys.path[0] == str(Path(__file__).resolve().parent):
    sys.path[0] = str(ROOT)  # bench/synthesis.py would shadow the synthesis package
else:
    sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--challenges", type=int, default=18)
    ap.add_argument("--layers", type=int, default=11)
    ap.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for the kernels")
    args = ap.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)

    import numpy as np

    from synthesis import field as F
    from synthesis.bellpepper.core import Synth
    from synthesis.bellpepper import multipack as mp
    from synthesis.bellpepper import neptune as nep
    from synthesis.bellpepper import num
    from synthesis.bellpepper import sha256 as sh
    from synthesis.bellpepper.boolean import Boolean
    from synthesis.bellpepper.uint32 import UInt32
    from synthesis.bellpepper.uint64 import UInt64

    B, L = args.challenges, args.layers
    rng = np.random.default_rng(1)

    def rand_fr(n=1):
        v = F.vec_random(B * n).reshape(B, n, 4)
        v[..., 3] &= np.uint64((1 << 62) - 1)  # below 2^254, as labels are
        return v

    def rev_bytes(bits):
        """storage-proofs-core util::reverse_bit_numbering: bit order reversed in each byte."""
        return [b for lo in range(0, len(bits), 8) for b in bits[lo:lo + 8][::-1]]

    # warm the templates and kernels (shape recording happens once per process)
    warm = Synth(batch=1)
    x = num.alloc_num(warm, lambda: rand_fr()[:1, 0])
    sh.sha256(warm, num.to_bits_le(warm, x) + [Boolean.constant(0)] * 257)
    for arity in (8, 11):  # neptune's preprocessed constants: ~0.3 s of Python once per process
        nep.poseidon_hash(warm, [x] * arity)
    times: dict[str, list[float]] = {}

    def timed(name, fn):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        t = times.setdefault(name, [0.0, 0.0])
        t[0] += time.process_time() - c0
        t[1] += time.perf_counter() - w0
        return out

    # template warm-up for the label pattern: one full label at B = 1 outside the timing
    s = Synth(batch=B, blocks=True)
    c_start, w_start = time.process_time(), time.perf_counter()
    rid = num.alloc_num(s, lambda: rand_fr()[:, 0])
    rid_bits = rev_bytes(timed("to_bits_le", lambda: num.to_bits_le(s, rid)))
    node = UInt64.alloc(s, lambda: rng.integers(0, 1 << 30, B, dtype=np.uint64))
    for layer in range(1, L + 1):
        labels = [num.alloc_num(s, lambda: rand_fr()[:, 0]) for _ in range(14)]
        parents = [rev_bytes(timed("to_bits_le", lambda p=p: num.to_bits_le(s, p))) for p in labels]
        pre = rid_bits + [Boolean.constant(0)] + UInt32.constant(layer).into_bits_be() + node.to_bits_be()
        pre += [Boolean.constant(0)] * (512 - len(pre))
        for j in range(37):
            pre += parents[j % 14] + [Boolean.constant(0)]
        out = timed("sha256 labels", lambda: sh.sha256(s, pre))
        timed("pack_bits", lambda: mp.pack_bits(s, rev_bytes(out)[:254]))
    cur = num.alloc_num(s, lambda: rand_fr()[:, 0])
    for level in range(30):
        sib = num.alloc_num(s, lambda: rand_fr()[:, 0])
        bits = timed("to_bits_le", lambda: rev_bytes(num.to_bits_le(s, cur)) + [Boolean.constant(0)]
                     + rev_bytes(num.to_bits_le(s, sib)) + [Boolean.constant(0)])
        out = timed("sha256 TreeD", lambda: sh.sha256(s, bits))
        cur = timed("pack_bits", lambda: mp.pack_bits(s, rev_bytes(out)[:254]))
    cols = [[num.alloc_num(s, lambda: rand_fr()[:, 0]) for _ in range(L)] for _ in range(15)]
    hashes = [timed("poseidon columns (11)", lambda c=c: nep.poseidon_hash(s, c)) for c in cols]
    for h in hashes + [hashes[0]]:  # 15 TreeC paths + the TreeR path
        cur = h
        for level in range(10):
            sibs = [num.alloc_num(s, lambda: rand_fr()[:, 0]) for _ in range(7)]
            cur = timed("poseidon paths (8)", lambda: nep.poseidon_hash(s, [cur] + sibs))
    cpu, wall = time.process_time() - c_start, time.perf_counter() - w_start
    nvars = sum(v.bits.shape[1] if hasattr(v, "bits") else (v.vals.shape[1] if hasattr(v, "vals") else 1)
                for v in s.values)
    print(f"challenges {B}, layers {L}: {nvars:,} variables a challenge, threads "
          f"{os.environ.get('OMP_NUM_THREADS', 'all')} of {os.cpu_count()}")
    for k, (c, w) in times.items():
        print(f"  {k:24s} cpu {c:6.2f} s  wall {w:6.2f} s")
    print(f"  {'total':24s} cpu {cpu:6.2f} s  wall {wall:6.2f} s")


if __name__ == "__main__":
    main()
