"""The three size bounds on what a sealing pipeline sends, each at its limit (accepted: the next
check is what speaks) and one byte over (refused in one line naming the limit and what sets it):
the gateway's gRPC message limit (``[gateway] max_message_bytes``), the Commit2 wrapper's bounds
(the gateway's, derived from ``limits.c1_max_bytes``; ``zkhive c2``'s file bound,
``synthesis.filecoin.c1.COMMIT2_LIMITS``) and the Filecoin C1 bound (``C1_LIMITS``). The
defaults are tested at their real size (hundreds of MiB of spaces, a second or two each): a
bound multiplied or divided anywhere, in the setting's default or where it is applied, fails
here (issue 35: each was multiplied by 1000 and no test failed)."""
from __future__ import annotations

import json
from dataclasses import replace

import grpc
import pytest

from cluster.gateway import c2input
from cluster.settings import GatewaySettings, Settings
from synthesis import limits as lim
from synthesis.filecoin import c1 as fc1

MIB = 1 << 20


def padded(text: bytes, n: int) -> bytes:
    """``text`` followed by spaces to exactly ``n`` bytes (JSON allows trailing whitespace; the
    decoded document is the same, so only the text's own size bound can refuse it)."""
    assert len(text) <= n
    return text + b" " * (n - len(text))


# -- the Filecoin C1 bound: 160 MiB of JSON ----------------------------------------------------------

C1_HEAD = b'{"registered_proof":"StackedDrg2KiBV1_1"}'


def test_the_filecoin_c1_bound_at_its_limit_and_one_byte_over():
    assert fc1.C1_LIMITS.document_bytes == 160 * MIB  # docs/params.md and the module say 160 MiB
    at = padded(C1_HEAD, 160 * MIB)
    # at the limit the size passes and the shape check speaks (no vanilla proofs in this one)
    with pytest.raises(fc1.FilecoinC1Error, match=r"vanilla_proofs") as e:
        fc1.load(at)
    assert "over the limit" not in str(e.value)
    # the gateway's path to the same bound (a Commit2 input's Phase1Out)
    with pytest.raises(c2input.C2InputError, match=r"field Phase1Out: .*vanilla_proofs") as e:
        c2input._filecoin_doc(at, 7, 2048, None, "vanilla_proof")
    assert "over the limit" not in str(e.value)
    over = at + b" "
    del at
    with pytest.raises(lim.InputError, match=rf"^{160 * MIB + 1} bytes, over the limit of {160 * MIB} "
                                             r"\(the filecoin C1 bound\)$"):
        fc1.load(over)
    with pytest.raises(c2input.C2InputError, match=rf"^vanilla_proof: Commit2 input: field Phase1Out: "
                                                   rf"{160 * MIB + 1} bytes, over the limit of {160 * MIB} "
                                                   r"\(the filecoin C1 bound\)$"):
        c2input._filecoin_doc(over, 7, 2048, None, "vanilla_proof")


# -- the Commit2 wrapper: zkhive c2's file bound (224 MiB), the gateway's (from c1_max_bytes) ---------

def test_the_commit2_file_bound_at_its_limit_and_one_byte_over():
    assert fc1.COMMIT2_LIMITS.document_bytes == 224 * MIB
    inner = C1_HEAD
    at = padded(fc1.commit2_input(inner, 7, 2048), 224 * MIB)
    assert fc1.read_commit2(at) == (7, inner, 2048)
    over = at + b" "
    del at
    with pytest.raises(lim.InputError, match=rf"^{224 * MIB + 1} bytes, over the limit of {224 * MIB} "
                                             r"\(the Commit2 file bound\)$"):
        fc1.read_commit2(over)
    with pytest.raises(lim.InputError, match=r"\(the Commit2 file bound\)$"):
        fc1.load(over)


def _wrapper_of(doc_bytes: bytes, n: int) -> bytes:
    return padded(c2input.wrap(doc_bytes, 7, 2048), n)


