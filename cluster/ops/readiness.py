"""Readiness checks, shared by ``zkhive up`` (polled while it starts the cluster) and
``zkhive ready`` (the docker-compose health checks), so "ready" means the same in both places:

- Redis: answers PING (with the password, when there is one);
- a worker: its registry entry (matched by host and PID) says ``ready``, which a worker sets only
  after it has loaded its keys and started consuming; a prover must also list every
  ``[srs] preload`` key as resident;
- Flower: ``GET /healthcheck`` answers ``OK`` (the one page Flower serves without auth);
- the metrics exporter: ``GET /metrics`` answers with ``zkhive_up 1.0`` (it reads Redis);
- the gateway: its process listens on its unix socket (``[gateway] socket``) or TCP ``port``
  (``gateway_listening``) and answers (``gateway_check``: a GetStatus within a deadline; the
  keeper asks the same to find a wedged gateway).

Each check returns None when ready, else a one-line reason (what it is still waiting for).
"""
from __future__ import annotations

import urllib.error
import urllib.request

import redis


def redis_check(host: str, port: int, password: str | None, timeout_s: float = 1.0) -> str | None:
    try:
        ok = redis.Redis(host=host, port=port, password=password, socket_timeout=timeout_s,
                         socket_connect_timeout=timeout_s).ping()
    except redis.exceptions.AuthenticationError as e:
        return f"Redis on {host}:{port} refused the password: {e}"
    except redis.exceptions.RedisError as e:
        return f"Redis on {host}:{port} does not answer PING yet ({e})"
    return None if ok else f"Redis on {host}:{port} answered PING with an error"


def worker_check(r, *, host: str, pid: int, preload: list[str] = ()) -> str | None:
    from cluster.pipeline import registry

    for w in registry.workers(r):
        if w.host == host and w.pid == pid:
            if w.standby:
                return None  # up and waiting on its device's lock: ready as what it is
            if not w.ready:
                return f"{w.worker_id} registered but not ready yet (loading keys)"
            missing = [k for k in preload if w.role == "prove" and k not in w.resident_keys]
            if missing:
                return f"{w.worker_id} ready but without resident keys {', '.join(missing)}"
            return None
    return f"no registry entry for pid {pid} on host {host} yet"


def flower_check(base_url: str, timeout_s: float = 1.0) -> str | None:
    url = base_url.rstrip("/") + "/healthcheck"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            body = resp.read(64)
            if resp.status == 200 and body.strip() == b"OK":
                return None
            return f"GET {url} answered {resp.status} {body[:32]!r}"
    except (urllib.error.URLError, OSError) as e:
        return f"GET {url} failed ({getattr(e, 'reason', e)})"


def metrics_check(base_url: str, timeout_s: float = 2.0) -> str | None:
    url = base_url.rstrip("/") + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            body = resp.read()
    except (urllib.error.URLError, OSError) as e:
        return f"GET {url} failed ({getattr(e, 'reason', e)})"
    if b"\nzkhive_up 1.0\n" not in b"\n" + body:
        return f"GET {url} answers, but without zkhive_up 1.0 (it cannot read Redis yet)"
    return None


def listening_check(pid: int, port: int, what: str = "the gateway") -> str | None:
    """The process ``pid`` itself listens on TCP ``port`` (the gateway: grpc binds the port
    only once the service is set up; port reuse is off, so no other process shares it)."""
    import psutil

    try:
        conns = psutil.Process(pid).net_connections(kind="inet")
    except psutil.Error as e:
        return f"{what} (pid {pid}) cannot be inspected: {e}"
    if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns):
        return None
    return f"{what} (pid {pid}) does not listen on port {port} yet"


def gateway_listening(pid: int, g) -> str | None:
    """The gateway (pid) listens where ``g`` (``[gateway]``) says: its unix socket, else its port."""
    if not g.on_unix_socket():
        return listening_check(pid, g.port)
    import psutil

    path = str(g.socket_path())
    try:
        conns = psutil.Process(pid).net_connections(kind="unix")
    except psutil.Error as e:
        return f"the gateway (pid {pid}) cannot be inspected: {e}"
    if any(c.laddr == path for c in conns):
        return None
    return f"the gateway (pid {pid}) does not listen on unix://{path} yet"


#: cuzk.v1.ProvingEngine's GetStatus, as the wire names it (cluster/gateway/pb/proving.proto)
GET_STATUS = "/cuzk.v1.ProvingEngine/GetStatus"


def gateway_check(s, target: str, timeout_s: float = 2.0) -> str | None:
    """The gateway at ``target`` answers a call within ``timeout_s``: None, else why not. Any
    answer counts (a refusal too: UNAUTHENTICATED, RESOURCE_EXHAUSTED); only silence (a
    deadline) or no connection fails. A gateway SIGSTOPped, or whose threads all wait, listens
    (the kernel accepts the connection) but does not answer. With TLS the probe is the TLS
    handshake, done by grpc's own threads (the certificate's name need not match ``target``)."""
    import grpc

    g = s.gateway
    if g.tls_cert is not None:
        return _tls_answers(target, timeout_s)
    token = g.secret()
    metadata = [("authorization", f"Bearer {token}")] if token else None
    with grpc.insecure_channel(target) as channel:
        # the method by its wire name, an empty GetStatusRequest as its bytes: the operator's
        # layer does not import the gateway's generated modules (tools/import_graph's layers)
        call = channel.unary_unary(GET_STATUS)
        try:
            call(b"", metadata=metadata, timeout=timeout_s)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
                return f"the gateway at {target} did not answer GetStatus within {timeout_s:g} s ({e.code().name})"
    return None


def _tls_answers(target: str, timeout_s: float) -> str | None:
    import socket
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # liveness, not identity
    try:
        if target.startswith("unix://"):  # TLS on the unix socket (unusual, but allowed)
            raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            raw.settimeout(timeout_s)
            raw.connect(target[len("unix://"):])
            host = "localhost"
        else:
            host, _, port = target.rpartition(":")
            host = host.strip("[]")
            raw = socket.create_connection((host, int(port)), timeout=timeout_s)
        with raw, ctx.wrap_socket(raw, server_hostname=host):
            return None
    except ssl.SSLError:
        return None  # it answered the handshake (a client certificate required, say)
    except OSError as e:
        return f"the gateway at {target} did not answer a TLS handshake within {timeout_s:g} s ({e})"
