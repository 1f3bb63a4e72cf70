"""The gateway without a broker: our .proto against cuzk's (the wire), the committed generated
modules against the .proto, the Commit2 input decoder (accepts and rejects), the timings from a
timeline, and ``zkhive c2``'s lotus-bench formats."""
from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.gateway import c2input
from cluster.gateway.commands import go_duration, miner_id, size_rate
from cluster.gateway.pb import proving_pb2 as pb
from cluster.gateway.service import PRIORITIES, timings
from synthesis.limits import DEFAULT as LIMITS

ROOT = Path(__file__).resolve().parents[2]

#: cuzk's proving.proto (filecoin-project/curio, extern/cuzk/cuzk-proto/proto/cuzk/v1/proving.proto):
#: message -> [(field, number, type, repeated)]; the wire is these numbers and types
CUZK_FIELDS = {
    "SubmitProofRequest": [("request_id", 1, "string", False), ("proof_kind", 2, "ProofKind", False),
                           ("sector_size", 3, "uint64", False), ("registered_proof", 4, "uint64", False),
                           ("priority", 5, "Priority", False), ("vanilla_proof", 10, "bytes", False),
                           ("vanilla_proofs", 11, "bytes", True), ("sector_number", 20, "uint64", False),
                           ("miner_id", 21, "uint64", False), ("randomness", 22, "bytes", False),
                           ("partition_index", 23, "uint32", False), ("comm_r_old", 30, "bytes", False),
                           ("comm_r_new", 31, "bytes", False), ("comm_d_new", 32, "bytes", False)],
    "SubmitProofResponse": [("job_id", 1, "string", False), ("queue_position", 2, "uint32", False),
                            ("assigned_gpu", 3, "string", False)],
    "AwaitProofRequest": [("job_id", 1, "string", False), ("timeout_ms", 2, "uint64", False)],
    "AwaitProofResponse": [("job_id", 1, "string", False), ("status", 2, "Status", False),
                           ("proof", 3, "bytes", False), ("error_message", 4, "string", False),
                           ("queue_wait_ms", 10, "uint64", False), ("srs_load_ms", 11, "uint64", False),
                           ("synthesis_ms", 12, "uint64", False), ("gpu_compute_ms", 13, "uint64", False),
                           ("total_ms", 14, "uint64", False)],
    "ProveRequest": [("submit", 1, "SubmitProofRequest", False)],
    "ProveResponse": [("result", 1, "AwaitProofResponse", False)],
    "CancelProofRequest": [("job_id", 1, "string", False)],
    "CancelProofResponse": [("was_running", 1, "bool", False)],
    "GetStatusRequest": [],
    "GetStatusResponse": [("gpus", 1, "GPUStatus", True), ("loaded_srs", 2, "SRSStatus", True),
                          ("queues", 3, "QueueStatus", True), ("total_proofs_completed", 4, "uint64", False),
                          ("total_proofs_failed", 5, "uint64", False), ("uptime_seconds", 6, "uint64", False),
                          ("pinned_memory_bytes", 7, "uint64", False), ("pinned_memory_limit_bytes", 8, "uint64", False)],
    "GPUStatus": [("ordinal", 1, "uint32", False), ("name", 2, "string", False), ("vram_total_bytes", 3, "uint64", False),
                  ("vram_free_bytes", 4, "uint64", False), ("current_job_id", 5, "string", False),
                  ("current_proof_kind", 6, "string", False)],
    "SRSStatus": [("circuit_id", 1, "string", False), ("tier", 2, "Tier", False), ("size_bytes", 3, "uint64", False),
                  ("ref_count", 4, "uint32", False)],
    "QueueStatus": [("proof_kind", 1, "string", False), ("pending", 2, "uint32", False), ("in_progress", 3, "uint32", False)],
    "PreloadSrsRequest": [("circuit_id", 1, "string", False)],
    "PreloadSrsResponse": [("already_loaded", 1, "bool", False), ("load_time_ms", 2, "uint64", False)],
    "EvictSrsRequest": [("circuit_id", 1, "string", False)],
    "EvictSrsResponse": [("was_loaded", 1, "bool", False), ("freed_bytes", 2, "uint64", False)],
    "GetMetricsRequest": [],
    "GetMetricsResponse": [("prometheus_text", 1, "string", False)],
}
CUZK_ENUMS = {
    "ProofKind": {"PROOF_KIND_UNSPECIFIED": 0, "POREP_SEAL_COMMIT": 1, "SNAP_DEALS_UPDATE": 2,
                  "WINDOW_POST_PARTITION": 3, "WINNING_POST": 4},
    "Priority": {"PRIORITY_UNSPECIFIED": 0, "LOW": 1, "NORMAL": 2, "HIGH": 3, "CRITICAL": 4},
    "AwaitProofResponse.Status": {"UNKNOWN": 0, "COMPLETED": 1, "FAILED": 2, "CANCELLED": 3, "TIMEOUT": 4},
    "SRSStatus.Tier": {"HOT": 0, "WARM": 1, "COLD": 2},
}
CUZK_METHODS = {"SubmitProof": ("SubmitProofRequest", "SubmitProofResponse"),
                "AwaitProof": ("AwaitProofRequest", "AwaitProofResponse"),
                "Prove": ("ProveRequest", "ProveResponse"),
                "CancelProof": ("CancelProofRequest", "CancelProofResponse"),
                "GetStatus": ("GetStatusRequest", "GetStatusResponse"),
                "GetMetrics": ("GetMetricsRequest", "GetMetricsResponse"),
                "PreloadSRS": ("PreloadSrsRequest", "PreloadSrsResponse"),
                "EvictSRS": ("EvictSrsRequest", "EvictSrsResponse")}