@pytest.mark.parametrize("c1_max_bytes", [999, 1000, 64 * MIB])  # small settings (base64's rounding), the default
def test_the_gateway_s_commit2_wrapper_bound_at_its_limit_and_one_byte_over(c1_max_bytes):
    """The wrapper's text may be the base64 of a ``limits.c1_max_bytes`` document plus 4 KiB
    for its other fields and whitespace; the document inside is bounded by the setting itself."""
    limits = replace(Settings().limits.limits(), document_bytes=c1_max_bytes)
    if c1_max_bytes == 64 * MIB:
        assert Settings().limits.c1_max_bytes == c1_max_bytes  # the default: docs/cluster.md
        limits = Settings().limits.limits()
    wrapper_max = (c1_max_bytes + 2) // 3 * 4 + 4096
    doc = json.dumps({"params": "p"}).encode()
    got = c2input.decode(_wrapper_of(doc, wrapper_max), limits)
    assert got.doc == {"params": "p"} and got.shape == "commit2"
    with pytest.raises(c2input.C2InputError, match=rf"^vanilla_proof: Commit2 input: {wrapper_max + 1} bytes, "
                                                   rf"over the limit of {wrapper_max} \(limits\.c1_max_bytes, "
                                                   r"as base64 in a Commit2 input\)$"):
        c2input.decode(_wrapper_of(doc, wrapper_max + 1), limits)
    # the document inside: exactly c1_max_bytes accepted, one more refused naming the setting
    got = c2input.decode(c2input.wrap(padded(doc, c1_max_bytes), 7, 2048), limits)
    assert got.doc == {"params": "p"}
    with pytest.raises(c2input.C2InputError, match=rf"^vanilla_proof: Commit2 input: field Phase1Out: "
                                                   rf"{c1_max_bytes + 1} bytes, over the limit of "
                                                   rf"{c1_max_bytes} \(limits\.c1_max_bytes\)$"):
        c2input.decode(c2input.wrap(padded(doc, c1_max_bytes + 1), 7, 2048), limits)


# -- the gateway's gRPC message limit -------------------------------------------------------------

class _Runtime:
    """What ProvingEngine reads before a call is decoded: the settings and a Redis for its
    metrics registry (a call that reaches the servicer here is refused before any Redis use)."""

    def __init__(self, settings):
        import fakeredis

        self.settings, self.redis = settings, fakeredis.FakeRedis()


def _message_of(n: int):
    """A SubmitProofRequest of exactly n bytes on the wire (proof kind 99, no kind: the servicer
    answers INVALID_ARGUMENT naming the field without touching the cluster)."""
    from cluster.gateway.pb import proving_pb2 as pb

    def of(k: int):
        return pb.SubmitProofRequest(proof_kind=99, vanilla_proof=b"v" * k)
    k = n - of(0).ByteSize() - 5  # the field's tag and length prefix: at most 5 bytes
    while of(k).ByteSize() < n:
        k += 1
    req = of(k)
    assert req.ByteSize() == n
    return req


@pytest.mark.parametrize("max_message_bytes", [4096, None])  # a small setting, and the default
def test_the_grpc_message_limit_at_its_limit_and_one_byte_over(max_message_bytes):
    from cluster.gateway.pb import proving_pb2_grpc as pb_grpc
    from cluster.gateway.server import build
    from cluster.ops.supervisor import free_port

    gateway = {} if max_message_bytes is None else {"max_message_bytes": max_message_bytes}
    s = Settings(gateway=GatewaySettings(address="127.0.0.1", port=free_port(), **gateway))
    # the gateway reads a request up to the smaller of max_message_bytes and what a Commit2
    # input may be (request_bytes: the default 256 MiB is above a Commit2 input's bound)
    limit = s.gateway.request_bytes(s.limits.c1_max_bytes)
    if max_message_bytes is None:
        assert s.gateway.max_message_bytes == 256 * MIB  # docs/gateway.md
        assert limit == (s.limits.c1_max_bytes + 2) // 3 * 4 + 4096 + (64 << 10) < 256 * MIB
    else:
        assert limit == max_message_bytes
    server, port = build(s, _Runtime(s))
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}",
                                   options=[("grpc.max_send_message_length", -1)]) as channel:
            stub = pb_grpc.ProvingEngineStub(channel)
            with pytest.raises(grpc.RpcError) as e:
                stub.SubmitProof(_message_of(limit), timeout=60)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()  # reached the servicer
            assert e.value.details().startswith("field proof_kind: 99 is not a proof kind"), e.value.details()
            with pytest.raises(grpc.RpcError) as e:
                stub.SubmitProof(_message_of(limit + 1), timeout=60)
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            line = e.value.details()
            assert "\n" not in line and f"({limit + 1} vs. {limit})" in line, line
    finally:
        server.stop(None)
