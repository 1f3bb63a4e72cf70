"""docker-compose.yml and the Dockerfile, checked without a Docker engine (the compose cluster
itself runs in tests/integration/test_compose_cluster.py, where an engine can run).

``problems(compose_text)`` is the validator: every zkhive service's command and health check
must parse with the real ``zkhive`` argument parser; every volume, secret and ``${VAR}`` it uses
must be defined; every ``ZKHIVE_*`` variable it sets must load through the settings model; and
the issue's operational rules (Redis private, persistent and non-evicting; one GPU per prover,
each with its own queue; grace periods longer than the longest task) must hold. The real file
must give no problem; broken copies must each give the problem that names what is wrong.
"""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

_VAR = re.compile(r"(?<!\$)\$\{([^}]*)\}")


def interpolate(text: str) -> tuple[str, list[str]]:
    """Compose's variable substitution with every variable unset: ``${X:-d}`` -> d. Returns the
    text and a problem for each ``${X}`` that has no default and no ``:?`` message."""
    issues = []

    def sub(m):
        body = m.group(1)
        name, op, rest = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(:?[-?]|)(.*)", body).groups()
        if op in (":-", "-"):
            return rest
        if op in (":?", "?"):
            return f"<required {name}>"
        issues.append(f"variable ${{{name}}} has neither a default (:-) nor an error message (:?)")
        return ""
    out = _VAR.sub(sub, text)
    return out.replace("$$", "$"), issues


def seconds(duration: str) -> float:
    total, n = 0.0, 0
    for value, unit in re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s|us)", str(duration)):
        total += float(value) * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6}[unit]
        n += 1
    if not n:
        raise ValueError(f"not a compose duration: {duration!r}")
    return total


def dockerfile_stages(text: str) -> dict[str, list[str]]:
    """Stage name -> its instruction lines (continuations joined)."""
    stages, cur = {}, None
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+\S+(?:\s+AS\s+(\S+))?", line, re.I)
        if m:
            cur = m.group(1) or f"stage{len(stages)}"
            stages[cur] = [line]
        elif cur:
            stages[cur].append(line)
    return stages


def _parse_zkhive(argv: list[str]):
    """(namespace, None) or (None, argparse's error) for ``zkhive argv``."""
    from cluster.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = build_parser().parse_args(argv)
    except SystemExit:
        return None, err.getvalue().strip().splitlines()[-1]
    if not getattr(ns, "func", None):
        return None, "no subcommand"
    return ns, None


