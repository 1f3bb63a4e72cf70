"""The operator's commands of a cluster on one machine: ``zkhive up``, ``down``, ``ps``,
``restart``, ``keep`` (the keeper process), ``flower``, ``metrics`` and ``ready``.

``zkhive up`` starts what ``cluster.ops.plan`` lists, each recorded by PID and start time (see
``cluster.ops.supervisor``), and returns once each one is ready (``cluster.ops.readiness``).
Everything lives under the run directory (``--run-dir``, default ``var/up``)::

    var/up/cluster.json   the state file: PIDs, start times, ports, logs
    var/up/logs/*.log     one log per process
    var/up/redis/         redis.conf (mode 0600, holds the password) and the append-only file
    var/up/flower.pass    the Flower password ``up`` generated when the settings give none

``zkhive restart NAME|ROLE`` replaces one process (or every process of a role) on purpose.
``zkhive demo`` (cluster.user.demo) builds on ``start_cluster`` and ``cmd_down``.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from cluster.cli import CommandError, cli_name

from .current import DEFAULT_RUN_DIR, run_dir_for, settings_for
from .plan import check_options, check_ports, flat, flower_url, metrics_url, plan, replan
from .supervisor import Supervisor, SupervisorError

# -- up / down / ps ----------------------------------------------------------------------------

def start_cluster(args, s, out=print) -> Supervisor:
    sup = Supervisor(Path(args.run_dir).resolve())
    args.devices = ",".join(check_options(args))  # once: GPU detection takes a second
    try:
        with sup.locked():
            return _start_locked(sup, args, s, out)
    except SupervisorError as e:  # Busy
        raise CommandError(str(e)) from None


def _start_locked(sup: Supervisor, args, s, out) -> Supervisor:
    try:
        # refuse a live cluster and bound ports before writing configs or generating passwords
        note = sup.check_clear([])
        check_ports(s)  # every clash at once, naming the settings
        services, meta = plan(args, s)
        sup.check_clear(flat(services))
    except SupervisorError as e:
        raise CommandError(str(e)) from None
    if note:
        out(note)
    sup.meta = meta

    def on_ready(spec, rec, took):
        out(f"  {spec.name:<14} ready in {took:5.1f} s  pid {rec.pid:<7} {spec.address:<28} log {spec.log}")
    out(f"starting the cluster (state in {sup.state_file})")
    try:
        sup.start_all(services, on_ready=on_ready)
    except SupervisorError as e:
        raise CommandError(f"{e}\nstopped everything this `up` had started") from None
    from . import current

    current.point_at(sup.state_dir)
    return sup


def hints(args) -> tuple[str, str]:
    """The ``status`` and ``down`` commands to print, as this user runs zkhive (``./run``)."""
    name = cli_name()
    cfg = f" --config {args.config}" if getattr(args, "config", None) else ""
    rd = f" --run-dir {args.run_dir}" if getattr(args, "run_dir_explicit", False) \
        and Path(args.run_dir) != DEFAULT_RUN_DIR else ""
    return f"{name} status{cfg}", f"{name} down{cfg}{rd}"


def cmd_up(args) -> int:
    s = settings_for(args)
    from .membership import revive_keeper

    # a running cluster whose keeper was killed: `up` brings the keeper back (and refuses the rest)
    if revive_keeper(run_dir_for(args), out=lambda m: print(f"zkhive up: {m}")) is not None:
        return 0
    t0 = time.monotonic()
    sup = start_cluster(args, s)
    status, down = hints(args)
    print(f"cluster up in {time.monotonic() - t0:.1f} s\n"
          f"  Flower   {sup.meta['flower']}  (user {sup.meta['flower_user']}, password "
          f"{sup.meta['flower_password']})\n"
          f"  metrics  {sup.meta['metrics']}  (Prometheus; dashboard docs/grafana/zkhive.json)\n"
          f"  gateway  {sup.meta.get('gateway')}  (cuzk's gRPC service: Curio's Cuzk.Address)\n"
          f"  status   {status}\n"
          f"  stop     {down}")
    for note in sup.meta.get("device_notes") or ():  # fewer provers than asked, and why
        print(f"  note     {note}")
    return 0


def _mark_stopping(sup: Supervisor) -> None:
    """Record that ``down`` has begun, before the keeper is stopped: from then on no worker
    brings the keeper back (cluster.ops.keeper.watch_keeper) and no keeper restarts anything."""
    try:
        with sup.locked(wait_s=5.0):
            if sup.load():
                sup.meta["stopping"] = time.time()
                sup.save()
    except SupervisorError:
        pass  # a keeper mid-restart holds it: it is stopped next, and stop_all follows


def _stop_keeper(sup: Supervisor) -> None:
    """Stop the keeper before anything else, without the lock (it may hold it while a
    restarted process starts): from then on nothing is brought back."""
    from .keeper import KEEPER

    try:
        sup.load()
    except SupervisorError:
        return
    rec = sup.record(KEEPER)
    if rec is not None and rec.process() is not None:
        how = sup.stop_one(rec, grace_s=rec.stop_grace_s)
        print(f"  {rec.name:<14} pid {rec.pid:<7} {how} (nothing is restarted from here on)")


class _SteadyOut:
    """stdout for a command that must finish whatever happens to its reader: ``zkhive down |
    head -1`` closed the pipe after the first line, the next print raised BrokenPipeError, and
    ``down`` ended there with the keeper stopped and Redis, the workers, Flower and the gateway
    left running unsupervised. Each write is flushed at once; once the reader is gone, the rest
    goes to /dev/null (the interpreter's last flush too) and the command goes on; so it does
    for any other failure to write (a terminal that went away, ``> /dev/full``)."""

    def __init__(self, stream):
        self.stream, self.gone = stream, False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.stream.write(text)
                self.stream.flush()
            except (OSError, ValueError):  # EPIPE, EIO (the terminal went away), ENOSPC
                self._drop()               # (> /dev/full); ValueError: the stream was closed
        return len(text)

    def _drop(self) -> None:
        self.gone = True
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
        except (OSError, ValueError):
            pass

    def flush(self) -> None:
        if not self.gone:
            self.write("")


def steady(fn):
    """Run ``fn(args)`` with :class:`_SteadyOut` as stdout and SIGPIPE ignored (Python ignores it
    already; a parent may have set it back to the default, which kills the process at the first
    write to a closed pipe)."""
    import contextlib
    import functools
    import signal

    @functools.wraps(fn)
    def run(args):
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        with contextlib.redirect_stdout(_SteadyOut(sys.stdout)):
            return fn(args)
    return run


@steady
def cmd_down(args) -> int:
    from . import current

    sup = Supervisor(run_dir_for(args))
    if not sup.state_file.exists():
        current.forget(sup.state_dir)
        print(f"no cluster recorded in {sup.state_file}: nothing to stop")
        return 0
    _mark_stopping(sup)
    _stop_keeper(sup)
    try:
        # a keeper killed mid-restart released the lock with its life; `up` may still hold it
        with sup.locked(wait_s=5.0):
            return _down_locked(sup, args)
    except SupervisorError as e:
        raise CommandError(str(e)) from None


def _down_locked(sup: Supervisor, args) -> int:
    try:
        if not sup.load():
            print(f"no cluster recorded in {sup.state_file}: nothing to stop")
            return 0
        live = sup.alive()
        hand = [r for r in live if r.by_hand]
        print(f"stopping {len(live)} of {len(sup.records)} recorded processes"
              + (f", {len(hand)} of them started by hand" if hand else "")
              + " (warm shutdown: tasks in hand finish first)")
        stopped = []

        def on_stopped(r, how):
            print(f"  {r.name:<14} pid {r.pid:<7} {how}")
            if how != "already gone":
                stopped.append(f"{r.name} (pid {r.pid})")
        sup.stop_all(grace_s=getattr(args, "grace", None), on_stopped=on_stopped)
    except SupervisorError as e:
        raise CommandError(str(e)) from None
    from . import current

    current.forget(sup.state_dir)
    print(f"stopped {len(stopped)} processes ({', '.join(stopped) or 'none was running'}); "
          f"every process is gone and every port released")
    return 0


def supervision_lines(s, run_dir=None) -> list[str]:
    """``zkhive status``'s lines about the processes of ``up`` whose Redis is ``s``'s: where
    Flower and the metrics are, and warnings: the keeper gone (nothing dead comes back), a
    process left stopped or retried at the ceiling, a process gone."""
    from . import current
    from .keeper import KEEPER

    sup = Supervisor(current.resolve_run_dir(run_dir))
    try:
        if not sup.load() or sup.meta.get("redis") != s.redis.url:
            return []
    except SupervisorError as e:
        return [f"cluster: {e}"]
    lines = [f"cluster of `up`: {sup.state_file} ({len(sup.alive())}/{len(sup.records)} processes running)"]
    if sup.meta.get("flower"):
        lines.append(f"  Flower   {sup.meta['flower']}  (user {sup.meta.get('flower_user')}, password "
                     f"{sup.meta.get('flower_password')})")
    if sup.meta.get("metrics"):
        lines.append(f"  metrics  {sup.meta['metrics']}")
    if sup.meta.get("gateway"):
        lines.append(f"  gateway  {sup.meta['gateway']}  (cuzk's gRPC service: Curio's Cuzk.Address)")
    keeper = sup.record(KEEPER)
    if keeper is not None and keeper.process() is None:
        lines.append(f"  WARNING: the keeper (pid {keeper.pid}) is not running: a process that dies "
                     f"stays dead until a worker or `{cli_name()} up` starts the keeper again")
    for r in sup.records:
        if r.given_up:
            lines.append(f"  WARNING: {r.name} left stopped by the keeper: {r.given_up.splitlines()[0]}")
        elif r.note:
            lines.append(f"  WARNING: {r.name}: {r.note}")
        elif r.process() is None and r.name != KEEPER:
            lines.append(f"  WARNING: {r.name} (pid {r.pid}) is not running")
    return lines


def cmd_ps(args) -> int:
    sup = Supervisor(run_dir_for(args))
    try:
        if not sup.load():
            print(f"no cluster recorded in {sup.state_file}")
            return 1
    except SupervisorError as e:
        raise CommandError(str(e)) from None
    for r in sup.records:
        state = "running" if r.process() else ("stopped" if r.given_up else "gone")
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.create_time))
        print(f"{r.name:<14} pid {r.pid:<7} {state:<8} started {started} UTC  restarts {r.restarts:<3} "
              f"{r.address:<28} log {r.log}")
        if r.given_up:
            print("    left stopped by the keeper: " + r.given_up.replace("\n", "\n    "))
        elif r.note:
            print(f"    {r.note}")
    if sup.meta.get("flower"):
        print(f"Flower {sup.meta['flower']} (user {sup.meta.get('flower_user')}, password "
              f"{sup.meta.get('flower_password')})")
    if sup.meta.get("metrics"):
        print(f"metrics {sup.meta['metrics']}")
    if sup.meta.get("gateway"):
        print(f"gateway {sup.meta['gateway']} (cuzk.v1.ProvingEngine)")
    return 0 if all(r.process() for r in sup.records) else 1


def cmd_logs(args) -> int:
    """The log of one process of `up` (its last ``--lines`` lines; ``-f`` follows it, across the
    keeper's restarts: the same file is appended to)."""
    from .supervisor import log_tail

    sup = Supervisor(run_dir_for(args))
    try:
        if not sup.load():
            raise CommandError(f"no cluster recorded in {sup.state_file}: `{cli_name()} up` first")
    except SupervisorError as e:
        raise CommandError(str(e)) from None
    rec = sup.record(args.name)
    if rec is None:
        raise CommandError(f"nothing named {args.name!r} in {sup.state_file}; recorded: "
                           + ", ".join(r.name for r in sup.records))
    if rec.by_hand:
        raise CommandError(f"{rec.name} was started by hand: its output is in the terminal that started it")
    path = Path(rec.log)
    if args.lines:
        text = log_tail(path, args.lines)
        if text:
            print(text)
    if not args.follow:
        return 0
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            while True:
                line = f.readline()
                if line:
                    sys.stdout.write(line.decode("utf-8", "replace"))
                    sys.stdout.flush()
                else:
                    time.sleep(0.2)
    except KeyboardInterrupt:
        return 0
    except FileNotFoundError:
        raise CommandError(f"{path}: no such log") from None


def cmd_gc(args) -> int:
    """Remove dir-store blobs older than the TTL that no job record references."""
    import redis as redis_py

    from .gc import collect

    s = settings_for(args)
    if s.blobs.backend != "dir":
        print(f"blobs.backend is {s.blobs.backend}: its blobs expire by themselves (blobs.ttl_s)")
        return 0
    root = Path(s.blobs.dir)
    if not root.is_dir():
        print(f"no blob store at {root}: nothing to collect")
        return 0
    r = redis_py.Redis.from_url(s.redis.url_with_password(), socket_timeout=10)
    older = s.blobs.ttl_s if args.older_than is None else args.older_than
    try:
        got = collect(root, r, older, dry_run=args.dry_run)
    except redis_py.exceptions.RedisError as e:
        # without the job records every blob looks unreferenced: collect nothing
        raise CommandError(f"cannot read the job records at {s.redis.url} ({e}); nothing removed") from None
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} {len(got.removed)} blobs ({got.removed_bytes} bytes) older than {older:.0f} s from {root}; "
          f"kept {got.kept_referenced} still referenced by a job and {got.kept_young} younger")
    return 0


