"""All cluster settings: one pydantic model, loaded from a TOML file and the environment.

    [redis]
    url = "redis://10.0.0.5:6379/0"      # no password here
    password_file = "/etc/zkhive/redis.pass"

    [srs]
    param_cache = "/var/lib/zkhive/keys"  # cuzk: param cache
    preload = ["porep-lite-2k"]           # cuzk: preload list

    [worker]
    partition_workers = 2                 # cuzk: synthesis concurrency
    gpu_workers_per_device = 1            # cuzk: provers per GPU

Precedence: defaults < TOML file < environment. The file is ``--config PATH`` or
``$ZKHIVE_CONFIG``. Environment variables are ``ZKHIVE_<SECTION>__<KEY>`` (two underscores), e.g.
``ZKHIVE_REDIS__PASSWORD``, ``ZKHIVE_SRS__PRELOAD='["a","b"]'`` (lists and numbers as JSON).
Unknown keys, in the file or in a ``ZKHIVE_*__*`` variable, are rejected with a message naming the
key and where it came from; a typo must not silently fall back to a default. Passwords are never in
code nor in the URL default: give ``password`` through the environment or ``password_file``.
"""
from __future__ import annotations

import json
import os
import socket
import tomllib
from pathlib import Path
from typing import Any, Literal, Mapping
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from .errors import SettingsError

ENV_PREFIX = "ZKHIVE_"
CONFIG_ENV = "ZKHIVE_CONFIG"




def _secret(section: str, password: SecretStr | None, password_file: Path | None) -> str | None:
    """``password``, else the first line of ``password_file``, else None; an unreadable file is a
    SettingsError naming ``<section>.password_file``."""
    if password is not None:
        return password.get_secret_value()
    if password_file is not None:
        try:
            return password_file.read_text().splitlines()[0].strip()
        except (OSError, IndexError) as e:
            raise SettingsError(f"{section}.password_file {password_file}: cannot read a password ({e})")
    return None


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, use_attribute_docstrings=True)


class RedisSettings(Section):
    url: str = "redis://127.0.0.1:6379/0"
    """Broker and result backend (one Redis). Without credentials: a URL with a password is rejected."""
    password: SecretStr | None = None
    """Redis password (AUTH). Prefer ``ZKHIVE_REDIS__PASSWORD`` or ``password_file`` to a file in git."""
    password_file: Path | None = None
    """A file whose first line is the Redis password (read at start)."""
    maxmemory_bytes: int = Field(2 << 30, ge=0)
    """``maxmemory`` of the Redis ``zkhive up`` starts (docker-compose.yml: ``ZKHIVE_REDIS_MAXMEMORY``),
    with ``noeviction``: at the bound writes fail (a submit says "broker memory full") and no
    queue or job is ever evicted. 0: no bound. A Redis run elsewhere: set its own maxmemory."""

    @field_validator("url")
    @classmethod
    def _no_credentials_in_url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"scheme must be redis://, rediss:// or unix://, not {parts.scheme!r}")
        if parts.password:
            raise ValueError("put the password in redis.password or redis.password_file, not the URL")
        return v

    def secret(self) -> str | None:
        return _secret("redis", self.password, self.password_file)

    def url_with_password(self) -> str:
        """The URL Celery and redis-py connect with (kept out of logs and of ``zkhive status``)."""
        pw = self.secret()
        if not pw:
            return self.url
        p = urlsplit(self.url)
        netloc = f":{quote(pw, safe='')}@{p.hostname}" + (f":{p.port}" if p.port else "")
        return urlunsplit((p.scheme, netloc, p.path, p.query, p.fragment))


class BlobSettings(Section):
    backend: Literal["dir", "redis"] = "dir"
    """Where assignments, C1 inputs and results travel: ``dir`` (a directory every worker mounts) or
    ``redis`` (in Redis itself: the embedded one-machine setup; small payloads only)."""
    dir: Path = Path("var/blobs")
    """Root of the ``dir`` store; must be the same shared path on every machine."""
    redis_max_bytes: int = Field(64 << 20, gt=0)
    """Largest payload the ``redis`` store accepts (Redis holds it in memory)."""
    max_bytes: int = Field(16 << 30, gt=0)
    """Largest blob any reference may claim; a bigger size in a message is refused before reading."""
    min_free_bytes: int = Field(1 << 30, ge=0)
    """``dir`` store: a submit is refused (naming the free space) while its disk has less free than
    this, instead of accepting a job whose assignments cannot be written; 0 turns the check off."""
    ttl_s: int = Field(7 * 86400, gt=0)
    """How long ``redis`` blobs live; ``dir`` blobs older than this that no job record references
    are removed by ``zkhive gc`` (run it from cron: removing by age alone would take blobs a job
    still needs)."""


