"""The importing side of tests/gpu/test_keyholder_cuda.py, in its own process (CUDA refuses to
open a process's own IPC handles): adopt a key manifest, prove, report, and optionally die.

    python tests/gpu/holder_attach.py MANIFEST.json CIRCUIT OUT.json [--kill]

CIRCUIT: ``toy9`` (tests/compact_circuits.py, compact matrices) or a parameter set name (full
CSR, its C1 from fixed seeds). OUT.json: the proofs (hex) with their public inputs, the bytes
this process booked, what the manifest's shape says it should book, and the one-line refusals
of a manifest for another circuit, of a bad handle and of another version. ``--kill``: SIGKILL
itself after writing OUT.json, with the key still mapped.
"""
from __future__ import annotations

import copy
import json
import os
import signal
import sys
from pathlib import Path

# the checkout's root first: run as a script, this file's directory is sys.path[0]
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def circuit_of(spec: str):
    """(r1cs or compact circuit, [(z, public inputs)], another circuit)."""
    from synthesis import assignment, field as F
    from tests.compact_circuits import toy, witness

    if spec == "toy9":
        z = witness(9)
        return toy(9), [(assignment.encode(z), F.vec_to_ints(z[1:2]))], toy(8)
    from synthesis.circuits import get_circuit
    from synthesis.porep import c1_document, generate
    circuit = get_circuit(spec)
    c1 = circuit.parse_c1(c1_document(generate(circuit.prm, b"\x07" * 32), b"\x08" * 32))
    pairs = [(circuit.synthesize(c1, k), circuit.public_inputs(c1, k))
             for k in range(min(2, circuit.num_partitions()))]
    return circuit.r1cs(), pairs, toy(8)


def main(manifest_path: str, spec: str, out_path: str, kill: bool) -> None:
    from gpu import prove
    from gpu.backends.cuda import CudaBackend
    from gpu.budget import ProofShape

    manifest = json.loads(open(manifest_path).read())
    r1cs, pairs, other = circuit_of(spec)
    backend = CudaBackend(0)
    out = {"pid": os.getpid(), "refusals": {}}
    with backend.current():
        for what, bad, circ in (("other circuit", manifest, other),
                                ("bad handle", _bad_handle(manifest), r1cs),
                                ("version", {**manifest, "version": 99}, r1cs)):
            try:
                backend.adopt(bad, circ)
                out["refusals"][what] = None
            except Exception as e:  # the test asserts the class and the line
                out["refusals"][what] = f"{type(e).__name__}: {e}"
        pk = backend.adopt(manifest, r1cs)
        out["attached"] = backend._on_device[pk.circuit_digest][0].attached
        out["booked"] = backend.held_bytes(pk.circuit_digest)
        sh = manifest["shape"]
        out["process_bytes"] = ProofShape(sh["num_vars"], sh["num_aux"], sh["domain"],
                                          sh["matrix_bytes"]).process_bytes()
        out["proofs"] = [[prove(pk, r1cs, z, backend=backend).to_bytes().hex(), pub]
                         for z, pub in pairs]
    with open(out_path, "w") as f:
        json.dump(out, f)
    if kill:
        os.kill(os.getpid(), signal.SIGKILL)
    backend.release()


def _bad_handle(manifest: dict) -> dict:
    bad = copy.deepcopy(manifest)
    bad["buffers"][0]["handle"] = "00" * 64
    return bad


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], "--kill" in sys.argv[4:])
