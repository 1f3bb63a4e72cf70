"""Cluster pieces without a broker: settings, blob store, routing choice, timeline, time limits."""
from __future__ import annotations

import re
import time

import numpy as np
import pytest

from cluster import settings
from cluster.pipeline.blobs import BlobError, BlobRef, DirBlobStore
from cluster.pipeline.registry import WorkerInfo
from cluster.pipeline.routing import choose_queue


# -- settings --------------------------------------------------------------------------------------

def test_settings_from_toml_and_environment(tmp_path):
    f = tmp_path / "zkhive.toml"
    f.write_text('[srs]\nparam_cache = "/keys"\npreload = ["a"]\n[worker]\npartition_workers = 3\n')
    s = settings.load(f, env={"ZKHIVE_WORKER__PARTITION_WORKERS": "5", "ZKHIVE_REDIS__PASSWORD": "p@ss/1",
                              "ZKHIVE_STAGE_LOG": "1"})
    assert str(s.srs.param_cache) == "/keys" and s.srs.preload == ["a"]
    assert s.worker.partition_workers == 5  # the environment wins over the file
    assert s.redis.url_with_password() == "redis://:p%40ss%2F1@127.0.0.1:6379/0"
    assert "p@ss" not in repr(s) and "p@ss" not in s.redis.url


def test_an_empty_environment_value_is_an_empty_string_not_a_list():
    # "" in "[{" is True in Python: an empty ZKHIVE_GATEWAY__TOKEN once loaded as [] and failed
    s = settings.load(env={"ZKHIVE_GATEWAY__TOKEN": "", "ZKHIVE_REDIS__PASSWORD": ""})
    secret = lambda v: v.get_secret_value() if hasattr(v, "get_secret_value") else v  # noqa: E731
    assert secret(s.gateway.token) in ("", None) and secret(s.redis.password) in ("", None)
    s = settings.load(env={"ZKHIVE_SRS__PRELOAD": "a,b"})
    assert s.srs.preload == ["a", "b"]


@pytest.mark.parametrize("text, message", [
    ("[worker]\npartition_worker = 2\n", "unknown key worker.partition_worker"),
    ("[wrker]\nhost = 'a'\n", "unknown key wrker"),
    ("[worker]\npartition_workers = 0\n", "worker.partition_workers"),
    ("[redis]\nurl = 'redis://:secret@h:6379/0'\n", "not the URL"),
    ("[worker]\nhost = 'bad host'\n", "worker.host"),
    ("[delivery]\nvisibility_timeout_s = 60\n", "visibility_timeout_s (60) must exceed"),
    ("[delivery]\nprove_soft_time_limit_s = 2000\n", "prove_soft_time_limit_s must be below"),
    ("not toml = = =\n", "not valid TOML"),
    ("[deadlines]\nwinning_post_s = 0\n", "deadlines.winning_post_s"),
    ("[deadlines]\nwinning_s = 20\n", "unknown key deadlines.winning_s"),
])
def test_settings_reject_bad_keys_naming_key_and_file(tmp_path, text, message):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(settings.SettingsError, match=re.escape(message)) as e:
        settings.load(f, env={})
    assert "bad.toml" in str(e.value)


def test_a_bad_value_from_a_variable_is_blamed_on_the_variable(tmp_path):
    """Issue 27: a bad ZKHIVE_* value was reported as the settings file's."""
    f = tmp_path / "good.toml"
    f.write_text("[worker]\npartition_workers = 2\n")
    with pytest.raises(settings.SettingsError) as e:
        settings.load(f, env={"ZKHIVE_WORKER__PARTITION_WORKERS": "0"})
    assert str(e.value) == "environment variable ZKHIVE_WORKER__PARTITION_WORKERS: worker.partition_workers: 0 is not >= 1"
    f.write_text("[worker]\npartition_workers = 0\n")
    with pytest.raises(settings.SettingsError) as e:
        settings.load(f, env={"ZKHIVE_WORKER__HEARTBEAT_S": "3"})
    assert str(e.value) == f"settings file {f}: worker.partition_workers: 0 is not >= 1"
    assert settings.load(tmp_path / "good.toml", env={"ZKHIVE_WORKER__PARTITION_WORKERS": "3"}).worker.partition_workers == 3


def test_settings_reject_unknown_environment_keys():
    with pytest.raises(settings.SettingsError, match="ZKHIVE_WORKER__HEARTBEAT: unknown key worker.heartbeat"):
        settings.load(env={"ZKHIVE_WORKER__HEARTBEAT": "1"})
    with pytest.raises(settings.SettingsError, match="unknown section 'srss'"):
        settings.load(env={"ZKHIVE_SRSS__PRELOAD": "[]"})
    with pytest.raises(settings.SettingsError, match="missing.toml"):
        settings.load("/nonexistent/missing.toml", env={})


