"""Validation before acceptance (issue 27): what the C1 schema can check is refused at submit,
naming the job-level field, in our one-line wording; nothing is stored. Before, `submit`
accepted a wrong partition count, a malformed comm_r or 66 partitions and then failed the job
as "partition 0: bad C1 input: ..." in pydantic's words. Real Redis, no workers."""
from __future__ import annotations

import copy

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def good():
    from synthesis.porep import SETS, c1_document, generate

    seed = (5).to_bytes(32, "little")
    return c1_document(generate(SETS["porep-lite-4k"], seed), seed)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["partitions"].append(copy.deepcopy(d["partitions"][0])),
     "bad C1 input: field partitions: has 3 partitions, 2 expected for this parameter set"),
    (lambda d: d["partitions"].extend(copy.deepcopy(d["partitions"][0]) for _ in range(64)),
     "bad C1 input: field partitions: has 66 items, at most 64 allowed"),
    (lambda d: d.update(comm_r="0xzz"),
     "bad C1 input: field comm_r: '0xzz' does not match ^0x[0-9a-fA-F]{1,64}$"),
    (lambda d: d.pop("comm_d"), "bad C1 input: field comm_d: is missing"),
    (lambda d: d["partitions"][1]["challenges"][0].update(node="x7"),
     "bad C1 input: field partitions[1].challenges[0].node: must be an integer, not 'x7'"),
])
def test_submit_refuses_what_the_schema_can_check(cluster, good, change, message, tmp_path):
    from cluster.errors import JobError
    from cluster.pipeline.workflow import submit_job

    cluster.flush()
    # a key cache of its own: the session's holds porep-lite-4k's keys once another test made them
    cluster.configure_here(ZKHIVE_SRS__PARAM_CACHE=str(tmp_path / "no-keys"))
    rt = cluster.runtime()
    doc = copy.deepcopy(good)
    change(doc)
    with pytest.raises(JobError) as e:
        submit_job(rt, doc, job_id="refused")
    assert str(e.value) == message
    assert not list(rt.redis.scan_iter(match="zkhive:job:*"))  # nothing accepted, nothing stored
    # the unchanged document passes the same check (it then needs keys, which this test has not)
    with pytest.raises(JobError, match="^field params: no keys for parameter set 'porep-lite-4k'"):
        submit_job(rt, copy.deepcopy(good), job_id="accepted-by-the-schema")
    cluster.configure_here()


def test_a_malformed_blob_reference_is_one_line():
    from cluster.pipeline.blobs import BlobError, parse_ref

    with pytest.raises(BlobError) as e:
        parse_ref({"store": "dir", "sha256": "ab", "size": -1, "kind": "c1"})
    assert str(e.value) == ("malformed blob reference: field sha256: must be 64 lowercase hex digits "
                            "(and 1 more errors)")
    with pytest.raises(BlobError, match=r"^malformed blob reference: field store: 'disk' is not one of "):
        parse_ref({"store": "disk", "sha256": "a" * 64, "size": 1})
    assert parse_ref({"store": "dir", "sha256": "a" * 64, "size": 1}).size == 1


def test_a_full_blob_disk_is_back_pressure_not_a_failed_job(cluster, good, tmp_path):
    """Refused at submit, naming the free space, while the store's disk is under
    blobs.min_free_bytes; the same submit passes with room. A write that finds the disk full
    (ENOSPC) is a transient error: retried, never a permanent failure of accepted work."""
    import errno as errno_mod

    from cluster.errors import BlobStoreFull
    from cluster.pipeline.blobs import DirBlobStore
    from cluster.pipeline.retry import classify
    from cluster.pipeline.workflow import submit_job

    cluster.flush()
    cluster.configure_here(ZKHIVE_BLOBS__MIN_FREE_BYTES=str(1 << 62))  # more than any disk has
    try:
        rt = cluster.runtime()
        rt.keys.setup(__import__("synthesis.circuits", fromlist=["get_circuit"]).get_circuit("porep-lite-4k"))
        with pytest.raises(BlobStoreFull, match=r"^blob store .*: \d+ bytes free, under blobs.min_free_bytes="
                                                 r"4611686018427387904: free space"):
            submit_job(rt, copy.deepcopy(good), job_id="no-room")
        assert not list(rt.redis.scan_iter(match="zkhive:job:*"))
    finally:
        cluster.configure_here()
    rec, created = submit_job(cluster.runtime(), copy.deepcopy(good), job_id="room")
    assert created and rec.job_id == "room"
    verdict = classify(BlobStoreFull("blob store /x: no room for a assignment of 10 bytes (0 bytes free)"))
    assert verdict.transient and verdict.wait and verdict.kind == "blob store full"
    # back-pressure waits with a growing delay (issue 39), other transient errors do not wait
    from cluster.pipeline.retry import wait_delay

    assert [wait_delay(n) for n in (1, 2, 3, 4, 5, 6, 50)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert not classify(TimeoutError("x")).wait
    # an OSError that is not the disk's fullness stays what it was (permanent, "unexpected")
    assert not classify(OSError(errno_mod.EACCES, "Permission denied")).transient
    assert DirBlobStore(tmp_path / "blobs").free_bytes() > 0
