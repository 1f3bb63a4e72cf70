"""The gateway's gRPC server: cuzk's ProvingEngine (cluster.gateway.service) on a unix socket
(the default: ``[gateway] socket``, mode 0660, so only the operator's user and group can call it)
or on TCP ``[gateway] address:port``, with the optional bearer token and TLS of the settings.
TCP beyond loopback is refused unless it is TLS with client certificates: Curio sends no
credentials, so on a shared address anyone could cancel jobs or evict keys.

The bytes of SubmitProof/Prove requests in flight are bounded (``InflightBytes``): a request
larger than a Commit2 input may be (``[limits] c1_max_bytes``, base64) is refused by grpc as its
length arrives; room for the largest request is reserved from ``[gateway] max_inflight_bytes``
before a message is read (a call waits ``inflight_wait_s`` for it, then RESOURCE_EXHAUSTED);
the message's own size is kept while it is parsed, decoded and stored (a few times its size),
and given back once its job is: a Prove waiting for its proof holds no copy of its input.

Port reuse is off (grpc turns SO_REUSEPORT on by default): a second gateway on the same port
fails to start instead of silently sharing it. SIGTERM stops taking calls and gives those in
flight a few seconds; a Prove cut off there leaves its job running, and the caller's retry with
the same request_id gets its proof.
"""
from __future__ import annotations

import ctypes
import errno
import hmac
import ipaddress
import os
import signal
import socket
import stat
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

import grpc

from cluster.errors import SettingsError

from .pb import proving_pb2 as pb
from .service import ProvingEngine

#: seconds the calls in flight get when the gateway stops
STOP_GRACE_S = 5.0
#: the longest unix socket path (sockaddr_un's sun_path, less its NUL)
SOCKET_PATH_MAX = 107
#: the socket's mode: the gateway's user and group (Curio's, with ``socket_group``), nobody else
SOCKET_MODE = 0o660


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

        def deny(requests, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        deny._zkhive_lane = "refuse"  # answered at once, on the refusals' thread (Lanes)
        # request-streaming (the same wire as a unary call's): the refusal reads no message
        return grpc.stream_unary_rpc_method_handler(deny)


class Held:
    """A request's raw bytes, as grpc hands them over (the deserializer): the handler takes them
    out, so no reference of grpc's keeps them alive while a Prove waits for its proof."""

    def __init__(self, raw: bytes):
        self.raw = raw

    def take(self) -> bytes:
        raw, self.raw = self.raw, b""
        return raw


class InflightBytes:
    """The bytes of SubmitProof/Prove requests being received, parsed, decoded and stored at
    once, bounded by ``limit``. A call reserves room for the largest request before one byte of
    its message is read (waiting up to ``wait_s`` for it), keeps the message's real size once it
    has it, and gives it back once its job is stored. When none is in flight, freed heap pages
    go back to the system (glibc keeps them otherwise: one 250 MB request left the gateway at
    576 MiB, issue 39)."""

    def __init__(self, limit: int, wait_s: float = 0.0):
        self.limit, self.wait_s, self.used, self.peak = limit, wait_s, 0, 0
        self._cond = threading.Condition()

    def take(self, n: int) -> bool:
        with self._cond:
            if not self._cond.wait_for(lambda: self.used + n <= self.limit, timeout=self.wait_s):
                return False
            self.used += n
            self.peak = max(self.peak, self.used)
            return True

    def give(self, n: int) -> None:
        with self._cond:
            self.used -= n
            idle = self.used == 0
            self._cond.notify_all()
        if idle and n >= TRIM_ABOVE:
            _malloc_trim()


#: a request at least this large gives its pages back when it leaves (malloc_trim)
TRIM_ABOVE = 1 << 20


def _malloc_trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to give back this way
        pass


class _Hold:
    """One call's share of the budget (given back once, whatever happens)."""

    def __init__(self, budget: InflightBytes):
        self.budget, self.n = budget, 0

    def resize(self, n: int) -> None:
        self.budget.give(self.n - n)
        self.n = n

    def release(self) -> None:
        n, self.n = self.n, 0
        if n:
            self.budget.give(n)


def _bounded(engine: ProvingEngine, budget: InflightBytes, request_max: int):
    """SubmitProof and Prove as request-streaming handlers (one message on the wire, as a unary
    call's): room for ``request_max`` bytes is reserved before the message is read, so requests
    waiting for room hold none of their bytes, and a refusal reads none."""

    def receive(requests, cls, context, hold: _Hold):
        if not budget.take(request_max):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"the gateway is busy: {budget.used} bytes of requests in flight after "
                          f"{budget.wait_s:g} s (gateway.max_inflight_bytes {budget.limit}); retry later")
        hold.n = request_max
        held = next(requests, None)
        if held is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"no {cls.DESCRIPTOR.name} message in the call")
        raw = held.take()
        hold.resize(len(raw))
        try:
            return cls.FromString(raw)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError, whatever its module
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"not a {cls.DESCRIPTOR.name} message")

    def submit(requests, context):
        hold = _Hold(budget)
        try:
            return engine.SubmitProof(receive(requests, pb.SubmitProofRequest, context, hold), context)
        finally:
            hold.release()

    def prove(requests, context):
        hold = _Hold(budget)
        try:
            req = receive(requests, pb.ProveRequest, context, hold)
            if not req.HasField("submit"):
                return engine.Prove(req, context)  # its one-line refusal
            job_id = engine.SubmitProof(req.submit, context).job_id
            del req
        finally:
            hold.release()
        # Prove is SubmitProof then AwaitProof without a timeout, the input already dropped
        return pb.ProveResponse(result=engine.AwaitProof(pb.AwaitProofRequest(job_id=job_id), context))
    # counted by Lanes, refused past its cap; SubmitProof on the submission threads (Lanes)
    submit._zkhive_lane, prove._zkhive_lane = "submit", "heavy"
    return {"SubmitProof": submit, "Prove": prove}


