"""A 32 GiB-shaped partition on one device (issue 16): the key made on the device, proved from
the compact assignment, verified; setup and prove stage times; device memory against the plan.

    python3 bench/gpu_big.py --params filecoin-2k,filecoin-32g --runs 3 --out big.json [--compare-host filecoin-2k]

Per set: the compact matrices (built or loaded), a sealed sector's C1 and partition 0's compact
assignment (its blob, as the cluster stores it), ``CudaBackend.setup_resident`` with a fixed seed
(stage times from ``last_setup``), one warm-up proof, ``--runs`` timed proofs from the blob (each
stage from device events), the last verified (and a wrong public input rejected). Memory: the
bytes this process holds in DeviceBuffers (gpu/cuda/memory.py: after setup, and the peak during
setup and during a proof) beside gpu/budget.py's ProofShape plan, and the driver's free memory.
``--compare-host``: for that set also the issue-8 path (host Lagrange and transposed products
over the full R1CS, device fixed-base) with the same seed must give the same verifying key byte
for byte, and the full-vector assignment must give the same five sums as the blob.
"""
from __future__ import annotations

import argparse
import os
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GiB = 1 << 30
SEED = b"zkhive-bench-dev-ceremony"


def measure(be, prove, verify, pk, vk, pub, circuit, blob, runs: int) -> dict:
    """``runs`` timed proofs: wall medians, per-stage medians, per-stream busy (the union of
    that stream's stage intervals) against the device span (first stage start to last end)."""
    from gpu.timing import StageTimer
    totals, stages, busy, spans = [], {}, {}, []
    for _ in range(runs):
        timer = StageTimer()
        t = time.time()
        proof = prove(pk, circuit, blob, backend=be, timer=timer)
        totals.append(time.time() - t)
        for k, v in timer.totals().items():
            stages.setdefault(k, []).append(v)
        dev = [r for r in timer.records if r.get("device")]
        spans.append(max(r["end"] for r in dev) - min(r["start"] for r in dev))
        for name in {r.get("stream", "main") for r in dev}:
            iv = sorted((r["start"], r["end"]) for r in dev if r.get("stream", "main") == name)
            tot, cur_s, cur_e = 0.0, None, None
            for s_, e_ in iv:
                if cur_e is None or s_ > cur_e:
                    tot += (cur_e - cur_s) if cur_e is not None else 0.0
                    cur_s, cur_e = s_, e_
                else:
                    cur_e = max(cur_e, e_)
            tot += (cur_e - cur_s) if cur_e is not None else 0.0
            busy.setdefault(name, []).append(tot)
        streams = {r["stage"]: r.get("stream", "main") for r in dev}
    # ZKHIVE_MSM_PROFILE=1 (a variant): the H query's dense engine, stage by stage, last proof
    split = getattr(be, "_split", None)
    dense = getattr(split, "_dense", {}).get("g1") if split is not None else None
    profile = dict(getattr(dense, "last_profile", {}) or {}) \
        if os.environ.get("ZKHIVE_MSM_PROFILE") == "1" else {}
    return dict(prove_s=statistics.median(totals), prove_all_s=totals, h_profile_ms=profile,
                matvec_planes=bool(getattr(be, "last_matvec_planes", False)),
                stages_s={k: statistics.median(v) for k, v in stages.items()},
                stage_streams=streams, device_span_s=statistics.median(spans),
                stream_busy_s={k: statistics.median(v) for k, v in busy.items()},
                msm_paths=dict(be.last_msm), verifies=verify(vk, pub, proof),
                rejects_wrong_input=not verify(vk, [pub[0] ^ 1, *pub[1:]], proof))


def matvec_probe(be, pk) -> dict:
    """Each of A z, B z, C z alone over the resident compact matrices (any z does
    for timing; every limb 1 here, not zeros), CUDA events, median of 3; gathers counted as 32 bytes a nonzero."""
    from gpu.cuda.memory import DeviceBuffer
    res = be._on_device[pk.circuit_digest][0]
    if res.compact is None:
        return {}
    cuda = be.cuda
    out = {}
    nv, m = res.num_vars, res.compact.rows
    with DeviceBuffer(32 * nv, what="probe z") as z, DeviceBuffer(32 * m, what="probe out") as o:
        cuda.memset_d32(z.ptr, 1, 8 * nv)  # every limb 1: a canonical nonzero value
        for name in "abc":
            p = res.compact.parts[name]
            ts = []
            for _ in range(3):
                a, b = cuda.Event(), cuda.Event()
                a.record()
                res.compact.spmv(name, z, o)
                b.record()
                b.synchronize()
                ts.append(b.time_since(a))
            ms = statistics.median(ts)
            out[name] = {"ms": ms, "nnz": int(p["nnz"]), "rows": int(p["rows"]),
                         "gather_gbps": 32 * int(p["nnz"]) / ms / 1e6}
    return out


