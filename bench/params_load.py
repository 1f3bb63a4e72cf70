"""A 2^27 key in bellperson's format on one device (issue 24): written, streamed back, proved from.

    python3 bench/params_load.py filecoin-32g [--dir DIR] [--points curve|full] [--c1 C1.json] [--out params_load.json]
    python3 bench/params_load.py filecoin-32g --c1 c1.json

Two processes, so that each one's peak host memory is its own:
1. write: the key made on the device with a fixed seed (``CudaBackend.setup_resident``, the
   development ceremony), written from the device as ``<stem>.params`` and ``<stem>.vk``
   (``bellperson.write_params_from`` with gpu/cuda/params.py ``device_rows``: a million
   variables at a time, encoded on the device, the a/b queries filtered by the densities). ``<stem>``: Filecoin's v28 name
   for the filecoin sets, ``<set>.<digest16>`` otherwise. DIR: ``--dir`` if given, else the
   working directory when its disk holds the file (the estimate from the circuit's shape, +2 GiB),
   else /dev/shm (tmpfs, host memory: the device machine's 64 GiB disk cannot hold a ~47 GiB
   file beside the checkout); the report says which.
2. load: ``read_params`` (lengths and densities against the circuit) then ``CudaBackend.load``,
   which streams every query into the device bases (gpu/cuda/params.py fill: one chunk of
   variables in host memory at a time, every point checked on the curve on the device, with
   ``--points full`` in the subgroup too). Reported: load seconds, file size and GB/s, the
   process's peak RSS (VmHWM, reset just before the load through /proc/self/clear_refs) beside
   its RSS before, and the device bytes resident.
   Then partition 0 of a sealed benchmark sector (``--c1``, or made here) is
   proved from the loaded key, verified with the verifying key read back from the .vk, a wrong
   public input rejected; and with r, s fixed the proof is compared with the one from the key
   made on the device again with the same seed (byte for byte).
3. ``--keep``: leave the files (default: removed at the end).

``--phase write`` and ``--phase load`` (with ``--dir``) run one phase in this process and print
its JSON row: for a device session whose commands are limited to 10 minutes each.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GiB = 1 << 30
SEED = b"zkhive-bench-dev-ceremony"


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _circuit(name: str):
    from synthesis.circuits import get_circuit
    return get_circuit(name)


def _stem(circuit) -> str:
    from gpu.groth16.bellperson import FILECOIN_SETS, filecoin_stem
    if circuit.name in FILECOIN_SETS:
        return filecoin_stem(FILECOIN_SETS[circuit.name])
    return f"{circuit.name}.{circuit.digest()[:16]}"


def estimate_bytes(circuit) -> int:
    from gpu.groth16.bellperson import shape_of
    from gpu.native.compact import compact_of
    w = shape_of(compact_of(circuit) or circuit).want()
    return 868 + 96 * w["ic"] + 20 + 96 * (w["h"] + w["l"] + w["a"] + w["b_g1"]) + 192 * w["b_g2"]


def phase_write(args) -> dict:
    from gpu.backends import get_backend
    from gpu.cuda.params import device_rows
    from gpu.groth16 import bellperson as bp
    from gpu.native.compact import compact_of

    circuit = _circuit(args.params)
    cr = compact_of(circuit) or circuit
    be = get_backend("cuda:0")
    t = time.time()
    pk, vk = be.setup_resident(circuit, seed=SEED)
    row = {"setup_s": time.time() - t}
    res = be._on_device[pk.circuit_digest][0]
    path = Path(args.dir) / f"{_stem(circuit)}.params"
    t = time.time()
    bp.write_params_from(pk, cr, path, encoded=True,
                         rows=lambda name, lo, hi: device_rows(res.bases[name], lo, hi, encoded=True))
    row["write_s"] = time.time() - t
    bp.write_vk(pk, path.with_suffix(".vk"))
    row.update(params=str(path), params_bytes=path.stat().st_size,
               write_peak_rss_bytes=_status("VmHWM"))
    lay = bp.scan(path)
    row["sections"] = {n: s.count for n, s in lay.sections.items() if n in ("ic", "h", "l", "a", "b_g1", "b_g2")}
    return row


def phase_load(args) -> dict:
    from gpu import prove, verify
    from gpu.backends import get_backend
    from gpu.cuda.memory import DeviceBuffer
    from gpu.groth16 import bellperson as bp
    from gpu.native.compact import compact_of
    from synthesis import assignment, field as F

    circuit = _circuit(args.params)
    cr = compact_of(circuit) or circuit
    be = get_backend("cuda:0")
    path = Path(args.dir) / f"{_stem(circuit)}.params"
    row: dict = {"params": str(path), "params_bytes": path.stat().st_size, "points": args.points}
    cr.digest()
    bp.shape_of(cr)  # the densities (cached on the matrices): not part of the file's load time
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    row["rss_before_bytes"] = _status("VmRSS")
    live0 = DeviceBuffer.live
    t = time.time()
    pk = bp.read_params(path, cr, points=args.points)
    row["read_header_s"] = time.time() - t
    be.load(pk, cr)
    row["load_s"] = time.time() - t
    row["load_GBps"] = row["params_bytes"] / row["load_s"] / 1e9
    row["peak_rss_bytes"] = _status("VmHWM")
    row["device_resident_bytes"] = DeviceBuffer.live - live0
    print(f"  loaded {row['params_bytes'] / GiB:.1f} GiB in {row['load_s']:.1f} s "
          f"({row['load_GBps']:.2f} GB/s); peak RSS {row['peak_rss_bytes'] / GiB:.2f} GiB "
          f"(before {row['rss_before_bytes'] / GiB:.2f})", flush=True)
    from gpu.cuda.params import last_fill
    row["sections"] = last_fill  # read / upload / device seconds of each section
    if args.load_only:
        be.unload(pk.circuit_digest)
        return row

    if args.c1:
        doc = json.loads(Path(args.c1).read_text())
    else:
        from bench.gpu_prover import c1_doc
        doc = c1_doc(circuit, 5)
    c1 = circuit.parse_c1(doc)
    comp = circuit.synthesize_compact(c1, 0) if hasattr(circuit, "synthesize_compact") else circuit.synthesize(c1, 0)
    blob = assignment.encode(comp)
    pub = circuit.public_inputs(c1, 0)
    vk = bp.read_vk(path.with_suffix(".vk"), circuit=cr)
    r, s = F.random_element(), F.random_element()
    prove(pk, cr, blob, backend=be)  # warm-up
    t = time.time()
    proof = prove(pk, cr, blob, backend=be, r=r, s=s)
    row["prove_s"] = time.time() - t
    row["verifies"] = verify(vk, pub, proof)
    row["rejects_wrong_input"] = not verify(vk, [pub[0] ^ 1, *pub[1:]], proof)
    be.unload(pk.circuit_digest)
    made, _ = be.setup_resident(circuit, seed=SEED)
    row["same_proof_as_device_key"] = prove(made, cr, blob, backend=be, r=r, s=s).to_bytes() == proof.to_bytes()
    be.unload(made.circuit_digest)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("params", nargs="?", default="filecoin-32g")
    ap.add_argument("--dir", help="where the files go (default: here if the disk holds them, else /dev/shm)")
    ap.add_argument("--points", default="curve", choices=["none", "curve", "full"])
    ap.add_argument("--c1", help="a C1 JSON for the set (default: a sector sealed here)")
    ap.add_argument("--out", default="params_load.json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--load-only", action="store_true",
                    help="with --phase load: the load and its per-section seconds, no proof")
    ap.add_argument("--phase", choices=["write", "load"],
                    help="run one phase in this process (with --dir; keep the files between them): "
                         "each under the device tool's 10 minutes a command")
    args = ap.parse_args()
    import logging
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.phase:
        row = (phase_write if args.phase == "write" else phase_load)(args)
        print("RESULT " + json.dumps(row), flush=True)
        return 0

    circuit = _circuit(args.params)
    need = estimate_bytes(circuit)
    report: dict = {"params": args.params, "estimated_params_bytes": need}
    if args.dir is None:
        for cand in (Path.cwd() / "params-bench", Path("/dev/shm/params-bench")):
            cand.mkdir(parents=True, exist_ok=True)
            free = shutil.disk_usage(cand).free
            report.setdefault("free_bytes", {})[str(cand)] = free
            if free > need + 2 * GiB:
                args.dir = str(cand)
                break
            shutil.rmtree(cand, ignore_errors=True)
        if args.dir is None:
            print(f"no place holds {need / GiB:.1f} GiB: {report['free_bytes']}", file=sys.stderr)
            return 1
    report["dir"] = args.dir
    report["on_tmpfs"] = args.dir.startswith("/dev/shm")
    print(f"{args.params}: ~{need / GiB:.1f} GiB of .params into {args.dir}"
          f"{' (tmpfs: the disk cannot hold it)' if report['on_tmpfs'] else ''}", flush=True)
    base = [sys.executable, __file__, args.params, "--dir", args.dir, "--points", args.points]
    if args.c1:
        base += ["--c1", args.c1]
    try:
        for phase in ("write", "load"):
            t = time.time()
            res = subprocess.run(base + ["--phase", phase], capture_output=True, text=True)
            sys.stderr.write(res.stderr[-4000:])
            lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
            print("\n".join(ln for ln in res.stdout.splitlines() if not ln.startswith("RESULT ")), flush=True)
            if res.returncode != 0 or not lines:
                report[phase] = {"error": res.stderr.strip().splitlines()[-1:] or res.returncode}
                break
            report[phase] = json.loads(lines[-1][7:])
            report[phase]["wall_s"] = time.time() - t
            print(f"{phase}: " + json.dumps(report[phase]), flush=True)
    finally:
        if not args.keep:
            for p in Path(args.dir).glob("*"):
                if p.suffix in (".params", ".vk"):
                    p.unlink()
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    ok = report.get("load", {}).get("verifies") and report["load"].get("same_proof_as_device_key")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
