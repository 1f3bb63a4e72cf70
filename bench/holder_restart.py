"""A prover SIGKILLed in the middle of a 32 GiB job, and a prover replaced on purpose, with the
device's key holder on (issue 40 item 2; cluster/pipeline/keyholder.py):

    python3 bench/holder_restart.py --params filecoin-32g --jobs 2 --kill-after 4 --out DIR

``zkhive up`` in a fresh run directory (Redis, one synthesis worker, the aggregate worker, the
key holder of ``--devices``' device, its prover; the key made in the holder's process from a
dev-ceremony seed, ``[srs] in_process`` + ``preload``), ``--jobs`` sealed sectors submitted at
once; after ``--kill-after`` partitions have been proved the prover is SIGKILLed (the process
alone, as the OOM killer would) and the cluster's own keeper restarts it. Reported from the jobs'
timelines:

- ``kill_to_pickup_s``: from the kill to the restarted prover's first ``prove_pickup``;
- ``kill_to_first_proved_s``: from the kill to its first ``prove_end`` (the issue's "back to
  proving": must <= 10 s, goal <= 3 s; 28.3 s measured without a holder, the key made again);
- every job verified (each partition against public inputs recomputed from its C1 input), the
  holder never restarted (same pid before and after);

then, with ``--restart`` (default on), one more job and, after ``--kill-after`` of its
partitions, ``zkhive restart prove-cudaN`` (a warm stop, then a new process: "a new build takes
over"): ``restart_ready_s`` (the command's own "ready in"), ``restart_to_first_proved_s`` from
the new process's start to its first ``prove_end``, that job verified. ``--holder off``: the same
without the holder (the baseline: the key made again in the restarted prover).
``--standby on``: ``[worker] prover_standby`` (a second prover process waits on the device's
lock and takes over; the killed one comes back as the next standby): the same figures, and
whether the takeover was the standby's. Writes DIR/holder-restart.json and the timelines. CPU check of the script (no holder: it lends
CUDA memory only): ``--devices cpu:0 --params porep-lite-4k --holder off --kill-after 1``.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from cluster_sdr32g import in_process_env, sectors, zkhive  # noqa: E402
from gpu_cluster import all_verify  # noqa: E402


def events(rt, job_ids) -> list[dict]:
    from cluster.pipeline import timeline
    return [dict(e, job=j) for j in job_ids for e in timeline.load(rt.redis, j)]


def wait_proved(rt, job_ids, n: int, timeout_s: float) -> int:
    """Block until ``n`` partitions of ``job_ids`` have ended their prove task; the count."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        done = sum(1 for e in events(rt, job_ids) if e["event"] == "prove_end")
        if done >= n:
            return done
        time.sleep(0.05)
    raise TimeoutError(f"{n} partitions not proved in {timeout_s} s")


def first_after(rt, job_ids, kind: str, t0: float, timeout_s: float) -> float | None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        ts = [e["t"] for e in events(rt, job_ids) if e["event"] == kind and e["t"] > t0]
        if ts:
            return min(ts)
        time.sleep(0.05)
    return None


def record(run_dir: Path, name: str) -> dict:
    state = json.loads((run_dir / "cluster.json").read_text())
    return next(r for r in state["processes"] if r["name"] == name)


