"""``zkhive up`` -> jobs (CLI and Flower's REST API) -> verified proofs -> ``zkhive down``, on real
processes started by the real command, then: no process it started is alive, no port is bound.
And the failure paths: a port already taken, an invalid settings file, a worker that crashes
while it starts."""
from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from circuits_for_tests import COMPACT, SQUARES_A, SQUARES_B, SQUARES_C, make_c1
from cluster.ops.supervisor import free_port, free_ports, port_is_free

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TEST_CIRCUITS = ROOT / "tests" / "integration"


def zkhive(*args, env=None, timeout=240, check=None):
    res = subprocess.run([sys.executable, "-m", "cluster", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert res.returncode == check, f"zkhive {' '.join(args)} -> {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


class Setup:
    """A settings file with free ports under tmp, and the environment for the `zkhive` calls."""

    def __init__(self, tmp: Path, *, preload=(), extra_toml: str = ""):
        self.tmp = tmp
        self.redis_port, self.flower_port, self.metrics_port, self.gateway_port = free_ports(4)
        self.password, self.flower_password = "redis-pw-" + os.urandom(4).hex(), "flower-pw"
        self.run_dir = tmp / "run"
        self.config = tmp / "zkhive.toml"
        self.config.write_text(f"""
[redis]
url = "redis://127.0.0.1:{self.redis_port}/0"
password = "{self.password}"
[blobs]
dir = "{tmp / 'blobs'}"
[srs]
param_cache = "{tmp / 'keys'}"
preload = {json.dumps(list(preload))}
[worker]
circuit_modules = ["circuits_for_tests"]
heartbeat_s = 0.5
registry_ttl_s = 3
[flower]
port = {self.flower_port}
password = "{self.flower_password}"
[metrics]
port = {self.metrics_port}
[gateway]
port = {self.gateway_port}
{extra_toml}""")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ZKHIVE_")}
        self.env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(TEST_CIRCUITS)])
        # where `up` records the running cluster for later commands (cluster.ops.current): the
        # test's own, never the user's
        self.env["ZKHIVE_STATE_DIR"] = str(tmp / "state")

    def args(self, *a):
        return [*a, "--config", str(self.config)]

    def up(self, *extra, check=None):
        return zkhive(*self.args("up", "--run-dir", str(self.run_dir), "--devices", "cpu:0", *extra),
                      env=self.env, check=check)

    def down(self, check=0):
        return zkhive(*self.args("down", "--run-dir", str(self.run_dir)), env=self.env, check=check)

    def ours(self) -> list[psutil.Process]:
        """Live processes that belong to this test's cluster (their command line names its run
        directory or settings file) - only to check that none is left, never to signal."""
        found = []
        for p in psutil.process_iter(["cmdline", "status"]):
            if p.info["status"] == psutil.STATUS_ZOMBIE or not p.info["cmdline"]:
                continue
            line = " ".join(p.info["cmdline"])
            if (str(self.run_dir) in line or str(self.config) in line) and p.pid != os.getpid():
                found.append(p)
        return found

    def setup_keys(self, *circuits):
        from cluster.pipeline.keys import KeyCache

        for c in circuits:
            KeyCache(self.tmp / "keys").setup(c)


def _alive(pid: int, create_time: float) -> bool:
    try:
        p = psutil.Process(pid)
        return abs(p.create_time() - create_time) < 0.05 and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _flower(url, password=None, data=None):
    req = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode(),
                                 headers={"Content-Type": "application/json"} if data else {})
    if password:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"zkhive:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _verify(setup, circuit, doc, proof: bytes, public_inputs):
    from cluster.pipeline.keys import KeyCache
    from gpu.groth16 import Proof, verify

    vk = KeyCache(setup.tmp / "keys").load_vk(circuit)
    c1 = circuit.parse_c1(doc)
    assert len(proof) == 192 * circuit.num_partitions()
    for k in range(circuit.num_partitions()):
        assert public_inputs[k] == circuit.public_inputs(c1, k)
        assert verify(vk, public_inputs[k], Proof.from_bytes(proof[192 * k:192 * (k + 1)])), k
    # bound to the inputs: partition 0's proof does not verify partition 1's inputs
    assert not verify(vk, public_inputs[1], Proof.from_bytes(proof[:192]))