#: cuzk's circuit ids (curio extern/cuzk srs_manager.rs) that name one of our parameter sets
CUZK_PRELOAD = {"porep-32g": "filecoin-32g", "porep-64g": "filecoin-64g"}
#: bytes of the largest PoSt / SnapDeals request (a full 64 GiB WindowPoSt partition + 4 KiB):
#: cluster.gateway.kindlimits.largest_request(), pinned here so the settings' own checks need no
#: circuit import (tests/unit/test_kind_limits.py holds the two equal)
LARGEST_KIND_REQUEST = 58_709_493


class SrsSettings(Section):
    param_cache: Path = Path("var/keys")
    """Directory of proving and verifying keys (cuzk's param cache): bellperson's ``.params`` and
    ``.vk`` files, ``<params>.<digest16>.params|.vk`` or Filecoin's v28 names; older
    ``<params>.<digest16>.pk`` files are read too (docs/params.md)."""
    preload: list[str] = []
    """Parameter sets whose proving keys a prover loads before it reports ready (cuzk's preload;
    cuzk's ids ``porep-32g`` ... are taken for ``filecoin-32g`` ...)."""
    filecoin_cache: Path = Field(default_factory=lambda: Path(
        os.environ.get("FIL_PROOFS_PARAMETER_CACHE") or "/var/tmp/filecoin-proof-parameters"))
    """Filecoin's parameter cache (``$FIL_PROOFS_PARAMETER_CACHE``, else Filecoin's default): the
    ``filecoin-*`` sets' keys are read from here under their v28 names when ``param_cache`` holds
    none (docs/params.md)."""

    @field_validator("preload")
    @classmethod
    def _cuzk_ids(cls, v: list[str]) -> list[str]:
        return [CUZK_PRELOAD.get(x, x) for x in v]
    in_process: list[str] = []
    """Parameter sets whose proving keys a prover makes in its own process (at start when also in
    ``preload``, else on first use) and holds resident instead of reading ``param_cache``: keys too
    large for a file (2^27: 76 GB). The prover publishes the verifying key into ``param_cache``.
    Needs ``setup_seed`` or ``setup_seed_file`` (a development ceremony: cluster/pipeline/inprocess.py)."""
    setup_seed: SecretStr | None = None
    """Seed of the development ceremony for ``in_process`` keys: every prover with the same seed makes
    the same key. Whoever knows it knows the trapdoor: private deployments and tests only."""
    setup_seed_file: Path | None = None
    """A file whose first line is ``setup_seed`` (read at start)."""

    def seed(self) -> bytes | None:
        """The ceremony seed's bytes, or None; an unreadable or empty file is a SettingsError."""
        if self.setup_seed is not None:
            return self.setup_seed.get_secret_value().encode() or None
        if self.setup_seed_file is not None:
            try:
                line = self.setup_seed_file.read_text().splitlines()[0].strip()
            except (OSError, IndexError) as e:
                raise SettingsError(f"srs.setup_seed_file {self.setup_seed_file}: cannot read a seed ({e})")
            if not line:
                raise SettingsError(f"srs.setup_seed_file {self.setup_seed_file}: its first line is empty")
            return line.encode()
        return None