def problems(text: str, dockerfile: str | None = None) -> list[str]:
    from cluster import settings as settings_mod
    from cluster.pipeline.prover import parse_device

    text, out = interpolate(text)
    doc = yaml.safe_load(text)
    if "name" in doc:
        out.append("top-level `name:` is rejected by docker-compose 1.29 (Debian's): pin the project "
                   "name with COMPOSE_PROJECT_NAME or -p instead")
    stages = dockerfile_stages(dockerfile if dockerfile is not None else DOCKERFILE.read_text())
    services = doc.get("services", {})
    volumes, secrets = set(doc.get("volumes") or {}), set(doc.get("secrets") or {})
    used_volumes, used_secrets = set(), set()
    prove_queues: dict[str, str] = {}
    gpu_ids: dict[str, str] = {}

    for name, svc in services.items():
        where = f"service {name}"
        for v in svc.get("volumes", []):
            src = v.split(":")[0] if isinstance(v, str) else v.get("source")
            if src and not src.startswith((".", "/")):
                used_volumes.add(src)
                if src not in volumes:
                    out.append(f"{where}: volume {src} is not defined under volumes:")
        for sec in svc.get("secrets", []):
            sec = sec if isinstance(sec, str) else sec.get("source")
            used_secrets.add(sec)
            if sec not in secrets:
                out.append(f"{where}: secret {sec} is not defined under secrets:")
        if "restart" not in svc:
            out.append(f"{where}: no restart policy")
        if "healthcheck" not in svc:
            out.append(f"{where}: no health check")
        if not str(svc.get("image", "")).startswith("zkhive:"):
            continue

        # -- a zkhive service: the image's entrypoint is `zkhive`, `command` its arguments -----
        target = (svc.get("build") or {}).get("target")
        if target not in stages:
            out.append(f"{where}: build target {target!r} is not a Dockerfile stage ({', '.join(stages)})")
        cmd = svc.get("command")
        if not isinstance(cmd, list):
            out.append(f"{where}: command must be a list (exec form), not {cmd!r}")
            continue
        args, err = _parse_zkhive([str(c) for c in cmd])
        if err:
            out.append(f"{where}: `zkhive {' '.join(map(str, cmd))}` is not a valid command: {err}")
            continue
        test = (svc.get("healthcheck") or {}).get("test", [])
        if test[:2] != ["CMD", "zkhive"] or test[2:3] != ["ready"]:
            out.append(f"{where}: health check must be `zkhive ready ...` (the readiness of `zkhive up`), not {test}")
        else:
            _, err = _parse_zkhive(test[2:])
            if err:
                out.append(f"{where}: health check `{' '.join(test[1:])}` is not valid: {err}")
        env = {k: str(v) for k, v in (svc.get("environment") or {}).items()}
        try:
            s = settings_mod.load(env=env)
        except settings_mod.SettingsError as e:
            out.append(f"{where}: its environment does not load: {e}")
            continue
        mine = {x if isinstance(x, str) else x.get("source") for x in svc.get("secrets", [])}
        for key, value in env.items():
            if key.endswith("PASSWORD_FILE"):
                m = re.fullmatch(r"/run/secrets/([\w.-]+)", value)
                if not m or m.group(1) not in mine:
                    out.append(f"{where}: {key}={value} is not one of its secrets ({', '.join(sorted(mine))})")
        if s.redis.password is None and s.redis.password_file is None:
            out.append(f"{where}: no Redis password")
        if (s.redis.url.split("//")[1].split(":")[0]) not in services:
            out.append(f"{where}: redis.url {s.redis.url} does not name a service")
        mounts = [v.split(":")[1] for v in svc.get("volumes", []) if isinstance(v, str) and ":" in v]
        for what, path in (("blobs.dir", s.blobs.dir), ("srs.param_cache", s.srs.param_cache)):
            if not any(str(path).startswith(m.rstrip("/") + "/") for m in mounts):
                out.append(f"{where}: {what} {path} is not on a shared volume ({mounts})")

        if cmd[0] == "worker":
            longest = max(s.delivery.prove_time_limit_s, s.delivery.synthesis_time_limit_s)
            grace = seconds(svc.get("stop_grace_period", "10s"))
            if grace <= longest:
                out.append(f"{where}: stop_grace_period {grace:.0f} s is not longer than the longest "
                           f"task ({longest} s): docker would SIGKILL a running prove")
            if args.role == "synthesis" and ("hostname" in svc or "container_name" in svc):
                out.append(f"{where}: a fixed hostname/container_name prevents --scale")
        if cmd[0] == "worker" and args.role == "prove":
            host = svc.get("hostname")
            if not host:
                out.append(f"{where}: a prover needs a stable hostname (its queue and device lock)")
                continue
            queue = parse_device(args.device).queue(host)
            if queue in prove_queues:
                out.append(f"{where}: queue {queue} is also {prove_queues[queue]}'s")
            prove_queues[queue] = name
            devs = (((svc.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices", [])
            if args.device.startswith("cuda"):
                if len(devs) != 1 or devs[0].get("driver") != "nvidia" or "gpu" not in devs[0].get("capabilities", []) \
                        or len(devs[0].get("device_ids", [])) != 1:
                    out.append(f"{where}: a GPU prover needs exactly one NVIDIA device reservation")
                else:
                    gid = devs[0]["device_ids"][0]
                    if gid in gpu_ids:
                        out.append(f"{where}: GPU {gid} is also reserved by {gpu_ids[gid]}")
                    gpu_ids[gid] = name
                if target != "gpu":
                    out.append(f"{where}: a GPU prover must use the gpu image target")
        if cmd[0] == "flower":
            if not s.flower.password and not s.flower.password_file:
                out.append(f"{where}: Flower without basic auth")
            published = [str(p) for p in svc.get("ports", [])]
            if not all(p.startswith("127.0.0.1:") and p.endswith(f":{s.flower.port}") for p in published):
                out.append(f"{where}: ports {published} must publish flower.port {s.flower.port} on 127.0.0.1 only")

        if cmd[0] == "metrics":
            published = [str(p) for p in svc.get("ports", [])]
            if not published or not all(p.startswith("127.0.0.1:") and p.endswith(f":{s.metrics.port}")
                                        for p in published):
                out.append(f"{where}: ports {published} must publish metrics.port {s.metrics.port} on 127.0.0.1 only")

        if cmd[0] == "gateway":
            published = [str(p) for p in svc.get("ports", [])]
            if not published or not all(p.endswith(f":{s.gateway.port}") for p in published):
                out.append(f"{where}: ports {published} must publish gateway.port {s.gateway.port}")
            elif not all(p.startswith("127.0.0.1:") for p in published) and not s.gateway.secret() \
                    and s.gateway.tls_cert is None:
                out.append(f"{where}: ports {published} beyond 127.0.0.1 without a token or TLS")

    for v in sorted(volumes - used_volumes):
        out.append(f"volume {v} is defined but no service uses it")
    for sec in sorted(secrets - used_secrets):
        out.append(f"secret {sec} is defined but no service uses it")

    redis = services.get("redis")
    if redis is None:
        out.append("no redis service")
    else:
        if redis.get("ports"):
            out.append("service redis: publishes ports on the host")
        line = " ".join(map(str, redis.get("command", [])))
        for flag in ("--appendonly yes", "--appendfsync everysec", "--maxmemory-policy noeviction", "--maxmemory ",
                     "requirepass"):
            if flag not in line:
                out.append(f"service redis: command lacks {flag}")
    return out


# -- the real files ------------------------------------------------------------------------------

def test_compose_file_is_valid():
    assert problems(COMPOSE.read_text()) == []


def test_compose_declares_what_the_issue_asks():
    text, _ = interpolate(COMPOSE.read_text())
    svc = yaml.safe_load(text)["services"]
    assert {"redis", "aggregate", "synthesis", "flower", "metrics", "gateway", "prover-gpu0", "prover-gpu1",
            "prover-cpu"} <= set(svc)
    assert svc["prover-gpu0"]["profiles"] == ["gpu"] and svc["prover-cpu"]["profiles"] == ["cpu"]
    assert svc["synthesis"]["command"] == ["worker", "synthesis"]


def test_every_compose_variable_is_documented_in_its_header():
    text = COMPOSE.read_text()
    header = text.split("\nx-zkhive-env:")[0]
    for name in {m.group(1).split(":")[0].split("-")[0] for m in _VAR.finditer(text)}:
        assert re.search(rf"#\s+{name}\s", header), f"${{{name}}} is used but not described in the header"


def test_dockerfile_targets():
    stages = dockerfile_stages(DOCKERFILE.read_text())
    assert {"cpu", "gpu"} <= set(stages)
    assert re.match(r"FROM\s+\$\{CUDA_IMAGE\}", stages["gpu"][0])
    assert re.search(r"ARG CUDA_IMAGE=nvidia/cuda:\S+-devel-", DOCKERFILE.read_text())
    assert any(".[gpu]" in line for line in stages["gpu"]), "PyCUDA (the gpu extra) is not installed"
    for name in ("cpu", "gpu"):
        lines = stages[name]
        users = [line.split()[1] for line in lines if line.startswith("USER ")]
        assert users and users[-1] not in ("root", "0"), f"{name}: runs as root"
        entry = [line for line in lines if line.startswith("ENTRYPOINT")]
        assert entry and entry[-1] == 'ENTRYPOINT ["zkhive"]', f"{name}: entrypoint not in exec form"
        assert all(line.startswith("CMD [") for line in lines if line.startswith("CMD")), name


def test_dockerignore_keeps_secrets_and_state_out_of_the_image():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for path in (".git", ".venv", "var", "secrets"):
        assert path in ignored, path


# -- the validator rejects broken files ------------------------------------------------------------

def _mutate(old: str, new: str) -> str:
    text = COMPOSE.read_text()
    assert old in text, old
    return text.replace(old, new, 1)


@pytest.mark.parametrize("old, new, message", [
    ('command: ["worker", "prove", "--device", "cuda:0"]\n    hostname: prover-gpu0',
     'command: ["worker", "prove", "--devcie", "cuda:0"]\n    hostname: prover-gpu0',
     "service prover-gpu0: `zkhive worker prove --devcie cuda:0` is not a valid command: "
     "zkhive: error: unrecognized arguments: --devcie"),
    ('command: ["worker", "synthesis"]', 'command: ["worker", "synthesise"]',
     "service synthesis: `zkhive worker synthesise` is not a valid command"),
    ('command: ["flower"]', 'command: ["flowers"]', "service flower: `zkhive flowers` is not a valid command"),
    ('test: ["CMD", "zkhive", "ready", "flower", "--quiet"]', 'test: ["CMD", "zkhive", "ready", "flwr"]',
     "service flower: health check `zkhive ready flwr` is not valid"),
    ('test: ["CMD", "zkhive", "ready", "flower", "--quiet"]', 'test: ["CMD", "curl", "localhost:5555"]',
     "service flower: health check must be `zkhive ready ...`"),
    ('volumes: ["zkhive-data:/var/lib/zkhive"]', 'volumes: ["zkhive-dat:/var/lib/zkhive"]',
     "service aggregate: volume zkhive-dat is not defined under volumes:"),
    ('secrets: [redis_password, flower_password]', 'secrets: [redis_password, flower_pass]',
     "service flower: secret flower_pass is not defined under secrets:"),
    ("ZKHIVE_BLOBS__DIR: /var/lib/zkhive/blobs", "ZKHIVE_BLOBS__DIRECTORY: /var/lib/zkhive/blobs",
     "its environment does not load: environment variable ZKHIVE_BLOBS__DIRECTORY: unknown key blobs.directory"),
    ('ZKHIVE_DELIVERY__VISIBILITY_TIMEOUT_S: "7200"', 'ZKHIVE_DELIVERY__VISIBILITY_TIMEOUT_S: "600"',
     "delivery.visibility_timeout_s (600) must exceed the longest task time limit"),
    ("ZKHIVE_SRS__PRELOAD: ${ZKHIVE_PRELOAD:-[]}", "ZKHIVE_SRS__PRELOAD: ${ZKHIVE_PRELOAD}",
     "variable ${ZKHIVE_PRELOAD} has neither a default"),
    ("stop_grace_period: 1860s", "stop_grace_period: 60s",
     "stop_grace_period 60 s is not longer than the longest task (1800 s)"),
    ('device_ids: ["1"]', 'device_ids: ["0"]', "service prover-gpu1: GPU 0 is also reserved by prover-gpu0"),
    ("hostname: prover-gpu1", "hostname: prover-gpu0", "service prover-gpu1: queue prove.prover-gpu0.0 is also prover-gpu0's"),
    ('ports: ["127.0.0.1:${ZKHIVE_FLOWER_PORT:-5555}:5555"]', 'ports: ["5555:5555"]',
     "on 127.0.0.1 only"),
    ('ports: ["127.0.0.1:${ZKHIVE_GATEWAY_PORT:-9820}:9820"]', 'ports: ["9820:9820"]',
     "service gateway: ports ['9820:9820'] beyond 127.0.0.1 without a token or TLS"),
    ('ports: ["127.0.0.1:${ZKHIVE_METRICS_PORT:-9464}:9464"]', 'ports: ["0.0.0.0:9464:9464"]',
     "service metrics: ports ['0.0.0.0:9464:9464'] must publish metrics.port 9464 on 127.0.0.1 only"),
    ('test: ["CMD", "zkhive", "ready", "metrics", "--quiet"]', 'test: ["CMD", "zkhive", "ready", "metrix"]',
     "service metrics: health check `zkhive ready metrix` is not valid"),
    ("ZKHIVE_FLOWER__PASSWORD_FILE: /run/secrets/flower_password", "ZKHIVE_FLOWER__PASSWORD_FILE: /etc/flower.pass",
     "service flower: ZKHIVE_FLOWER__PASSWORD_FILE=/etc/flower.pass is not one of its secrets"),
    ("    # no `ports:`: Redis", '    ports: ["6379:6379"]\n    # no `ports:`: Redis', "service redis: publishes ports on the host"),
    ("--maxmemory-policy noeviction", "--maxmemory-policy allkeys-lru", "service redis: command lacks --maxmemory-policy noeviction"),
    ("--maxmemory ${ZKHIVE_REDIS_MAXMEMORY:-2gb} ", "", "service redis: command lacks --maxmemory "),
    ("build: {context: ., target: gpu}", "build: {context: ., target: cuda}", "build target 'cuda' is not a Dockerfile stage"),
])
def test_validator_rejects_broken_compose(old, new, message):
    found = problems(_mutate(old, new))
    assert any(message in p for p in found), found


def test_validator_rejects_a_top_level_name():
    found = problems(_mutate("x-zkhive-env: &zkhive-env", "name: zkhive\n\nx-zkhive-env: &zkhive-env"))
    assert any("top-level `name:` is rejected by docker-compose 1.29" in p for p in found), found


def test_dockerfile_trusts_no_extra_ca():
    # the compose test's local base image carries the host's CA bundle; the shipped images never do
    text = DOCKERFILE.read_text()
    for word in ("ca-certificates.crt", "PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "trusted-host"):
        assert word not in text, word


def test_validator_rejects_an_unused_volume():
    found = problems(_mutate("  redis-data: {}\n", "  redis-data: {}\n  spare: {}\n"))
    assert "volume spare is defined but no service uses it" in found