def test_up_prove_down_leaves_nothing(tmp_path):
    s = Setup(tmp_path, preload=[SQUARES_A.name])
    s.setup_keys(SQUARES_A, SQUARES_B)
    res = s.up(check=0)
    # two aggregate workers by default ([worker] aggregate_workers): an urgent job's aggregation
    # never waits behind a 32 GiB one (seconds); an urgent synthesis worker
    # ([worker] urgent_synthesis_workers): nor its synthesis behind 32 GiB partitions'
    for name in ("redis", "aggregate-0", "aggregate-1", "synthesis-0", "synthesis-urgent-0", "prove-cpu0",
                 "flower", "metrics", "gateway", "keeper"):
        assert re.search(rf"^  {name}\s+ready in .* pid \d+", res.stdout, re.M), res.stdout
    assert f"http://127.0.0.1:{s.flower_port}" in res.stdout
    state = json.loads((s.run_dir / "cluster.json").read_text())
    procs = [(r["pid"], r["create_time"]) for r in state["processes"]]
    assert len(procs) == 10 and all(_alive(*p) for p in procs)
    children = [(c.pid, c.create_time()) for pid, _ in procs for c in psutil.Process(pid).children(recursive=True)]
    ports = [s.redis_port, s.flower_port, s.metrics_port, s.gateway_port]
    try:
        # the prover reported ready only with its preload key resident
        st = zkhive(*s.args("status", "--json"), env=s.env, check=0)
        doc = json.loads(st.stdout)
        ws = doc["workers"]
        assert sorted(w["role"] for w in ws) == ["aggregate", "aggregate", "prove", "synthesis", "synthesis"]
        prove_queue = next(w["queues"][0] for w in ws if w["role"] == "prove")
        assert set(doc["queues"]) >= {"synthesis", "synthesis.urgent", "aggregate", "prove.unassigned", prove_queue}
        assert all(v == 0 for v in doc["queues"].values()) and doc["jobs"] == {"active": [], "recent": []}
        assert all(w["ready"] for w in ws)
        assert [w["resident_keys"] for w in ws if w["role"] == "prove"] == [[SQUARES_A.name]]
        # the aggregate worker read the preloaded set's .vk at start (its first job does not);
        # no Poseidon constants for a set that does not hash with it (cluster/pipeline/warmup.py)
        assert sorted((w["role"], tuple(w["warmed"])) for w in ws) == [
            ("aggregate", (f"vk:{SQUARES_A.name}",)), ("aggregate", (f"vk:{SQUARES_A.name}",)),
            ("prove", ()), ("synthesis", ()), ("synthesis", ())]

        # `zkhive ready` (the compose health checks) agrees with what `up` waited for
        prove_pid = next(r["pid"] for r in state["processes"] if r["name"] == "prove-cpu0")
        for service in (["redis"], ["flower"], ["worker", "--pid", str(prove_pid)]):
            zkhive(*s.args("ready", *service), env=s.env, check=0)
        not_ready = zkhive(*s.args("ready", "worker", "--pid", "1"), env=s.env, check=1)
        assert "no registry entry for pid 1" in not_ready.stderr

        # a second `up` over the running cluster is refused, and the cluster is untouched
        again = s.up(check=2)
        assert "a previous cluster is still running" in again.stderr and "zkhive down" in again.stderr
        assert all(_alive(*p) for p in procs)

        # a job through the CLI
        doc = make_c1(SQUARES_A, seed=5)
        (tmp_path / "c1.json").write_text(json.dumps(doc))
        zkhive(*s.args("submit", str(tmp_path / "c1.json"), "--job-id", "up-cli", "--wait",
                       "--timeout", "120"), env=s.env, check=0)
        out = zkhive(*s.args("result", "up-cli"), env=s.env, check=0)
        r = json.loads(out.stdout)
        _verify(s, SQUARES_A, doc, bytes.fromhex(r["proof"]), [[int(x, 16) for x in p] for p in r["public_inputs"]])

        # Flower: health without auth, the API only with it, and a job through its REST API
        base = f"http://127.0.0.1:{s.flower_port}"
        assert _flower(base + "/healthcheck") == (200, b"OK")
        assert _flower(base + "/api/workers")[0] == 401
        assert _flower(base + "/api/workers", password="wrong")[0] == 401
        doc_b = make_c1(SQUARES_B, seed=6)
        code, body = _flower(base + "/api/task/send-task/zkhive.submit", s.flower_password,
                             {"args": [doc_b], "kwargs": {"job_id": "up-flower"}})
        assert code == 200, body
        out = zkhive(*s.args("result", "up-flower", "--wait", "--timeout", "120"), env=s.env, check=0)
        r = json.loads(out.stdout)
        _verify(s, SQUARES_B, doc_b, bytes.fromhex(r["proof"]), [[int(x, 16) for x in p] for p in r["public_inputs"]])
        # a body outside [limits] is refused by Flower itself, in one line; nothing is sent
        code, body = _flower(base + "/api/task/send-task/zkhive.submit", s.flower_password,
                             {"args": [{"params": "x" * 100_000}], "kwargs": {"job_id": "up-big"}})
        assert (code, body) == (400, b"request body: field args[0].params: a string of 100000 bytes, "
                                     b"over the limit of 256 (limits.string_bytes)")
        # the Redis `up` started is bounded (redis.maxmemory_bytes) and never evicts
        import redis as redis_py
        r = redis_py.Redis(port=s.redis_port, password=s.password)
        assert r.config_get("maxmemory") == {"maxmemory": str(2 << 30)}
        assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert not r.exists("zkhive:job:up-big")
        # the worker event stream reaches Flower: it saw every partition's prove task finish
        code, body = _flower(base + "/api/tasks?taskname=zkhive.prove_partition", s.flower_password)
        states = [t["state"] for t in json.loads(body).values()]
        assert code == 200 and states.count("SUCCESS") >= 4, states
        # Flower's own /metrics is behind the same auth as the rest
        assert _flower(base + "/metrics")[0] == 401
        code, body = _flower(base + "/metrics", s.flower_password)
        assert code == 200 and b"flower_events_total" in body
        # the zkhive exporter `up` started counted both jobs
        code, body = _flower(f"http://127.0.0.1:{s.metrics_port}/metrics")
        assert code == 200
        done = re.findall(rb'^zkhive_jobs_total\{[^}]*outcome="done"[^}]*\} (\S+)$', body, re.M)
        assert sum(float(x) for x in done) == 2.0, body.decode()[-2000:]
    finally:
        down = s.down()
    assert "every process is gone and every port released" in down.stdout
    assert not any(_alive(*p) for p in procs + children)
    assert all(port_is_free(p) for p in ports)
    assert s.ours() == []
    assert not (s.run_dir / "cluster.json").exists()
    # nothing left to stop: down again is a no-op that says so
    assert "nothing to stop" in s.down().stdout
    assert "not ready" in zkhive(*s.args("ready", "redis"), env=s.env, check=1).stderr


