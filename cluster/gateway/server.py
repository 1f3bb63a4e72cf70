"""The gateway's gRPC server: cuzk's ProvingEngine (cluster.gateway.service) on ``[gateway]
address:port``, with the optional bearer token and TLS of the settings.

Port reuse is off (grpc turns SO_REUSEPORT on by default): a second gateway on the same port
fails to start instead of silently sharing it. SIGTERM stops taking calls and gives those in
flight a few seconds; a Prove cut off there leaves its job running, and the caller's retry with
the same request_id gets its proof.
"""
from __future__ import annotations

import hmac
import signal
import threading
from concurrent.futures import Executor, ThreadPoolExecutor

import grpc

from cluster.errors import SettingsError

from .pb import proving_pb2_grpc as pb_grpc
from .service import ProvingEngine

#: seconds the calls in flight get when the gateway stops
STOP_GRACE_S = 5.0


class GatewayError(RuntimeError):
    """The gateway cannot start: one line (bad TLS files, a port it cannot bind)."""


class TokenCheck(grpc.ServerInterceptor):
    """Every call carries ``authorization: Bearer <token>``, else UNAUTHENTICATED."""

    def __init__(self, token: str):
        self._want = f"Bearer {token}".encode()

    def intercept_service(self, continuation, handler_call_details):
        got = dict(handler_call_details.invocation_metadata or ()).get("authorization", "")
        if hmac.compare_digest(got.encode() if isinstance(got, str) else bytes(got), self._want):
            return continuation(handler_call_details)
        message = ("missing bearer token (metadata authorization: Bearer <token>; gateway.token)"
                   if not got else "the bearer token is not the gateway's (gateway.token)")

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        deny._zkhive_lane = "cheap"  # answered at once, beside GetStatus (Lanes)
        return grpc.unary_unary_rpc_method_handler(deny)


#: calls that only read (answered in milliseconds): they run on threads of their own, so a
#: gateway full of submissions and waiting Prove calls still answers them
CHEAP = ("GetStatus", "GetMetrics")
#: threads kept for the cheap calls and for refusals, out of ``gateway.threads``
RESERVE = 4


def _refuse_busy(message: str):
    def refuse(request, context):
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
    refuse._zkhive_lane = "cheap"
    return refuse


