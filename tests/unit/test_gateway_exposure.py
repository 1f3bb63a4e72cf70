"""Who can reach the gateway and how much it holds, without a broker (issue 39): the settings'
refusals (a TCP address beyond loopback without TLS and client certificates, a byte budget below
the message size), the bytes-in-flight bound over a real grpc server on a unix socket (a second
large request while the first is held is RESOURCE_EXHAUSTED, and the budget comes back), the
ports of a plan refused all at once with the settings that move them, and Flower's basic-auth
check that runs before a body is read."""
from __future__ import annotations

import base64
import os
import socket
import stat
import threading
from pathlib import Path

import grpc
import pytest

from cluster import settings as settings_mod
from cluster.errors import SettingsError
from cluster.gateway import server
from cluster.gateway.pb import proving_pb2 as pb
from cluster.gateway.pb import proving_pb2_grpc as pb_grpc


def _settings(**env):
    return settings_mod.load(env={f"ZKHIVE_GATEWAY__{k.upper()}": str(v) for k, v in env.items()})


def test_the_default_is_a_unix_socket_and_tcp_beyond_loopback_needs_client_certificates(tmp_path):
    g = _settings().gateway
    assert g.on_unix_socket() and g.dial_address().startswith("unix:///") and g.dial_address().endswith("/gateway.sock")
    server.check_exposure(g)  # accepted
    for ok in ("127.0.0.1", "::1", "localhost"):
        server.check_exposure(_settings(address=ok).gateway)
    assert _settings(address="127.0.0.1", port=9999).gateway.dial_address() == "127.0.0.1:9999"
    for address in ("0.0.0.0", "10.0.0.5"):
        with pytest.raises(server.GatewayError, match=r"beyond loopback: serve it with TLS and client certificates "
                                                      r"\(gateway.tls_cert, tls_key, tls_client_ca\)"):
            server.check_exposure(_settings(address=address).gateway)
        # TLS without client certificates is still anyone's
        with pytest.raises(server.GatewayError, match="beyond loopback"):
            server.check_exposure(_settings(address=address, tls_cert="c.pem", tls_key="k.pem").gateway)
        server.check_exposure(_settings(address=address, tls_cert="c.pem", tls_key="k.pem",
                                        tls_client_ca="ca.pem").gateway)
        server.check_exposure(_settings(address=address, plaintext_beyond_loopback="true").gateway)
    with pytest.raises(SettingsError, match="tls_client_ca: client certificates need TLS"):
        _settings(tls_client_ca="ca.pem").gateway.check_tls()
    with pytest.raises(SettingsError, match=r"gateway.max_inflight_bytes \(1000\) must be at least the largest request \(2000"):
        _settings(max_inflight_bytes=1000, max_message_bytes=2000)
    s = settings_mod.load(env={})  # a Commit2 input of limits.c1_max_bytes as base64, and the other fields
    assert s.gateway.request_bytes(s.limits.c1_max_bytes) == (64 << 20) // 3 * 4 + 4 + 4096 + (64 << 10)
    long = Path("/tmp") / ("d" * 170) / "gateway.sock"
    with pytest.raises(server.GatewayError, match="188 bytes, over the 107 a unix socket path may have"):
        server._check_socket(long)


def test_a_live_socket_is_refused_a_dead_one_replaced_and_a_file_never_removed(tmp_path):
    path = tmp_path / "gw.sock"
    live = socket.socket(socket.AF_UNIX)
    live.bind(str(path))
    live.listen()
    with pytest.raises(server.GatewayError, match="another gateway serves it"):
        server._check_socket(path)
    live.close()  # the file stays: a gateway that died
    server._check_socket(path)
    assert not path.exists()
    path.write_text("not a socket")
    with pytest.raises(server.GatewayError, match="exists and is not a socket"):
        server._check_socket(path)
    assert path.read_text() == "not a socket"


class HeldEngine(pb_grpc.ProvingEngineServicer):
    """Stands for cluster.gateway.service.ProvingEngine: SubmitProof waits until released, so a
    request stays in flight as long as the test wants."""

    def __init__(self):
        self.entered, self.release = threading.Semaphore(0), threading.Event()

    def SubmitProof(self, request, context):
        self.entered.release()
        self.release.wait(30)
        return pb.SubmitProofResponse(job_id=request.request_id)


