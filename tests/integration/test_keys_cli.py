"""``zkhive keys setup|check|import|export`` as a user runs them (a real process a command, a
key cache directory, no Redis), and the key cache reading what they write: bellperson files
prove and verify; a tampered file is refused in one line naming the section and byte offset;
an older zkhive .pk is migrated."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from circuits_for_tests import SQUARES_A, make_c1

from cluster.pipeline.keys import KeyCache
from gpu import prove, verify
from gpu.groth16 import bellperson as bp
from gpu.groth16.proof import split_proofs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def zk(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKHIVE_") and k != "FIL_PROOFS_PARAMETER_CACHE"}
    env.update(PYTHONPATH=f"{ROOT}:{ROOT / 'tests' / 'integration'}",
               ZKHIVE_STATE_DIR=str(tmp_path / "state"), ZKHIVE_SRS__PARAM_CACHE=str(tmp_path / "keys"),
               ZKHIVE_WORKER__CIRCUIT_MODULES='["circuits_for_tests"]',
               FIL_PROOFS_PARAMETER_CACHE=str(tmp_path / "filecoin"))

    def run(*args, check=0, **extra):
        res = subprocess.run([sys.executable, "-m", "cluster", "keys", *map(str, args)], cwd=tmp_path,
                             env={**env, **extra}, capture_output=True, text=True, timeout=240)
        if check is not None:
            assert res.returncode == check, f"{args} -> {res.returncode}\n{res.stdout}\n{res.stderr}"
        return res
    run.tmp = tmp_path
    return run


def _prove_all(keys: KeyCache, circuit, seed: int) -> None:
    """Every partition proved with the cache's key and verified with its .vk, as one C2 output
    (192 bytes a partition, concatenated in partition order)."""
    doc = make_c1(circuit, seed=seed)
    c1 = circuit.parse_c1(doc)
    pk, vk = keys.load_pk(circuit), keys.load_vk(circuit)
    r1cs = circuit.r1cs()
    blob = b"".join(prove(pk, r1cs, circuit.synthesize(c1, i)).to_bytes()
                    for i in range(circuit.num_partitions()))
    assert len(blob) == 192 * circuit.num_partitions()
    for i, p in enumerate(split_proofs(blob)):
        assert verify(vk, circuit.public_inputs(c1, i), p)
    assert not verify(vk, circuit.public_inputs(c1, 1), split_proofs(blob)[0])


def test_setup_check_and_tampering(zk):
    made = zk("setup", "--params", SQUARES_A.name, "--backend", "cpu")
    keys = KeyCache(zk.tmp / "keys")
    params, vk = keys.path(SQUARES_A, "params"), keys.path(SQUARES_A, "vk")
    assert f"{params} (" in made.stdout and params.exists() and vk.exists()
    _prove_all(keys, SQUARES_A, seed=3)
    assert keys.matches(SQUARES_A)
    ok = zk("check", "--params", SQUARES_A.name, "--points", "full")
    assert ok.stdout.startswith(f"{params}: ok (") and f"{vk}: ok (" in ok.stdout
    # the digest as paramfetch computes it, against a parameters.json
    manifest = zk.tmp / "parameters.json"
    manifest.write_text(json.dumps({params.name: {"digest": bp.file_digest(params)},
                                    vk.name: {"digest": "0" * 32}}))
    bad = zk("check", "--params", SQUARES_A.name, "--manifest", manifest, check=2)
    assert bad.stderr.startswith(f"zkhive keys: {vk}: digest ") and "differs from the manifest's 00000" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    # a point off the curve in l: one line, the section and the byte offset
    lay = bp.scan(params)
    at = lay.sections["l"].offset(1)
    data = bytearray(params.read_bytes())
    data[at + 95] ^= 1
    params.write_bytes(bytes(data))
    bad = zk("check", "--params", SQUARES_A.name, check=2)
    assert bad.stderr.strip() == (f"zkhive keys: {params}: section l, point 1 at byte offset {at}: "
                                  "not on the G1 curve")
    params.write_bytes(bytes(data[:-7]))   # and truncated
    bad = zk("check", "--params", SQUARES_A.name, check=2)
    assert f"{params}: section b_g2: its length field at byte offset " in bad.stderr


def test_migrate_export_and_import(zk):
    from gpu import setup
    # an older cache: a zkhive .pk and .vk
    old = KeyCache(zk.tmp / "keys")
    old.root.mkdir(parents=True)
    pk, vk = setup(SQUARES_A.r1cs(), seed=b"migrate")
    pk.save(old.path(SQUARES_A, "pk"))
    vk.save(old.path(SQUARES_A, "vk"))
    _prove_all(old, SQUARES_A, seed=4)             # still read as they are
    bad = zk("check", "--params", SQUARES_A.name, check=2)
    assert "a zkhive key file, not bellperson's" in bad.stderr
    out = zk.tmp / "export"
    done = zk("export", "--params", SQUARES_A.name, "--out", out)
    stem = old.path(SQUARES_A, "params").stem
    assert (out / f"{stem}.params").exists() and (out / f"{stem}.vk").exists(), done.stdout
    back = bp.read_params(out / f"{stem}.params", SQUARES_A, eager=True)
    assert back.a_query.raw.tobytes() == pk.a_query.raw.tobytes()
    # into a fresh cache by import (checked first), then proved from
    fresh = zk.tmp / "fresh"
    zk("import", out / f"{stem}.params", out / f"{stem}.vk", "--params", SQUARES_A.name,
       "--points", "full", ZKHIVE_SRS__PARAM_CACHE=str(fresh))
    _prove_all(KeyCache(fresh), SQUARES_A, seed=5)
    # a file of another circuit is refused before anything is copied
    other = zk.tmp / "other"
    from circuits_for_tests import SQUARES_C
    bad = zk("import", out / f"{stem}.params", out / f"{stem}.vk", "--params", SQUARES_C.name,
             ZKHIVE_SRS__PARAM_CACHE=str(other), check=2)
    assert "section " in bad.stderr and "the circuit needs" in bad.stderr and not other.exists()


def test_filecoin_names_and_settings(tmp_path, monkeypatch):
    """The filecoin sets' keys under their v28 names in FIL_PROOFS_PARAMETER_CACHE; cuzk's preload ids."""
    from cluster import settings

    monkeypatch.setenv("FIL_PROOFS_PARAMETER_CACHE", str(tmp_path / "fil"))
    monkeypatch.setenv("ZKHIVE_SRS__PRELOAD", '["porep-32g", "porep-lite-4k"]')
    s = settings.load()
    assert s.srs.filecoin_cache == tmp_path / "fil"
    assert s.srs.preload == ["filecoin-32g", "porep-lite-4k"]
    monkeypatch.delenv("FIL_PROOFS_PARAMETER_CACHE")
    monkeypatch.delenv("ZKHIVE_SRS__PRELOAD")
    assert settings.load().srs.filecoin_cache == Path("/var/tmp/filecoin-proof-parameters")

    class Named:  # the name and digest are all the cache reads for the file names
        name = "filecoin-32g"

        def digest(self):
            return "ab" * 32
    keys = KeyCache(tmp_path / "keys", tmp_path / "fil")
    names = keys.filecoin_names(Named())
    assert [p.parent for p in names] == [tmp_path / "keys", tmp_path / "fil"]
    assert names[0].name == ("v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-"
                             "sha256_hasher-82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820")
    assert keys.find(Named(), "params") is None
    (tmp_path / "fil").mkdir()
    fil = names[1].with_name(names[1].name + ".params")
    fil.write_bytes(b"x")
    assert keys.find(Named(), "params") == fil     # Filecoin's own cache, when ours has none
    ours = keys.path(Named(), "params")
    (tmp_path / "keys").mkdir()
    ours.write_bytes(b"y")
    assert keys.find(Named(), "params") == fil     # the v28 name first
    mine = names[0].with_name(names[0].name + ".params")
    mine.write_bytes(b"z")
    assert keys.find(Named(), "params") == mine    # param_cache (cuzk's) before Filecoin's cache


def _off_subgroup_g2() -> bytes:
    """A G2 curve point outside the r-subgroup (never multiplied by the cofactor), uncompressed."""
    import numpy as np
    from py_arkworks_bls12381 import G2Point
    for x in range(1, 1000):
        try:
            p = G2Point.from_compressed_bytes_unchecked(bytes([0x80]) + bytes(94) + bytes([x]))
        except Exception:
            continue
        if not p.is_in_subgroup():
            return bp.to_uncompressed(np.frombuffer(p.to_xy_bytes_le(), np.uint8).reshape(1, 192), 2).tobytes()
    raise AssertionError("no G2 point outside the subgroup found")


def test_check_and_import_refuse_bad_keys_by_default(zk):
    """b_g2 damaged, a point off the subgroup (the default checks it), a zero-filled point, IC's
    length, a FIFO: `keys check` and `keys import` refuse each in one line naming the section
    and byte offset (the path for the FIFO), and import copies nothing."""
    import time
    zk("setup", "--params", SQUARES_A.name, "--backend", "cpu")
    keys = KeyCache(zk.tmp / "keys")
    params, vk = keys.path(SQUARES_A, "params"), keys.path(SQUARES_A, "vk")
    good = params.read_bytes()
    lay = bp.scan(params)
    g = lay.sections["b_g2"].offset(1)
    fresh = zk.tmp / "fresh"

    def damaged(edit, *args, want, import_too=True):
        data = bytearray(good)
        edit(data)
        params.write_bytes(bytes(data))
        bad = zk("check", *args, "--params", SQUARES_A.name, check=2)
        assert bad.stderr.strip() == f"zkhive keys: {params}: {want}", bad.stderr
        if import_too:
            bad = zk("import", params, vk, "--params", SQUARES_A.name,
                     ZKHIVE_SRS__PARAM_CACHE=str(fresh), check=2)
            assert bad.stderr.strip() == f"zkhive keys: {params}: {want}" and not fresh.exists()
        params.write_bytes(good)

    def flip(b):
        b[g + 191] ^= 1
    damaged(flip, want=f"section b_g2, point 1 at byte offset {g}: not on the G2 curve", import_too=False)

    def off_group(b):
        b[g:g + 192] = _off_subgroup_g2()
    data = bytearray(good)
    off_group(data)
    params.write_bytes(bytes(data))
    assert zk("check", "--params", SQUARES_A.name, "--points", "curve").returncode == 0
    damaged(off_group, want=f"section b_g2, point 1 at byte offset {g}: not in the prime-order subgroup")
    at = lay.sections["l"].offset(0)
    damaged(lambda b: b.__setitem__(slice(at, at + 96), bytes(96)), "--points", "curve",
            want=f"section l, point 0 at byte offset {at}: every byte zero (a zero-filled point: "
                 "(0, 0) is not on the G1 curve)")
    ic = lay.sections["ic"]
    damaged(lambda b: b.__setitem__(slice(ic.start - 4, ic.start), (ic.count + 1).to_bytes(4, "big")),
            want=f"section ic: the length field at byte offset 864 says {ic.count + 1} points, the "
                 f"circuit needs {ic.count} ({ic.count - 1} public inputs + ONE)")
    assert zk("check", "--params", SQUARES_A.name).returncode == 0   # restored: accepted
    fifo = zk.tmp / "pipe.params"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    for action in ("check", "import"):
        bad = zk(action, fifo, vk, "--params", SQUARES_A.name, ZKHIVE_SRS__PARAM_CACHE=str(fresh), check=2)
        assert bad.stderr.strip() == f"zkhive keys: {fifo}: a FIFO, not a regular file: a key file must be one"
    assert time.monotonic() - t0 < 120 and not fresh.exists()