class WorkerSettings(Section):
    host: str = Field(default_factory=lambda: socket.gethostname().split(".")[0])
    """Host name in queue and registry names (``prove.<host>.<n>``); letters, digits, ``-`` and ``_``."""
    partition_workers: int = Field(1, ge=1, le=256)
    """Synthesis processes per synthesis worker (cuzk's synthesis concurrency)."""
    gpu_workers_per_device: int = Field(1, ge=1, le=16)
    """Prover processes allowed on one device (device-lock slots); they share the device's queue."""
    prover_standby: bool = False
    """``zkhive up`` starts one prover process more a device, which waits on the device lock as a
    standby: started, imported, the preloaded circuits' host work done, its device context and
    cubins made, Celery's start made ahead (its command line, plugins, result backend), registered as
    ``standby``, never consuming. When the prover dies (SIGKILL, a crash) or is replaced
    (``zkhive restart``: its warm stop releases the lock), the standby takes the lock within
    ``STANDBY_POLL_S`` and goes on as a prover (keys from the key holder, then Celery), and the
    keeper's restart of the other becomes the next standby: a prover is back without a process
    start in between (issue 40 item 2). A process a device more: its host memory, and on a CUDA
    device its context and loaded modules (a few hundred MB; no key, no working set before the
    lock)."""
    aggregate_workers: int = Field(2, ge=1, le=16)
    """Aggregate worker processes ``zkhive up`` starts (``aggregate-0`` ..), one queue, a job's
    aggregation in one of them. Each runs one aggregation at a time, and a 32 GiB PoRep job's
    (its C1 parsed again, ten proofs verified) held one for 2.75-4.24 s on the H200's host
    (2026-12-05, bench/gpu_curio.py's timelines): with one, a WinningPoSt finishing meanwhile
    waited for it, however urgent. Two: the second is free for it."""
    urgent_synthesis_workers: int = Field(1, ge=0, le=8)
    """Urgent synthesis workers ``zkhive up`` starts (``synthesis-urgent-0`` ..), one process each,
    consuming only ``synthesis.urgent``: a CRITICAL job's synthesis (WinningPoSt) never waits for
    the other workers' PoRep partitions (eight of them hold every process ~7.5 s on the H200's
    host: a WinningPoSt waited 4.76 s there, docs/performance.md). 0: none; the other synthesis
    workers still serve the urgent queue whenever a process is free."""
    device_memory_bytes: int | None = Field(None, gt=0)
    """Memory a prover may fill with resident keys; default: what the device reports free."""
    heartbeat_s: float = Field(2.0, gt=0)
    """Interval of registry and device-lock refreshes."""
    registry_ttl_s: float = Field(10.0, gt=0)
    """A worker whose heartbeat is older than this leaves the registry and gets no new work."""
    lock_ttl_s: float = Field(30.0, gt=0)
    """Device lock lifetime without refresh; a crashed worker's lock is taken over after it."""
    circuit_modules: list[str] = []
    """Extra Python modules imported at start to register circuit families (plugins, tests)."""

    @field_validator("host")
    @classmethod
    def _host_name(cls, v: str) -> str:
        if not v or not all(c.isalnum() or c in "-_" for c in v) or len(v) > 63:
            raise ValueError("must be 1-63 letters, digits, '-' or '_'")
        return v


class DeliverySettings(Section):
    visibility_timeout_s: int = Field(7200, gt=0)
    """Redis redelivers an unacknowledged message after this; must exceed the longest task."""
    max_redeliveries: int = Field(3, ge=0)
    """Attempts of one unit whose worker died holding it (a lapsed lease, a killed pool child),
    beyond the first, before the job fails naming the partition; duplicates are not counted."""
    prove_soft_time_limit_s: int = Field(1500, gt=0)
    """A prove task gets SoftTimeLimitExceeded after this and is retried on another device."""
    prove_time_limit_s: int = Field(1800, gt=0)
    """A prove task is killed after this (hard limit)."""
    synthesis_time_limit_s: int = Field(1800, gt=0)
    """Hard limit of one partition's synthesis."""
    job_deadline_s: int = Field(4 * 3600, gt=0)
    """A job not done this long after submission is failed by the watchdog, with a report."""
    watchdog_interval_s: float = Field(2.0, gt=0)
    """How often the watchdog reconciles the active jobs (lapsed leases, lost messages, deadlines)."""
    lease_ttl_s: float = Field(5.0, gt=0)
    """A claimed unit's lease lasts this long after its worker's last renewal (every third of it);
    a unit whose lease lapses (worker killed or frozen) is re-dispatched."""
    reconcile_grace_s: float = Field(2.0, ge=0)
    """A unit neither queued, leased nor done this long (lost in the hand-over) is re-dispatched."""
    partition_retries: int = Field(2, ge=0)
    """One partition's retry budget: re-proofs after a transient error, an unverifiable proof or
    a lost prover, together, before the job fails (bad input fails at once: cluster.pipeline.retry)."""
    result_ttl_s: int = Field(7 * 86400, gt=0)
    """How long job state stays in Redis: job records, partition proofs, timelines, the result's
    reference (and ``redis`` blobs, ``blobs.ttl_s``)."""
    task_result_ttl_s: int = Field(3600, gt=0)
    """How long Celery keeps a task's own result (Flower's ``/api/task/result``: the submit task's
    job id, a failure's one-line reason); each is a few hundred bytes, never the C1 input. The
    chord's join state lives until the job's deadline instead (``job_deadline_s`` + 1 h)."""


