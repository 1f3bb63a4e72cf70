"""Bounded memory and one-line input errors (issue 15 items 3 and 4) on a real Redis with real
workers: the same bad inputs from the command line, the Python client and the submit task (what
Flower's send-task runs), each refused in one line naming the field and its size, nothing stored;
task results small and short-lived; a submit at Redis' maxmemory refused in one line, never
leaving a half-written job. (Flower's own request bound: tests/integration/test_up_cluster.py.)"""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import time

import pytest

from circuits_for_tests import SQUARES_A, make_c1

pytestmark = pytest.mark.integration

MB50 = 50 << 20


def deep(depth: int):
    v: list = []
    for _ in range(depth - 1):
        v = [v]
    return v


def no_trace_of(r, job_id: str) -> None:
    from cluster.pipeline.queues import queued_messages

    assert not list(r.scan_iter(match=f"zkhive:job:{job_id}*"))
    assert not r.sismember("zkhive:active", job_id) and r.zscore("zkhive:jobs", job_id) is None
    assert not [m for _, _, m in queued_messages(r) if job_id.encode() in json.dumps(m).encode()]


def stored_bytes(r) -> int:
    """What Redis stores: the exact size (MEMORY USAGE, SAMPLES 0) of every key. Not used_memory
    less mem_clients_normal: Redis adds a client's buffers to mem_clients_normal in its cron, on
    its own schedule, so after a 50 MB message the difference was off by one message (70 MB,
    base64) either way for a while; a full-suite run measured 70 MB there with every key small
    (before that, CI stop 22: a query buffer Redis had not trimmed yet)."""
    return sum(r.memory_usage(k, samples=0) or 0 for k in r.scan_iter(count=1000))


def wait_acked(r, task_id: str, timeout_s: float = 30.0) -> None:
    """Until the broker's ``unacked`` hash holds no message of ``task_id``. The result is stored
    before the worker acks (late acks), so a result read can come while the message, 70 MB for a
    50 MB argument, is still in the hash; a message never acked fails here."""
    deadline = time.monotonic() + timeout_s
    while True:
        held = [raw for raw in r.hvals("unacked") if json.loads(raw)[0].get("headers", {}).get("id") == task_id]
        if not held:
            return
        assert time.monotonic() < deadline, f"task {task_id}: its message ({len(held[0])} bytes) still unacked after {timeout_s} s"
        time.sleep(0.1)


@pytest.fixture
def aggregate_only(cluster, workers):
    cluster.setup_keys(SQUARES_A)
    return [workers("aggregate"), workers("synthesis"), workers("prove", "cpu:0", ZKHIVE_SRS__PRELOAD=f'["{SQUARES_A.name}"]')]