def method_handlers(engine: ProvingEngine, budget: InflightBytes, request_max: int) -> dict:
    """cuzk.v1.ProvingEngine's methods by name; SubmitProof and Prove within ``budget`` (``_bounded``)."""
    service = pb.DESCRIPTOR.services_by_name["ProvingEngine"]
    bounded = _bounded(engine, budget, request_max)
    methods = {}
    for m in service.methods:
        request, response = getattr(pb, m.input_type.name), getattr(pb, m.output_type.name)
        if m.name in bounded:
            methods[m.name] = grpc.stream_unary_rpc_method_handler(
                bounded[m.name], request_deserializer=Held, response_serializer=response.SerializeToString)
        else:
            methods[m.name] = grpc.unary_unary_rpc_method_handler(
                getattr(engine, m.name), request_deserializer=request.FromString,
                response_serializer=response.SerializeToString)
    return methods


def handlers(engine: ProvingEngine, budget: InflightBytes, request_max: int) -> grpc.GenericRpcHandler:
    """The methods as one generic handler (``method_handlers``)."""
    service = pb.DESCRIPTOR.services_by_name["ProvingEngine"]
    return grpc.method_handlers_generic_handler(service.full_name, method_handlers(engine, budget, request_max))


def add_handlers(server: grpc.Server, engine: ProvingEngine, budget: InflightBytes, request_max: int) -> None:
    """The methods on ``server`` as registered methods, as grpc's generated code adds them: core
    then keeps a call requested for each method, so a GetStatus arriving behind a thousand
    SubmitProof is taken at once; with the one generic handler alone, grpc-python requests one
    call at a time for every method, and the GetStatus waited until the poll thread had
    dispatched, in Python, each call that arrived before it (issue 39: up to 764 ms)."""
    service = pb.DESCRIPTOR.services_by_name["ProvingEngine"]
    methods = method_handlers(engine, budget, request_max)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, methods),))
    server.add_registered_method_handlers(service.full_name, methods)


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_exposure(g) -> None:
    """A TCP address beyond loopback needs TLS with client certificates: Curio's client sends no
    credentials, so whoever reaches the port could cancel and evict."""
    if g.on_unix_socket() or _is_loopback(g.address) or g.plaintext_beyond_loopback:
        return
    if g.tls_cert is None or g.tls_client_ca is None:
        raise GatewayError(
            f"gateway.address {g.address} is beyond loopback: serve it with TLS and client certificates "
            f"(gateway.tls_cert, tls_key, tls_client_ca), or keep the default unix socket (gateway.address "
            f"= \"unix\"); inside a container published on loopback only: gateway.plaintext_beyond_loopback")


