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