@steady
def cmd_restart(args) -> int:
    """Replace one recorded process, or every process of a role, one at a time: each is
    warm-stopped, started again from ``up``'s plan and waited for before the next."""
    sup = Supervisor(run_dir_for(args))
    try:
        if not sup.load():
            raise CommandError(f"no cluster recorded in {sup.state_file}: `{cli_name()} up` first")
        names = [r.name for r in sup.records if not r.by_hand
                 and (r.name == args.target or r.name.startswith(args.target + "-"))]
        if not names:
            raise CommandError(f"nothing named {args.target!r} in {sup.state_file}; recorded: "
                               + ", ".join(r.name for r in sup.records))
        specs = replan(sup, args)
        with sup.locked(wait_s=30.0):
            sup.load()
            for name in names:
                rec, spec = sup.record(name), specs.get(name)
                if rec is None or spec is None:
                    raise CommandError(f"{name}: not in the cluster's plan any more")
                how = sup.stop_one(rec, grace_s=args.grace) if rec.process() else "was not running"
                rec.given_up, rec.failures, rec.unready, rec.note = "", 0, 0, ""
                new = sup.replace(spec)
                took = sup.wait_ready(spec, new)
                new.ready_at = time.time()
                sup.save()
                print(f"  {name:<14} {how}; pid {new.pid} ready in {took:.1f} s "
                      f"(restarts {new.restarts})")
    except SupervisorError as e:
        raise CommandError(str(e)) from None
    return 0