def _check_socket(path: Path) -> None:
    """A socket file there already: another gateway's (it answers: refused) or a dead one's
    (removed; grpc would silently unlink a live one's too). Anything else there: refused."""
    if len(str(path).encode()) > SOCKET_PATH_MAX:
        raise GatewayError(f"gateway.socket {path}: {len(str(path).encode())} bytes, over the "
                           f"{SOCKET_PATH_MAX} a unix socket path may have; set a shorter gateway.socket")
    try:
        st = path.lstat()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise GatewayError(f"gateway.socket {path}: exists and is not a socket; remove it or set another path")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except OSError as e:
            if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                raise GatewayError(f"gateway.socket {path}: {e.strerror}") from None
        else:
            raise GatewayError(f"cannot listen on unix://{path} (gateway.socket): another gateway serves it")
    path.unlink(missing_ok=True)


def _own_socket(path: Path, group: str | None) -> None:
    os.chmod(path, SOCKET_MODE)
    if group is not None:
        import grp

        try:
            os.chown(path, -1, grp.getgrnam(group).gr_gid)
        except KeyError:
            raise GatewayError(f"gateway.socket_group {group!r}: no such group") from None
        except PermissionError:
            raise GatewayError(f"gateway.socket_group {group!r}: this user is not a member "
                               f"(cannot give it the socket)") from None


def listen_address(g, port: int | None = None) -> str:
    """Where the gateway listens, as a client dials it (``unix:///...`` or ``host:port``)."""
    if g.on_unix_socket():
        return f"unix://{g.socket_path()}"
    return _bind_address(g.address, g.port if port is None else port)


#: calls that only read (answered in milliseconds): they run on threads of their own, so a
#: gateway full of submissions and waiting Prove calls still answers them
CHEAP = ("GetStatus", "GetMetrics")
#: threads kept for the cheap calls and for refusals, out of ``gateway.threads``
RESERVE = 4
#: threads that serve SubmitProof (Lanes): the service lets 2 of them submit at once
#: (service.SUBMITTING); the third reads the next call's message meanwhile
SUBMIT_THREADS = 3


def _refuse_busy(message: str):
    def refuse(request, context):
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
    refuse._zkhive_lane = "refuse"
    return refuse