def alloc_probe(be, pk) -> dict:
    """What the proof's own buffers cost the host to allocate and free (prove_terms' buf: z,
    a, b, c, the split MSM's lists), with the device idle, median of 3: the time a proof's
    stages wait on cuMemAlloc / cuMemFree, which no stage event shows (if it is more than a
    few ms, a pool of the working set's buffers would give it back)."""
    from gpu.cuda.memory import DeviceBuffer
    res = be._on_device[pk.circuit_digest][0]
    n, nv = res.n, res.num_vars
    sizes = [32 * nv, 32 * n, 32 * n, 32 * n, 4 * max(n, nv)]
    alloc, free = [], []
    for _ in range(3):
        be.cuda.Context.synchronize()
        t = time.perf_counter()
        bufs = [DeviceBuffer(b, what="alloc probe") for b in sizes]
        alloc.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        for b in bufs:
            b.free()
        free.append((time.perf_counter() - t) * 1e3)
    return {"bytes": sum(sizes), "alloc_ms": statistics.median(alloc),
            "free_ms": statistics.median(free)}


def report(row: dict, tag: str) -> None:
    print(f"  {tag}prove median {row['prove_s'] * 1e3:.1f} ms over {len(row['prove_all_s'])} "
          f"({', '.join(f'{x * 1e3:.0f}' for x in row['prove_all_s'])}); device span "
          f"{row['device_span_s'] * 1e3:.1f} ms, busy per stream "
          + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in row["stream_busy_s"].items()) + "; stages "
          + ", ".join(f"{k} {v * 1e3:.1f} ({row['stage_streams'].get(k, '-')})"
                      for k, v in row["stages_s"].items())
          + f"; verifies={row['verifies']} rejects_wrong_input={row['rejects_wrong_input']}", flush=True)
    if row.get("h_profile_ms"):
        print(f"    {tag}H query's dense engine (ms, summed over its chunks; events between "
              f"launches): " + ", ".join(f"{k} {v:.1f}" for k, v in row["h_profile_ms"].items()),
              flush=True)
    print(f"    {tag}matvec read z from {'the planes' if row.get('matvec_planes') else 'z'}; "
          f"paths: " + "; ".join(
        f"{q}: {i['path']} 0={i.get('zeros', '-')} 1={i.get('ones', '-')} other={i.get('tail', '-')} "
        f"chunks={i['chunks']}" for q, i in row["msm_paths"].items()), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", default="filecoin-2k")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="gpu_big.json")
    ap.add_argument("--compare-host", default="", help="sets to check against the host-part setup")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME:ENV=V,ENV=V: also --runs proofs with those variables set (e.g. "
                         "serial:ZKHIVE_MSM_OVERLAP=0); each row verified")
    ap.add_argument("--refuse-on-gib", type=float, default=0,
                    help="first ask a ledger of a card this size (GiB) to make the key: must refuse")
    args = ap.parse_args()

    from bench.gpu_prover import c1_doc
    from gpu import prove, verify
    from gpu.backends import get_backend
    from gpu.budget import ProofShape
    from gpu.cuda.compact import DeviceCompactR1CS
    from gpu.cuda.memory import DeviceBuffer
    from gpu.timing import StageTimer
    from synthesis import assignment
    from synthesis.circuits import get_circuit

    be = get_backend("cuda:0")
    free0, total = be.memory_info()
    print(f"device: {be.device}, free {free0 / GiB:.2f} of {total / GiB:.2f} GiB, "
          f"ledger capacity {be.capacity() / GiB:.2f} GiB", flush=True)
    results = []
    ok = True
    for name in args.params.split(","):
        row: dict = {"params": name}
        circuit = get_circuit(name)
        t = time.time()
        cr = circuit.compact_r1cs()
        row["matrices_s"] = time.time() - t
        t = time.time()
        digest = cr.digest()
        row["digest_s"] = time.time() - t
        row.update(constraints=cr.num_constraints, variables=cr.num_variables, nnz=cr.nnz,
                   compact_host_bytes=cr.nbytes, compact_device_bytes=DeviceCompactR1CS.estimate_bytes(cr))
        print(f"{name}: {cr.num_constraints:,} constraints, {cr.num_variables:,} variables, "
              f"{cr.nnz:,} nonzeros; compact matrices {row['matrices_s']:.1f} s (digest {row['digest_s']:.1f} s), "
              f"on the device {row['compact_device_bytes'] / GiB:.3f} GiB", flush=True)
        t = time.time()
        c1 = circuit.parse_c1(c1_doc(circuit, 5))
        row["sector_s"] = time.time() - t
        t = time.time()
        comp = circuit.synthesize_compact(c1, 0)
        row["synthesis_s"] = time.time() - t
        t = time.time()
        blob = assignment.encode(comp)
        row["encode_s"] = time.time() - t
        row["blob_bytes"] = len(blob)
        row["witness"] = comp.stats()
        pub = circuit.public_inputs(c1, 0)
        print(f"  sector {row['sector_s']:.1f} s, synthesis {row['synthesis_s']:.2f} s, blob "
              f"{len(blob) / 1e6:.1f} MB ({row['witness']})", flush=True)
        del comp

        if args.refuse_on_gib:
            # the same key on a card of that size (its ledger): refused before any allocation
            from gpu.backends.cuda import CAPACITY_SHARE, CudaBackend
            from gpu.budget import DeviceMemoryExhausted
            small = CudaBackend(0, capacity=int(args.refuse_on_gib * GiB * CAPACITY_SHARE))
            live = DeviceBuffer.live
            try:
                small.setup_resident(circuit, seed=SEED)
                row["refused_on_small_card"] = None
            except DeviceMemoryExhausted as e:
                row["refused_on_small_card"] = str(e)
            row["small_card_allocated"] = DeviceBuffer.live - live
            print(f"  on a {args.refuse_on_gib} GiB card: {row['refused_on_small_card']} "
                  f"(device bytes left allocated: {row['small_card_allocated']})", flush=True)
            ok &= row["refused_on_small_card"] is not None and row["small_card_allocated"] == 0
        DeviceBuffer.reset_peak()
        live0 = DeviceBuffer.live
        t = time.time()
        pk, vk = be.setup_resident(circuit, seed=SEED)
        row["setup_s"] = time.time() - t
        row["setup_stages_s"] = dict(be.last_setup)
        row["domain"] = pk.domain_size
        row["setup_peak_bytes"] = DeviceBuffer.peak - live0
        row["resident_bytes"] = DeviceBuffer.live - live0
        shape = ProofShape(cr.num_variables, cr.num_aux, pk.domain_size, row["compact_device_bytes"])
        row["plan_resident_bytes"] = shape.resident_bytes()
        row["plan_working_set_bytes"] = shape.working_set_bytes()
        print(f"  setup on the device {row['setup_s']:.1f} s (2^{pk.domain_size.bit_length() - 1}): "
              + ", ".join(f"{k} {v:.2f}" for k, v in row["setup_stages_s"].items()), flush=True)
        print(f"  resident {row['resident_bytes'] / GiB:.2f} GiB (plan {row['plan_resident_bytes'] / GiB:.2f}), "
              f"setup peak {row['setup_peak_bytes'] / GiB:.2f} GiB", flush=True)

        t = time.time()
        proof = prove(pk, circuit, blob, backend=be)  # warm-up: workspaces (the NTT tables came with the load)
        row["first_prove_s"] = time.time() - t
        row["first_verifies"] = verify(vk, pub, proof)
        # the buffers kept for the next proof (gpu/cuda/memory.py BufferPool) are the proofs'
        # working set, not what the key holds
        pooled = getattr(getattr(be, "_pool", None), "nbytes", 0)
        row["pooled_after_first_proof_bytes"] = pooled
        row["held_after_first_proof_bytes"] = DeviceBuffer.live - live0 - pooled
        print(f"  held after the first proof (NTT tables made): {row['held_after_first_proof_bytes']:,} "
              f"bytes = {row['held_after_first_proof_bytes'] / GiB:.2f} GiB (plan "
              f"{row['plan_resident_bytes'] / GiB:.2f})", flush=True)
        print(f"  first proof {row['first_prove_s']:.2f} s, verifies={row['first_verifies']}", flush=True)
        DeviceBuffer.reset_peak()
        before = DeviceBuffer.live - pooled
        measured = measure(be, prove, verify, pk, vk, pub, circuit, blob, args.runs)
        row.update(measured)
        row["prove_peak_working_bytes"] = DeviceBuffer.peak - before
        row["device_peak_bytes"] = DeviceBuffer.peak - live0
        free_now, _ = be.memory_info()
        row["driver_used_bytes"] = total - free_now
        report(row, "")
        print(f"  proof working set peak {row['prove_peak_working_bytes'] / GiB:.2f} GiB "
              f"(plan {row['plan_working_set_bytes'] / GiB:.2f}); all DeviceBuffers peak "
              f"{row['device_peak_bytes'] / GiB:.2f} GiB; driver: {row['driver_used_bytes'] / GiB:.2f} GiB used",
              flush=True)
        res = be._on_device[pk.circuit_digest][0]
        if res.compact is not None:
            row["long_rows"] = {k: res.compact.long_rows(k) for k in "abc"}
            print(f"  rows of more than 32 terms (a warp each), header / all copies: {row['long_rows']}",
                  flush=True)
        if hasattr(be, "_drop_pool"):  # the probes allocate a proof's buffers of their own
            be._drop_pool()
        row["matvec_probe"] = matvec_probe(be, pk)
        print("  matvec probe (each product alone, CUDA events, median of 3): " + ", ".join(
            f"{k} {v['ms']:.1f} ms ({v['nnz'] / 1e6:.0f} M nonzeros, {v['rows'] / 1e6:.1f} M rows, "
            f"{v['gather_gbps']:.0f} GB/s of z gathers)" for k, v in row["matvec_probe"].items()),
            flush=True)
        row["alloc_probe"] = alloc_probe(be, pk)
        print(f"  alloc probe (a proof's z, a, b, c and lists, {row['alloc_probe']['bytes'] / GiB:.1f} "
              f"GiB, device idle, median of 3): alloc {row['alloc_probe']['alloc_ms']:.2f} ms, free "
              f"{row['alloc_probe']['free_ms']:.2f} ms", flush=True)
        row["variants"] = {}
        for spec in args.variant:
            vname, _, assigns = spec.partition(":")
            env = dict(a.split("=", 1) for a in assigns.split(",") if a)
            old_env = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                v = measure(be, prove, verify, pk, vk, pub, circuit, blob, args.runs)
            finally:
                for k, x in old_env.items():
                    if x is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = x
            v["env"] = env
            row["variants"][vname] = v
            report(v, f"[{vname}] ")
            ok &= v["verifies"] and v["rejects_wrong_input"]
        ok &= row["verifies"] and row["rejects_wrong_input"] and row["first_verifies"]

        if name in args.compare_host.split(","):
            from gpu import setup as host_setup
            t = time.time()
            z = assignment.decode(blob, n=cr.num_variables)
            tb = be.prove_terms(pk, circuit, blob, StageTimer())
            tz = be.prove_terms(pk, circuit, z, StageTimer())
            row["blob_equals_vector"] = all(getattr(tb, k) == getattr(tz, k) for k in ("a", "b_g1", "b_g2", "l", "h"))
            full = circuit.r1cs()
            t = time.time()
            pk_h, vk_h = host_setup(full, backend="cuda:0", seed=SEED)
            row["host_setup_s"] = time.time() - t
            row["vk_identical"] = vk_h.to_bytes() == vk.to_bytes()
            # the host-made key with the compact matrices on the device: same points
            be.unload(pk.circuit_digest)
            t = time.time()
            be.load(pk_h, circuit)
            row["host_key_load_s"] = time.time() - t
            th = be.prove_terms(pk_h, circuit, blob, StageTimer())
            row["host_key_same_terms"] = all(getattr(tb, k) == getattr(th, k) for k in ("a", "b_g1", "b_g2", "l", "h"))
            print(f"  compare: blob == vector terms {row['blob_equals_vector']}; host-part setup "
                  f"{row['host_setup_s']:.1f} s, vk identical {row['vk_identical']}, same terms from the "
                  f"host-made key {row['host_key_same_terms']}", flush=True)
            ok &= row["blob_equals_vector"] and row["vk_identical"] and row["host_key_same_terms"]
            be.unload(pk_h.circuit_digest)
            del pk_h, full, z
        results.append(row)
        Path(args.out).write_text(json.dumps(results, indent=1, default=str))
        be.unload(pk.circuit_digest)
        del pk, vk, blob
    print("\n| set | constraints | domain | setup s | prove ms | " + " | ".join(
        ["upload", "matvec", "ntt_h", "msm_a", "msm_b_g1", "msm_b_g2", "msm_l", "msm_h", "combine"])
        + " | resident GiB | proof peak GiB |")
    for row in results:
        st = row["stages_s"]
        print(f"| {row['params']} | {row['constraints']:,} | 2^{row['domain'].bit_length() - 1} | {row['setup_s']:.1f} | "
              f"{row['prove_s'] * 1e3:.1f} | " + " | ".join(f"{st.get(k, 0) * 1e3:.1f}" for k in
              ["upload", "matvec", "ntt_h", "msm_a", "msm_b_g1", "msm_b_g2", "msm_l", "msm_h", "combine"])
              + f" | {row['resident_bytes'] / GiB:.2f} | {row['prove_peak_working_bytes'] / GiB:.2f} |")
    print("ALL OK" if ok else "SOMETHING FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