def test_deadlines_by_kind_name_their_setting():
    """cuzk-like defaults: WinningPoSt 25 s, WindowPoSt 30 min, PoRep and SnapDeals the job
    deadline; a job's own deadline_s wins; an unknown kind or a bad deadline is refused."""
    from cluster.errors import JobError
    from cluster.pipeline.workflow import job_deadline, job_kind

    s = settings.load(env={})
    assert s.deadlines.for_kind("winning-post", s.delivery) == (25.0, "deadlines.winning_post_s")
    assert s.deadlines.for_kind("window-post", s.delivery) == (1800.0, "deadlines.window_post_s")
    assert s.deadlines.for_kind("porep-c2", s.delivery) == (14400.0, "delivery.job_deadline_s")
    assert s.deadlines.for_kind("snap-update", s.delivery) == (14400.0, "delivery.job_deadline_s")
    s = settings.load(env={"ZKHIVE_DEADLINES__POREP_S": "600", "ZKHIVE_DEADLINES__WINNING_POST_S": "2.5"})
    assert job_deadline(s, "porep-c2", None) == (600.0, "deadlines.porep_s")
    assert job_deadline(s, "winning-post", None) == (2.5, "deadlines.winning_post_s")
    assert job_deadline(s, "winning-post", 7) == (7.0, "the job's own deadline_s (submit --deadline)")
    for bad in (0, -1, "5", True):
        with pytest.raises(JobError, match="^field deadline_s: .* must be a number of seconds above 0$"):
            job_deadline(s, "porep-c2", bad)
    with pytest.raises(settings.SettingsError, match="job kind 'post' is unknown"):
        s.deadlines.for_kind("post", s.delivery)
    circuit = type("C", (), {"proof_kind": "window-post"})()
    assert job_kind(circuit, None) == "window-post" and job_kind(object(), None) == "porep-c2"
    assert job_kind(circuit, "porep-c2") == "porep-c2"
    with pytest.raises(JobError, match="^field kind: 'PoRep' is not a job kind"):
        job_kind(object(), "PoRep")


def test_priority_names_follow_the_levels_kombu_serves():
    from cluster.pipeline.jobs import PRIORITIES, priority_name
    from cluster.pipeline.queues import LEVEL_NAMES, PRIORITY_STEPS

    assert [priority_name(p) for p in range(10)] == ["critical"] * 3 + ["high"] * 3 + ["normal"] * 3 + ["bulk"]
    assert [PRIORITIES[n] for n in LEVEL_NAMES] == PRIORITY_STEPS


def test_every_setting_is_documented():
    for section in settings.Settings.model_fields.values():
        model = section.annotation
        if isinstance(model, type) and issubclass(model, settings.Section):
            for name, field in model.model_fields.items():
                assert field.description, f"{model.__name__}.{name} has no docstring"


# -- blobs -----------------------------------------------------------------------------------------

def test_blob_round_trip_and_content_addressing(tmp_path):
    store = DirBlobStore(tmp_path)
    z = np.arange(40, dtype=np.uint64).reshape(10, 4)
    ref = store.put_array(z, kind="assignment")
    assert np.array_equal(store.get_array(ref.model_dump(), dtype=np.uint64, shape=(10, 4)), z)
    assert store.put_array(z, kind="assignment") == ref  # the same content is the same blob
    assert store.get_json(store.put_json({"a": [1, 2]})) == {"a": [1, 2]}


def test_blob_reads_are_checked(tmp_path):
    store = DirBlobStore(tmp_path, max_bytes=1 << 20)
    ref = store.put(b"x" * 100, kind="c1")
    path = tmp_path / ref.sha256[:2] / ref.sha256
    path.write_bytes(b"y" * 100)  # same size, other content
    with pytest.raises(BlobError, match="does not match its sha256"):
        store.get(ref)
    path.write_bytes(b"x" * 101)
    with pytest.raises(BlobError, match="read 101 bytes, the reference says 100"):
        store.get(ref)
    path.unlink()
    with pytest.raises(BlobError, match="missing"):
        store.get(ref)
    with pytest.raises(BlobError, match="over the limit"):
        store.get(BlobRef(store="dir", sha256=ref.sha256, size=2 << 20))
    # a reference from a message cannot point outside the store or claim a negative size
    for bad in ({"store": "dir", "sha256": "../../etc/passwd", "size": 1},
                {"store": "dir", "sha256": ref.sha256, "size": -1},
                {"store": "s3", "sha256": ref.sha256, "size": 1},
                {"store": "dir", "sha256": ref.sha256, "size": 1, "path": "/etc/passwd"}):
        with pytest.raises(BlobError, match="malformed blob reference"):
            store.get(bad)
    with pytest.raises(BlobError, match="redis"):
        store.get(BlobRef(store="redis", sha256=ref.sha256, size=1))