def test_a_key_from_a_params_file_over_compact_matrices_through_up(tmp_path):
    """Issue 40, item 0 (the CPU half; bench/params_up.py is the H200's): `up` with a preloaded
    key read from a bellperson .params file without the .meta beside it (as paramfetch leaves
    Filecoin's), for a circuit the prover holds over its compact matrices, is ready with the key
    resident, and a job through it verifies with the .vk file; a prover whose device cannot
    hold the key stops `up` before ready, naming the bytes the key needs and the device has."""
    from gpu.groth16 import Proof, bellperson as bp, verify

    s = Setup(tmp_path, preload=[COMPACT.name])
    s.env["ZKHIVE_PARAMS_MIRROR"] = "1"   # opt-in: the mirror written, then read (issue 40 item 3)
    s.setup_keys(COMPACT)
    keys = tmp_path / "keys"
    meta = next(keys.glob(f"{COMPACT.name}.*.meta"))
    meta.unlink()
    params = next(keys.glob(f"{COMPACT.name}.*.params"))
    s.up(check=0)
    try:
        st = json.loads(zkhive(*s.args("status", "--json"), env=s.env, check=0).stdout)
        assert [w["resident_keys"] for w in st["workers"] if w["role"] == "prove"] == [[COMPACT.name]]
        # the load's seconds and bytes: in status and in the metrics
        size = params.stat().st_size
        ld = next(w for w in st["workers"] if w["role"] == "prove")["key_loads"][COMPACT.name]
        assert ld["bytes"] == size and ld["seconds"] > 0 and ld["gbps"] > 0, ld
        text = zkhive(*s.args("status"), env=s.env, check=0).stdout
        assert re.search(rf"loaded the proving key of {COMPACT.name} in \d+\.\d s from "
                         rf"{size / 1e9:.2f} GB at \d+\.\d\d GB/s", text), text
        code, body = _flower(f"http://127.0.0.1:{s.metrics_port}/metrics")
        got = re.findall(rb'^zkhive_key_load_bytes\{[^}]*params="' + COMPACT.name.encode()
                         + rb'"[^}]*\} (\S+)$', body, re.M)
        assert code == 200 and [float(x) for x in got] == [float(size)], body.decode()[-1500:]
        assert re.search(rb'^zkhive_key_load_seconds\{[^}]*params="' + COMPACT.name.encode(), body, re.M)
        # issue 40 item 3: each phase of the prover's start, in status, the metrics and its log
        ph = next(w for w in st["workers"] if w["role"] == "prove")["start_phases"]
        # the densities: before the scan where the preparing thread had them, else beside the reads
        assert ("circuit shape (densities)" in ph) != (
            "circuit shape and density index (beside the reads)" in ph), ph
        for name in ("process start and imports", "prover (backend)", "matrices (host)",
                     "params scan (lengths)", "circuit digest",
                     "verifying key", "density index", "admission", "celery start", "ready",
                     "waited for the circuits' host work"):
            assert name in ph and ph[name] >= 0, (name, ph)
        assert 0 < ph["process start and imports"] < ph["ready"] and ph["ready"] >= sum(
            v for k, v in ph.items() if k != "ready") - 0.1, ph
        assert re.search(r"prove\.\S+ started in \d+\.\d s: ", text), text
        assert re.search(rb'^zkhive_start_phase_seconds\{[^}]*phase="params scan \(lengths\)"[^}]*\} ',
                         body, re.M), body.decode()[-1500:]
        plog = next((s.run_dir / "logs").glob("prove*.log")).read_text()
        for name in ("process start and imports", "params scan (lengths)", "density index", "ready"):
            assert re.search(rf"start phase {re.escape(name)}: \d+\.\d\d s \(at \d+\.\d\d s\)",
                             plog), (name, plog[-3000:])
        doc = {"params": COMPACT.name, "partitions": [{"x": hex(v), "y": hex(v)} for v in (7, 2**200 + 9)]}
        (tmp_path / "c1.json").write_text(json.dumps(doc))
        zkhive(*s.args("submit", str(tmp_path / "c1.json"), "--job-id", "up-compact", "--wait",
                       "--timeout", "120"), env=s.env, check=0)
        r = json.loads(zkhive(*s.args("result", "up-compact"), env=s.env, check=0).stdout)
        proof = bytes.fromhex(r["proof"])
        vk = bp.read_vk(params.with_suffix(".vk"), circuit=COMPACT)
        c1 = COMPACT.parse_c1(doc)
        assert len(proof) == 2 * 192
        for k in range(2):
            assert verify(vk, COMPACT.public_inputs(c1, k), Proof.from_bytes(proof[192 * k:192 * (k + 1)])), k
        assert not verify(vk, COMPACT.public_inputs(c1, 1), Proof.from_bytes(proof[:192]))
        # issue 40 item 3: the prover writes the .params' compressed mirror in the background
        mirror = keys / (params.name + ".mirror")
        for _ in range(120):
            st = json.loads(zkhive(*s.args("status", "--json"), env=s.env, check=0).stdout)
            ld = next(w for w in st["workers"] if w["role"] == "prove")["key_loads"][COMPACT.name]
            if ld.get("mirror_progress", 0) >= 1 or ld.get("mirror_progress", 0) < 0:
                break
            time.sleep(0.5)
        assert ld["mirror_progress"] == 1.0 and ld["from_mirror"] == 0.0 and mirror.exists(), ld
        assert "its mirror written" in zkhive(*s.args("status"), env=s.env, check=0).stdout
        code, body = _flower(f"http://127.0.0.1:{s.metrics_port}/metrics")
        assert re.search(rb'^zkhive_key_mirror_progress\{[^}]*params="' + COMPACT.name.encode()
                         + rb'"[^}]*\} 1\.0$', body, re.M), body.decode()[-1500:]
    finally:
        s.down()
    assert s.ours() == []

    # the next `up` reads the key through the mirror (half the bytes) and proves the same
    s.up(check=0)
    try:
        st = json.loads(zkhive(*s.args("status", "--json"), env=s.env, check=0).stdout)
        ld = next(w for w in st["workers"] if w["role"] == "prove")["key_loads"][COMPACT.name]
        assert ld["from_mirror"] == 1.0 and ld["bytes"] == mirror.stat().st_size < size, ld  # 4 KiB-aligned sections: half only for big keys
        assert "through its compressed mirror" in zkhive(*s.args("status"), env=s.env, check=0).stdout
        zkhive(*s.args("submit", str(tmp_path / "c1.json"), "--job-id", "up-mirror", "--wait",
                       "--timeout", "120"), env=s.env, check=0)
        r = json.loads(zkhive(*s.args("result", "up-mirror"), env=s.env, check=0).stdout)
        proof = bytes.fromhex(r["proof"])
        for k in range(2):
            assert verify(vk, COMPACT.public_inputs(c1, k), Proof.from_bytes(proof[192 * k:192 * (k + 1)])), k
    finally:
        s.down()
    assert s.ours() == []

    # a device too small for the key: refused at preload, before ready, naming the bytes
    (tmp_path / "small" / "keys").mkdir(parents=True)
    small = Setup(tmp_path / "small", preload=[COMPACT.name])
    for f in keys.glob(f"{COMPACT.name}.*"):
        if f.suffix != ".mirror":
            (small.tmp / "keys" / f.name).write_bytes(f.read_bytes())
    small.env["ZKHIVE_WORKER__DEVICE_MEMORY_BYTES"] = str(params.stat().st_size - 1)
    res = small.up(check=2)
    assert "prove-cpu0 failed to start" in res.stderr, res.stderr
    assert (f"the proving key of {COMPACT.name} needs {params.stat().st_size} bytes resident, more "
            f"than device cpu:0 can hold ({params.stat().st_size - 1} bytes)") in res.stderr, res.stderr
    assert small.ours() == []