class Lanes(Executor):
    """The gateway's thread pool, as grpc calls it (``submit`` from its polling thread, one call
    each): the cheap calls (``CHEAP``) on ``RESERVE`` threads of their own; every other call
    counted from the moment it arrives until it ends, at most ``threads - RESERVE`` running and
    ``queue`` waiting for a thread; one more is answered RESOURCE_EXHAUSTED at once (on the
    reserve: cuzk clients retry it), never queued without bound.

    The lane of a call is read from its handler (``_zkhive_lane`` on the servicer's methods,
    see ``mark_lanes``); a call whose lane cannot be read is counted as a heavy one."""

    def __init__(self, threads: int, queue: int):
        reserve = min(RESERVE, max(1, threads // 4))
        self.cap, self.queue = threads - reserve, queue
        self.main = ThreadPoolExecutor(max_workers=self.cap, thread_name_prefix="gateway")
        self.fast = ThreadPoolExecutor(max_workers=reserve, thread_name_prefix="gateway-cheap")
        self._lock = threading.Lock()
        self.in_progress = 0  # heavy calls running or waiting for a thread
        self.refused = 0
        self._refuse = _refuse_busy(f"gateway busy: {self.cap} calls in progress and {queue} waiting "
                                    f"(gateway.threads, gateway.queue); retry")

    def submit(self, fn, /, *args, **kwargs):
        lane, at = None, None
        for i, a in enumerate(args):
            lane = getattr(a, "_zkhive_lane", None)
            if lane is not None:
                at = i
                break
        if lane == "cheap":
            return self.fast.submit(fn, *args, **kwargs)
        with self._lock:
            if self.in_progress >= self.cap + self.queue:
                self.refused += 1
                if at is not None:  # the same call, answered by the refusal instead
                    args = args[:at] + (self._refuse,) + args[at + 1:]
                    return self.fast.submit(fn, *args, **kwargs)
            self.in_progress += 1
        future = self.main.submit(fn, *args, **kwargs)
        future.add_done_callback(self._ended)
        return future

    def _ended(self, _future) -> None:
        with self._lock:
            self.in_progress -= 1

    def shutdown(self, wait=True, *, cancel_futures=False):
        self.main.shutdown(wait, cancel_futures=cancel_futures)
        self.fast.shutdown(wait, cancel_futures=cancel_futures)


def mark_lanes(servicer) -> None:
    """Each method of the servicer names its lane (read by ``Lanes.submit`` from the handler grpc
    passes it): the cheap ones ``cheap``, every other ``heavy``."""
    for name in ("SubmitProof", "AwaitProof", "Prove", "CancelProof", "GetStatus", "GetMetrics",
                 "PreloadSRS", "EvictSRS"):
        fn = getattr(type(servicer), name)
        fn._zkhive_lane = "cheap" if name in CHEAP else "heavy"


def _bind_address(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def _check_port(address: str, port: int, where: str) -> None:
    """Bind the port once ourselves: a taken port is our one line, before grpc logs its own."""
    import socket

    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as grpc does: TIME_WAIT is no owner
        try:
            sock.bind((address, port))
        except OSError as e:
            raise GatewayError(f"cannot listen on {where} ([gateway] address, port): {e.strerror or e}") from None


def build(s, rt) -> tuple[grpc.Server, int]:
    """A started-to-be server for settings ``s`` over runtime ``rt``, and the port it bound."""
    g = s.gateway
    try:
        g.check_tls()
        token = g.secret()
    except SettingsError as e:
        raise GatewayError(str(e)) from None
    opts = [("grpc.max_receive_message_length", g.max_message_bytes),
            ("grpc.max_send_message_length", g.max_message_bytes),
            ("grpc.so_reuseport", 0)]
    lanes = Lanes(g.threads, g.queue)
    server = grpc.server(lanes, interceptors=[TokenCheck(token)] if token else [], options=opts)
    engine = ProvingEngine(rt, control_timeout_s=g.control_timeout_s)
    mark_lanes(engine)
    pb_grpc.add_ProvingEngineServicer_to_server(engine, server)
    server.zkhive_lanes = lanes
    where = _bind_address(g.address, g.port)
    _check_port(g.address, g.port, where)
    try:
        if g.tls_cert is not None:
            try:
                creds = grpc.ssl_server_credentials([(g.tls_key.read_bytes(), g.tls_cert.read_bytes())])
            except OSError as e:
                raise GatewayError(f"gateway.tls_cert/tls_key: cannot read {e.filename}: {e.strerror}") from None
            port = server.add_secure_port(where, creds)
        else:
            port = server.add_insecure_port(where)
    except RuntimeError as e:  # grpc raises RuntimeError when it cannot bind
        raise GatewayError(f"cannot listen on {where} ([gateway] address, port): {e}") from None
    if not port:
        raise GatewayError(f"cannot listen on {where} ([gateway] address, port): in use or not an address here")
    return server, port


def serve(s, rt, out=print) -> int:
    """Run the gateway until SIGTERM or SIGINT (``zkhive gateway``)."""
    server, port = build(s, rt)
    server.start()
    g = s.gateway
    how = ("TLS" if g.tls_cert else "plaintext") + (", bearer token" if g.secret() else ", no token")
    out(f"zkhive gateway: serving cuzk.v1.ProvingEngine on {_bind_address(g.address, port)} ({how}; "
        f"Redis {s.redis.url})", flush=True)
    if g.address not in ("127.0.0.1", "localhost", "::1") and not g.secret() and not g.tls_cert:
        out("zkhive gateway: note: listening beyond loopback without a token or TLS: anyone who "
            "reaches the port can submit and cancel proofs", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop(STOP_GRACE_S).wait()
    return 0