def test_blob_arrays_refuse_pickles_and_wrong_shapes(tmp_path):
    store = DirBlobStore(tmp_path)
    import io
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(BlobError, match="not a plain .npy"):
        store.get_array(store.put(buf.getvalue()))
    ref = store.put_array(np.zeros((3, 4), dtype=np.uint64))
    with pytest.raises(BlobError, match="shape"):
        store.get_array(ref, shape=(4, 4))
    with pytest.raises(BlobError, match="dtype"):
        store.get_array(ref, dtype=np.int64)


# -- routing ---------------------------------------------------------------------------------------

def prover(device, keys=(), free=1 << 30, inflight=0, ready=True, host="h"):
    idx = device.split(":")[1]
    return WorkerInfo(worker_id=f"prove.{host}.cpu{idx}.0", role="prove", host=host, pid=1,
                      queues=[f"prove.{host}.cpu{idx}"], device=device, resident_keys=list(keys),
                      free_memory=free, ready=ready, inflight=["j/0"] * inflight)


def test_routing_prefers_the_resident_key_then_load():
    ws = [prover("cpu:0", ["a"]), prover("cpu:1", ["b"]), prover("cpu:2", ["a"])]
    assert choose_queue(ws, "b", 100, {}).queue == "prove.h.cpu1"
    c = choose_queue(ws, "a", 100, {"prove.h.cpu0": 3})
    assert (c.queue, c.reason) == ("prove.h.cpu2", "resident")
    # a holder stays preferred over an idle device without the key
    assert choose_queue(ws, "b", 100, {"prove.h.cpu1": 5}).queue == "prove.h.cpu1"
    # in-flight work counts as load too
    ws2 = [prover("cpu:0", ["a"], inflight=1), prover("cpu:2", ["a"])]
    assert choose_queue(ws2, "a", 100, {}).queue == "prove.h.cpu2"


def test_routing_without_a_holder_needs_room_and_skips_not_ready_and_excluded():
    ws = [prover("cpu:0", free=10), prover("cpu:1", free=1000), prover("cpu:2", ["c"], ready=False)]
    c = choose_queue(ws, "c", 500, {})
    assert (c.queue, c.reason) == ("prove.h.cpu1", "room")  # cpu:2 holds it but is not ready
    c = choose_queue(ws, "c", 5000, {"prove.h.cpu0": 1})
    assert (c.queue, c.reason) == ("prove.h.cpu1", "evict")
    c = choose_queue(ws, "c", 500, {}, exclude_devices=("cpu:1",))
    assert c.queue == "prove.h.cpu0" and c.reason == "evict"
    c = choose_queue([prover("cpu:0")], "c", 1, {}, exclude_devices=("cpu:0",))
    assert (c.queue, c.reason) == ("prove.h.cpu0", "excluded-only")
    assert choose_queue([], "c", 1, {}).queue == "prove.unassigned"


# -- timeline, devices, time limits ----------------------------------------------------------------

def test_timeline_spans_and_text():
    from cluster.pipeline.timeline import format_text, spans

    ev = [{"t": 0.0, "event": "queued", "partition": 0},
          {"t": 1.0, "event": "synthesis_start", "partition": 0},
          {"t": 2.0, "event": "synthesis_end", "partition": 0},
          {"t": 2.5, "event": "prove_pickup", "partition": 0, "worker": "w"},
          {"t": 2.6, "event": "stage", "partition": 0, "stage": "msm", "start": 2.6, "end": 3.0, "seconds": 0.4},
          {"t": 3.1, "event": "aggregate_start", "partition": None},
          {"t": 3.3, "event": "aggregated", "partition": None}]
    got = {(p, label): (round(a, 3), round(b, 3)) for p, label, a, b in spans(ev)}
    assert got == {(0, "queued"): (0.0, 1.0), (0, "synthesis"): (1.0, 2.0), (0, "wait_prover"): (2.0, 2.5),
                   (0, "msm"): (2.6, 3.0), (None, "aggregate"): (3.1, 3.3)}
    text = format_text("j", ev)
    assert "stage=msm seconds=0.4" in text and "aggregated" in text
    assert "no events" in format_text("j", [])


def test_device_names():
    from cluster.pipeline.prover import DeviceSpecError, parse_device

    assert parse_device("cuda:1").queue("h") == "prove.h.1"
    assert parse_device("cpu").queue("h") == "prove.h.cpu0"
    for bad in ("gpu:0", "cuda:", "cuda:x", "", "cpu:1:2"):
        with pytest.raises(DeviceSpecError, match="not cpu, cpu:N or cuda:N"):
            parse_device(bad)


