"""SnapDeals (EmptySectorUpdate) compact matrices: build, save and load time, bytes.

    python bench/snap_matrices.py empty-sector-update-32GiB empty-sector-update-poseidon-32GiB

Per parameter set (``synthesis.filecoin.update.SETS``), into an empty cache directory (one
process: the peak RSS printed is the largest set's): ``UpdateCircuit.compact_r1cs()`` (record the
header and the unrepeated challenges, cut and map the block, save), ``CompactR1CS.load`` of the
file, the layout, rows and nonzeros of header and block, host bytes, file bytes, the device
form's bytes as ``gpu/native/compact.py`` counts them, and what the full CSR would take (40 bytes a
nonzero). One JSON object a set.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sets", nargs="+", help="update parameter sets, e.g. empty-sector-update-32GiB")
    args = ap.parse_args()
    os.environ["ZKHIVE_CACHE_DIR"] = tempfile.mkdtemp(prefix="zkhive-snap-bench-")
    from gpu.native import compact as host
    from synthesis.compact import CompactR1CS
    from synthesis.filecoin import snap_circuit as sc
    from synthesis.filecoin import update as upd
    for name in args.sets:
        prm = upd.get(name)
        c = sc.UpdateCircuit(name, prm)
        t = time.time()
        cr = c.compact_r1cs()
        built = time.time() - t
        t = time.time()
        CompactR1CS.load(c.matrices_path())
        loaded = time.time() - t
        ps = [host.parts(getattr(cr, k)) for k in "abc"]
        mats = (cr.a, cr.b, cr.c)
        print(json.dumps({
            "set": name, "layout": sc.layout(prm), "constraints": cr.num_constraints,
            "aux": cr.num_aux, "nonzeros": cr.nnz,
            "header_rows": cr.a.header.rows, "header_nnz": sum(m.header.nnz for m in mats),
            "block_rows": cr.a.block.rows, "block_nnz": sum(m.block.nnz for m in mats),
            "copies": cr.a.copies, "build_save_s": round(built, 1), "load_s": round(loaded, 1),
            "host_bytes": cr.nbytes, "file_bytes": c.matrices_path().stat().st_size,
            "device_bytes": sum(host.nbytes(p, with_map=i == 0) for i, p in enumerate(ps)),
            "full_csr_bytes": cr.nnz * 40,
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
        }), flush=True)


if __name__ == "__main__":
    main()