def prover_record(run_dir: Path, rt, device: str, timeout_s: float = 60.0,
                  not_pid: int | None = None) -> dict:
    """The state file's record of the device's prover: the process whose registry entry proves
    (not a ``[worker] prover_standby`` waiting on the lock), ready; not ``not_pid`` (a killed
    one, whose entry stands until its TTL)."""
    from cluster.pipeline import registry
    state = json.loads((run_dir / "cluster.json").read_text())
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        live = {w.pid for w in registry.workers(rt.redis, role="prove")
                if w.device == device and w.ready and not w.standby and w.pid != not_pid}
        for r in state["processes"]:
            if r["pid"] in live:
                return r
        time.sleep(0.05)
        state = json.loads((run_dir / "cluster.json").read_text())
    raise TimeoutError(f"no ready prover on {device} in {timeout_s} s")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", default="filecoin-32g")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--kill-after", type=int, default=4, help="partitions proved before the kill")
    ap.add_argument("--devices", default="cuda:0")
    ap.add_argument("--holder", choices=("on", "off"), default="on")
    ap.add_argument("--restart", choices=("on", "off"), default="on")
    ap.add_argument("--standby", choices=("on", "off"), default="off",
                    help="[worker] prover_standby: a second prover process waits on the lock")
    ap.add_argument("--partition-workers", type=int, default=8)
    ap.add_argument("--ready-timeout", type=float, default=400)
    ap.add_argument("--timeout", type=float, default=400)
    ap.add_argument("--out", default="holder_restart_out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("ZKHIVE_BENCH_DIR", "/tmp/zkhive-holder"))
    env = in_process_env(work, [args.params])
    env["ZKHIVE_WORKER__PARTITION_WORKERS"] = str(args.partition_workers)
    env["ZKHIVE_GPU__KEY_HOLDER"] = "true" if args.holder == "on" else "false"
    env["ZKHIVE_WORKER__PROVER_STANDBY"] = "true" if args.standby == "on" else "false"
    env.setdefault("OMP_NUM_THREADS", "2")
    from cluster.ops.supervisor import free_port
    # free ports, so the script also runs beside other clusters (its CPU check on a shared host)
    env.setdefault("ZKHIVE_REDIS__URL", f"redis://127.0.0.1:{free_port()}/0")
    for var in ("ZKHIVE_FLOWER__PORT", "ZKHIVE_METRICS__PORT", "ZKHIVE_GATEWAY__PORT"):
        env.setdefault(var, str(free_port()))
    from synthesis.circuits import get_circuit
    circuit = get_circuit(args.params)
    if hasattr(circuit, "compact_r1cs"):
        circuit.compact_r1cs()  # built once, cached for the workers
    docs = sectors(args.params, args.jobs + (1 if args.restart == "on" else 0))
    device = args.devices.split(",")[0]
    holder_name = f"keyholder-{device.replace(':', '')}"
    run_dir = work / f"up-holder-{args.holder}-standby-{args.standby}-{int(time.time())}"
    rep: dict = {"params": args.params, "jobs": args.jobs, "kill_after": args.kill_after,
                 "holder": args.holder, "standby": args.standby, "device": device, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    t = time.time()
    up = zkhive("up", "--run-dir", str(run_dir), "--devices", args.devices, "--synthesis-workers", "1",
                "--ready-timeout", str(args.ready_timeout), check=False, env=dict(env))
    rep["up_s"] = round(time.time() - t, 2)
    print(up.stdout, up.stderr[-3000:], flush=True)
    if up.returncode != 0:
        rep["error"] = f"up failed ({up.returncode})"
        for log in sorted((run_dir / "logs").glob("*.log")):
            print(f"--- {log.name}\n" + log.read_text(errors="replace")[-3000:], flush=True)
        zkhive("down", "--run-dir", str(run_dir), check=False, env=dict(env))
        (out / "holder-restart.json").write_text(json.dumps(rep, indent=1))
        return 1
    try:
        from cluster.client import submit
        from cluster.pipeline import registry
        from cluster.pipeline.app import configure, runtime
        from cluster.pipeline.keys import KeyCache
        from cluster.settings import load

        s = load(env={k: v for k, v in env.items() if k.startswith("ZKHIVE_")})
        configure(s)
        rt = runtime()
        vk = KeyCache(s.srs.param_cache).load_vk(circuit)
        holder_pid = record(run_dir, holder_name)["pid"] if args.holder == "on" else None
        stamp = int(time.time())
        kill_docs = docs[:args.jobs]
        handles = [submit(d, job_id=f"kill-{args.params}-{j}-{stamp}") for j, d in enumerate(kill_docs)]
        ids = [h.job_id for h in handles]
        rep["proved_before_kill"] = wait_proved(rt, ids, args.kill_after, args.timeout)
        old = prover_record(run_dir, rt, device)
        prover_name = old["name"]   # with a standby: whichever of the two took the lock first
        t_kill = time.time()
        os.kill(old["pid"], signal.SIGKILL)
        print(f"SIGKILL {prover_name} pid {old['pid']} after {rep['proved_before_kill']} partitions", flush=True)
        new = prover_record(run_dir, rt, device, args.timeout, not_pid=old["pid"])
        rep["new_prover_ready_after_kill_s"] = round(time.time() - t_kill, 3)
        pickup = first_after(rt, ids, "prove_pickup", t_kill, args.timeout)
        proved = first_after(rt, ids, "prove_end", t_kill, args.timeout)
        rep["kill_to_pickup_s"] = round(pickup - t_kill, 3) if pickup else None
        rep["kill_to_first_proved_s"] = round(proved - t_kill, 3) if proved else None
        results = [h.result(timeout=args.timeout) for h in handles]
        rep["kill_jobs_verified"] = all_verify(circuit, vk, kill_docs, results)
        rep["prover_restarted"] = new["pid"] != old["pid"]
        # where the seconds went: the keeper's restart, the new process to ready (its key
        # attached: "attached the proving key of ... in S s" in its log), then the first proof;
        # with a standby, the standby's takeover (its process started before the kill)
        rep["new_prover_started_after_kill_s"] = round(new["create_time"] - t_kill, 3)
        w = next(w for w in registry.workers(rt.redis, role="prove") if w.pid == new["pid"])
        rep["new_prover_start_phases"] = w.start_phases
        if args.standby == "on":
            rep["took_over_from_standby"] = new["name"] != prover_name
            deadline, back = time.time() + 60, None
            while back is None and time.time() < deadline:   # the keeper's restart, standing by
                killed = record(run_dir, prover_name)
                back = next((round(x.started_at - t_kill, 3) for x in registry.workers(
                    rt.redis, role="prove") if x.standby and x.pid == killed["pid"]), None)
                time.sleep(0.1)
            rep["killed_one_back_as_standby_after_s"] = back
        if holder_pid is not None:
            rep["holder_same_pid"] = record(run_dir, holder_name)["pid"] == holder_pid
        if args.restart == "on":
            h = submit(docs[-1], job_id=f"restart-{args.params}-{stamp}")
            wait_proved(rt, [h.job_id], args.kill_after, args.timeout)
            prover_name = new["name"]
            t_cmd = time.time()
            res = zkhive("restart", prover_name, "--run-dir", str(run_dir), check=False, env=dict(env))
            rep["restart_command_s"] = round(time.time() - t_cmd, 2)
            rep["restart_output"] = (res.stdout + res.stderr).strip()[-500:]
            # the process that proves next: the standby (started before) or the restarted one
            new2 = prover_record(run_dir, rt, device, not_pid=new["pid"])
            if args.standby == "on":
                # `restart prove-cudaN` replaces both (the name and the name-1): the prover
                # hands over to the standby, whose replacement then hands over to the first's
                new2 = dict(new2, create_time=t_cmd)   # timed from the command, not its start
            after = [h]
            st = h.status()
            if st["partitions_done"] >= st["num_partitions"]:
                # the warm stop proved the job's last partitions (a circuit of few partitions,
                # the CPU check's): the new process's first proof is a job submitted now
                after.append(submit(docs[0], job_id=f"restart-next-{args.params}-{stamp}"))
                rep["restart_next_job"] = True
            proved = first_after(rt, [a.job_id for a in after], "prove_end", new2["create_time"],
                                 args.timeout)
            rep["restart_to_first_proved_s"] = round(proved - new2["create_time"], 3) if proved else None
            rep["restart_job_verified"] = all_verify(circuit, vk, [docs[-1], docs[0]][:len(after)],
                                                     [a.result(timeout=args.timeout) for a in after])
            ids.extend(a.job_id for a in after)
            if holder_pid is not None:
                rep["holder_same_pid_after_restart"] = record(run_dir, holder_name)["pid"] == holder_pid
        from cluster.pipeline import timeline
        for j in ids:
            (out / f"timeline-{j}.txt").write_text(timeline.format_text(j, timeline.load(rt.redis, j)))
        for log in sorted((run_dir / "logs").glob("*.log")):
            lines = [ln.strip()[-160:] for ln in log.read_text(errors="replace").splitlines()
                     if "attached the proving key" in ln or "holding the proving key" in ln
                     or "in process in" in ln or "key holder" in ln]
            if lines:
                rep.setdefault("log", {})[log.name] = lines[-8:]
        st = zkhive("status", check=False, env=dict(env))
        (out / "status.txt").write_text(st.stdout + st.stderr)
    except Exception as e:
        rep["error"] = f"{type(e).__name__}: {e}"
        for log in sorted((run_dir / "logs").glob("*.log")):
            print(f"--- {log.name}\n" + log.read_text(errors="replace")[-2000:], flush=True)
    finally:
        down = zkhive("down", "--run-dir", str(run_dir), check=False, env=dict(env))
        rep["down_rc"] = down.returncode
        (out / "holder-restart.json").write_text(json.dumps(rep, indent=1, default=str))
    print(json.dumps(rep, indent=1, default=str), flush=True)
    ok = rep.get("kill_jobs_verified") and rep.get("restart_job_verified", True) and "error" not in rep
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
