"""In-process keys (cluster/pipeline/inprocess.py): the seeded development setup is deterministic, the
verifying key is published atomically and first-writer-wins, and a published vk that is not
this prover's (another seed) or is unreadable is refused naming the file."""
from __future__ import annotations

import pytest

from tests.integration.circuits_for_tests import SQUARES_A, SQUARES_B


class Srs:
    def __init__(self, names, seed=None):
        from pydantic import SecretStr
        from cluster.settings import SrsSettings
        self.s = SrsSettings(in_process=names, setup_seed=SecretStr(seed) if seed else None)


def _keys(tmp_path):
    from cluster.pipeline.keys import KeyCache
    return KeyCache(tmp_path / "keys")


def test_seeded_setup_is_deterministic_and_the_seed_matters():
    from gpu.groth16.setup import setup

    r1cs = SQUARES_A.r1cs()
    pk1, vk1 = setup(r1cs, seed=b"dev-ceremony-1")
    pk2, vk2 = setup(r1cs, seed=b"dev-ceremony-1")
    _, vk3 = setup(r1cs, seed=b"dev-ceremony-2")
    assert vk1.to_bytes() == vk2.to_bytes()
    assert pk1.a_query == pk2.a_query and pk1.h_query == pk2.h_query
    assert vk1.to_bytes() != vk3.to_bytes()
    with pytest.raises(ValueError, match="seed must be non-empty"):
        setup(r1cs, seed=b"")


def test_a_seeded_key_proves_and_verifies():
    from gpu.backends import get_backend
    from gpu.groth16 import prove, verify
    from tests.integration.circuits_for_tests import make_c1

    backend = get_backend("cpu")
    pk, vk = backend.setup_resident(SQUARES_A, seed=b"s")
    doc = make_c1(SQUARES_A, 3)
    c1 = SQUARES_A.parse_c1(doc)
    z = SQUARES_A.synthesize(c1, 0)
    proof = prove(pk, SQUARES_A.r1cs(), z, backend)
    assert verify(vk, SQUARES_A.public_inputs(c1, 0), proof)
    assert not verify(vk, SQUARES_A.public_inputs(c1, 1), proof)


def test_publish_is_first_writer_wins_and_refuses_another_key(tmp_path):
    from gpu.groth16.errors import CircuitMismatch, KeyFormatError
    from gpu.groth16.setup import setup
    from cluster.pipeline.inprocess import publish_vk

    keys = _keys(tmp_path)
    _, vk = setup(SQUARES_B.r1cs(), seed=b"a")
    path = publish_vk(keys, SQUARES_B, vk)
    assert path == keys.path(SQUARES_B, "vk") and keys.load_vk(SQUARES_B).to_bytes() == vk.to_bytes()
    assert publish_vk(keys, SQUARES_B, vk) == path  # the same key again: accepted
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    _, other = setup(SQUARES_B.r1cs(), seed=b"b")
    with pytest.raises(CircuitMismatch, match=r"not the one this prover makes \(another setup seed"):
        publish_vk(keys, SQUARES_B, other)
    assert path.read_bytes() == vk.to_bytes()  # the first one stays
    path.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(KeyFormatError, match=rf"published verifying key {path} of {SQUARES_B.name} is unreadable"):
        publish_vk(keys, SQUARES_B, vk)


def test_in_process_without_a_seed_is_refused(tmp_path):
    from cluster.errors import SettingsError
    from cluster.pipeline.inprocess import InProcessKeys

    with pytest.raises(SettingsError, match="srs.in_process names test-squares-8x2 but neither srs.setup_seed"):
        InProcessKeys(Srs([SQUARES_A.name]).s, _keys(tmp_path))
    made = InProcessKeys(Srs([SQUARES_A.name], "x").s, _keys(tmp_path))
    assert made.makes(SQUARES_A) and not made.makes(SQUARES_B) and made.seed == b"x"
    assert InProcessKeys(Srs([]).s, _keys(tmp_path)).seed is None  # nothing in process: no seed needed


def test_prover_makes_the_key_once_and_publishes_the_vk(tmp_path):
    from cluster.pipeline.inprocess import InProcessKeys
    from cluster.pipeline.prover import Prover, parse_device
    from tests.integration.circuits_for_tests import make_c1
    from gpu.groth16 import Proof, verify
    from synthesis import assignment

    keys = _keys(tmp_path)
    p = Prover(parse_device("cpu"), keys, in_process=InProcessKeys(Srs([SQUARES_A.name], "x").s, keys))
    try:
        pk = p.load(SQUARES_A)
        assert p.load(SQUARES_A) is pk and p.resident_names() == [SQUARES_A.name]
        assert not keys.path(SQUARES_A, "pk").exists() and keys.path(SQUARES_A, "vk").exists()
        assert p.used_memory() > 0
        c1 = SQUARES_A.parse_c1(make_c1(SQUARES_A, 5))
        z = SQUARES_A.synthesize(c1, 1)
        compact = assignment.decode_compact(assignment.encode(z))
        proof = Proof.from_bytes(p.prove(SQUARES_A, compact))  # the compact form, expanded for the CPU
        assert verify(keys.load_vk(SQUARES_A), SQUARES_A.public_inputs(c1, 1), proof)
        short = assignment.Compact(compact.kinds[:-1], compact.fes)
        with pytest.raises(ValueError):
            p.prove(SQUARES_A, short)
    finally:
        p.close()