def test_port_already_taken_is_reported_and_nothing_starts(tmp_path):
    s = Setup(tmp_path)
    with socket.socket() as taken, socket.socket() as also:
        taken.bind(("127.0.0.1", s.flower_port))
        taken.listen()
        also.bind(("127.0.0.1", s.metrics_port))
        also.listen()
        res = s.up(check=2)
    # every clash at once, each naming the setting that moves it (issue 39)
    assert f"flower: port {s.flower_port} is in use" in res.stderr and "move it with flower.port" in res.stderr
    assert f"metrics: port {s.metrics_port} is in use" in res.stderr and "move it with metrics.port" in res.stderr
    assert "2 port(s) of this cluster are taken" in res.stderr
    assert not (s.run_dir / "cluster.json").exists()
    assert port_is_free(s.redis_port) and s.ours() == []


@pytest.mark.parametrize("toml, message", [
    ("[flower]\nprot = 1\n", "unknown key flower.prot"),
    ("[worker]\npartition_workers = 0\n", "worker.partition_workers: 0 is not >= 1"),
])
def test_invalid_settings_file_names_key_and_file(tmp_path, toml, message):
    s = Setup(tmp_path)
    s.config.write_text(toml)
    res = s.up(check=2)
    assert f"settings file {s.config}" in res.stderr and message in res.stderr
    assert not (s.run_dir / "cluster.json").exists() and s.ours() == []


