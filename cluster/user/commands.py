"""``zkhive`` subcommands of the cluster: workers, keys, submit, result, status, timeline, cancel.

Every command takes ``--config FILE`` (else ``$ZKHIVE_CONFIG``); Celery and the settings are
imported only when a command runs, so a bad setting is reported by the command that needs it.
The operator's ``up``/``down``/``ps``/``restart`` live in ``cluster.ops.commands``, ``demo`` in
``cluster.user.demo``; ``cluster.cli`` registers each module's commands.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from cluster.cli import CommandError
from cluster.ops.current import settings_for


def _rt(args):
    """The runtime for this command's settings (reconfiguring the app if it was imported with
    others), after checking that Redis answers: a one-line error instead of a traceback."""
    import redis

    s = settings_for(args)
    from cluster.pipeline.app import app, configure, runtime

    if s != app.zkhive_settings:
        configure(s)
    rt = runtime()
    try:
        rt.redis.ping()
    except redis.exceptions.AuthenticationError as e:
        raise CommandError(f"Redis at {s.redis.url} refused the password ({e}); set redis.password "
                           "or ZKHIVE_REDIS__PASSWORD") from None
    except redis.exceptions.RedisError as e:
        raise CommandError(f"cannot reach Redis at {s.redis.url}: {e}") from None
    return rt


def _add_config(p):
    p.add_argument("--config", metavar="FILE", help="settings TOML (default: $ZKHIVE_CONFIG)")


# -- worker ------------------------------------------------------------------------------------

def cmd_worker(args) -> int:
    _rt(args)
    from cluster.pipeline.lifecycle import WorkerLifecycle, WorkerStartError
    from cluster.pipeline.prover import DeviceSpecError

    if args.role == "prove" and not args.device:
        raise CommandError("a prove worker needs --device (cpu, cpu:N or cuda:N)")
    from cluster.ops import membership

    try:
        life = WorkerLifecycle(args.role, args.device, urgent=getattr(args, "urgent", False))
        # started by `up`: watch its keeper; started by hand against a cluster of `up`: join its
        # state file, so `down` stops this process too (cluster.ops.membership)
        joined = membership.attach(life.rt.settings, args.role, args.device)
        try:
            return life.run(args.loglevel)
        finally:
            if joined is not None:
                joined.leave()
    except (WorkerStartError, DeviceSpecError) as e:
        raise CommandError(str(e)) from None


# -- jobs ----------------------------------------------------------------------------------------

def cmd_submit(args) -> int:
    rt = _rt(args)
    from cluster.client import Job
    from cluster.errors import BlobStoreFull
    from cluster.pipeline.jobs import JobError
    from cluster.pipeline.bounds import read_limits
    from cluster.pipeline.workflow import submit_job

    from synthesis import limits

    from synthesis.circuits import C1Error
    from synthesis.filecoin.commands import job_document

    try:  # bounded before it is parsed: size, UTF-8, nesting, numbers ([limits])
        # Filecoin's C1 / Commit2 input file (lotus-bench, Curio) names its set by registered_proof
        # read up to the largest document of any kind; submit_job holds it to its own kind's
        bound = read_limits(rt.settings)
        doc = job_document(args.file, bound)
        if doc is None:
            doc = limits.read(args.file, bound)
    except OSError as e:
        raise CommandError(f"{args.file}: {e.strerror or e}") from None
    except (limits.InputError, C1Error) as e:
        raise CommandError(f"{args.file}: {e}") from None
    try:
        rec, created = submit_job(rt, doc, job_id=args.job_id, priority=args.priority, deadline_s=args.deadline,
                                  kind=args.kind)
    except (JobError, BlobStoreFull) as e:
        raise CommandError(f"{args.file}: {e}") from None
    said = ("already submitted" if not created else "submitted" if rec.attempt == 1
            else f"resubmitted (attempt {rec.attempt})")
    print(f"{rec.job_id} {said} ({rec.params}, {rec.num_partitions} partitions)")
    if args.wait:
        from .progress import follow_job

        _print_result(follow_job(Job(rec.job_id, rt), args.timeout), args.out)
    return 0


def _print_result(res, out: str | None) -> None:
    if out:
        Path(out).write_bytes(res.proof)
        print(f"{res.job_id}: {len(res.proof)} proof bytes ({len(res.partition_proofs())} partitions) -> {out}")
    else:
        print(json.dumps({"job_id": res.job_id, "params": res.params, "proof": res.proof.hex(),
                          "public_inputs": [[hex(x) for x in p] for p in res.public_inputs]}))


def cmd_result(args) -> int:
    rt = _rt(args)
    from cluster.client import Job, JobFailed, JobTimeout

    try:
        job = Job(args.job, rt)
        if not args.wait:
            st = job.status()
            if st["status"] not in ("done", "failed", "cancelled"):
                raise CommandError(f"job {args.job} is {st['status']} ({st['partitions_done']}/"
                                   f"{st['num_partitions']} partitions proved); use --wait")
            res = job.result(timeout=args.timeout)
        else:
            from .progress import follow_job

            res = follow_job(job, args.timeout)
    except KeyError as e:
        raise CommandError(e.args[0]) from None
    except (JobFailed, JobTimeout) as e:
        raise CommandError(str(e)) from None
    _print_result(res, args.out)
    return 0


def cmd_cancel(args) -> int:
    from cluster.client import cancel

    _rt(args)
    try:
        print(f"{args.job}: {'cancelled' if cancel(args.job) else 'already finished'}")
    except KeyError as e:
        raise CommandError(e.args[0]) from None
    return 0


# -- status, timeline ----------------------------------------------------------------------------

def _mib(n) -> str:
    return "-" if n is None else f"{n / (1 << 20):.0f}Mi"


def status_text(rt, *, jobs: int = 5) -> str:
    from cluster.pipeline import registry
    from cluster.pipeline.jobs import priority_name
    from cluster.pipeline.queues import queue_depths
    from cluster.version import code_digest

    now = time.time()
    ws = registry.workers(rt.redis)
    mine = code_digest()
    lines = [f"workers ({len(ws)}):",
             f"  {'worker':<28} {'role':<9} {'device':<7} {'ready':<7} {'free':>8}  {'resident keys':<22} "
             f"{'version':<20} {'started (UTC)':<19} beat"]
    for w in ws:
        ver = f"{w.version}+{w.code_digest}" + ("" if w.code_digest == mine else " *")
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(w.started_at))
        state = "loading" if w.loading else ("yes" if w.ready else "standby" if w.standby else "no")
        lines.append(f"  {w.worker_id:<28} {w.role:<9} {w.device or '-':<7} {state:<7} "
                     f"{_mib(w.free_memory):>8}  {','.join(w.resident_keys) or '-':<22} {ver:<20} {started:<19} "
                     f"{now - w.heartbeat_at:.1f}s")
    for w in ws:
        for name, ld in sorted(w.key_loads.items()):
            size = (f" from {ld['bytes'] / 1e9:.2f} GB at {ld['gbps']:.2f} GB/s" if ld.get("bytes")
                    else " (made in process)")
            fm = ld.get("from_mirror") or 0.0
            size += ("" if not fm else " through its compressed mirror" if fm >= 1 else
                     f" through its compressed mirror ({100 * fm:.0f}% of the points; the rest "
                     "from the .params)")
            mp = ld.get("mirror_progress")   # the .params' mirror this prover writes
            why = (w.key_mirror_errors or {}).get(name)
            share = ld.get("mirror_share", 1.0)
            size += ("" if mp is None else
                     (f"; its mirror: writing failed: {why}" if why else
                      "; its mirror: writing failed (see the prover's log)")
                     if mp < 0 else ("; its mirror written" + (
                         "" if share >= 1 else f" ({100 * share:.0f}% of the points: the disk "
                         "had room for no more)")) if mp >= 1 else
                     f"; writing its mirror ({100 * mp:.0f}%)")
            lines.append(f"  {w.worker_id} loaded the proving key of {name} in {ld['seconds']:.1f} s{size}")
        ph = {k: v for k, v in (w.start_phases or {}).items() if k != "ready"}
        if w.role == "prove" and ph:   # where the start's seconds went: the longest phases
            top = sorted(ph.items(), key=lambda kv: -kv[1])[:6]
            lines.append(f"  {w.worker_id} started in "
                         + (f"{w.start_phases['ready']:.1f} s" if "ready" in w.start_phases else "?")
                         + ": " + ", ".join(f"{k} {v:.1f} s" for k, v in top))
        for ev in w.evictions[-3:]:  # what left the device, when and why (the last three)
            at = time.strftime("%H:%M:%S", time.gmtime(ev.get("at", 0)))
            lines.append(f"  {w.worker_id} evicted the proving key of {ev.get('key')} at {at} UTC "
                         f"({_mib(ev.get('bytes') or None)}): {ev.get('reason')}")
        if w.loading:
            lines.append(f"  {w.worker_id} is loading the proving key of {', '.join(w.loading)}"
                         + ("" if w.ready else " (ready after it)")
                         + (f"; in hand: {', '.join(w.inflight)}" if w.inflight else ""))
    if any(w.code_digest != mine for w in ws):
        lines.append(f"  * runs other code than this checkout (code {mine}): restart it after a deploy")
    queues = _queues(rt, ws)
    lines.append("queues:")
    for q in queues:
        levels = queue_depths(rt.redis, q)
        split = ", ".join(f"{name} {n}" for name, n in levels.items() if n)
        lines.append(f"  {q:<28} {sum(levels.values())}" + (f"  ({split})" if split else ""))
    active = rt.jobs.active()
    lines.append(f"jobs: {len(active)} active")
    for job_id in rt.jobs.recent(jobs):
        rec, st = rt.jobs.get(job_id), rt.jobs.state(job_id)
        if rec is None:
            continue
        done = len(rt.jobs.partitions(job_id, rec.num_partitions))
        waiting = rt.jobs.waiting(job_id) if st.get("status") in ("queued", "running") else {}
        lines.append(f"  {job_id:<28} {'waiting' if waiting else st.get('status', '?'):<9} {rec.params:<16} "
                     f"{rec.kind:<12} {done}/{rec.num_partitions}  {priority_name(rec.priority)}"
                     + (f"  attempt {rec.attempt}" if rec.attempt > 1 else ""))
        if waiting:  # back-pressure: what it waits for, since when
            first = min(w["since"] for w in waiting.values())
            units = ", ".join(sorted(waiting, key=lambda u: (not u.isdigit(), int(u) if u.isdigit() else 0)))
            last = max(waiting.values(), key=lambda w: w.get("at", 0))
            lines.append(f"    waiting for space {now - first:.0f} s (units {units}): {last['reason']}")
        elif st.get("error"):  # whole: the reason is what an operator needs, never cut
            lines.append(f"    {st['error']}")
    return "\n".join(lines)


def _queues(rt, ws) -> list[str]:
    from cluster.pipeline.queues import AGGREGATE_QUEUE, SYNTHESIS_QUEUE, UNASSIGNED_QUEUE, URGENT_SYNTHESIS_QUEUE

    return [SYNTHESIS_QUEUE, URGENT_SYNTHESIS_QUEUE, AGGREGATE_QUEUE] \
        + sorted({w.queues[0] for w in ws if w.role == "prove" and w.queues}) \
        + [UNASSIGNED_QUEUE]


def status_doc(rt, *, jobs: int = 5) -> dict:
    """``zkhive status --json``: the registry entries, the queue depths, active and recent jobs."""
    from cluster.pipeline import registry
    from cluster.pipeline.queues import queue_depth, queue_depths

    ws = registry.workers(rt.redis)
    recent = []
    for job_id in rt.jobs.recent(jobs):
        rec, st = rt.jobs.get(job_id), rt.jobs.state(job_id)
        if rec is None:
            continue
        recent.append({"job_id": job_id, "status": st.get("status"), "params": rec.params,
                       "partitions_done": len(rt.jobs.partitions(job_id, rec.num_partitions)),
                       "num_partitions": rec.num_partitions, "priority": rec.priority, "kind": rec.kind,
                       "deadline_at": rec.deadline_at, "deadline_from": rec.deadline_from,
                       "submitted_at": rec.submitted_at, "error": st.get("error"), "attempt": rec.attempt,
                       "waiting": rt.jobs.waiting(job_id) if st.get("status") in ("queued", "running") else {}})
    return {"workers": [w.model_dump() for w in ws],
            "queues": {q: queue_depth(rt.redis, q) for q in _queues(rt, ws)},
            "queue_levels": {q: queue_depths(rt.redis, q) for q in _queues(rt, ws)},
            "jobs": {"active": sorted(rt.jobs.active()), "recent": recent}}


def cmd_status(args) -> int:
    rt = _rt(args)
    from cluster.pipeline import registry

    if args.json:
        print(json.dumps(status_doc(rt, jobs=args.jobs), indent=2))
    else:
        from cluster.ops.commands import supervision_lines

        print("\n".join([status_text(rt, jobs=args.jobs),
                         *supervision_lines(rt.settings, getattr(args, "run_dir", None))]))
    return 0


def cmd_timeline(args) -> int:
    rt = _rt(args)
    from cluster.pipeline import timeline

    events = timeline.load(rt.redis, args.job)
    if not events:
        raise CommandError(f"no timeline for job {args.job} (unknown job, or expired)")
    print(timeline.format_text(args.job, events))
    png = args.png or f"timeline-{args.job}.png"
    if png != "-" and not timeline.spans(events):
        # the cluster's own timeline (keeper restarts, ...) is events at points in time: a
        # chart of spans had nothing to draw and ended in gantt_png's ValueError
        print(f"no gantt chart: the timeline of {args.job} has no timed spans (only events)")
    elif png != "-":
        timeline.gantt_png(args.job, events, png)
        print(f"gantt chart: {png}")
    return 0


# -- registration --------------------------------------------------------------------------------

def register(sub) -> None:
    p = sub.add_parser("worker", help="run a cluster worker (synthesis, prove on a device, aggregate)")
    p.add_argument("role", choices=["synthesis", "prove", "aggregate"])
    p.add_argument("--device", help="prove workers: cpu, cpu:N or cuda:N (one worker per device slot)")
    p.add_argument("--urgent", action="store_true",
                   help="synthesis workers: one process that serves only CRITICAL jobs' synthesis "
                        "(`zkhive up` starts [worker] urgent_synthesis_workers of them)")
    p.add_argument("--loglevel", default="INFO")
    _add_config(p)
    p.set_defaults(func=cmd_worker)

    from . import keys  # zkhive keys: the key cache (no Redis)
    keys.register(sub, _add_config)
    from . import selftest  # zkhive selftest: Filecoin's parameter files prove our circuits (no Redis)
    selftest.register(sub)

    p = sub.add_parser("submit", help="submit a C1 input (JSON file) as a job")
    p.add_argument("file")
    p.add_argument("--job-id", help="job id (default: derived from the C1 content); resubmitting is a no-op, "
                                    "unless the job failed or was cancelled: then it is retried (a new attempt)")
    p.add_argument("--priority", default="normal", help="critical, high, normal, bulk (or 0-9, 0 first)")
    p.add_argument("--deadline", type=float, default=None,
                   help="seconds until the watchdog fails the job (default: its kind's [deadlines] setting)")
    p.add_argument("--kind", default=None, help="porep-c2, snap-update, window-post or winning-post (cuzk's names): chooses the deadline "
                                                "setting (default: the parameter set's kind, else porep-c2)")
    p.add_argument("--wait", action="store_true", help="wait for the proof")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait (with --wait)")
    p.add_argument("--out", help="write the proof bytes here (default: print JSON)")
    _add_config(p)
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("result", help="a job's proof and public inputs")
    p.add_argument("job")
    p.add_argument("--wait", action="store_true")
    p.add_argument("--timeout", type=float, default=None)
    p.add_argument("--out", help="write the proof bytes here (default: print JSON)")
    _add_config(p)
    p.set_defaults(func=cmd_result)

    p = sub.add_parser("cancel", help="cancel a job")
    p.add_argument("job")
    _add_config(p)
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("status", help="workers (role, device, keys, memory, version), queue depths, jobs")
    p.add_argument("--json", action="store_true",
                   help="as JSON: {workers: [registry entries], queues: {name: depth}, jobs: {active, recent}}")
    p.add_argument("--jobs", type=int, default=5, help="recent jobs to list")
    p.add_argument("--run-dir", default=None,
                   help="the cluster of `up` to report on (default: this checkout's, else var/up)")
    _add_config(p)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("timeline", help="a job's events, and a Gantt chart PNG")
    p.add_argument("job")
    p.add_argument("--png", help="PNG path (default timeline-JOB.png; '-' for none)")
    _add_config(p)
    p.set_defaults(func=cmd_timeline)