def test_routing_prefers_a_prover_that_makes_the_key_to_one_with_room():
    from cluster.pipeline.registry import WorkerInfo
    from cluster.pipeline.routing import choose_queue

    def prover(i, makes=(), resident=()):
        return WorkerInfo(worker_id=f"p{i}", role="prove", host="h", pid=i, queues=[f"prove.h.{i}"],
                          device=f"cuda:{i}", ready=True, free_memory=1 << 40, makes_keys=list(makes),
                          resident_keys=list(resident))
    ws = [prover(0), prover(1, makes=["sdr-32g"]), prover(2)]
    c = choose_queue(ws, "sdr-32g", 0, {})
    assert (c.queue, c.reason) == ("prove.h.1", "makes")
    c = choose_queue(ws + [prover(3, makes=["sdr-32g"], resident=["sdr-32g"])], "sdr-32g", 0, {"prove.h.3": 5})
    assert (c.queue, c.reason) == ("prove.h.3", "resident")  # resident still first, even busier
    c = choose_queue(ws, "porep-lite-4k", 0, {"prove.h.0": 3})
    assert c.reason == "room" and c.queue == "prove.h.1"  # nobody makes it: room, least loaded


def test_only_keys_that_can_fit_the_device_are_announced(tmp_path):
    """A prover on a card too small for a set's key does not announce it in makes_keys (the
    submit-time check would accept jobs nobody can prove); a preloaded one fails the start."""
    from gpu.budget import DeviceBudget, DeviceMemoryExhausted
    from cluster.pipeline.inprocess import InProcessKeys

    class Small:
        budget = DeviceBudget("small-card", 1 << 30, ledger_dir=tmp_path / "ledger")

    made = InProcessKeys(Srs(["porep-lite-16m", "porep-lite-4k"], "x").s, _keys(tmp_path))
    assert made.fitting(Small()) == ["porep-lite-4k"]
    with pytest.raises(DeviceMemoryExhausted, match="the in-process key of porep-lite-16m cannot run on device small-card"):
        made.fitting(Small(), preload=["porep-lite-16m"])
    assert made.fitting(object()) == ["porep-lite-16m", "porep-lite-4k"]  # no device ledger (CPU)


def test_load_vk_reads_each_version_of_the_file_once(tmp_path):
    """The aggregate worker's verifying key is read and checked once per version of its file
    (a WinningPoSt's aggregation has no room for reading it each job); a key published again
    under the name (a new inode), or the file damaged in place, is read again: never the old one."""
    import os

    from gpu.groth16.errors import KeyFormatError
    from gpu.groth16.setup import setup
    from cluster.pipeline.inprocess import publish_vk

    keys = _keys(tmp_path)
    _, vk = setup(SQUARES_B.r1cs(), seed=b"a")
    path = publish_vk(keys, SQUARES_B, vk)
    first = keys.load_vk(SQUARES_B)
    assert keys.load_vk(SQUARES_B) is first  # not read again
    _, other = setup(SQUARES_B.r1cs(), seed=b"b")
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(other.to_bytes())
    os.replace(tmp, path)  # how keys are written: a new file renamed over the old
    again = keys.load_vk(SQUARES_B)
    assert again is not first and again.to_bytes() == other.to_bytes()
    with open(path, "r+b") as f:  # damaged in place: same inode, same size, a new mtime
        f.seek(10)
        f.write(b"\xff" * 8)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    with pytest.raises(KeyFormatError):
        keys.load_vk(SQUARES_B)


def test_load_vk_takes_the_digest_its_meta_records_and_reads_a_new_meta(tmp_path):
    """A bellperson .vk carries no circuit digest: the .meta beside it names the one it was made
    for, and the key read carries that digest (not the one computed here); a .meta written later
    is read: the cached key is per version of the .vk and of its .meta."""
    import json

    from gpu.backends.forms import circuit_digest
    from gpu.groth16 import bellperson
    from gpu.groth16.setup import setup

    keys = _keys(tmp_path)
    pk, _ = setup(SQUARES_B.r1cs(), seed=b"a")
    path = keys.path(SQUARES_B, "vk")
    path.parent.mkdir(parents=True, exist_ok=True)
    bellperson.write_vk(pk, path)
    assert bellperson.is_bellperson_vk(path)
    assert keys.load_vk(SQUARES_B).circuit_digest == circuit_digest(SQUARES_B)  # no .meta: computed
    other = bytes(range(32))
    path.with_suffix(".meta").write_text(json.dumps({"zkhive_circuit_digest": other.hex()}))
    assert keys.load_vk(SQUARES_B).circuit_digest == other