def test_every_bad_input_is_one_line_from_cli_client_and_task(cluster, aggregate_only, tmp_path):
    from cluster.pipeline.app import app
    from cluster.client import submit
    from cluster.errors import JobError
    from tests.conftest import ROOT

    good = make_c1(SQUARES_A, seed=70)
    text = json.dumps(good)
    files = {  # what only a file can carry, and what every path can
        "non-utf8": (text[:30].encode() + b"\xff" + text[31:].encode(), "not UTF-8: byte 30 (0xff)"),
        "deep": (b"[" * 5000 + b"]" * 5000, "nested deeper than 16 levels (limits.depth) at byte 16"),
        "bigint": (text.replace('"partitions"', '"n": ' + "7" * 5000 + ', "partitions"').encode(),
                   "field n: an integer of 5000 digits, over the limit of 40 (limits.int_digits)"),
        "50mb": (json.dumps({**good, "params": "x" * MB50}).encode(),
                 "field params: a string of 52428800 bytes, over the limit of 256 (limits.string_bytes)"),
    }
    for name, (raw, message) in files.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(raw)
        p = subprocess.run([sys.executable, "-m", "cluster", "submit", str(path)], cwd=ROOT, env=cluster.env,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
        assert p.stderr.startswith(f"zkhive submit: {path}: ") and message in p.stderr, p.stderr

    dicts = {  # a Python caller's dicts: the client and the submit task (Flower's send-task)
        "deep": ({**good, "x": deep(5000)}, "field x[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: nested deeper than 16"),
        "bigint": ({**good, "n": 10 ** 5000}, "field n: an integer of 5001 digits, over the limit of 40"),
        "50mb": ({**good, "params": "x" * MB50}, "field params: a string of 52428800 bytes, over the limit of 256"),
        "nan": ({**good, "partitions": [{"x": float("nan"), "y": "0x1"}]}, "field partitions[0].x: the number nan is not finite"),
        "bytes": ({**good, "x": b"\x00"}, "field x: a bytes is not a JSON value"),
        "surrogate": ({**good, "params": "\ud800"}, "field params: string has a lone surrogate at character 0"),
    }
    for name, (doc, message) in dicts.items():
        with pytest.raises(JobError) as e:
            submit(doc, job_id=f"bad-{name}")
        assert str(e.value).startswith(message) and "\n" not in str(e.value) and len(str(e.value)) < 200, str(e.value)
        no_trace_of(cluster.redis, f"bad-{name}")

    # the submit task, as Flower's send-task runs it (what kombu's JSON can carry: a 5,000-digit
    # integer cannot be sent at all, 100 digits can; 1,000 levels can)
    before = stored_bytes(cluster.redis)
    tasks = {"deep": ({**good, "x": deep(900)}, "nested deeper than 16 levels"),
             "bigint": ({**good, "n": 10 ** 100}, "field n: an integer of 101 digits"),
             "50mb": ({**good, "params": "x" * MB50}, "field params: a string of 52428800 bytes"),
             "priority": (good, "priority 'uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuu'... (100000 characters) is unknown")}
    for name, (doc, message) in tasks.items():
        kwargs = {"job_id": f"task-{name}", **({"priority": "u" * 100_000} if name == "priority" else {})}
        res = app.send_task("zkhive.submit", args=[doc], kwargs=kwargs)
        with pytest.raises(JobError) as e:
            res.get(timeout=60)
        assert message in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 300, str(e.value)[:500]
        no_trace_of(cluster.redis, f"task-{name}")
        # the task's result: a few hundred bytes for an hour, never the argument
        meta = f"celery-task-meta-{res.id}"
        assert cluster.redis.memory_usage(meta) < 4096 and 0 < cluster.redis.ttl(meta) <= 3600
        # acked, the argument left nothing behind (before: 218 MiB for 7 days, docs/cluster.md)
        wait_acked(cluster.redis, res.id)
        grown = stored_bytes(cluster.redis) - before
        assert grown < (2 << 20), f"task-{name}: Redis stores {grown} bytes more than before"

    # the workers kept serving: a good job through the same task verifies
    from cluster.client import Job
    from test_cluster_jobs import verify_result

    res = app.send_task("zkhive.submit", args=[good], kwargs={"job_id": "after-bad"})
    assert res.get(timeout=60) == {"job_id": "after-bad", "created": True, "num_partitions": 2}
    verify_result(cluster, SQUARES_A, good, Job("after-bad").result(timeout=60))
    assert all(w.proc.poll() is None for w in aggregate_only)
    # every task result is small and expires within delivery.task_result_ttl_s; none holds a C1
    for k in cluster.redis.scan_iter(match="celery-task-meta-*"):
        assert cluster.redis.memory_usage(k) < 4096 and 0 < cluster.redis.ttl(k) <= 3600
        assert b'"partitions"' not in cluster.redis.get(k)


def test_submit_at_maxmemory_is_one_line_and_never_half_written(cluster, tmp_path, caplog):
    """A Redis with maxmemory and noeviction, the bound moved across a submission's writes (blob,
    record, state, events, the chord's messages): each submit either is whole (record and every
    partition's message) or refused with the broker-full line, leaving no trace."""
    from cluster.client import submit
    from cluster.errors import JobError
    from cluster.ops.redis_server import RedisServer
    from cluster.pipeline.queues import queued_messages

    cluster.setup_keys(SQUARES_A)
    srv = RedisServer(password=cluster.password, data_dir=tmp_path / "redis", maxmemory=0).start()
    r = srv.client()
    caplog.set_level(logging.INFO, logger="cluster.pipeline.bounds")
    outcomes = {"whole": 0, "refused": 0}
    try:
        cluster.configure_here(ZKHIVE_REDIS__URL=srv.url, ZKHIVE_BLOBS__BACKEND="redis")
        doc = make_c1(SQUARES_A, seed=71)
        # fine steps across the writes, then coarser ones up to room for a new connection's
        # buffers (a publish after a refused one connects again: ~50 KB in Redis 6.2)
        gaps = [*range(0, 40_000, 400), *range(40_000, 200_001, 20_000)]
        for i, gap in enumerate(gaps):
            r.flushdb()
            r.config_set("maxmemory", 0)
            r.set("ballast", b"b" * 20_000)  # some data, as a live broker has
            r.config_set("maxmemory", r.info("memory")["used_memory"] + gap)
            job_id = f"oom-{i}"
            try:
                job = submit(doc, job_id=job_id)
            except JobError as e:
                msg = str(e)
                assert msg.startswith("broker memory full (maxmemory ") and f"job {job_id} not submitted" in msg, msg
                assert "\n" not in msg and "raise redis.maxmemory_bytes" in msg
                r.config_set("maxmemory", 0)
                no_trace_of(r, job_id)
                outcomes["refused"] += 1
                continue
            r.config_set("maxmemory", 0)
            assert job.created and r.exists(f"zkhive:job:{job_id}") and r.sismember("zkhive:active", job_id)
            synth = [m for _, _, m in queued_messages(r) if m["headers"]["task"] == "zkhive.synthesize_partition"]
            assert len(synth) == SQUARES_A.num_partitions()
            outcomes["whole"] += 1
        undone = [rec for rec in caplog.records if "submission failed after it was recorded" in rec.getMessage()]
        assert outcomes["refused"] and outcomes["whole"] and undone, (outcomes, len(undone))
    finally:
        import gc

        gc.collect()  # the chords' AsyncResults unsubscribe while their Redis still answers
        cluster.configure_here()
        srv.stop()