def cmd_keyholder(args) -> int:
    """The key holder of one CUDA device (``[gpu] key_holder``; started by ``up``)."""
    import logging

    from cluster.pipeline.keyholder import HolderError, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        serve(args.device, run_dir_for(args), settings_for(args))
    except HolderError as e:
        raise CommandError(str(e)) from None
    return 0


def cmd_keep(args) -> int:
    """The keeper process (started by ``up``): restarts what dies until ``down``."""
    from .keeper import Keeper

    run_dir = run_dir_for(args)
    sup = Supervisor(run_dir)
    if not sup.load():
        raise CommandError(f"no cluster recorded in {sup.state_file}: the keeper has nothing to keep")
    s = settings_for(args)
    redis_client: list = []

    def on_event(event, **fields):
        # the cluster's own timeline (`zkhive timeline cluster`); Redis may be what died
        import redis as redis_py

        from cluster.pipeline import timeline
        try:
            if not redis_client:
                redis_client.append(redis_py.Redis.from_url(s.redis.url_with_password(),
                                                            socket_timeout=2))
            timeline.emit(redis_client[0], "cluster", event, **fields)
        except redis_py.exceptions.RedisError as e:
            print(f"keeper: could not record {event} in the timeline: {e}", flush=True)

    def client():
        import redis as redis_py

        if not redis_client:
            redis_client.append(redis_py.Redis.from_url(s.redis.url_with_password(), socket_timeout=2))
        return redis_client[0]

    def heartbeats():
        # {pid: last heartbeat} of this host's workers, for the freeze check; None: Redis away
        import redis as redis_py

        from cluster.pipeline import registry
        try:
            return {w.pid: w.heartbeat_at for w in registry.workers(client()) if w.host == s.worker.host}
        except redis_py.exceptions.RedisError:
            return None

    def gone(rec):
        # the units the process held are re-dispatched at the next sweep (its PID is gone),
        # which this asks for now rather than within the watchdog's interval
        from cluster.pipeline.watchdog import request_sweep
        request_sweep(client())

    keeper = Keeper(run_dir, lambda: replan(sup, args), on_event=on_event,
                    out=lambda m: print(m, flush=True), heartbeats=heartbeats, on_gone=gone)
    keeper.step()
    (run_dir / "keeper.ready").write_text(f"{os.getpid()}\n")
    keeper.run()
    return 0


