"""``zkhive selftest`` on stand-in files: our own bellperson-format keys (zkhive keys setup, a
development ceremony) in a parameter cache, their digests in a parameters.json-style manifest
given with --manifest (the output says it is a stand-in run). A stand-in kind on porep-lite-4k
keeps this in seconds; the filecoin-2k run (the registered porep-2k kind, Filecoin's v28 names)
is behind ZKHIVE_LONG_FILECOIN=1 (its key takes ~8-20 minutes on 2 cores)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from cluster.user import selftest
from gpu.groth16 import bellperson
from synthesis import field

STAND_IN = "standin-porep-lite-4k"


def _lite_instance(circuit, seed):
    from synthesis import family
    side = family.sealing("porep-lite")
    sector = side.generate(circuit.prm, seed.to_bytes(32, "little"))
    c1 = circuit.parse_c1(json.loads(json.dumps(side.c1_document(sector, side.interactive_seed(sector)))))
    return circuit.synthesize(c1, 0), circuit.public_inputs(c1, 0)


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    """A cache holding porep-lite-4k's .params/.vk under the stand-in kind's name, and a
    manifest of their digests."""
    from cluster.pipeline.keys import KeyCache
    from synthesis.circuits import get_circuit
    selftest.register_kind(selftest.Kind(STAND_IN, "porep-lite-4k", 4096, "stand-in: porep-lite-4k",
                                         lambda: STAND_IN, _lite_instance))
    root = tmp_path_factory.mktemp("selftest")
    params, vk = KeyCache(root / "keys").setup(get_circuit("porep-lite-4k"), backend="cpu")
    cache = root / "cache"
    cache.mkdir()
    shutil.copyfile(params, cache / f"{STAND_IN}.params")
    shutil.copyfile(vk, cache / f"{STAND_IN}.vk")
    manifest = {p.name: {"cid": "-", "digest": bellperson.file_digest(p), "sector_size": 4096}
                for p in (cache / f"{STAND_IN}.params", cache / f"{STAND_IN}.vk")}
    (root / "parameters.json").write_text(json.dumps(manifest))
    yield {"root": root, "cache": cache, "manifest": root / "parameters.json", "entries": manifest}
    selftest.KINDS.pop(STAND_IN, None)


def run(capsys, *args):
    from cluster.cli import main
    rc = main(["selftest", *map(str, args)])
    cap = capsys.readouterr()
    run.err = cap.err
    return rc, cap.out


def test_stand_in_files_all_green(stand_in, capsys):
    rc, out = run(capsys, "--cache", stand_in["cache"], "--manifest", stand_in["manifest"], "--kind", STAND_IN)
    assert rc == 0, out
    assert out.startswith(f"STAND-IN RUN: digests are checked against {stand_in['manifest']}, NOT Filecoin's")
    rows = [ln for ln in out.splitlines() if STAND_IN in ln and "│" in ln]
    assert len(rows) == 2 and all("│ ok " in ln for ln in rows), out
    assert "│ yes, 192 B " in rows[0] and "│ yes " in rows[1], out
    assert "PASS" in out and "a STAND-IN run: these are not Filecoin's keys" in out


def test_a_broken_digest_is_red_and_named(stand_in, capsys, tmp_path):
    entries = json.loads(json.dumps(stand_in["entries"]))
    name = f"{STAND_IN}.params"
    entries[name]["digest"] = "0" * 32
    (tmp_path / "parameters.json").write_text(json.dumps(entries))
    rc, out = run(capsys, "--cache", stand_in["cache"], "--manifest", tmp_path / "parameters.json", "--kind", STAND_IN)
    assert rc == selftest.FAILED, out
    got = stand_in["entries"][name]["digest"]
    assert f"FAIL: {name} ({STAND_IN}): NO: {got}, the manifest says {'0' * 32}" in out
    assert f"{STAND_IN}.vk" not in out.split("FAIL:")[1]      # only the broken one is named
    # a file changed by one byte: its digest differs from the manifest's
    bad = tmp_path / "cache"
    shutil.copytree(stand_in["cache"], bad)
    raw = bytearray((bad / f"{STAND_IN}.vk").read_bytes())
    raw[-1] ^= 1
    (bad / f"{STAND_IN}.vk").write_bytes(bytes(raw))
    rc, out = run(capsys, "--cache", bad, "--manifest", stand_in["manifest"], "--kind", STAND_IN)
    assert rc == selftest.FAILED and f"FAIL: {STAND_IN}.vk ({STAND_IN}): NO: " in out, out


def test_two_exchanged_aux_variables_fail_the_selftest(stand_in, capsys):
    """The negative control: the keys are made for the circuit's order; a copy with two
    auxiliary variables exchanged (witness likewise, so still satisfied) proves, and the proof
    does not verify."""
    from synthesis.circuits import get_circuit
    c = get_circuit("porep-lite-4k")
    z, _ = _lite_instance(c, 1)
    aux = field.vec_to_ints(z[1 + c.r1cs().num_public:])
    j = next(j for j in range(1, len(aux)) if aux[j] != aux[0])  # a pair holding different values
    rc, out = run(capsys, "--cache", stand_in["cache"], "--manifest", stand_in["manifest"], "--kind", STAND_IN,
                  "--swap-aux", f"0,{j}")
    assert rc == selftest.FAILED, out
    assert f"NEGATIVE CONTROL: auxiliary variables 0 and {j} exchanged" in out
    assert f"FAIL: {STAND_IN}.vk ({STAND_IN}): NO: the proof does not verify with this .vk" in out
    rc, out = run(capsys, "--cache", stand_in["cache"], "--manifest", stand_in["manifest"], "--kind", STAND_IN,
                  "--swap-aux", "0,0")
    assert rc == 2 and "two different auxiliary variables" in run.err
    # a pair holding the same value: a proof cannot see the exchange; refused, not passed off as green
    seen = {}
    m, k = next((seen[v], k) for k, v in enumerate(aux) if seen.setdefault(v, k) != k)
    rc, out = run(capsys, "--cache", stand_in["cache"], "--manifest", stand_in["manifest"], "--kind", STAND_IN,
                  "--swap-aux", f"{m},{k}")
    assert rc == 2 and f"--swap-aux {m},{k}: both hold the same value" in run.err
    rc, out = run(capsys, "--cache", stand_in["cache"], "--manifest", stand_in["manifest"], "--kind", STAND_IN,
                  "--swap-aux", "auto")
    assert rc == selftest.FAILED and f"auxiliary variables 0 and {j} exchanged" in out, out


def test_without_files_the_missing_list_and_how_to_fetch(tmp_path, capsys):
    """Kinds whose files are absent are skipped and listed (nothing checked: exit 3, INCOMPLETE);
    a kind the operator names must be there: its files are listed missing."""
    rc, out = run(capsys, "--cache", tmp_path)
    assert rc == selftest.MISSING, out
    stem = bellperson.filecoin_stem(2048)
    for kind in ("porep-2k", "winning-post-2k", "window-post-2k", "snap-update-2k"):
        assert f"skipped {kind}: absent (" in out and f"--kind {kind} to require it)" in out, out
    assert "missing " not in out and "│" not in out        # no rows: nothing was present
    assert "`curio fetch-params 2KiB`" in out and "`lotus fetch-params 2KiB`" in out
    assert "paramfetch --sector-sizes 2048" in out
    assert "digests against Filecoin's parameters.json" in out and "INCOMPLETE: no kind could be checked" in out
    rc, out = run(capsys, "--cache", tmp_path, "--kind", "porep-2k", "--kind", "winning-post-2k")
    assert rc == selftest.MISSING, out
    assert f"missing {tmp_path / stem}.params (porep-2k)" in out
    assert f"missing {tmp_path / stem}.vk (porep-2k)" in out
    wstem = selftest.KINDS["winning-post-2k"].stem()
    assert f"missing {tmp_path / wstem}.params (winning-post-2k)" in out and "skipped" not in out
    # $FIL_PROOFS_PARAMETER_CACHE is where it looks by default
    env = dict(os.environ, FIL_PROOFS_PARAMETER_CACHE=str(tmp_path / "elsewhere"))
    res = subprocess.run([sys.executable, "-m", "cluster", "selftest", "--kind", "porep-2k"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == selftest.MISSING and f"missing {tmp_path / 'elsewhere' / stem}.params" in res.stdout


@pytest.fixture(scope="module")
def window_cache(tmp_path_factory):
    """window-post-2k's keys (zkhive keys setup: a development ceremony) under Filecoin's own
    name (v28-proof-of-spacetime-fallback-…-0170db1f…) in a parameter cache, with a manifest of
    their digests."""
    from cluster.pipeline.keys import KeyCache
    from synthesis.circuits import get_circuit
    root = tmp_path_factory.mktemp("selftest-post")
    params, vk = KeyCache(root / "keys").setup(get_circuit("window-post-2k"), backend="cpu")
    stem = selftest.KINDS["window-post-2k"].stem()
    assert stem.startswith("v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-0-0-0170db1f")
    cache = root / "cache"
    cache.mkdir()
    shutil.copyfile(params, cache / f"{stem}.params")
    shutil.copyfile(vk, cache / f"{stem}.vk")
    manifest = {p.name: {"cid": "-", "digest": bellperson.file_digest(p), "sector_size": 2048}
                for p in (cache / f"{stem}.params", cache / f"{stem}.vk")}
    (root / "parameters.json").write_text(json.dumps(manifest))
    return {"root": root, "cache": cache, "manifest": root / "parameters.json", "stem": stem}


def test_post_kind_present_and_good_the_absent_kinds_skipped(window_cache, capsys):
    """Every 2 KiB kind by default: window-post-2k's files present, proved (a sealed sector's
    vanilla proof as Curio sends it) and verified (green, exit 0); PoRep, WinningPoSt and
    SnapDeals absent: skipped and listed, not failed."""
    rc, out = run(capsys, "--cache", window_cache["cache"], "--manifest", window_cache["manifest"])
    assert rc == 0, out
    rows = [ln for ln in out.splitlines() if "window-post-2k" in ln and "│" in ln]
    assert len(rows) == 2 and all("│ ok " in ln for ln in rows), out
    assert "│ yes, 192 B " in rows[0] and "│ yes " in rows[1], out
    for kind in ("porep-2k", "winning-post-2k", "snap-update-2k"):
        assert f"skipped {kind}: absent (" in out, out
    assert "PASS" in out


def test_post_kind_tampered_is_refused_naming_file_and_offset(window_cache, capsys, tmp_path):
    """A byte of the .vk changed (its alpha_g1 point): red, exit 1; the digest named against the
    manifest, and the key refused naming the file, the section and the byte offset."""
    bad = tmp_path / "cache"
    shutil.copytree(window_cache["cache"], bad)
    vk = bad / f"{window_cache['stem']}.vk"
    raw = bytearray(vk.read_bytes())
    raw[40] ^= 0x01
    vk.write_bytes(bytes(raw))
    rc, out = run(capsys, "--cache", bad, "--manifest", window_cache["manifest"], "--kind", "window-post-2k")
    assert rc == selftest.FAILED, out
    verdict = " ".join(out.split("FAIL:")[1].split())
    assert f"{window_cache['stem']}.vk (window-post-2k): NO: " in verdict and ", the manifest says " in verdict
    assert "byte offset" in verdict and f"{window_cache['stem']}.params" not in verdict, verdict


def test_the_carried_parameters_json_lists_the_porep_files():
    doc = json.loads(selftest.PARAMETERS_JSON.read_text())
    assert len(doc) == 44
    stem = bellperson.filecoin_stem(2048)
    assert doc[stem + ".params"]["digest"] == "434fb1338ecfaf0f59256f30dde4968f"
    assert doc[stem + ".vk"]["digest"] == "dc1ade9929ade1708238f155343044ac"
    for size in bellperson.FILECOIN_POREP:
        assert doc[bellperson.filecoin_stem(size) + ".params"]["sector_size"] == size


@pytest.mark.skipif(os.environ.get("ZKHIVE_LONG_FILECOIN") != "1",
                    reason="a filecoin-2k key takes ~8-20 minutes on 2 cores: ZKHIVE_LONG_FILECOIN=1 runs it")
@pytest.mark.timeout(3600)
def test_filecoin_2k_stand_in_files_under_v28_names(tmp_path):
    """The registered porep-2k kind end to end through the command: a sealed 2 KiB sector proved
    with a filecoin-2k .params under Filecoin's name and verified with the .vk (green), and the
    negative control (red). $ZKHIVE_SELFTEST_KEYS: a key cache already holding filecoin-2k."""
    from cluster.pipeline.keys import KeyCache
    from synthesis.circuits import get_circuit
    keys = KeyCache(os.environ.get("ZKHIVE_SELFTEST_KEYS") or tmp_path / "keys")
    params, vk = keys.setup(get_circuit("filecoin-2k"), backend="cpu")
    stem = bellperson.filecoin_stem(2048)
    cache = tmp_path / "cache"
    cache.mkdir()
    for src, ext in ((params, ".params"), (vk, ".vk")):
        os.symlink(os.path.abspath(src), cache / (stem + ext))
    manifest = {stem + ext: {"digest": bellperson.file_digest(cache / (stem + ext))} for ext in (".params", ".vk")}
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    cmd = [sys.executable, "-m", "cluster", "selftest", "--cache", str(cache), "--manifest", str(tmp_path / "m.json")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=3000)
    print(res.stdout, res.stderr)
    assert res.returncode == 0 and "PASS" in res.stdout, res.stdout + res.stderr
    res = subprocess.run(cmd + ["--swap-aux", "auto"], capture_output=True, text=True, timeout=3000)
    print(res.stdout, res.stderr)
    assert res.returncode == 1 and "does not verify" in res.stdout, res.stdout + res.stderr


def test_the_winning_and_update_kinds_instances_are_their_circuits():
    """The kinds whose keys are too slow to make here (winning-post-2k ~45 s, snap-update-2k
    ~20 min on 2 cores): their instances are a sealed sector's WinningPoSt (66 circuit sectors,
    132 public inputs, the witness satisfying every row) and a CC sector's update (h_select 1,
    comm_r_old, comm_d_new, comm_r_new), each under parameters.json's v28 name."""
    from synthesis.circuits import get_circuit
    doc = json.loads(selftest.PARAMETERS_JSON.read_text())
    c = get_circuit("winning-post-2k")
    z, pub = selftest.KINDS["winning-post-2k"].instance(c, 1)
    assert len(pub) == 132 and len(set(pub[0::2])) == 1          # the one sector's comm_r, 66 times
    c.r1cs().check(z.to_vec())
    u = get_circuit("snap-update-2k")
    z, pub = selftest.KINDS["snap-update-2k"].instance(u, 1)
    assert len(pub) == 4 and pub[0] == 1 and len(z) == 1 + 4 + u.size()["aux"]
    for kind in ("porep-2k", "winning-post-2k", "window-post-2k", "snap-update-2k"):
        stem = selftest.KINDS[kind].stem()
        assert stem + ".params" in doc and stem + ".vk" in doc, kind
