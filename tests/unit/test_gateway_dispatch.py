"""How the gateway's process keeps GetStatus quick under a burst (issue 39): every method
registered with grpc's core (a call requested for each, so a GetStatus is not taken after every
SubmitProof that arrived before it), and its heap frozen once the calls' modules are loaded (a
full collection does not scan them during a burst)."""
from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from cluster.gateway import server
from cluster.gateway.pb import proving_pb2 as pb
from cluster.gateway.pb import proving_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parents[2]


class TinyEngine(pb_grpc.ProvingEngineServicer):
    def GetStatus(self, request, context):
        return pb.GetStatusResponse(uptime_seconds=7)


def test_every_method_is_registered_and_an_unknown_one_is_unimplemented(tmp_path):
    """``add_handlers`` registers the eight methods (grpc then requests a call for each in its
    core) and keeps the generic handler: the calls are served, a method of no service is
    UNIMPLEMENTED."""
    srv = grpc.server(ThreadPoolExecutor(2))
    server.add_handlers(srv, TinyEngine(), server.InflightBytes(1 << 20), 1 << 20)
    registered = set(srv._state.registered_method_handlers)  # grpc's own record of them
    assert registered == {f"/cuzk.v1.ProvingEngine/{m.name}"
                          for m in pb.DESCRIPTOR.services_by_name["ProvingEngine"].methods}, registered
    path = tmp_path / "gw.sock"
    assert srv.add_insecure_port(f"unix:{path}")
    srv.start()
    try:
        with grpc.insecure_channel(f"unix://{path}") as ch:
            assert pb_grpc.ProvingEngineStub(ch).GetStatus(pb.GetStatusRequest(), timeout=10).uptime_seconds == 7
            other = ch.unary_unary("/cuzk.v1.ProvingEngine/NoSuchMethod")
            try:
                other(b"", timeout=10)
                raise AssertionError("an unknown method was answered")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        srv.stop(0).wait()


def test_settle_heap_freezes_what_the_calls_would_load(tmp_path):
    """In a process of its own (the gateway's, as ``serve`` does it): before, nothing is frozen and
    the circuit families are not loaded; after, the calls' modules are imported, the heap is
    frozen, and one result backend serves every thread."""
    code = """
import gc, sys, threading
from cluster.pipeline.app import app
b0 = app.backend
print("before", gc.get_freeze_count(), "synthesis.porep" in sys.modules)
from cluster.gateway import server
server.settle_heap()
got = []
t = threading.Thread(target=lambda: got.append(app.backend)); t.start(); t.join()
print("after", gc.get_freeze_count(), all(m in sys.modules for m in server.CALL_MODULES + ("synthesis.porep",)),
      got[0] is app.backend, b0 is app.backend)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    before, after = out.stdout.splitlines()[-2:]
    assert before == "before 0 False", before
    words = after.split()
    assert int(words[1]) > 20_000 and words[2:] == ["True", "True", "False"], after