# -- flower and ready (also the container commands) ------------------------------------------------

def cmd_flower(args) -> int:
    from cluster.settings import SettingsError

    s = settings_for(args)
    try:
        password = s.flower.secret()
    except SettingsError as e:
        raise CommandError(str(e)) from None
    if not password:
        raise CommandError("Flower runs only behind basic auth: set flower.password, "
                           "ZKHIVE_FLOWER__PASSWORD or flower.password_file")
    # through the environment: a password in argv would show in `ps` to every user
    os.environ["FLOWER_BASIC_AUTH"] = f"{s.flower.user}:{password}"
    _metrics_behind_auth()
    _terminate_cancels_the_job()
    from cluster.pipeline.bounds import bound_flower_requests

    bound_flower_requests(s)  # request bodies decoded within [limits]; broker-full is one line
    from .flowerguard import auth_before_body, bounded_http_server

    auth_before_body()  # an unauthenticated body is refused at its headers, never read
    bounded_http_server(s)  # and an authenticated one read up to what a submission needs
    from cluster.pipeline.app import app

    # the worker event stream: the workers send task events (worker_send_task_events,
    # task_send_sent_event in cluster.pipeline.app); Flower turns them on in workers started without -E
    app.start(["flower", f"--address={s.flower.address}", f"--port={s.flower.port}",
               "--enable_events=True"])
    return 0


