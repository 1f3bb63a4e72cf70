"""The inputs the device benchmarks make (bench/gpu_prover.py ``c1_doc``, which bench/gpu_big.py
proves on the H200): a PoSt job over a benchmark replica must be a job the circuit accepts and
satisfies, or the benchmark measures a proof no user could get; a changed byte is refused."""
from __future__ import annotations

import base64
import copy
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


@pytest.mark.parametrize("name", ["window-post-2k", "winning-post-2k"])
def test_benchmark_post_job_is_accepted_and_satisfies_the_circuit(name):
    from bench.gpu_prover import c1_doc
    from synthesis.circuits import get_circuit

    circuit = get_circuit(name)
    doc = c1_doc(circuit, 5)
    job = circuit.parse_c1(doc)
    circuit.r1cs().check(circuit.synthesize(job, 0))
    assert len(circuit.public_inputs(job, 0)) == circuit.prm.num_public
    # a full partition: every sector of a WindowPoSt partition, WinningPoSt's one
    assert len(job.sectors) == (1 if circuit.prm.kind == "winning" else circuit.prm.sector_count)


def test_benchmark_post_job_with_a_changed_path_byte_is_refused():
    from bench.gpu_prover import c1_doc
    from synthesis.circuits import get_circuit
    from synthesis.circuits import C1Error

    circuit = get_circuit("window-post-2k")
    doc = copy.deepcopy(c1_doc(circuit, 5))
    raw = bytearray(base64.b64decode("".join(doc["vanilla_proofs"][0])))
    raw[-40] ^= 1  # inside the last challenge's path
    text = base64.b64encode(bytes(raw)).decode()
    doc["vanilla_proofs"][0] = [text[j:j + 192] for j in range(0, len(text), 192)]  # the pieces' width
    with pytest.raises((C1Error, ValueError), match=r"sector|challenge|path|root"):
        circuit.parse_c1(doc)


def test_winning_path_steps_name_the_wait_for_the_device():
    """bench/winning_path.py ``steps`` (the curio benchmark's table): the seconds between a
    WinningPoSt's fetched assignment and its first device stage are ``device_wait`` (a PoRep
    partition on the device, 2026-12-05: ~1.4 s), not lost between the columns; with no wait
    it is 0, and the columns with the wait sum to the whole."""
    from bench.winning_path import STEPS, steps

    def timeline(begin):
        return [{"event": "queued", "t": 0.09}, {"event": "synthesis_start", "t": 0.10},
                {"event": "synthesis_end", "t": 0.30}, {"event": "prove_pickup", "t": 0.31},
                {"event": "stage", "stage": "fetch_assignment", "start": 0.31, "end": 0.32,
                 "seconds": 0.01},
                {"event": "stage", "stage": "upload", "start": begin, "end": begin + 0.02,
                 "seconds": 0.02},
                {"event": "stage", "stage": "msm_h", "start": begin + 0.02, "end": begin + 0.06,
                 "seconds": 0.04},
                {"event": "prove_end", "t": begin + 0.07}, {"event": "aggregate_start",
                                                           "t": begin + 0.08}]

    waited = steps(timeline(1.70), 0.0, 0.09, 1.95, 1.90)
    assert list(waited)[:-1] == list(STEPS)
    assert waited["device_wait"] == 1.38 and waited["prove"] == 0.06
    assert abs(sum(v for k, v in waited.items() if k != "total") - waited["total"]) < 1e-3
    prompt = steps(timeline(0.32), 0.0, 0.09, 0.57, 0.52)
    assert prompt["device_wait"] == 0.0 and prompt["total"] == 0.57