def _type_name(f) -> str:
    from google.protobuf.descriptor import FieldDescriptor as F

    if f.type == F.TYPE_MESSAGE:
        return f.message_type.name
    if f.type == F.TYPE_ENUM:
        return f.enum_type.name
    return {F.TYPE_STRING: "string", F.TYPE_UINT64: "uint64", F.TYPE_UINT32: "uint32", F.TYPE_BYTES: "bytes",
            F.TYPE_BOOL: "bool"}[f.type]


def test_our_proto_is_cuzks_on_the_wire():
    fd = pb.DESCRIPTOR
    assert fd.package == "cuzk.v1"
    assert set(fd.message_types_by_name) == set(CUZK_FIELDS)
    for name, fields in CUZK_FIELDS.items():
        got = [(f.name, f.number, _type_name(f), f.is_repeated)
               for f in sorted(fd.message_types_by_name[name].fields, key=lambda f: f.number)]
        assert got == fields, name
    for path, values in CUZK_ENUMS.items():
        outer, _, inner = path.partition(".")
        enum = fd.enum_types_by_name[outer] if not inner else fd.message_types_by_name[outer].enum_types_by_name[inner]
        assert {v.name: v.number for v in enum.values} == values, path
    svc = fd.services_by_name["ProvingEngine"]
    assert svc.full_name == "cuzk.v1.ProvingEngine"
    assert {m.name: (m.input_type.name, m.output_type.name) for m in svc.methods} == CUZK_METHODS
    # and a message encoded by field number decodes as cuzk's would: request_id is field 1, bytes 10
    raw = pb.SubmitProofRequest(request_id="porep-1000-7", vanilla_proof=b"{}").SerializeToString()
    assert raw == b"\x0a\x0cporep-1000-7" + b"\x52\x02{}"


