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
from concurrent.futures import ThreadPoolExecutor

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
        return grpc.unary_unary_rpc_method_handler(deny)


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
    server = grpc.server(ThreadPoolExecutor(max_workers=g.threads, thread_name_prefix="gateway"),
                         interceptors=[TokenCheck(token)] if token else [], options=opts)
    pb_grpc.add_ProvingEngineServicer_to_server(ProvingEngine(rt, control_timeout_s=g.control_timeout_s), server)
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