def cmd_metrics(args) -> int:
    from .metrics import serve

    return serve(settings_for(args))


def _metrics_behind_auth() -> None:
    """Flower (2.2) serves ``/metrics`` without auth even when basic auth guards every other
    page, and has no option to change that (mher/flower#1342): its task names and worker names
    are the cluster's. Wrap the handler in tornado's ``authenticated``, as Flower's own pages are;
    with basic auth, Flower's ``get_current_user`` answers 401 without the credentials. Only
    ``/healthcheck`` stays open (the readiness check)."""
    import tornado.web
    from flower.views.monitor import Metrics

    if not getattr(Metrics.get, "_zkhive_authenticated", False):
        Metrics.get = tornado.web.authenticated(Metrics.get)
        Metrics.get._zkhive_authenticated = True


def task_unit(r, task_id: str) -> tuple[str, str] | None:
    """(job id, unit) whose lease names ``task_id``: the zkhive unit that task is running."""
    from cluster.pipeline.jobs import ACTIVE
    from cluster.pipeline.lease import Lease, leases_key

    for raw_job in r.smembers(ACTIVE):
        job_id = raw_job.decode()
        for unit, raw in r.hgetall(leases_key(job_id)).items():
            if Lease.from_json(unit.decode(), raw).task_id == task_id:
                return job_id, unit.decode()
    return None