def test_worker_crash_during_start_is_reported_with_log_tail_and_cleaned_up(tmp_path):
    # workers must prepare a parameter set nobody registered (the prover its key, synthesis
    # its matrices): one of them exits while starting
    s = Setup(tmp_path, preload=["no-such-params"])
    res = s.up(check=2)
    m = re.search(r"zkhive up: (synthesis-0|prove-cpu0) failed to start: exited with status 2 "
                  r"before it was ready", res.stderr)
    assert m, res.stderr
    assert "last lines of" in res.stderr and f"{m.group(1)}.log" in res.stderr
    assert "unknown parameter set 'no-such-params'" in res.stderr  # the log tail
    assert "stopped everything this `up` had started" in res.stderr
    started = [int(p) for p in re.findall(r"pid (\d+)", res.stdout)]
    assert started, res.stdout  # redis and the workers that were ready
    assert not (s.run_dir / "cluster.json").exists()
    assert port_is_free(s.redis_port) and port_is_free(s.flower_port)
    assert s.ours() == []


@pytest.mark.parametrize("extra, message", [
    (["--devices", "cpu:0,gpu:1"], "--devices: device 'gpu:1' is not cpu, cpu:N or cuda:N"),
    (["--devices", "cpu:0,cpu"], "--devices: cpu:0 is listed twice"),
    (["--synthesis-workers", "0"], "--synthesis-workers 0: at least 1"),
])
def test_bad_up_options_are_refused_before_anything_starts(tmp_path, extra, message):
    s = Setup(tmp_path)
    res = zkhive(*s.args("up", "--run-dir", str(s.run_dir), *extra), env=s.env, check=2)
    assert message in res.stderr
    assert not s.run_dir.exists() and s.ours() == []


