"""Flower's request bodies: bounded, and read only from callers that passed basic auth.

Flower (2.2) serves with tornado's defaults: any body up to 100 MB (``max_body_size``) is read
into memory before the handler runs, and the handler is where basic auth is checked. So an
unauthenticated caller could make Flower buffer 100 MB per request and only then answer 401
(issue 39: 16 refused requests cost 970 MiB). Here, in the Flower process:

- ``auth_before_body``: a request that announces a body (``Content-Length`` or chunked) and
  does not carry Flower's basic-auth credentials is answered 401 as soon as its headers are
  read, and its connection closed: the body is never read;
- ``bounded_http_server``: an authenticated body is read up to the size a submission can need
  (``[limits] c1_max_bytes`` plus 64 KiB of task options, the bound the body is decoded under
  in cluster.pipeline.bounds); a larger ``Content-Length`` is refused by tornado before reading.
"""
from __future__ import annotations

import base64
import functools
import hmac

#: what a send-task/apply body may hold beyond the C1 document (cluster.pipeline.bounds)
OPTIONS_BYTES = 64 << 10

UNAUTHORIZED = (b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"flower\"\r\n"
                b"Content-Length: 0\r\nConnection: close\r\n\r\n")


def body_limit(settings) -> int:
    return settings.limits.c1_max_bytes + OPTIONS_BYTES


def authorized(auth_header: str, basic_auth: list[str]) -> bool:
    """The ``Authorization`` header names one of Flower's ``user:password`` pairs (as Flower's
    own ``get_current_user`` compares them)."""
    try:
        kind, encoded = auth_header.split()
        if kind != "Basic":
            return False
        given = base64.b64decode(encoded.encode(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return False
    return any(hmac.compare_digest(stored, given) for stored in basic_auth)


def auth_before_body() -> None:
    """Wrap Flower's request delegate: an unauthenticated request with a body is answered 401 at
    its headers and its connection closed, before one byte of the body is read."""
    from flower.app import Flower
    from tornado import httputil

    if getattr(Flower.start_request, "_zkhive_auth_first", False):
        return
    original = Flower.start_request

    class AuthFirst(httputil.HTTPMessageDelegate):
        def __init__(self, app, request_conn, inner):
            self.app, self.conn, self.inner = app, request_conn, inner

        def headers_received(self, start_line, headers):
            basic_auth = self.app.options.basic_auth
            length = headers.get("Content-Length", "0").strip()
            has_body = "Transfer-Encoding" in headers or length != "0"
            if basic_auth and has_body and not authorized(headers.get("Authorization", ""), basic_auth):
                stream = self.conn.detach()  # tornado reads nothing more of this request
                stream.write(UNAUTHORIZED).add_done_callback(lambda _: stream.close())
                return None
            return self.inner.headers_received(start_line, headers)

        def data_received(self, chunk):
            return self.inner.data_received(chunk)

        def finish(self):
            return self.inner.finish()

        def on_connection_close(self):
            return self.inner.on_connection_close()

    def start_request(self, server_conn, request_conn):
        return AuthFirst(self, request_conn, original(self, server_conn, request_conn))
    start_request._zkhive_auth_first = True
    Flower.start_request = start_request


def bounded_http_server(settings) -> None:
    """Flower's HTTPServer with ``max_body_size`` (and the stream's buffer) at ``body_limit``."""
    import flower.app
    from tornado.httpserver import HTTPServer

    limit = body_limit(settings)
    flower.app.HTTPServer = functools.partial(HTTPServer, max_body_size=limit, max_buffer_size=limit + (1 << 20))
