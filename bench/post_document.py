"""A PoSt job without sealing: a full partition's vanilla proofs over one benchmark replica
(``post_job.benchmark_vanilla_proofs``), written as the job document ``zkhive submit`` takes (and
as the bincode files Curio would send), with the time of each step: the proofs, the document,
the checks a submission runs (bincode read, every path verified).

    .venv/bin/python bench/post_document.py window-post-32g --out /tmp/wpost32 [--sectors N]

A full window-post-32g partition's document is ~80 MB of JSON: raise ``limits.c1_max_bytes``
above it to submit it (docs/circuits.md).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/synthesis.py shadows the package


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("params", help="a PoSt set: window-post-32g, winning-post-64g, ...")
    ap.add_argument("--sectors", type=int, help="sectors of the partition (default: a full one)")
    ap.add_argument("--registered-proof", help="default: the set's last (WindowPoSt V1_2)")
    ap.add_argument("--partition", type=int, default=0)
    ap.add_argument("--out", help="write job.json and vanilla-<i>.bin here")
    args = ap.parse_args()
    from synthesis.filecoin import post
    from synthesis.filecoin import post_job as pj

    prm = post.get(args.params)
    rp = args.registered_proof or prm.registered_proofs[-1]
    n = args.sectors or pj.max_sectors(prm)
    randomness = bytes(range(1, 32)) + b"\x01"
    t = time.time()
    raws = pj.benchmark_vanilla_proofs(prm, randomness, list(range(1000, 1000 + n)), registered_proof=rp,
                                       partition_index=args.partition)
    print(f"{args.params} ({rp}): {n} vanilla proofs, {sum(map(len, raws))} bytes, {time.time() - t:.1f} s")
    t = time.time()
    doc = pj.document(prm, rp, randomness, 1000, raws, args.partition)
    text = json.dumps(doc)
    print(f"job document: {len(text)} bytes of JSON, {time.time() - t:.1f} s")
    t = time.time()
    pj.parse(prm, doc)
    print(f"checked (bincode read, every path and comm_r verified): {time.time() - t:.1f} s")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "job.json").write_text(text)
        for i, raw in enumerate(raws):
            (out / f"vanilla-{i}.bin").write_bytes(raw)
        print(f"wrote {out / 'job.json'} and {len(raws)} vanilla-<i>.bin (randomness {randomness.hex()})")


if __name__ == "__main__":
    main()