def _terminate_cancels_the_job() -> None:
    """Flower's Terminate (``POST /api/task/revoke/<id>?terminate=true``) on a running zkhive task
    answered "Revoked" while the proof went on (the solo pool cannot terminate its own task).
    For a task that holds a unit's lease it now does what ``zkhive cancel JOB`` does: the job is
    cancelled, its queued messages dropped, the running task's result discarded, and the answer
    says so. Other tasks are revoked as before."""
    import asyncio

    import tornado.web
    from flower.api.control import TaskRevoke

    if getattr(TaskRevoke.post, "_zkhive_cancel", False):
        return
    original = TaskRevoke.post

    async def post(self, taskid):
        if self.get_argument("terminate", default=False, type=bool) and not self.application.options.read_only:
            from cluster.pipeline.app import runtime
            from cluster.pipeline.workflow import cancel_job

            rt = runtime()
            found = await asyncio.get_running_loop().run_in_executor(None, task_unit, rt.redis, taskid)
            if found is not None:
                job_id, unit = found
                done = await asyncio.get_running_loop().run_in_executor(None, cancel_job, rt, job_id)
                self.write({"message": f"Cancelled job {job_id} (task '{taskid}' was running its unit "
                                       f"{unit}): as `{cli_name()} cancel {job_id}`; the running task's result is "
                                       f"discarded" if done else f"job {job_id} had already finished"})
                return
        return await original(self, taskid)
    post = tornado.web.authenticated(post)  # as Flower's own handler: 401 without the credentials
    post._zkhive_cancel = True
    TaskRevoke.post = post


def _gateway_pid(args) -> tuple[int, str | None]:
    """(pid, None) of the gateway ``ready gateway`` checks: ``--pid``; else the one the cluster
    of ``up`` recorded (it inspected pid 1, the init process, outside a container); else pid 1
    when that is a zkhive gateway (its container's main process). Else (0, why not)."""
    import psutil

    if args.pid is not None:
        return args.pid, None
    sup = Supervisor(run_dir_for(args))
    try:
        rec = sup.record("gateway") if sup.load() else None
    except SupervisorError as e:
        return 0, str(e)
    if rec is not None:
        if rec.process() is None:
            return 0, f"the gateway recorded in {sup.state_file} (pid {rec.pid}) is not running"
        return rec.pid, None
    try:
        line = psutil.Process(1).cmdline()
    except psutil.Error:
        line = []
    if "gateway" in line:
        return 1, None
    return 0, (f"no gateway recorded in {sup.state_file} and pid 1 is not one: "
               f"pass --pid, or --run-dir of the cluster")


def cmd_ready(args) -> int:
    """Exit 0 when the named service is ready (the health checks of docker-compose.yml)."""
    from . import readiness

    s = settings_for(args)
    if args.service == "redis":
        u = urlsplit(s.redis.url)
        reason = readiness.redis_check(u.hostname or "127.0.0.1", u.port or 6379, s.redis.secret())
    elif args.service == "flower":
        reason = readiness.flower_check(args.url or flower_url(s))
    elif args.service == "metrics":
        reason = readiness.metrics_check(args.url or metrics_url(s))
    elif args.service == "gateway":
        from .plan import gateway_address

        g = s.gateway
        if g.on_unix_socket() and g.socket is None:  # the socket up made, in its run directory
            s = s.model_copy(update={"gateway": g.model_copy(
                update={"socket": run_dir_for(args) / "gateway.sock"})})
        pid, reason = _gateway_pid(args)
        if reason is None:
            reason = (readiness.gateway_listening(pid, s.gateway)
                      or readiness.gateway_check(s, gateway_address(s)))
    else:
        import redis as redis_py

        r = redis_py.Redis.from_url(s.redis.url_with_password(), socket_timeout=2)
        try:
            reason = readiness.worker_check(r, host=s.worker.host, pid=args.pid or 1,
                                            preload=list(s.srs.preload))
        except redis_py.exceptions.RedisError as e:
            reason = f"cannot read the registry: {e}"
    if reason:
        print(f"not ready: {reason}", file=sys.stderr)
        return 1
    if not args.quiet:
        print("ready")
    return 0


# -- registration --------------------------------------------------------------------------------

def add_config(p) -> None:
    p.add_argument("--config", metavar="FILE", help="settings TOML (default: $ZKHIVE_CONFIG)")


