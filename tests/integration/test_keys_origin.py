"""Where keys are looked for, and said so (issue 39): ``zkhive c2 --local`` reads Filecoin's
parameter cache ($FIL_PROOFS_PARAMETER_CACHE) as the cluster does; a missing key names every
directory looked in, its setting and where the settings came from, and a
$FIL_PROOFS_PARAMETER_CACHE exported after the settings were written is named as not used."""
from __future__ import annotations

import pytest

from cluster.cli import main
from gpu.groth16.bellperson import filecoin_stem


SET, SIZE = "filecoin-512m", 512 << 20  # a benchmark sector: seconds (a sealed 2 KiB one: 40 s)


@pytest.fixture(scope="module")
def commit2(tmp_path_factory):
    d = tmp_path_factory.mktemp("fc512m")
    assert main(["sector", "new", "--params", SET, "--seed", "x", "--out", str(d / "s")]) == 0
    assert main(["sector", "c1", str(d / "s"), "--out", str(d / "commit2.json"), "--commit2"]) == 0
    return d / "commit2.json"


@pytest.fixture
def clean_env(tmp_path, monkeypatch):
    import os
    for k in list(os.environ):
        if k.startswith("ZKHIVE_") or k == "FIL_PROOFS_PARAMETER_CACHE":
            monkeypatch.delenv(k)
    monkeypatch.setenv("ZKHIVE_STATE_DIR", str(tmp_path / "state"))  # no recorded cluster
    monkeypatch.setenv("ZKHIVE_CLI_NAME", "./run")  # as ./run sets it: the hints say ./run


def test_c2_local_reads_filecoins_parameter_cache(commit2, tmp_path, monkeypatch, capsys, clean_env):
    fil = tmp_path / "fil"
    fil.mkdir()
    monkeypatch.setenv("FIL_PROOFS_PARAMETER_CACHE", str(fil))
    cfg = tmp_path / "z.toml"
    cfg.write_text(f'[srs]\nparam_cache = "{tmp_path / "keys"}"\n')
    # no key anywhere: both places named, with their settings, and how to make one (as ./run)
    assert main(["c2", str(commit2), "--local", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'keys'} ([srs] param_cache) and {fil} ([srs] filecoin_cache" in err, err
    assert f"[srs] from settings file {cfg}" in err and f"`./run keys setup --params {SET}`" in err
    assert "is not used" not in err  # the variable is what the settings use
    # Filecoin's own file in $FIL_PROOFS_PARAMETER_CACHE is the one read (here a damaged one:
    # its error names it; before, c2 --local looked only in param_cache)
    (fil / (filecoin_stem(SIZE) + ".params")).write_bytes(b"\0" * 64)
    assert main(["c2", str(commit2), "--local", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert str(fil / (filecoin_stem(SIZE) + ".params")) in err, err


def test_a_cache_exported_after_the_settings_were_written_is_named_as_not_used(
        commit2, tmp_path, monkeypatch, capsys, clean_env):
    written = tmp_path / "fil-at-up"
    cfg = tmp_path / "settings.toml"  # as `up` writes it: filecoin_cache fixed
    cfg.write_text(f'[srs]\nparam_cache = "{tmp_path / "keys"}"\nfilecoin_cache = "{written}"\n')
    later = tmp_path / "fil-later"
    later.mkdir()
    monkeypatch.setenv("FIL_PROOFS_PARAMETER_CACHE", str(later))
    assert main(["c2", str(commit2), "--local", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert f"{written} ([srs] filecoin_cache" in err
    assert (f"$FIL_PROOFS_PARAMETER_CACHE={later} is not used: filecoin_cache was fixed when those "
            f"settings were written") in err, err
    assert "`./run down` and `./run up` again with it exported" in err
