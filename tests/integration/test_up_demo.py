"""``zkhive demo`` end to end on the real porep-lite-4k circuit: keys, up, sector, prove on the
cluster, verify, down; then the proof it wrote is checked again here, and a tampered copy fails."""
from __future__ import annotations

import json
import re

import psutil
import pytest

from cluster.ops.supervisor import port_is_free
from test_up_cluster import Setup, zkhive

pytestmark = pytest.mark.integration


def test_demo_ends_with_a_verified_proof_and_stops_cleanly(tmp_path):
    from cluster.pipeline.keys import KeyCache
    from gpu.groth16 import Proof, verify
    from synthesis.circuits import get_circuit
    from synthesis.porep import TINY

    s = Setup(tmp_path)
    res = zkhive(*s.args("demo", "--run-dir", str(s.run_dir), "--devices", "cpu:0", "--down"),
                 env=s.env, timeout=400, check=0)
    out = res.stdout
    assert "[5/5] verify: all 2 partition proofs verify (384 bytes" in out, out
    assert f"Flower     http://127.0.0.1:{s.flower_port}" in out
    assert re.search(r"prove \(submit -> proof\)\s+\d+\.\d+ s", out)
    assert "every process is gone and every port released" in out
    pids = [int(p) for p in re.findall(r"pid (\d+)\s", out)]
    assert len(pids) >= 10  # 5 started, 5 stopped
    for pid in set(pids):  # gone, or an exited child nobody reaped yet
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert s.ours() == [] and port_is_free(s.redis_port) and port_is_free(s.flower_port)

    # the written proof verifies here too, against inputs recomputed from the written C1 file
    circuit = get_circuit(TINY)
    [c1_path] = (s.run_dir / "demo").glob("c1-*.json")
    [proof_path] = (s.run_dir / "demo").glob("proof-*.bin")
    c1 = circuit.parse_c1(json.loads(c1_path.read_text()))
    vk = KeyCache(tmp_path / "keys").load_vk(circuit)
    proof = proof_path.read_bytes()
    for k in range(2):
        assert verify(vk, circuit.public_inputs(c1, k), Proof.from_bytes(proof[192 * k:192 * (k + 1)]))
    # and rejects a wrong public input in any position (replica id, comm_d, comm_r, challenges),
    # and the other partition's inputs when they differ (with 8 nodes two partitions can draw
    # the same challenge, and then their public inputs are equal)
    good = circuit.public_inputs(c1, 0)
    for i in range(len(good)):
        bad = list(good)
        bad[i] += 1
        assert not verify(vk, bad, Proof.from_bytes(proof[:192])), i
    other = circuit.public_inputs(c1, 1)
    if other != good:
        assert not verify(vk, other, Proof.from_bytes(proof[:192]))
