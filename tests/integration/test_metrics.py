"""The Prometheus exporter (``zkhive metrics``) as its own process, scraped over HTTP while real
workers on a real Redis run real jobs: the series move with the work (stage histograms, partition
and job outcomes, synthesis bytes, device busy seconds, queue depth), a failed job is counted as
failed and not as done, and the registry's devices, keys and memory are there."""
from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request

import pytest

from circuits_for_tests import SQUARES_A, SQUARES_C, SQUARES_SLOW, make_c1
from cluster.errors import JobFailed
from cluster.ops.supervisor import free_port, free_ports

pytestmark = pytest.mark.integration

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    """Prometheus text format -> {(name, labels): value}."""
    out = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if not m or line.startswith("#"):
            continue
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(samples, name, **labels) -> float:
    """Sum of ``name`` over the samples whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


class Exporter:
    def __init__(self, cluster, log):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        env = {**cluster.env, "ZKHIVE_METRICS__PORT": str(self.port)}
        self._log = open(log, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "cluster", "metrics"], env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        from cluster.ops.readiness import metrics_check

        end = time.monotonic() + 30
        while (reason := metrics_check(self.url[:-len("/metrics")])) is not None:
            assert self.proc.poll() is None, f"exporter exited: {log.read_text()}"
            assert time.monotonic() < end, reason
            time.sleep(0.1)

    def scrape(self):
        with urllib.request.urlopen(self.url, timeout=10) as r:
            assert r.status == 200
            return parse(r.read().decode())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self._log.close()


@pytest.fixture
def exporter(cluster, workers, tmp_path):
    ex = Exporter(cluster, tmp_path / "metrics.log")
    yield ex
    ex.stop()


def test_exporter_series_move_during_a_real_job(cluster, workers, exporter):
    from cluster.client import submit

    cluster.setup_keys(SQUARES_A, SQUARES_C, SQUARES_SLOW)
    syn, agg = workers("synthesis", wait=False), workers("aggregate", wait=False)
    prover = workers("prove", "cpu:0", wait=False, ZKHIVE_SRS__PRELOAD=f'["{SQUARES_A.name}"]')
    for w in (syn, agg, prover):
        w.wait_ready(cluster.redis)

    before = exporter.scrape()
    assert value(before, "zkhive_up") == 1.0
    assert value(before, "zkhive_jobs_active") == 0
    assert value(before, "zkhive_jobs_total") == 0
    # the registry: three ready workers, the prover's device with its preloaded key and memory
    assert value(before, "zkhive_worker_ready") == 3
    assert value(before, "zkhive_resident_key", device="cpu:0", params=SQUARES_A.name) == 1
    assert value(before, "zkhive_device_memory_total_bytes", device="cpu:0") > 0
    assert value(before, "zkhive_device_memory_free_bytes", device="cpu:0") > 0
    assert ("zkhive_queue_depth", frozenset({("queue", prover.wait_ready(cluster.redis).queues[0]),
                                              ("host", cluster.runtime().settings.worker.host),
                                              ("device", "cpu:0")})) in before

    # a slow job (0.2 s a partition proof): scraped while it runs
    job = submit(make_c1(SQUARES_SLOW, seed=11), job_id="metrics-slow")
    during = exporter.scrape()
    assert value(during, "zkhive_jobs_active") == 1
    seen_inflight = seen_depth = False
    while job.status()["status"] not in ("done", "failed", "cancelled"):
        s = exporter.scrape()
        seen_inflight |= value(s, "zkhive_worker_inflight", device="cpu:0") >= 1
        seen_depth |= value(s, "zkhive_queue_depth") >= 1
        time.sleep(0.05)
    job.result(timeout=60)
    a = submit(make_c1(SQUARES_C, seed=12), job_id="metrics-c")
    a.result(timeout=60)
    after = exporter.scrape()

    assert seen_inflight, "no scrape saw the prover with a partition in hand"
    assert seen_depth, "no scrape saw a queued message"
    assert value(after, "zkhive_jobs_active") == 0
    assert value(after, "zkhive_jobs_total", outcome="done") == 2
    assert value(after, "zkhive_jobs_total", outcome="failed") == 0
    assert value(after, "zkhive_job_seconds_count", params=SQUARES_SLOW.name, outcome="done") == 1
    # 2 + 3 partitions proved, each synthesized (assignment bytes counted) and timed per stage
    assert value(after, "zkhive_partitions_total", outcome="proved") == 5
    assert value(after, "zkhive_partitions_total", params=SQUARES_C.name, outcome="proved") == 3
    assert value(after, "zkhive_synthesis_seconds_count") == 5
    # each assignment blob is the compact encoding of that partition's z (synthesis.assignment)
    from synthesis import assignment
    doc_c = make_c1(SQUARES_C, seed=12)
    parsed = SQUARES_C.parse_c1(doc_c)
    expected = sum(len(assignment.encode(SQUARES_C.synthesize(parsed, k))) for k in range(3))
    assert value(after, "zkhive_synthesis_bytes_total", params=SQUARES_C.name) == expected
    assert value(after, "zkhive_prove_seconds_count", device="cpu:0") == 5
    assert value(after, "zkhive_stage_seconds_count", stage="msm", device="cpu:0") == 5
    assert value(after, "zkhive_stage_seconds_count", params=SQUARES_SLOW.name, stage="msm") == 2
    busy = value(after, "zkhive_device_busy_seconds_total", device="cpu:0")
    # the counter moved by the proofs' device stages (SQUARES_SLOW's proofs took ~0.2 s each on
    # an older 2-core VM, 0.06-0.08 s on this one: no speed is assumed here) ...
    assert busy > 0, busy
    # ... by exactly their sum (the host's fetch not among them)
    assert busy == pytest.approx(sum(v for (n, ls), v in after.items() if n == "zkhive_stage_seconds_sum"
                                     and ("device", "cpu:0") in ls and ("stage", "fetch_assignment") not in ls))
    # the Grafana dashboard's panels are exactly these series: each one it queries is served,
    # and each family served is on a panel
    import json
    from pathlib import Path

    board = json.loads((Path(__file__).resolve().parents[2] / "docs" / "grafana" / "zkhive.json").read_text())
    queried = {n for p in board["panels"] for t in p["targets"] for n in re.findall(r"zkhive_[a-z_]+", t["expr"])}
    served = {n for n, _ in after}
    # zkhive_key_loading has samples only while a key loads (docs/cluster.md shows one); the
    # back-pressure and resubmission counters once a unit waits or a failed job is retried
    # (tests/integration/test_back_pressure.py scrapes them); the deadline counter once a job
    # misses its deadline (tests/integration/test_priorities.py scrapes it); the mirror's progress
    # once a prover writes a .params' mirror (opt-in, ZKHIVE_PARAMS_MIRROR=1:
    # tests/integration/test_up_cluster.py scrapes it)
    assert queried - {"zkhive_key_loading", "zkhive_blob_store_waits_total", "zkhive_job_attempts_total",
                      "zkhive_deadline_missed_total", "zkhive_key_mirror_progress"} <= served, queried - served
    # the two sets not preloaded were each loaded once, as a key_load stage (issue 27)
    assert value(after, "zkhive_stage_seconds_count", stage="key_load", device="cpu:0") == 2
    assert value(after, "zkhive_stage_seconds_count", stage="key_load", params=SQUARES_A.name) == 0
    # the alert rules shipped beside it use only served series, and cover what issue 27 asked
    import yaml

    rules = yaml.safe_load((Path(__file__).resolve().parents[2] / "docs" / "prometheus" /
                            "zkhive-alerts.yml").read_text())["groups"][0]["rules"]
    alerted = {n for r in rules for n in re.findall(r"zkhive_[a-z_]+", r["expr"])}
    assert alerted <= served, alerted - served
    assert {"ZkhiveQueueGrowing", "ZkhiveNoReadyProver", "ZkhiveJobFailureRate",
            "ZkhiveOldestPartitionRunning"} <= {r["alert"] for r in rules}
    from cluster.version import code_digest
    assert value(after, "zkhive_build_info", code=code_digest()) == 1
    assert value(after, "zkhive_oldest_running_partition_seconds") == 0  # nothing in hand now
    families = {re.sub(r"_(bucket|sum|count|created|total)$", "", n) for n in served}
    assert all(any(q.startswith(f) for q in queried) for f in families), \
        [f for f in families if not any(q.startswith(f) for q in queried)]
    # scraping again without new work moves no counter
    again = exporter.scrape()
    for name in ("zkhive_partitions_total", "zkhive_stage_seconds_count", "zkhive_synthesis_bytes_total"):
        assert value(again, name) == value(after, name), name

    # a bad C1 (partition 1's y is wrong): the job is counted failed, never done
    bad = submit(make_c1(SQUARES_A, seed=13, bad_y_partition=1), job_id="metrics-bad")
    with pytest.raises(JobFailed, match=r"^job metrics-bad failed: .*partition 1; field partitions\[1\]\.y"):
        bad.result(timeout=60)
    end = time.monotonic() + 10
    while value(s := exporter.scrape(), "zkhive_jobs_total", outcome="failed") < 1 and time.monotonic() < end:
        time.sleep(0.1)
    assert value(s, "zkhive_jobs_total", params=SQUARES_A.name, outcome="failed") == 1
    assert value(s, "zkhive_jobs_total", outcome="done") == 2
    assert value(s, "zkhive_partitions_total", params=SQUARES_A.name, outcome="failed") >= 1


def test_exporter_reports_redis_down_as_zkhive_up_0(cluster, tmp_path):
    port, nobody = free_ports(2)
    env = {**cluster.env, "ZKHIVE_METRICS__PORT": str(port),
           "ZKHIVE_REDIS__URL": f"redis://127.0.0.1:{nobody}/0"}  # nobody listens there
    proc = subprocess.Popen([sys.executable, "-m", "cluster", "metrics"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        from cluster.ops.readiness import metrics_check

        end = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    samples = parse(r.read().decode())
                break
            except OSError:
                assert time.monotonic() < end and proc.poll() is None
                time.sleep(0.1)
        assert value(samples, "zkhive_up") == 0.0
        assert "without zkhive_up 1.0" in metrics_check(f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        proc.wait(10)