def add_run_dir(p) -> None:
    p.add_argument("--run-dir", default=None,
                   help=f"state file, logs and Redis data of `up` (default: the running cluster's, "
                        f"else {DEFAULT_RUN_DIR})")


def add_up_options(p) -> None:
    p.add_argument("--synthesis-workers", type=int, default=1, metavar="N",
                   help="synthesis worker processes (default 1)")
    p.add_argument("--devices", metavar="LIST",
                   help="prover devices, e.g. cuda:0,cuda:1 or cpu:0 (default: every GPU, else cpu:0)")
    p.add_argument("--ready-timeout", type=float, default=180.0, metavar="S",
                   help="seconds each worker may take to become ready (default 180)")
    p.add_argument("--no-keeper", action="store_true",
                   help="do not restart crashed processes (when systemd or similar supervises)")


def register(sub) -> None:
    p = sub.add_parser("up", help="start Redis, workers and Flower on this machine; wait until ready")
    add_config(p)
    add_run_dir(p)
    add_up_options(p)
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("down", help="stop exactly what `zkhive up` started, and verify it is gone")
    add_config(p)
    add_run_dir(p)
    p.add_argument("--grace", type=float, default=None, metavar="S",
                   help="seconds of warm shutdown before SIGKILL (default: each worker's longest task)")
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("restart", help="replace one process of `zkhive up` (or every one of a role) on purpose")
    p.add_argument("target", help="a process name from `zkhive ps` (prove-cuda0, synthesis-1, flower) "
                                  "or a role (synthesis, prove, aggregate)")
    p.add_argument("--grace", type=float, default=None, metavar="S",
                   help="seconds of warm shutdown before SIGKILL (default: its longest task)")
    add_config(p)
    add_run_dir(p)
    p.set_defaults(func=cmd_restart)

    p = sub.add_parser("logs", help="the log of one process of `zkhive up` (-f: follow it)")
    p.add_argument("name", help="a process name from `zkhive ps` (redis, synthesis-0, prove-cpu0, keeper, ...)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing what it writes (Ctrl-C stops)")
    p.add_argument("-n", "--lines", type=int, default=50, metavar="N", help="last N lines first (default 50)")
    add_config(p)
    add_run_dir(p)
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("gc", help="remove dir-store blobs older than blobs.ttl_s that no job references")
    p.add_argument("--older-than", type=float, default=None, metavar="S",
                   help="age in seconds (default blobs.ttl_s)")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    add_config(p)
    add_run_dir(p)
    p.set_defaults(func=cmd_gc)

    p = sub.add_parser("keyholder", help="(internal) a CUDA device's key holder that `up` starts "
                                         "with [gpu] key_holder")
    p.add_argument("--device", required=True, help="cuda:N")
    add_config(p)
    add_run_dir(p)
    p.set_defaults(func=cmd_keyholder)

    p = sub.add_parser("keep", help="(internal) the keeper process that `up` starts")
    add_config(p)
    add_run_dir(p)
    p.set_defaults(func=cmd_keep)

    p = sub.add_parser("ps", help="the processes `zkhive up` started, with PID, start time and log")
    add_config(p)
    add_run_dir(p)
    p.set_defaults(func=cmd_ps)

    p = sub.add_parser("flower", help="run Flower (basic auth from [flower]) against the cluster")
    add_config(p)
    p.set_defaults(func=cmd_flower)

    p = sub.add_parser("metrics", help="run the Prometheus exporter ([metrics] address, port) against the cluster")
    add_config(p)
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser("ready", help="exit 0 when a service is ready (container health checks)")
    p.add_argument("service", choices=["redis", "worker", "flower", "metrics", "gateway"])
    p.add_argument("--pid", type=int, default=None,
                   help="worker, gateway: its PID on this host (default: worker, 1: the container's main "
                        "process; gateway, the one `up` recorded, else 1 when that is a gateway)")
    p.add_argument("--url", help="flower, metrics: base URL (default from [flower], [metrics])")
    p.add_argument("--quiet", "-q", action="store_true")
    add_config(p)
    add_run_dir(p)
    p.set_defaults(func=cmd_ready)
