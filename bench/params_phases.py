"""The host phases of a prover's start from a Filecoin `.params`, measured without a device
(issue 40 item 3: which of the ready prover's seconds are not reading the file).

    python3 bench/params_phases.py [--params filecoin-32g] [--dir DIR] [--out OUT]

At the real shape: the circuit's compact matrices (read from $ZKHIVE_CACHE_DIR/r1cs, built
once when absent), the densities (``shape_of``), the a and b density indices the old way
(np.flatnonzero(...).astype(int32)) and the new (``density_index``), the circuit digest; then a
*sparse* .params of the real size (a real verifying-key head: the six points and IC's 328
points made from known scalars, the lengths of the circuit, the points' bytes a hole: nothing
is written but the head, the disk holds ~100 KB) through ``scan`` (the lengths) and the
verifying key's checks (every point, two pairings), the reader's phases as the prover times
them (gpu/phases.py). Also the imports a prover makes before its start. Reported: each
phase's seconds, the serial host work before section a the old way and now, peak RSS.
The device's phases (context, cubins, sections, tail engines) are in the prover's log of a
device run (bench/params_up.py: ``start_phases``)."""
from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(rep: dict, name: str, fn):
    t = time.perf_counter()
    out = fn()
    rep[name] = round(time.perf_counter() - t, 3)
    print(f"  {name:<44} {rep[name]:8.3f} s", flush=True)
    return out


def sparse_params(path: Path, shape) -> int:
    """A .params of the shape's real size whose only written bytes are the head (a valid
    verifying key) and the five length fields; the points are a hole (reads give zeros)."""
    from gpu.groth16 import bellperson as bp, curve
    from gpu.groth16.points import PointArray
    from py_arkworks_bls12381 import G1Point, G2Point, Scalar

    g1, g2 = curve.g1(), curve.g2()
    k = {"alpha_g1": 3, "beta_g1": 5, "beta_g2": 5, "gamma_g2": 7, "delta_g1": 11, "delta_g2": 11}
    want = shape.want()
    with open(path, "wb") as f:
        for name, kind in bp.VK_FIXED:
            p = (g1 if kind == 1 else g2) * Scalar(k[name])
            arr = PointArray.from_points(G1Point if kind == 1 else G2Point, [p])
            f.write(bp.to_uncompressed(arr.raw, kind).tobytes())
        ic = PointArray.from_points(G1Point, [g1 * Scalar(i + 13) for i in range(want["ic"])])
        f.write(struct.pack(">I", want["ic"]) + bp.to_uncompressed(ic.raw, 1).tobytes())
        at = f.tell()
        for name, kind in bp.QUERIES:
            f.seek(at)
            f.write(struct.pack(">I", want[name]))
            at += 4 + want[name] * bp.WIDTH[kind]
        f.truncate(at)
    return at


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", default="filecoin-32g")
    ap.add_argument("--dir", default="/tmp/zkhive-params-phases")
    ap.add_argument("--out", default=None, help="write the report here (JSON)")
    args = ap.parse_args()
    rep: dict = {"params": args.params, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 "cpus": os.cpu_count(), "load_avg": os.getloadavg()[0]}
    print(f"{args.params}: host phases of a prover's start (load average {rep['load_avg']:.1f})",
          flush=True)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import cluster.pipeline.lifecycle, cluster.pipeline.prover, "
                    "gpu.groth16.bellperson, gpu.backends, synthesis.circuits"], check=True, cwd=ROOT)
    rep["interpreter and imports (a fresh process)"] = round(time.perf_counter() - t, 3)
    print(f"  {'interpreter and imports (a fresh process)':<44} "
          f"{rep['interpreter and imports (a fresh process)']:8.3f} s", flush=True)

    import numpy as np

    from gpu import phases
    from gpu.backends.forms import circuit_digest
    from gpu.groth16 import bellperson as bp
    from gpu.native.compact import compact_of
    from synthesis.circuits import get_circuit

    c = timed(rep, "circuit", lambda: get_circuit(args.params))
    cr = timed(rep, "matrices (host; read from the r1cs cache)", lambda: compact_of(c))
    shape = timed(rep, "circuit shape (densities)", lambda: bp._shape(cr))
    old = timed(rep, "density index a+b, flatnonzero+astype (before)",
                lambda: [np.flatnonzero(d).astype(np.int32) for d in (shape.a_density, shape.b_density)])
    new = timed(rep, "density index a+b, density_index (now)",
                lambda: [bp.density_index(d) for d in (shape.a_density, shape.b_density)])
    assert all(np.array_equal(x, y) for x, y in zip(old, new))
    del old
    timed(rep, "circuit digest", lambda: circuit_digest(cr))
    cr.__dict__["_bellperson_shape"] = shape
    shape.__dict__["_index"] = {"a": new[0], "b": new[1]}

    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{bp.filecoin_stem(bp.FILECOIN_SETS[args.params])}.params" \
        if args.params in bp.FILECOIN_SETS else d / f"{args.params}.params"
    try:
        size = sparse_params(path, shape)
        rep["params_bytes"] = size
        rep["params_blocks_on_disk_bytes"] = os.stat(path).st_blocks * 512
        rec = phases.Phases()
        with phases.collect(rec):   # the reader's phases as the prover times them
            t = time.perf_counter()
            bp.read_params(path, c, points="curve")
            rep["read_params (all)"] = round(time.perf_counter() - t, 3)
        rep["reader phases"] = rec.as_dict()
        for k, v in rec.as_dict().items():
            print(f"  read_params: {k:<31} {v:8.3f} s", flush=True)
        # now: the prover's load (later=True) with no Shape cached: the reader returns after
        # the scan and the vk; the densities finish on their thread while h and l would stream
        cr.__dict__.pop("_bellperson_shape", None)
        rec = phases.Phases()
        with phases.collect(rec):
            t = time.perf_counter()
            pk = bp.read_params(path, c, points="curve", later=True)
            rep["read_params(later=True) returns"] = round(time.perf_counter() - t, 3)
            pk.a_query.resolve()
            pk.b_g1_query.resolve()
            rep["densities ready (beside h and l)"] = round(time.perf_counter() - t, 3)
        rep["reader phases, later"] = rec.as_dict()
        print(f"  read_params(later=True) returns in {rep['read_params(later=True) returns']:.3f} s;"
              f" the densities ready beside the reads at {rep['densities ready (beside h and l)']:.3f}"
              " s", flush=True)
    finally:
        path.unlink(missing_ok=True)
    before = (rep["circuit shape (densities)"] + rep["density index a+b, flatnonzero+astype (before)"]
              + rep["circuit digest"] + rep["reader phases"]["params scan (lengths)"]
              + rep["reader phases"]["verifying key"])
    rep["serial host work before section a, before"] = round(before, 3)
    rep["serial host work before section h, now"] = round(
        rep["reader phases, later"]["params scan (lengths)"] + rep["reader phases, later"]["verifying key"], 3)
    rep["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"serial host work before section a, the old way: {before:.2f} s (shape, index, digest, "
          f"scan, vk); now before section h: {rep['serial host work before section h, now']:.2f} s "
          "(scan, vk; the matrices and digest beside the CUDA context, the densities beside h and "
          f"l); peak RSS {rep['peak_rss_bytes'] / 2**30:.2f} GiB", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rep, indent=1))
    print("RESULT " + json.dumps(rep), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