def test_soft_time_limit_interrupts_and_hard_limit_fires():
    from celery.exceptions import SoftTimeLimitExceeded

    from cluster.pipeline.lifecycle import TimeLimits

    fired = []
    limits = TimeLimits(on_hard=lambda name, s: fired.append((name, s)))
    limits.arm("t", 0.05, None)
    with pytest.raises(SoftTimeLimitExceeded):
        time.sleep(2)
    limits.disarm()
    limits.arm("t", None, 0.05)
    time.sleep(0.3)
    assert fired == [("t", 0.05)]
    # disarmed in time: nothing fires
    limits.arm("u", 0.05, 0.05)
    limits.disarm()
    time.sleep(0.2)
    assert fired == [("t", 0.05)]


def test_up_plans_gpu_workers_per_device_provers_a_device(tmp_path):
    """`zkhive up` starts [worker] gpu_workers_per_device provers per device (the seeds' two
    workers per GPU), each its own process on the device's one queue; 1 keeps one a device."""
    import argparse

    from cluster import settings
    from cluster.ops.plan import plan

    def provers(n):
        s = settings.load(env={"ZKHIVE_WORKER__GPU_WORKERS_PER_DEVICE": str(n),
                               "ZKHIVE_FLOWER__PASSWORD": "pw"})
        args = argparse.Namespace(run_dir=str(tmp_path / f"run{n}"), devices="cpu:0,cpu:1",
                                  synthesis_workers=1, ready_timeout=5, config=None)
        services, _ = plan(args, s)
        return [(w.name, w.address) for w in services[1] if w.name.startswith("prove")]

    assert provers(2) == [("prove-cpu0", "cpu:0"), ("prove-cpu0-1", "cpu:0"),
                          ("prove-cpu1", "cpu:1"), ("prove-cpu1-1", "cpu:1")]
    assert provers(1) == [("prove-cpu0", "cpu:0"), ("prove-cpu1", "cpu:1")]


def test_the_device_lock_serves_the_most_urgent_waiter_first():
    """Prover's device lock: while it is held, waiters of priority 6, 0, 3, 0 line up; they get
    it 0, 0 (in the order they came), 3, 6. A plain Lock hands it to any of them."""
    import threading

    from cluster.pipeline.prover import PriorityLock

    lock, got, started = PriorityLock(), [], []
    release = threading.Event()

    def holder():
        with lock.hold(9):
            started.append("held")
            release.wait(10)

    def waiter(name, prio):
        with lock.hold(prio):
            got.append(name)

    h = threading.Thread(target=holder)
    h.start()
    while not started:
        time.sleep(0.001)
    ts = []
    for name, prio in (("normal", 6), ("critical-a", 0), ("high", 3), ("critical-b", 0)):
        t = threading.Thread(target=waiter, args=(name, prio))
        t.start()
        ts.append(t)
        while len(lock._waiting) < len(ts):  # each in line before the next comes
            time.sleep(0.001)
    release.set()
    for t in [h, *ts]:
        t.join(10)
    assert got == ["critical-a", "critical-b", "high", "normal"]
    with lock.hold():  # free again
        pass


def test_urgent_is_for_synthesis_workers_only():
    """`zkhive worker aggregate --urgent` is refused before anything starts, naming the option."""
    from cluster.pipeline.lifecycle import WorkerLifecycle, WorkerStartError

    for role in ("aggregate", "prove"):
        with pytest.raises(WorkerStartError, match=f"--urgent is for synthesis workers, not '{role}'"):
            WorkerLifecycle(role, "cpu:0" if role == "prove" else None, urgent=True)


def test_critical_synthesis_routes_to_the_urgent_queue():
    """route_task: a synthesis message of priority 0 (CRITICAL) goes to synthesis.urgent, every
    other priority (and none) to synthesis; the aggregation stays on its queue whatever its priority."""
    from cluster.pipeline.queues import AGGREGATE_QUEUE, SYNTHESIS_QUEUE, URGENT_SYNTHESIS_QUEUE
    from cluster.pipeline.routing import route_task

    name = "zkhive.synthesize_partition"
    assert route_task(name, ("j", 0), {}, {"priority": 0}) == {"queue": URGENT_SYNTHESIS_QUEUE}
    for p in (3, 6, 9, None):
        assert route_task(name, ("j", 0), {}, {"priority": p}) == {"queue": SYNTHESIS_QUEUE}, p
    assert route_task(name, ("j", 0), {}, {}) == {"queue": SYNTHESIS_QUEUE}
    assert route_task("zkhive.aggregate", (None, "j"), {}, {"priority": 0}) == {"queue": AGGREGATE_QUEUE}