def test_bytes_in_flight_are_bounded_waited_for_and_given_back(tmp_path):
    """Room for the largest request (6 MiB here) is reserved before a message is read: with 5 MiB
    held, a second request waits, then is refused RESOURCE_EXHAUSTED; one that waits long enough
    is served when the first leaves; a request over the largest is refused by grpc itself."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    limit, request_max = 10 << 20, 6 << 20
    engine, budget = HeldEngine(), server.InflightBytes(limit, wait_s=0.3)
    srv = grpc.server(ThreadPoolExecutor(4), options=[("grpc.max_receive_message_length", request_max)])
    srv.add_generic_rpc_handlers((server.handlers(engine, budget, request_max),))
    path = tmp_path / "gw.sock"
    assert srv.add_insecure_port(f"unix:{path}")
    srv.start()
    stub = pb_grpc.ProvingEngineStub(grpc.insecure_channel(f"unix://{path}"))

    def big(name, mib=5):
        return pb.SubmitProofRequest(request_id=name, vanilla_proof=os.urandom(mib << 20))
    out = {}
    first = threading.Thread(target=lambda: out.setdefault("first", stub.SubmitProof(big("big-1"), timeout=30)))
    try:
        first.start()
        assert engine.entered.acquire(timeout=30)
        assert budget.used == big("big-1").ByteSize()  # its own size, once read
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as e:
            stub.SubmitProof(big("big-2"), timeout=30)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and time.monotonic() - t0 >= 0.3
        assert f"after 0.3 s (gateway.max_inflight_bytes {limit}); retry later" in e.value.details()
        budget.wait_s = 30  # this one waits for the first to leave, then is served
        third = threading.Thread(target=lambda: out.setdefault("third", stub.SubmitProof(big("big-3"), timeout=30)))
        third.start()
        time.sleep(0.5)
        assert not engine.entered.acquire(timeout=0)  # still waiting, none of its bytes read
        engine.release.set()
        first.join(30)
        third.join(30)
        assert out["first"].job_id == "big-1" and out["third"].job_id == "big-3"
        assert budget.used == 0 and budget.peak <= limit
        with pytest.raises(grpc.RpcError) as e:
            stub.SubmitProof(big("huge", mib=7), timeout=30)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in e.value.details()
        assert budget.used == 0
    finally:
        engine.release.set()
        srv.stop(0)


def test_free_ports_are_distinct_within_one_pick_and_never_a_held_one():
    """One pick of several ports never repeats one (a full-suite run: "metrics and redis both want
    port 43057", from free_port() called once a port). 500 picks one at a time, each socket closed
    before the next, repeat a port with p ~ 0.99 in Linux' ~28,000 ephemeral ports."""
    from cluster.ops.supervisor import free_ports, port_is_free

    ports = free_ports(500)
    assert len(set(ports)) == 500 and all(port_is_free(p) for p in ports[:20])
    with socket.socket() as listener:  # rejects: a port someone listens on is not free
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = listener.getsockname()[1]
        assert not port_is_free(taken) and taken not in free_ports(200)


def test_every_port_clash_is_refused_at_once_naming_its_setting():
    from cluster.cli import CommandError
    from cluster.ops.plan import check_ports
    from cluster.ops.supervisor import free_ports

    held = [socket.socket() for _ in range(3)]
    try:
        for sock in held:
            sock.bind(("127.0.0.1", 0))
            sock.listen()
        redis_port, flower_port, metrics_port = (sock.getsockname()[1] for sock in held)
        s = settings_mod.load(env={"ZKHIVE_REDIS__URL": f"redis://127.0.0.1:{redis_port}/0",
                                   "ZKHIVE_FLOWER__PORT": str(flower_port), "ZKHIVE_METRICS__PORT": str(metrics_port)})
        with pytest.raises(CommandError) as e:
            check_ports(s)
        msg = str(e.value)
        assert msg.startswith("3 port(s) of this cluster are taken")
        for setting, port in (("redis.url (ZKHIVE_REDIS__URL)", redis_port), ("flower.port (ZKHIVE_FLOWER__PORT)", flower_port),
                              ("metrics.port (ZKHIVE_METRICS__PORT)", metrics_port)):
            assert f"port {port} is in use" in msg and f"move it with {setting}" in msg
        assert "gateway" not in msg  # the default gateway has no port: its socket is the cluster's own
        redis_port, flower_port, metrics_port = free_ports(3)
        ok = settings_mod.load(env={"ZKHIVE_REDIS__URL": f"redis://127.0.0.1:{redis_port}/0",
                                    "ZKHIVE_FLOWER__PORT": str(flower_port), "ZKHIVE_METRICS__PORT": str(metrics_port)})
        check_ports(ok)  # accepted
        tcp = ok.model_copy(update={"gateway": ok.gateway.model_copy(update={"address": "127.0.0.1",
                                                                            "port": ok.flower.port})})
        with pytest.raises(CommandError, match=r"gateway and flower both want port \d+: move one with gateway.port"):
            check_ports(tcp)
    finally:
        for sock in held:
            sock.close()


def test_flower_basic_auth_is_checked_from_the_headers_alone():
    from cluster.ops.flowerguard import authorized

    users = ["zkhive:secret"]
    good = "Basic " + base64.b64encode(b"zkhive:secret").decode()
    assert authorized(good, users)
    for bad in ("", "Basic", "Bearer x", "Basic " + base64.b64encode(b"zkhive:other").decode(), "Basic !!!",
                "Basic " + base64.b64encode(b"\xff\xfe").decode()):
        assert not authorized(bad, users), bad


def test_a_socket_group_that_does_not_exist_is_refused_in_one_line(tmp_path):
    path = tmp_path / "gw.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        server._own_socket(path, None)
        assert stat.S_IMODE(path.lstat().st_mode) == server.SOCKET_MODE == 0o660
        with pytest.raises(server.GatewayError, match="gateway.socket_group 'no-such-group-zk': no such group"):
            server._own_socket(path, "no-such-group-zk")