#: the job kinds, as cuzk names them (QueueStatus.proof_kind), each with its deadline setting in
#: [deadlines] (``<name>_s``)
JOB_KINDS = {"porep-c2": "porep", "snap-update": "snap", "window-post": "window_post",
             "winning-post": "winning_post"}


class DeadlineSettings(Section):
    """Per-kind deadlines (cuzk's: a WinningPoSt must be in the block within the epoch's ~30 s, a
    WindowPoSt partition within its proving window): a job not done this long after submission
    is failed by the watchdog, naming the setting. A job's own ``--deadline`` / ``deadline_s``
    replaces its kind's."""
    winning_post_s: float = Field(25.0, gt=0)
    """WinningPoSt (CRITICAL): inside the epoch's ~30 s budget, with room to send the block."""
    window_post_s: float = Field(1800.0, gt=0)
    """A WindowPoSt partition (HIGH): the deadline's 30 min challenge window."""
    porep_s: float | None = Field(None, gt=0)
    """A PoRep C2 job; unset: ``delivery.job_deadline_s``."""
    snap_s: float | None = Field(None, gt=0)
    """A SnapDeals update; unset: ``delivery.job_deadline_s``."""

    def for_kind(self, kind: str, delivery: "DeliverySettings") -> tuple[float, str]:
        """(seconds, the setting's name) of a job of ``kind``."""
        if kind not in JOB_KINDS:
            raise SettingsError(f"job kind {kind!r} is unknown (known: {', '.join(JOB_KINDS)})")
        name = JOB_KINDS[kind]
        v = getattr(self, f"{name}_s")
        if v is None:
            return float(delivery.job_deadline_s), "delivery.job_deadline_s"
        return float(v), f"deadlines.{name}_s"


class LimitSettings(Section):
    """Bounds on a submitted C1 document, checked before anything is stored (synthesis.limits;
    defaults 2-4x what sdr-32g's 16.4 MB document needs). Errors name the field and its size."""

    c1_max_bytes: int = Field(64 << 20, gt=0)
    """Largest C1 document (JSON text; a file, a client's dict, a Flower request's argument). A PoSt /
    SnapDeals job document is held to its own set's bound instead (cluster.pipeline.bounds.kind_limit)."""
    depth: int = Field(16, ge=2, le=200)
    """Deepest nesting of arrays and objects (a C1 document has 9 levels)."""
    string_bytes: int = Field(256, gt=0)
    """Longest string value (a field element is 66 characters)."""
    key_bytes: int = Field(64, gt=0)
    """Longest object key."""
    array_items: int = Field(4096, gt=0)
    """Most items of one array (porep-lite-16m: 895 challenges a partition)."""
    object_keys: int = Field(64, gt=0)
    """Most keys of one object."""
    int_digits: int = Field(40, ge=1, le=4000)
    """Most decimal digits of one integer (below Python's 4,300-digit conversion limit)."""

    def limits(self):
        from synthesis.limits import Limits

        return Limits(document_bytes=self.c1_max_bytes, depth=self.depth, string_bytes=self.string_bytes,
                      key_bytes=self.key_bytes, array_items=self.array_items,
                      object_keys=self.object_keys, int_digits=self.int_digits)


