"""The operator's path (issue 40, item 0): Filecoin's `.params` in FIL_PROOFS_PARAMETER_CACHE,
the page cache dropped, `zkhive up --devices cuda:0` with `[srs] preload = ["porep-32g"]`, then a
job through it, every partition verified with the `.vk` file.

    python3 bench/params_up.py --params filecoin-32g --dir DIR [--jobs 1] [--out OUT] [--keep] [--mirror]

1. write (skipped with --no-write when DIR holds the files): `bench/params_load.py SET --phase
   write --dir DIR` in its own process: the key made on the device with the bench seed, written
   from the device under Filecoin's v28 name (.params, .vk; no .meta, as paramfetch leaves them);
   meanwhile --jobs benchmark sectors are sealed here and their C1 inputs made.
2. the page cache dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`: root only; the report
   says whether it was, and the page cache's size before and after).
3. `zkhive up --devices cuda:0 --synthesis-workers 1` with FIL_PROOFS_PARAMETER_CACHE=DIR,
   ZKHIVE_SRS__PRELOAD='["porep-32g"]' (cuzk's id), an empty param_cache and no in-process key:
   the prover reads the file, the ledger admits the key (gpu/budget.py admit_shape, the rule of
   the key made in process) and it reports ready. Reported: `up`'s wall, the prover's "ready in"
   and "loaded the proving key ... in" seconds, the prover's peak host RSS (VmHWM of its
   process), the resident bytes the ledger booked.
4. --jobs jobs submitted at once; every partition's proof verified with the verifying key read
   from DIR's .vk (`bellperson.read_vk`), a wrong public input rejected; the seconds a job.
5. `zkhive down`; the files removed unless --keep.
6. with --mirror (issue 40 item 3): the first prover writes the .params' compressed mirror in
   the background after its load (waited for after the jobs: ``mirror_progress`` in `zkhive
   status --json`); `down`, the page cache dropped again, `up` again: the prover reads the
   mirror (half the bytes); its ready, peak RSS and a verified job in the report's "mirror".
   ZKHIVE_PARAMS_MIRROR=1 with --mirror (mirrors are opt-in); without, 0: the .params alone.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

GiB = 1 << 30


def zkhive(*args, env=None, timeout=None, check=True) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "cluster.cli", *args], capture_output=True,
                         text=True, env=env, timeout=timeout)
    if check and res.returncode != 0:
        raise RuntimeError(f"zkhive {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n"
                           f"{res.stderr[-3000:]}")
    return res


def cached_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Cached:"):
            return int(line.split()[1]) * 1024
    return 0


def drop_page_cache() -> bool:
    subprocess.run(["sync"], check=False)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def hwm(pid: int) -> int:
    """Peak resident set of a process and its children (VmHWM), bytes."""
    import psutil
    best = 0
    try:
        procs = [psutil.Process(pid)] + psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    for p in procs:
        try:
            for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    best = max(best, int(line.split()[1]) * 1024)
        except OSError:
            pass
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", default="filecoin-32g")
    ap.add_argument("--preload", default="porep-32g", help="the id in [srs] preload (cuzk's)")
    ap.add_argument("--dir", required=True, help="FIL_PROOFS_PARAMETER_CACHE for the run")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--devices", default="cuda:0")
    ap.add_argument("--partition-workers", type=int, default=8)
    ap.add_argument("--no-write", action="store_true", help="DIR already holds the files")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--ready-timeout", type=float, default=400)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default="params_up_out")
    ap.add_argument("--mirror", action="store_true",
                    help="after the first up (which writes the .params' compressed mirror in the "
                         "background: waited for), down, the page cache dropped, up again reading "
                         "the mirror: ready, peak RSS and a verified job again (report key mirror)")
    ap.add_argument("--arch", default="sm_90", help="--mirror: the arch mirror.cu is compiled for "
                                                    "before the second up (H100 and H200: sm_90)")
    ap.add_argument("--mirror-timeout", type=float, default=600,
                    help="seconds to wait for the mirror after the first up's jobs")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pdir = Path(args.dir)
    pdir.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("ZKHIVE_BENCH_DIR", "/tmp/zkhive-params-up"))
    rep: dict = {"params": args.params, "preload": args.preload, "dir": str(pdir),
                 "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}

    from cluster_sdr32g import sectors
    from gpu.groth16 import bellperson as bp
    from synthesis.circuits import get_circuit

    circuit = get_circuit(args.params)
    t = time.time()
    circuit.compact_r1cs() if hasattr(circuit, "compact_r1cs") else None
    rep["matrices_s"] = time.time() - t
    compiler = None
    if args.mirror:   # the mirror's kernel module into the cubin cache now, not inside the 2nd up
        compiler = subprocess.Popen(
            [sys.executable, "-c", "import sys; from gpu.cuda.loader import compile_cubin, "
             "module_path; compile_cubin(module_path('mirror'), sys.argv[1])", args.arch],
            cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    writer = None
    if not args.no_write:
        writer = subprocess.Popen([sys.executable, str(ROOT / "bench" / "params_load.py"),
                                   args.params, "--phase", "write", "--dir", str(pdir)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t = time.time()
    docs = sectors(args.params, args.jobs)
    rep["sectors_s"] = time.time() - t
    if writer is not None:
        so, se = writer.communicate()
        lines = [ln for ln in so.splitlines() if ln.startswith("RESULT ")]
        if writer.returncode != 0 or not lines:
            print(so[-3000:], se[-3000:], flush=True)
            rep["error"] = f"write failed ({writer.returncode})"
            (out / "params_up.json").write_text(json.dumps(rep, indent=1))
            return 1
        rep["write"] = json.loads(lines[-1][7:])
        print("write: " + json.dumps(rep["write"]), flush=True)
    stem = bp.filecoin_stem(bp.FILECOIN_SETS[args.params])
    params, vk_path = pdir / f"{stem}.params", pdir / f"{stem}.vk"
    rep["params_bytes"] = params.stat().st_size
    assert not params.with_suffix(".meta").exists()

    rep["page_cache_before_drop"] = cached_bytes()
    rep["page_cache_dropped"] = drop_page_cache()
    rep["page_cache_after_drop"] = cached_bytes()
    print(f"page cache {rep['page_cache_before_drop'] / GiB:.1f} GiB -> "
          f"{rep['page_cache_after_drop'] / GiB:.1f} GiB (dropped: {rep['page_cache_dropped']})",
          flush=True)

    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKHIVE_SRS__")}
    env.update(FIL_PROOFS_PARAMETER_CACHE=str(pdir), PYTHONUNBUFFERED="1",
               ZKHIVE_SRS__PRELOAD=json.dumps([args.preload]), ZKHIVE_SRS__IN_PROCESS="[]",
               ZKHIVE_SRS__PARAM_CACHE=str(work / "keys"), ZKHIVE_BLOBS__DIR=str(work / "blobs"),
               ZKHIVE_STATE_DIR=str(work / "state"),
               ZKHIVE_WORKER__PARTITION_WORKERS=str(args.partition_workers))
    env.setdefault("OMP_NUM_THREADS", "2")
    # the mirror is opt-in (cluster/pipeline/keys.py mirrors_enabled): --mirror turns it on
    env["ZKHIVE_PARAMS_MIRROR"] = "1" if args.mirror else "0"
    # what the mirror may take (mirror.plan_sections: the sections that fit beside the .params)
    work.mkdir(parents=True, exist_ok=True)
    rep["disk_free_before_up_bytes"] = shutil.disk_usage(work).free
    print(f"disk: {rep['disk_free_before_up_bytes'] / 1e9:.1f} GB free beside the .params",
          flush=True)
    rc = 1
    try:
        first = up_and_prove(args, env, work / "up", circuit, docs, vk_path,
                             wait_mirror=args.mirror)
        rep.update(first)
        rc = first.get("rc", 1)
        if compiler is not None:
            t = time.time()
            so, _ = compiler.communicate()
            rep["mirror_module_compile_wait_s"] = time.time() - t
            if compiler.returncode != 0:
                print(so[-3000:], flush=True)
        if args.mirror and rc == 0:
            # 6. the mirror the first prover wrote in the background, read by a fresh `up`
            rep["page_cache_before_drop_2"] = cached_bytes()
            rep["page_cache_dropped_2"] = drop_page_cache()
            rep["page_cache_after_drop_2"] = cached_bytes()
            again = up_and_prove(args, env, work / "up2", circuit, docs, vk_path)
            rep["mirror"] = again
            rc = again.get("rc", 1)
    finally:
        if not args.keep:
            for p in (params, vk_path):
                p.unlink(missing_ok=True)
            for p in (work / "keys").glob("*.mirror"):
                p.unlink(missing_ok=True)
        (out / "params_up.json").write_text(json.dumps(rep, indent=1, default=str))
        print("RESULT " + json.dumps(rep, default=str), flush=True)
    return rc


def up_and_prove(args, env, run_dir, circuit, docs, vk_path, *, wait_mirror: bool = False) -> dict:
    """`zkhive up`, the prover's ready and peak RSS, --jobs jobs verified with the .vk file,
    (``wait_mirror``: until the prover has written the .params' compressed mirror), `down`."""
    from gpu.groth16 import bellperson as bp
    rep: dict = {"rc": 1}
    t = time.time()
    up = zkhive("up", "--run-dir", str(run_dir), "--devices", args.devices, "--synthesis-workers",
                "1", "--ready-timeout", str(args.ready_timeout), env=env, check=False)
    rep["up_s"] = time.time() - t
    print(up.stdout, up.stderr[-3000:], flush=True)
    prove_logs = sorted((run_dir / "logs").glob("prove*.log"))
    for log in prove_logs:
        # every phase of the start (gpu/phases.py) and each section's read/upload/device
        # seconds; before 2026-12-05 the start logged before Celery set up logging, so these
        # INFO lines were lost and prover_log came back empty
        text = log.read_text(errors="replace")
        rep.setdefault("prover_log", []).extend(
            ln.strip()[-240:] for ln in text.splitlines()
            if "loaded the proving key" in ln or "needs" in ln or "Error" in ln or "mirror" in ln
            or "streamed to the device" in ln or "start phase" in ln)
        m = re.search(r"loaded the proving key of \S+ in ([\d.]+) s", text)
        if m:
            rep["key_load_s"] = float(m.group(1))
    m = re.search(r"^\s*prove-cuda0\s+ready in\s+([\d.]+) s\s+pid (\d+)", up.stdout, re.M)
    try:
        if up.returncode != 0 or not m:
            rep["error"] = f"up failed ({up.returncode}): {up.stderr.strip().splitlines()[-1:] }"
            for log in prove_logs:
                print(f"--- {log.name}\n" + log.read_text(errors="replace")[-4000:], flush=True)
            return rep
        rep["prover_ready_s"] = float(m.group(1))
        pid = int(m.group(2))
        rep["prover_peak_rss_bytes"] = hwm(pid)
        st = json.loads(zkhive("status", "--json", env=env).stdout)
        rep["provers"] = [{k: w.get(k) for k in ("worker_id", "resident_keys", "free_memory",
                                                 "total_memory", "key_loads", "start_phases")}
                          for w in st["workers"] if w["role"] == "prove"]
        phases = next((w.get("start_phases") for w in st["workers"] if w["role"] == "prove"), None)
        rep["start_phases"] = phases
        if phases:   # where the seconds to ready went, longest first
            print("prover start phases: " + ", ".join(
                f"{k} {v:.2f} s" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])),
                flush=True)
        from gpu.budget import DeviceBudget  # noqa: F401  (the ledger file: what was booked)
        ledgers = list((Path(os.environ.get("ZKHIVE_CACHE_DIR", "")) / "budget").glob("*.json"))
        if ledgers:
            book = json.loads(ledgers[0].read_text() or "{}")
            rep["ledger"] = {k.split(":")[0]: v for k, v in book.items()}
        print(f"ready: prover {rep['prover_ready_s']:.1f} s (key {rep.get('key_load_s')} s), "
              f"up {rep['up_s']:.1f} s, prover peak RSS {rep['prover_peak_rss_bytes'] / GiB:.2f} GiB",
              flush=True)

        from cluster.client import submit
        from cluster.pipeline.app import configure
        from cluster.settings import load
        from gpu import verify
        from gpu.groth16 import split_proofs
        from gpu.native.compact import compact_of

        configure(load(env={k: v for k, v in env.items() if k.startswith("ZKHIVE_")}))
        vk = bp.read_vk(vk_path, circuit=compact_of(circuit) or circuit)
        t = time.time()
        stamp = int(t)
        handles = [submit(d, job_id=f"params-up-{run_dir.name}-{j}-{stamp}") for j, d in enumerate(docs)]
        results = [h.result(timeout=args.timeout) for h in handles]
        rep["jobs_wall_s"] = time.time() - t
        ok, wrong = [], []
        for d, res in zip(docs, results):
            c1 = circuit.parse_c1(d)
            proofs = split_proofs(res.proof)
            pubs = [circuit.public_inputs(c1, k) for k in range(len(proofs))]
            ok.append(len(proofs) == circuit.num_partitions()
                      and all(verify(vk, pubs[k], p) for k, p in enumerate(proofs)))
            wrong.append(not verify(vk, [pubs[0][0] ^ 1, *pubs[0][1:]], proofs[0]))
        rep["partitions"] = circuit.num_partitions()
        rep["all_verify_with_vk_file"] = all(ok)
        rep["wrong_input_rejected"] = all(wrong)
        rep["prover_peak_rss_after_jobs_bytes"] = hwm(pid)
        print(f"{args.jobs} job(s) x {rep['partitions']} partitions in {rep['jobs_wall_s']:.1f} s; "
              f"verified with {vk_path.name}: {rep['all_verify_with_vk_file']}; a wrong input "
              f"rejected: {rep['wrong_input_rejected']}", flush=True)
        rc = 0 if rep["all_verify_with_vk_file"] and rep["wrong_input_rejected"] else 1
        if wait_mirror:   # written in the background after the load (cluster/pipeline/keys.py)
            t = time.time()
            progress = None
            while time.time() - t < args.mirror_timeout:
                st = json.loads(zkhive("status", "--json", env=env).stdout)
                loads = [ld for w in st["workers"] if w["role"] == "prove"
                         for ld in (w.get("key_loads") or {}).values()]
                progress = max((ld.get("mirror_progress", 0.0) for ld in loads), default=None)
                if progress is not None and (progress >= 1 or progress < 0):
                    break
                time.sleep(2)
            rep["mirror_write_s"] = time.time() - t    # after the jobs: the rest of its writing
            rep["mirror_progress"] = progress
            # < 1: a partial mirror, the sections the disk had room for (mirror.plan_sections)
            rep["mirror_share"] = max((ld.get("mirror_share", 0.0) for ld in loads), default=None)
            rep["prover_peak_rss_after_mirror_bytes"] = hwm(pid)
            mirrors = list((Path(env["ZKHIVE_SRS__PARAM_CACHE"])).glob("*.mirror"))
            rep["mirror_bytes"] = sum(p.stat().st_size for p in mirrors)
            print(f"mirror: progress {progress}, share {rep['mirror_share']}, "
                  f"{rep['mirror_bytes'] / 1e9:.2f} GB, waited "
                  f"{rep['mirror_write_s']:.1f} s after the jobs", flush=True)
            if progress is None or progress < 1:
                rc = 1
        rep["rc"] = rc
    except Exception as e:
        rep["error"] = f"{type(e).__name__}: {e}"
        for log in sorted((run_dir / "logs").glob("*.log")):
            print(f"--- {log.name}\n" + log.read_text(errors="replace")[-2000:], flush=True)
    finally:
        down = zkhive("down", "--run-dir", str(run_dir), env=env, check=False)
        rep["down_rc"] = down.returncode
    return rep


if __name__ == "__main__":
    sys.exit(main())
