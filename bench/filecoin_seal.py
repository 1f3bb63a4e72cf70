"""Time Filecoin sealing stage by stage: a real 2 KiB / 8 MiB seal, or a benchmark sector, then its
C1 (written, read back, every proof checked).

    .venv/bin/python bench/filecoin_seal.py filecoin-8m [--out DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/synthesis.py shadows the package


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("params")
    ap.add_argument("--out", help="also save the sector here")
    args = ap.parse_args()
    from synthesis.filecoin import c1 as C
    from synthesis.filecoin import graph as G
    from synthesis.filecoin import params as P
    from synthesis.filecoin import sector as S
    from synthesis.filecoin.trees import Tree, column_hashes

    prm = P.get(args.params)
    ticket = hashlib.sha256(b"bench ticket").digest()[:31] + b"\x01"
    seed = hashlib.sha256(b"bench seed").digest()[:31] + b"\x01"
    prover = S.prover_id_from_miner(1000)
    t0 = time.perf_counter()
    times = {}
    if prm.benchmark:
        sector = S.seal_benchmark(prm, prover, 1, ticket, seed)
        times["seal (benchmark sector)"] = time.perf_counter() - t0
    else:
        data = os.urandom(prm.sector_size // 128 * 127)
        t = time.perf_counter()
        padded = S.vec(S.fr32_pad(data, prm.sector_size))
        times["fr32 pad"] = time.perf_counter() - t
        nodes = np.arange(prm.nodes, dtype=np.uint64)
        t = time.perf_counter()
        comm_d = S.raw(Tree.build((2,) * prm.tree_d_depth, nodes, padded, sha=True).root_vec)
        times["TreeD"] = time.perf_counter() - t
        rid = S.replica_id(prover, 1, ticket, comm_d, prm.porep_id)
        g = G.Graph.for_params(prm)
        t = time.perf_counter()
        g.drg(nodes)
        times["DRG parents (numpy ChaCha8)"] = time.perf_counter() - t
        t = time.perf_counter()
        G.exp_parents_range(0, prm.nodes, prm.nodes, prm.porep_id, prm.api_version)
        times["expander parents (C++)"] = time.perf_counter() - t
        t = time.perf_counter()
        cache = g.cache()
        times["parents cache (both)"] = time.perf_counter() - t
        t = time.perf_counter()
        labels = S.label_all(g, rid, prm.layers, cache)
        times["labels (C++)"] = time.perf_counter() - t
        t = time.perf_counter()
        cols = np.ascontiguousarray(labels.transpose(1, 0, 2))
        column_hashes(cols)
        times["column hashes"] = time.perf_counter() - t
        t = time.perf_counter()
        sector = S.Sector(prm, prover, 1, ticket, rid, nodes, padded, cols, benchmark=False)
        times["TreeD + TreeC + TreeR (Sector)"] = time.perf_counter() - t
    t = time.perf_counter()
    raw = C.dumps(C.c1_document(sector, seed))
    times["C1 write"] = time.perf_counter() - t
    t = time.perf_counter()
    prm2, c1, _ = C.load(C.commit2_input(raw, 1, prm.sector_size))
    times["Commit2 read + parse"] = time.perf_counter() - t
    t = time.perf_counter()
    C.verify(prm2, c1)
    times["verify every proof"] = time.perf_counter() - t
    if args.out:
        sector.save(args.out)
    for k, v in times.items():
        print(f"{k:34s} {v:8.2f} s")
    print(f"{prm.name}: comm_r {sector.comm_r.hex()}, C1 {len(raw)} bytes, total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