class FlowerSettings(Section):
    """Flower, the Celery web monitor (``zkhive flower``, started by ``zkhive up``); always behind
    HTTP basic auth."""

    address: str = "127.0.0.1"
    """Interface Flower listens on (``0.0.0.0`` inside a container, behind the published port)."""
    port: int = Field(5555, ge=1, le=65535)
    """Flower's HTTP port."""
    user: str = "zkhive"
    """Basic-auth user name."""
    password: SecretStr | None = None
    """Basic-auth password; prefer ``ZKHIVE_FLOWER__PASSWORD`` or ``password_file``."""
    password_file: Path | None = None
    """A file whose first line is the password (``zkhive up`` writes a random one when none is set)."""

    @field_validator("user")
    @classmethod
    def _user(cls, v: str) -> str:
        # Flower's basic_auth option is "user:password[,user:password]"
        if not v or ":" in v or "," in v:
            raise ValueError("must be non-empty, without ':' or ','")
        return v

    def secret(self) -> str | None:
        pw = _secret("flower", self.password, self.password_file)
        if pw is not None and "," in pw:
            raise SettingsError("flower.password: must not contain ',' (Flower splits its basic_auth list on it)")
        return pw or None


class MetricsSettings(Section):
    """The Prometheus exporter (``zkhive metrics``, started by ``zkhive up``): cluster series read
    from Redis (timelines, registry, queues), served at ``http://address:port/metrics``."""

    address: str = "127.0.0.1"
    """Interface the exporter listens on (``0.0.0.0`` inside a container, behind the published port)."""
    port: int = Field(9464, ge=1, le=65535)
    """The exporter's HTTP port (Prometheus scrapes ``/metrics`` there)."""
    job_window: int = Field(1000, ge=1, le=100000)
    """The most recent jobs whose timelines the exporter follows (older ones were counted before)."""