def test_the_committed_modules_are_what_the_proto_generates():
    res = subprocess.run([sys.executable, "-m", "cluster.gateway.pb", "--check"], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_a_stale_generated_module_is_found(tmp_path, monkeypatch):
    from cluster.gateway.pb import __main__ as gen

    monkeypatch.setattr(gen, "HERE", tmp_path)  # an empty "package": both modules missing
    (tmp_path / "proving_pb2.py").write_text("# edited by hand\n")
    assert gen.main(["--check"]) == 1


# -- the Commit2 input ------------------------------------------------------------------------------

DOC = {"params": "porep-lite-4k", "partitions": []}


def test_a_commit2_input_and_a_bare_c1_document_are_accepted():
    raw = c2input.wrap(json.dumps(DOC).encode(), 7, 2048)
    assert raw.startswith(b'{"SectorNum":7,"Phase1Out":"')  # Go's field order and base64
    got = c2input.decode(raw, LIMITS)
    assert (got.doc, got.sector_number, got.sector_size, got.shape) == (DOC, 7, 2048, "commit2")
    # keys in another order and whitespace are the same input
    spaced = json.dumps({"SectorSize": 2048, "Phase1Out": base64.b64encode(json.dumps(DOC).encode()).decode(),
                         "SectorNum": 7}, indent=2).encode()
    assert c2input.decode(spaced, LIMITS).doc == DOC
    bare = c2input.decode(json.dumps(DOC).encode(), LIMITS)
    assert (bare.doc, bare.shape, bare.sector_number) == (DOC, "c1", None)


@pytest.mark.parametrize("raw, message", [
    (b"", "vanilla_proof: empty"),
    (b'{"SectorNum": 7, "SectorSize": 2048}', "field Phase1Out is missing"),
    (b'{"SectorNum": -1, "Phase1Out": "", "SectorSize": 2048}', "field SectorNum must be a sector number"),
    (b'{"SectorNum": 7, "Phase1Out": "e30=", "SectorSize": 3000}', "field SectorSize must be a power of two"),
    (b'{"SectorNum": 7, "Phase1Out": "not base64!", "SectorSize": 2048}', "field Phase1Out is not standard base64"),
    (b'{"SectorNum": 7, "Phase1Out": 5, "SectorSize": 2048}', "field Phase1Out must be a base64 string"),
    (c2input.wrap(b"[1, 2]", 7, 2048), "field Phase1Out: not a C1 document"),
    (c2input.wrap(b'{"params": "x", "a": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}', 7, 2048),
     "field Phase1Out: field a"),
    (c2input.wrap(b'{"params": "x", \xff}', 7, 2048), "field Phase1Out: not UTF-8: byte 16"),
    (b'{"SectorNum": 7, "Phase1Out": "e30=", "SectorSize": 2048', "Commit2 input: not JSON"),
    (b'{"nothing": 1}', "not a C1 document"),
    (c2input.wrap(b'{"registered_proof": "StackedDrg2KiBV1_1", "vanilla_proofs": {}}', 7, 2048),
     "field Phase1Out: field vanilla_proofs: "),
    (c2input.wrap(b'{"registered_proof": "StackedDrg7KiBV1", "vanilla_proofs": {}}', 7, 2048),
     "field Phase1Out: field registered_proof: registered proof 'StackedDrg7KiBV1' is not one of"),
])
def test_a_bad_input_is_refused_in_one_line_naming_the_field(raw, message):
    with pytest.raises(c2input.C2InputError) as e:
        c2input.decode(raw, LIMITS)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_filecoin_commit2_input_names_its_parameter_set():
    """A 2 KiB sector sealed by the Filecoin family, its C1 output in a Commit2 input as
    lotus-bench writes it: the cluster's document is the serde one with ``params`` added."""
    import os

    from synthesis.filecoin import c1 as fc1
    from synthesis.filecoin import sector as fs
    from synthesis.filecoin.params import SETS

    prm = SETS["filecoin-2k"]
    sealed = fs.seal(prm, os.urandom(1016), fs.prover_id_from_miner(1000), 7, bytes(32))
    phase1 = fc1.dumps(fc1.c1_document(sealed, bytes([1] * 32)))
    got = c2input.decode(fc1.commit2_input(phase1, 7, 2048), LIMITS)
    assert (got.doc["params"], got.sector_number, got.sector_size) == ("filecoin-2k", 7, 2048)
    assert {k: v for k, v in got.doc.items() if k != "params"} == json.loads(phase1)
    with pytest.raises(c2input.C2InputError, match="field SectorSize is 34359738368, the C1 output is a 2048-byte"):
        c2input.decode(fc1.commit2_input(phase1, 7, 34359738368), LIMITS)


def test_a_commit2_input_over_the_size_bound_is_refused_before_decoding():
    from dataclasses import replace

    small = replace(LIMITS, document_bytes=1000)
    raw = c2input.wrap(json.dumps({"params": "p", "pad": "x" * 200}).encode() * 1, 7, 2048)
    assert c2input.decode(raw, small).doc["params"] == "p"
    big = c2input.wrap(b" " * 3000 + json.dumps(DOC).encode(), 7, 2048)
    with pytest.raises(c2input.C2InputError, match="over the limit of 1000"):
        c2input.decode(big, small)


# -- timings, priorities, lotus-bench's formats ------------------------------------------------------------

def test_timings_come_from_the_timeline():
    ev = [{"t": 10.0, "event": "queued", "partition": 0}, {"t": 10.0, "event": "queued", "partition": 1},
          {"t": 10.5, "event": "synthesis_start", "partition": 0}, {"t": 10.6, "event": "synthesis_start", "partition": 1},
          {"t": 11.5, "event": "synthesis_end", "partition": 0}, {"t": 12.6, "event": "synthesis_end", "partition": 1},
          {"t": 11.6, "event": "stage", "partition": 0, "stage": "fetch_assignment", "seconds": 0.1},
          {"t": 11.7, "event": "stage", "partition": 0, "stage": "key_load", "seconds": 0.25},
          {"t": 12.0, "event": "stage", "partition": 0, "stage": "msm", "seconds": 0.75},
          {"t": 12.7, "event": "stage", "partition": 1, "stage": "ntt_h", "seconds": 0.5}]
    assert timings(ev, 10.0, 14.0) == {"queue_wait_ms": 500, "srs_load_ms": 250, "synthesis_ms": 3000,
                                       "gpu_compute_ms": 1250, "total_ms": 4000}
    assert timings([], 10.0, 10.0)["queue_wait_ms"] == 0


def test_every_cuzk_priority_maps_onto_a_cluster_priority():
    from cluster.pipeline.jobs import PRIORITIES as CLUSTER

    assert set(PRIORITIES) == set(CUZK_ENUMS["Priority"].values())
    assert [CLUSTER[PRIORITIES[p]] for p in (pb.CRITICAL, pb.HIGH, pb.NORMAL, pb.LOW)] == sorted(
        CLUSTER[PRIORITIES[p]] for p in (pb.CRITICAL, pb.HIGH, pb.NORMAL, pb.LOW))


def test_lotus_bench_formats():
    assert go_duration(1.5) == "1.5s" and go_duration(83.25) == "1m23.25s" and go_duration(0.8124) == "812.4ms"
    assert go_duration(3725.0) == "1h2m5s"
    assert size_rate(2048, 2.0) == "1 KiB/s" and size_rate(34359738368, 60) == "546.1 MiB/s"
    assert miner_id("t01000") == 1000 and miner_id("f0123") == 123
    from cluster.cli import CommandError
    with pytest.raises(CommandError, match="an ID address"):
        miner_id("t3abc")


# -- the wrapper's fields at their bounds (issue 35: mutation survivors of c2input.decode) -------------

def _wrapper(**fields) -> bytes:
    doc = {"SectorNum": 7, "Phase1Out": base64.b64encode(json.dumps(DOC).encode()).decode(), "SectorSize": 2048}
    doc.update(fields)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("num", [0, 1 << 62, (1 << 63) - 1])
def test_sector_numbers_from_0_to_2_63_minus_1_are_taken(num):
    assert c2input.decode(_wrapper(SectorNum=num), LIMITS).sector_number == num


@pytest.mark.parametrize("size", [1, 2048, 1 << 35])
def test_sector_sizes_are_powers_of_two_from_1(size):
    assert c2input.decode(_wrapper(SectorSize=size), LIMITS).sector_size == size


@pytest.mark.parametrize("fields, message", [
    ({"SectorNum": 1 << 63}, "field SectorNum must be a sector number, got 9223372036854775808"),
    ({"SectorNum": -1}, "field SectorNum must be a sector number, got -1"),
    ({"SectorNum": True}, "field SectorNum must be a sector number, got True"),
    ({"SectorSize": 0}, "field SectorSize must be a power of two in bytes, got 0"),
    ({"SectorSize": True}, "field SectorSize must be a power of two in bytes, got True"),
    ({"SectorSize": 3072}, "field SectorSize must be a power of two in bytes, got 3072"),
    ({"Phase1Out": "e30=!"}, "field Phase1Out is not standard base64"),
    ({"x": {"y": {}}}, "Commit2 input: field x.y: nested deeper than 2 levels (limits.depth)"),
    ({f"x{i}": 0 for i in range(9)}, "Commit2 input: field (document): an object of 12 keys, over the limit of 11"),
])
def test_the_wrapper_s_fields_one_past_their_bounds_are_refused(fields, message):
    with pytest.raises(c2input.C2InputError) as e:
        c2input.decode(_wrapper(**fields), LIMITS)
    assert message in str(e.value), str(e.value)


def test_the_wrapper_takes_other_fields_to_its_bounds():
    """Go may add fields: up to 8 beyond the three, nested once."""
    extra = {f"x{i}": {"y": i} for i in range(8)}
    assert c2input.decode(_wrapper(**extra), LIMITS).doc == DOC


def test_a_filecoin_c1_is_recognized_within_its_first_256_bytes():
    head = b'{"registered_proof":"StackedDrg2KiBV1_1"}'
    at = b" " * (256 - len(b'{"registered_proof"')) + head  # the name ends at byte 256
    with pytest.raises(c2input.C2InputError, match=r"field Phase1Out: field vanilla_proofs"):
        c2input.decode(c2input.wrap(at, 7, 2048), LIMITS)
    with pytest.raises(c2input.C2InputError, match=r"not a C1 document"):  # one byte later: not sniffed
        c2input.decode(c2input.wrap(b" " + at, 7, 2048), LIMITS)


def test_the_first_missing_field_is_named():
    with pytest.raises(c2input.C2InputError, match=r"Commit2 input: field Phase1Out is missing \(a Commit2 input"):
        c2input.decode(b'{"SectorNum": 7}', LIMITS)


def test_a_build_without_the_filecoin_family_says_so(monkeypatch):
    import sys

    import synthesis.filecoin

    monkeypatch.delattr(synthesis.filecoin, "c1")  # the import below fails: ImportError
    monkeypatch.setitem(sys.modules, "synthesis.filecoin.c1", None)
    with pytest.raises(c2input.C2InputError, match=r"this build has no Filecoin circuit family"):
        c2input.decode(c2input.wrap(b'{"registered_proof":"StackedDrg2KiBV1_1"}', 7, 2048), LIMITS)


# -- a Filecoin C1 held against the request, as seal_commit_phase2 holds it ----------------------------

@pytest.fixture(scope="module")
def fc_inputs():
    """A 2 KiB sector sealed as StackedDrg2KiBV1_1 and one as its SyntheticPoRep kind (miner
    1000, sector 7): their Commit2 inputs."""
    import os

    from synthesis.filecoin import c1 as fc1
    from synthesis.filecoin import sector as fs
    from synthesis.filecoin.params import SETS

    prm = SETS["filecoin-2k"]
    out = {}
    for rp in (prm.registered_proof, prm.synthetic_proof):
        sealed = fs.seal(prm, os.urandom(1016), fs.prover_id_from_miner(1000), 7, bytes([3] * 32),
                         registered_proof=rp)
        out[rp] = fc1.commit2_input(fc1.dumps(fc1.c1_document(sealed, bytes([1] * 32))), 7, 2048)
    return out


def test_the_request_is_held_against_a_filecoin_c1_and_refused_naming_the_field(fc_inputs):
    from synthesis.filecoin.params import ALL_PROOF_IDS

    for rp, raw in fc_inputs.items():
        c2 = c2input.decode(raw, LIMITS)
        c2input.check_filecoin(c2, registered_proof=ALL_PROOF_IDS[rp], sector_number=7, miner_id=1000)
    c2 = c2input.decode(fc_inputs["StackedDrg2KiBV1_1"], LIMITS)
    refusals = [
        (dict(registered_proof=8, sector_number=7, miner_id=1000),
         "registered_proof: request says StackedDrg32GiBV1_1, C1 is StackedDrg2KiBV1_1"),
        # the synthetic kind's number for an interactive C1: same circuit, still refused
        (dict(registered_proof=10, sector_number=7, miner_id=1000),
         "registered_proof: request says StackedDrg2KiBV1_1_Feat_SyntheticPoRep, C1 is StackedDrg2KiBV1_1"),
        (dict(registered_proof=5, sector_number=8, miner_id=1000),
         "sector_number: request says 8, the Commit2 input's SectorNum is 7"),
        (dict(registered_proof=5, sector_number=7, miner_id=1001), "replica_id: the C1's is "),
    ]
    for kw, message in refusals:
        with pytest.raises(c2input.C2InputError) as e:
            c2input.check_filecoin(c2, **kw)
        assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)
    assert "miner_id 1001, sector 7" in str(e.value)
    # the sector number inside the replica id too: a wrapper that says 8 around sector 7's C1
    from synthesis.filecoin import c1 as fc1
    _, phase1, _ = fc1.read_commit2(fc_inputs["StackedDrg2KiBV1_1"])
    c2 = c2input.decode(fc1.commit2_input(phase1, 8, 2048), LIMITS)
    with pytest.raises(c2input.C2InputError, match="^replica_id: .* sector 8,"):
        c2input.check_filecoin(c2, registered_proof=5, sector_number=8, miner_id=1000)
    # a zkhive document (another family) has no Filecoin fields: nothing to hold
    c2input.check_filecoin(c2input.decode(json.dumps(DOC).encode(), LIMITS), registered_proof=0,
                           sector_number=0, miner_id=0)


def test_the_keepers_liveness_probe_names_getstatus_as_the_wire_does():
    """cluster.ops probes the gateway without importing its generated modules (the layers): the
    method's wire name it dials must be the one the generated stub and servicer use."""
    import inspect

    from cluster.gateway.pb import proving_pb2_grpc
    from cluster.ops.readiness import GET_STATUS

    assert f"'{GET_STATUS}'" in inspect.getsource(proving_pb2_grpc)