def test_killed_cluster_leaves_a_stale_state_file_that_up_reports_and_replaces(tmp_path):
    import signal

    s = Setup(tmp_path)
    s.up(check=0)
    state = json.loads((s.run_dir / "cluster.json").read_text())
    for r in state["processes"]:  # a crash of everything: SIGKILL, no warm shutdown
        if _alive(r["pid"], r["create_time"]):
            psutil.Process(r["pid"]).send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(_alive(r["pid"], r["create_time"]) for r in state["processes"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    ps = zkhive(*s.args("ps", "--run-dir", str(s.run_dir)), env=s.env, check=1)
    # every process of the state file, the keeper and the gateway too: nothing came back
    assert ps.stdout.count(" gone ") == len(state["processes"]) == 10, ps.stdout
    try:
        again = s.up(check=0)
        assert "stale state file" in again.stdout and "is running any more" in again.stdout
        new = json.loads((s.run_dir / "cluster.json").read_text())["processes"]
        assert {r["pid"] for r in new}.isdisjoint({r["pid"] for r in state["processes"]})
    finally:
        s.down()
    assert s.ours() == []


def test_later_commands_in_a_fresh_shell_find_the_running_cluster(tmp_path):
    """The issue's case: the cluster is started with its settings in the environment of one
    shell; a later shell (another directory, none of those variables) finds it through what `up`
    recorded, and `keys` needs no Redis at all."""
    s = Setup(tmp_path)
    started_env = {**s.env, "ZKHIVE_REDIS__URL": f"redis://127.0.0.1:{s.redis_port}/0",
                   "ZKHIVE_REDIS__PASSWORD": s.password, "ZKHIVE_FLOWER__PORT": str(s.flower_port),
                   "ZKHIVE_FLOWER__PASSWORD": s.flower_password, "ZKHIVE_METRICS__PORT": str(s.metrics_port),
                   "ZKHIVE_GATEWAY__PORT": str(s.gateway_port),
                   "ZKHIVE_BLOBS__DIR": str(tmp_path / "blobs"), "ZKHIVE_SRS__PARAM_CACHE": str(tmp_path / "keys"),
                   "ZKHIVE_WORKER__CIRCUIT_MODULES": '["circuits_for_tests"]'}
    s.setup_keys(SQUARES_A)
    fresh = dict(s.env)  # a new shell: no ZKHIVE_*__* variables, no --config
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def cli(*args, env, cwd=elsewhere, check=None):
        res = subprocess.run([sys.executable, "-m", "cluster", *args], cwd=cwd, env=env,
                             capture_output=True, text=True, timeout=240)
        if check is not None:
            assert res.returncode == check, f"{args} -> {res.returncode}\n{res.stdout}\n{res.stderr}"
        return res

    # before any `up`: nothing recorded, the default Redis port has no cluster of ours
    assert cli("ps", env=fresh, check=1).stdout.startswith("no cluster recorded")
    up = cli("up", "--run-dir", str(s.run_dir), "--devices", "cpu:0", env=started_env, cwd=ROOT, check=0)
    recorded = (s.run_dir / "settings.toml").read_text()
    assert f"127.0.0.1:{s.redis_port}" in recorded and s.password not in recorded  # secrets in files
    assert oct((s.run_dir / "secrets" / "redis.pass").stat().st_mode & 0o777) == "0o600"
    assert f"{sys.executable} -m cluster status" in up.stdout or "zkhive status" in up.stdout
    try:
        st = cli("status", "--json", env=fresh, check=0)
        # the urgent synthesis worker is a second "synthesis" ([worker] urgent_synthesis_workers)
        assert sorted(w["role"] for w in json.loads(st.stdout)["workers"]) == ["aggregate", "aggregate",
                                                                               "prove", "synthesis", "synthesis"]
        ps = cli("ps", env=fresh, check=0)
        assert ps.stdout.count(" running ") == 10 and f":{s.metrics_port}/metrics" in ps.stdout
        assert f"gateway unix://{s.run_dir.resolve()}/gateway.sock" in ps.stdout  # the default: a socket
        assert f"gateway  unix://{s.run_dir.resolve()}/gateway.sock" in cli("status", env=fresh, check=0).stdout
        # told otherwise, a command uses what it is told: another Redis, which does not answer
        other = cli("status", env={**fresh, "ZKHIVE_REDIS__URL": f"redis://127.0.0.1:{free_port()}/0"}, check=2)
        assert other.stderr.startswith("zkhive status: cannot reach Redis at redis://127.0.0.1:")
        assert len(other.stderr.strip().splitlines()) == 1
        # a job submitted from the fresh shell, with progress on stderr and the proof on stdout
        doc = make_c1(SQUARES_A, seed=21)
        (elsewhere / "c1.json").write_text(json.dumps(doc))
        sub = cli("submit", "c1.json", "--job-id", "fresh-1", "--wait", "--timeout", "120", env=fresh, check=0)
        assert "fresh-1 submitted" in sub.stdout and "partitions" in sub.stderr
        r = json.loads(sub.stdout.splitlines()[-1])
        _verify(s, SQUARES_A, doc, bytes.fromhex(r["proof"]),
                [[int(x, 16) for x in p] for p in r["public_inputs"]])
        st = json.loads(cli("status", "--json", env=fresh, check=0).stdout)
        assert [(j["job_id"], j["status"], j["partitions_done"]) for j in st["jobs"]["recent"]] == [("fresh-1", "done", 2)]
    finally:
        down = cli("down", env=fresh)  # no --run-dir: the recorded cluster
    assert down.returncode == 0 and "every process is gone" in down.stdout, down.stdout + down.stderr
    assert s.ours() == [] and port_is_free(s.redis_port)
    assert not list((tmp_path / "state").glob("current*.json"))
    # keys need no Redis (none runs now): the key cache is a directory
    keys_env = {**fresh, "ZKHIVE_SRS__PARAM_CACHE": str(tmp_path / "keys"),
                "ZKHIVE_WORKER__CIRCUIT_MODULES": '["circuits_for_tests"]'}
    made = cli("keys", "setup", "--params", SQUARES_B.name, env=keys_env, check=0)
    assert f"{SQUARES_B.name}: " in made.stdout and ".params" in made.stdout
    listed = cli("keys", "list", env=keys_env, check=0).stdout
    assert re.search(rf"^{SQUARES_B.name}\s+partitions=2\s+\d+ B at ", listed, re.M)
    assert re.search(rf"^{SQUARES_C.name}\s+partitions=3\s+no key", listed, re.M)


def test_command_errors_are_one_line_however_the_cli_is_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKHIVE_")}
    env.update(PYTHONPATH=str(ROOT), ZKHIVE_STATE_DIR=str(tmp_path / "state"),
               ZKHIVE_REDIS__URL=f"redis://127.0.0.1:{free_port()}/0")
    for module in ("cluster", "cluster.cli"):
        for args, message in ((["status"], "zkhive status: cannot reach Redis at redis://127.0.0.1:"),
                              (["status", "--config", str(tmp_path / "none.toml")], "none.toml: No such file"),
                              (["keys", "setup"], "zkhive keys: keys setup needs --params NAME"),
                              (["ps", "--run-dir", str(tmp_path / "r")], "")):
            res = subprocess.run([sys.executable, "-m", module, *args], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=60)
            assert "Traceback" not in res.stderr, (module, args, res.stderr)
            if message:
                assert res.returncode == 2 and message in res.stderr, (module, args, res.stderr)
                assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    version = subprocess.run([sys.executable, "-m", "cluster", "--version"], env=env, capture_output=True, text=True)
    from cluster.version import code_digest, package_version
    assert version.returncode == 0 and version.stdout.strip() == f"zkhive {package_version()}+{code_digest()}"