class GatewaySettings(Section):
    """cuzk's ProvingEngine gRPC service in front of the cluster (``zkhive gateway``, started by
    ``zkhive up``; docs/gateway.md). By default on a unix socket that only the operator's user and
    group can open (Curio's client dials ``unix://`` addresses): file permissions are the guard,
    since Curio sends neither a token nor a client certificate. TCP on loopback is an option;
    beyond loopback only with TLS and client certificates."""

    address: str = "unix"
    """``unix`` (the default): listen on the unix socket ``socket`` (mode 0660). An IP address or
    host name: TCP on ``port``; beyond loopback only with ``tls_cert``, ``tls_key`` and
    ``tls_client_ca`` (or ``plaintext_beyond_loopback``)."""
    socket: Path | None = None
    """The unix socket's path; default ``<run dir>/gateway.sock`` (``zkhive up`` records it in the
    cluster's settings and prints it: Curio's ``Cuzk.Address`` is ``unix://`` and this path)."""
    socket_group: str | None = None
    """A group the socket is given to (mode 0660: its members may call the gateway, e.g. the
    group Curio runs as); default: the gateway's own group."""
    port: int = Field(9820, ge=1, le=65535)
    """The gRPC port with a TCP ``address`` (cuzk's default)."""
    token: SecretStr | None = None
    """A bearer token every call must carry (``authorization: Bearer <token>``); none: no check."""
    token_file: Path | None = None
    """A file whose first line is the token."""
    tls_cert: Path | None = None
    """PEM certificate chain: with ``tls_key``, the gateway serves TLS only."""
    tls_key: Path | None = None
    """PEM private key of ``tls_cert``."""
    tls_client_ca: Path | None = None
    """PEM CA certificates: with TLS, every client must present a certificate they signed."""
    plaintext_beyond_loopback: bool = False
    """Allow a TCP ``address`` beyond loopback without TLS and client certificates: only inside a
    container whose port is published on the host's loopback (docker-compose.yml)."""
    max_message_bytes: int = Field(256 << 20, gt=0)
    """Largest response, and request (a 32 GiB Commit2 input is ~70 MB of base64-wrapped JSON);
    requests are read only up to what a Commit2 input or a full WindowPoSt partition may be, whichever
    is larger, when that is less (``request_bytes``)."""
    max_inflight_bytes: int = Field(256 << 20, gt=0)
    """Bytes of SubmitProof/Prove requests being received, decoded and stored at once (each costs
    a few times its size while it is); room for the largest request is reserved before a message
    is read. At least the largest request (``request_bytes``)."""
    inflight_wait_s: float = Field(10.0, ge=0)
    """How long a SubmitProof/Prove waits for room in ``max_inflight_bytes`` before it is refused
    with RESOURCE_EXHAUSTED (retry later)."""
    threads: int = Field(64, ge=2, le=4096)
    """Threads of the gateway: 4 answer GetStatus/GetMetrics only (one more answers refusals, 3 more
    SubmitProof); the rest serve the other calls, one each (each waiting Prove or AwaitProof holds one)."""
    queue: int = Field(64, ge=0, le=65536)
    """Calls that may wait for a thread when all are busy; one more is refused at once with
    RESOURCE_EXHAUSTED (cuzk clients retry it), never queued without bound."""
    control_timeout_s: float = Field(30.0, gt=0)
    """How long PreloadSRS/EvictSRS wait for the provers' answers (a prover answers between proofs)."""

    def secret(self) -> str | None:
        return _secret("gateway", self.token, self.token_file) or None

    def check_tls(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise SettingsError("gateway.tls_cert and gateway.tls_key: set both (TLS) or neither")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise SettingsError("gateway.tls_client_ca: client certificates need TLS (gateway.tls_cert, tls_key)")

    def request_bytes(self, c1_max_bytes: int, kinds_bytes: int = LARGEST_KIND_REQUEST) -> int:
        """The largest request the gateway reads: ``max_message_bytes``, or less, what a Commit2
        input may be (``c1_max_bytes`` as base64 in its JSON wrapper, cluster.gateway.c2input)
        plus 64 KiB for the other fields, or ``kinds_bytes`` when larger (the largest PoSt /
        SnapDeals request, cluster.gateway.kindlimits); a larger one is refused as its length arrives."""
        return min(self.max_message_bytes, max((c1_max_bytes + 2) // 3 * 4 + 4096 + (64 << 10), kinds_bytes))

    def on_unix_socket(self) -> bool:
        return self.address == "unix"

    def socket_path(self) -> Path:
        """The unix socket: ``socket``, else ``gateway.sock`` in the cluster's run directory
        (``$ZKHIVE_RUN_DIR``, set for every process of ``zkhive up``), else in ``var/up``."""
        if self.socket is not None:
            return self.socket.resolve()
        return (Path(os.environ.get("ZKHIVE_RUN_DIR") or "var/up") / "gateway.sock").resolve()

    def dial_address(self) -> str:
        """What a client dials: ``unix://<socket>`` or ``host:port`` (grpc's target syntax)."""
        if self.on_unix_socket():
            return f"unix://{self.socket_path()}"
        host = "127.0.0.1" if self.address in ("", "0.0.0.0") else ("[::1]" if self.address == "::" else self.address)
        return f"[{host}]:{self.port}" if ":" in host and not host.startswith("[") else f"{host}:{self.port}"


class GpuSettings(Section):
    key_holder: bool = False
    """A key holder process per CUDA device (cluster/pipeline/keyholder.py): ``zkhive up`` starts
    ``keyholder-cudaN`` before the device's provers; it makes or loads the proving keys and keeps
    them resident, and the provers attach to them through CUDA IPC, so a prover that crashes or
    is restarted (a new build) proves again without making or loading the key again. Off: each
    prover holds its own keys (docs/gpu.md)."""
    key_holder_timeout_s: float = Field(900.0, gt=0)
    """Seconds a prover waits for the holder to answer a ``hold`` (a 2^27 key made on the device:
    ~21 s; from a 47 GB ``.params`` file: ~86 s) and, at its start, for the holder to answer."""


class LogSettings(Section):
    """The logs of ``zkhive up``'s processes (``<run dir>/logs/*.log``): the keeper rotates each
    one when it grows past ``max_bytes`` (copy to ``.1``, then truncate in place: the process
    keeps writing to the same file), and so does every (re)start of a process."""

    max_bytes: int = Field(64 << 20, ge=0)
    """Size at which a log is rotated; 0: never (rotate them yourself, logrotate ``copytruncate``)."""
    backups: int = Field(5, ge=0, le=100)
    """Rotated copies kept (``NAME.log.1`` newest .. ``NAME.log.N``); 0: the log is only truncated."""


class Settings(Section):
    redis: RedisSettings = RedisSettings()
    blobs: BlobSettings = BlobSettings()
    srs: SrsSettings = SrsSettings()
    worker: WorkerSettings = WorkerSettings()
    delivery: DeliverySettings = DeliverySettings()
    deadlines: DeadlineSettings = DeadlineSettings()
    flower: FlowerSettings = FlowerSettings()
    metrics: MetricsSettings = MetricsSettings()
    limits: LimitSettings = LimitSettings()
    gateway: GatewaySettings = GatewaySettings()
    logs: LogSettings = LogSettings()
    gpu: GpuSettings = GpuSettings()
    source: str | None = Field(None, exclude=True)
    """The settings file these were read from, if any (informational)."""

    def check(self) -> "Settings":
        """Rules across fields: a visibility timeout shorter than a task would redeliver it."""
        d = self.delivery
        where = f"settings file {self.source}" if self.source else "settings"
        longest = max(d.prove_time_limit_s, d.synthesis_time_limit_s)
        if d.visibility_timeout_s <= longest:
            raise SettingsError(
                f"{where}: delivery.visibility_timeout_s ({d.visibility_timeout_s}) "
                f"must exceed the longest task time limit ({longest} s), or Redis redelivers "
                "running tasks to a second worker")
        if d.prove_soft_time_limit_s >= d.prove_time_limit_s:
            raise SettingsError(f"{where}: delivery.prove_soft_time_limit_s must be "
                                "below delivery.prove_time_limit_s")
        g = self.gateway
        largest = g.request_bytes(self.limits.c1_max_bytes)
        if g.max_inflight_bytes < largest:
            raise SettingsError(f"{where}: gateway.max_inflight_bytes ({g.max_inflight_bytes}) must be at least "
                                f"the largest request ({largest}: gateway.max_message_bytes, or a Commit2 input "
                                f"of limits.c1_max_bytes or a full WindowPoSt partition if less), or no request "
                                f"could be served")
        return self


def _env_overrides(env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    sections = {name: model for name, model in Settings.model_fields.items() if name != "source"}
    for var, raw in env.items():
        # only ZKHIVE_SECTION__KEY is ours: other ZKHIVE_* flags (ZKHIVE_STAGE_LOG, ...) pass by
        if not var.startswith(ENV_PREFIX) or "__" not in var:
            continue
        section, _, key = var[len(ENV_PREFIX):].lower().partition("__")
        if section not in sections:
            raise SettingsError(f"environment variable {var}: unknown section {section!r} "
                                f"(known: {', '.join(sorted(sections))})")
        fields = sections[section].annotation.model_fields
        if key not in fields:
            raise SettingsError(f"environment variable {var}: unknown key {section}.{key} "
                                f"(known: {', '.join(sorted(fields))})")
        out.setdefault(section, {})[key] = _env_value(raw, fields[key].annotation)
    return out


def _env_value(raw: str, annotation) -> Any:
    # lists and numbers come as JSON; plain strings stay strings
    text = str(annotation)
    # ("" in "[{" is True: an empty value is a string, not a list)
    if (raw and raw[0] in "[{") or "list" in text:
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return [s for s in raw.split(",") if s]
    return raw


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load(path: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``path`` (or ``$ZKHIVE_CONFIG``) and the environment; SettingsError names the
    bad key and its source."""
    env = os.environ if env is None else env
    path = path or env.get(CONFIG_ENV) or None
    data: dict[str, Any] = {}
    source = None
    if path:
        source = str(path)
        try:
            data = tomllib.loads(Path(path).read_text())
        except OSError as e:
            raise SettingsError(f"settings file {path}: {e.strerror or e}") from None
        except tomllib.TOMLDecodeError as e:
            raise SettingsError(f"settings file {path}: not valid TOML: {e}") from None
    data = _merge(data, _env_overrides(env))
    try:
        settings = Settings(**data, source=source)
    except ValidationError as e:
        from synthesis.limits import schema_message

        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        # blame the variable when the value came from one, not the settings file (issue 27)
        var = next((v for v in env if v.startswith(ENV_PREFIX) and "__" in v
                    and v[len(ENV_PREFIX):].lower().partition("__")[::2] == tuple(map(str, err["loc"][:2]))),
                   None)
        where = f"environment variable {var}" if var else (f"settings file {source}" if source else "settings")
        if err["type"] == "extra_forbidden":
            raise SettingsError(f"{where}: unknown key {key}") from None
        raise SettingsError(f"{where}: {key}: {schema_message(err)}") from None
    return settings.check()