class Lanes(Executor):
    """The gateway's thread pool, as grpc calls it (``submit`` from its polling thread, one call
    each): the cheap calls (``CHEAP``) on ``RESERVE`` threads of their own; every other call
    counted from the moment it arrives until it ends, at most ``threads - RESERVE`` running and
    ``queue`` waiting for a thread; one more is answered RESOURCE_EXHAUSTED at once (on one more
    thread, its own: cuzk clients retry it), never queued without bound.

    SubmitProof (lane ``submit``) runs on ``SUBMIT_THREADS`` threads of its own, its calls waiting
    their turn in the queue without a thread (counted as above): a thousand at once used to start
    60 threads that each woke to read its message and then waited for one of the 4 submission
    slots, every waking thread another turn at the interpreter lock between a GetStatus and its
    answer (issue 39). The waits of Prove and AwaitProof keep the many threads.

    The lane of a call is read from its handler (``_zkhive_lane`` on the servicer's methods,
    see ``mark_lanes``); a call whose lane cannot be read is counted as a heavy one."""

    def __init__(self, threads: int, queue: int):
        reserve = min(RESERVE, max(1, threads // 4))
        self.cap, self.queue = threads - reserve, queue
        self.main = ThreadPoolExecutor(max_workers=self.cap, thread_name_prefix="gateway")
        self.submitting = ThreadPoolExecutor(max_workers=min(SUBMIT_THREADS, self.cap),
                                             thread_name_prefix="gateway-submit")
        self.fast = ThreadPoolExecutor(max_workers=reserve, thread_name_prefix="gateway-cheap")
        # refusals on a thread of their own: a burst of them (876 of 1,000 at once) queued on the
        # cheap threads made a GetStatus behind them wait its turn (issue 39's 100 ms bound)
        self.refusing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-refuse")
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
        if lane == "refuse":
            return self.refusing.submit(fn, *args, **kwargs)
        with self._lock:
            if self.in_progress >= self.cap + self.queue:
                self.refused += 1
                if at is not None:  # the same call, answered by the refusal instead
                    args = args[:at] + (self._refuse,) + args[at + 1:]
                    return self.refusing.submit(fn, *args, **kwargs)
            self.in_progress += 1
        pool = self.submitting if lane == "submit" else self.main
        future = pool.submit(fn, *args, **kwargs)
        future.add_done_callback(self._ended)
        return future

    def _ended(self, _future) -> None:
        with self._lock:
            self.in_progress -= 1

    def shutdown(self, wait=True, *, cancel_futures=False):
        self.main.shutdown(wait, cancel_futures=cancel_futures)
        self.submitting.shutdown(wait, cancel_futures=cancel_futures)
        self.fast.shutdown(wait, cancel_futures=cancel_futures)
        self.refusing.shutdown(wait, cancel_futures=cancel_futures)


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
    from .kindlimits import largest_request

    request_max = g.request_bytes(s.limits.c1_max_bytes, largest_request())  # a PoSt partition's too
    opts = [("grpc.max_receive_message_length", request_max),
            ("grpc.max_send_message_length", g.max_message_bytes),
            ("grpc.so_reuseport", 0)]
    lanes = Lanes(g.threads, g.queue)
    server = grpc.server(lanes, interceptors=[TokenCheck(token)] if token else [], options=opts)
    engine = ProvingEngine(rt, control_timeout_s=g.control_timeout_s)
    mark_lanes(engine)
    budget = InflightBytes(g.max_inflight_bytes, g.inflight_wait_s)
    add_handlers(server, engine, budget, request_max)
    server.zkhive_lanes = lanes
    server.zkhive_servicer = engine  # for tests and benchmarks: its status board
    check_exposure(g)
    creds = None
    if g.tls_cert is not None:
        try:
            ca = g.tls_client_ca.read_bytes() if g.tls_client_ca is not None else None
            creds = grpc.ssl_server_credentials([(g.tls_key.read_bytes(), g.tls_cert.read_bytes())],
                                                root_certificates=ca, require_client_auth=ca is not None)
        except OSError as e:
            raise GatewayError(f"gateway.tls_cert/tls_key/tls_client_ca: cannot read {e.filename}: {e.strerror}") from None
    if g.on_unix_socket():
        path = g.socket_path()
        _check_socket(path)
        where, setting = f"unix://{path}", "gateway.socket"
        old = os.umask(0o117)  # created 0660, never readable by others for an instant
        try:
            port = _add_port(server, f"unix:{path}", creds, where, setting)
        finally:
            os.umask(old)
        _own_socket(path, g.socket_group)
        return server, port
    where = _bind_address(g.address, g.port)
    _check_port(g.address, g.port, where)
    return server, _add_port(server, where, creds, where, "[gateway] address, port")


def _add_port(server, target: str, creds, where: str, setting: str) -> int:
    try:
        port = server.add_secure_port(target, creds) if creds is not None else server.add_insecure_port(target)
    except RuntimeError as e:  # grpc raises RuntimeError when it cannot bind
        raise GatewayError(f"cannot listen on {where} ({setting}): {e}") from None
    if not port:
        raise GatewayError(f"cannot listen on {where} ({setting}): in use or not an address here")
    return port


#: what the calls import on first use: imported before the heap is frozen (``settle_heap``)
#: (the list the gateway's sys.modules gained during a burst of submissions, issue 39: a
#: submission importing gpu.groth16 held the interpreter for GetStatus's 300-390 ms)
CALL_MODULES = ("arith.native", "celery.app.events", "celery.events.dispatcher", "cluster.client",
                "cluster.gateway.postinput", "cluster.gateway.snap", "cluster.pipeline.bounds",
                "cluster.pipeline.routing", "cluster.pipeline.srs_control", "cluster.pipeline.workflow",
                "gpu.groth16.bellperson", "gpu.groth16.keys", "kombu.exceptions", "kombu.mixins",
                "kombu.utils.limits", "prometheus_client", "synthesis.filecoin.c1", "synthesis.filecoin.params",
                "synthesis.filecoin.post_job", "synthesis.filecoin.sector")


def settle_heap(preload=()) -> None:
    """What the first calls would make, made now, then every object the process holds moved out
    of the cyclic collector's sight (``gc.freeze``): a full collection then scans only what the
    calls made since, not Celery's, kombu's, pydantic's and the circuits' objects too. Issue 39:
    a full collection during 1,000 submissions held the interpreter 141 ms, and a GetStatus
    waited for it (the call's maximum, 142 ms); the first submissions imported the circuit
    families, and each gateway thread made a result backend of its own (with its own Redis
    pool), during the burst. Now one backend serves every thread (celery's
    ``result_backend_thread_safe``: redis-py's client is thread-safe). Poseidon's constants too
    when a set of ``preload`` (``[srs] preload``) uses them (cluster/pipeline/warmup.py)."""
    import gc
    import importlib

    from cluster.pipeline.app import app
    from synthesis.circuits import known

    for name in CALL_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # a call that needs it fails as it did; the gateway still starts
            pass
    known()  # imports every family of parameter sets
    # the vanilla-proof checks of the preloaded kinds hash with Poseidon: its constants made
    # now, not by the first WinningPoSt (0.3 of its first 0.34 s SubmitProof; issue 37)
    from cluster.pipeline.warmup import poseidon
    poseidon(preload)
    app.conf.result_backend_thread_safe = True
    app._local.__dict__.pop("backend", None)  # one made before, for this thread alone
    app._backend_cache = None
    app.backend.client  # noqa: B018 - made now (a cached property), not by the first submission
    gc.collect()
    gc.freeze()


def serve(s, rt, out=print) -> int:
    """Run the gateway until SIGTERM or SIGINT (``zkhive gateway``)."""
    server, port = build(s, rt)
    settle_heap(s.srs.preload)
    server.start()
    g = s.gateway
    how = ("TLS" + (" with client certificates" if g.tls_client_ca else "") if g.tls_cert else "plaintext") \
        + (", bearer token" if g.secret() else ", no token")
    if g.on_unix_socket():
        how += f", mode {SOCKET_MODE:o}" + (f" group {g.socket_group}" if g.socket_group else "")
    out(f"zkhive gateway: serving cuzk.v1.ProvingEngine on {listen_address(g, port)} ({how}; "
        f"Redis {s.redis.url})", flush=True)
    if g.plaintext_beyond_loopback and not g.on_unix_socket() and not _is_loopback(g.address) and not g.tls_cert:
        out("zkhive gateway: note: listening beyond loopback without TLS (gateway.plaintext_beyond_loopback): "
            "anyone who reaches the port can submit and cancel proofs", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop(STOP_GRACE_S).wait()
    server.zkhive_servicer._board.close()
    server.zkhive_servicer._endings.close()
    if g.on_unix_socket():
        g.socket_path().unlink(missing_ok=True)
    return 0
