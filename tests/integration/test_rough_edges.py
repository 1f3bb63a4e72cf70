"""Rough edges of the CLI (issue 27), each through the real ``python -m cluster``, no Redis:
a reader that leaves early (``zkhive keys list | head``), ``verify`` without the cluster's key
cache, a key path that is a directory."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from circuits_for_tests import SQUARES_A, make_c1
from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKHIVE_")}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests" / "integration")]),
               ZKHIVE_STATE_DIR=str(tmp_path / "state"), ZKHIVE_WORKER__CIRCUIT_MODULES='["circuits_for_tests"]',
               **extra)
    return env


def test_a_reader_that_leaves_early_is_no_error(tmp_path):
    """`zkhive keys list | head`: the pipe's reader is gone before the first line is written."""
    from cluster.pipeline.keys import KeyCache

    KeyCache(tmp_path / "keys").setup(SQUARES_A)
    p = subprocess.Popen([sys.executable, "-m", "cluster", "keys", "list"], cwd=tmp_path,
                         env=_env(tmp_path, ZKHIVE_SRS__PARAM_CACHE=str(tmp_path / "keys")),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # like `head -0`: nobody reads
    err = p.stderr.read().decode()
    assert p.wait(60) == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    # and the same command with a reader prints the key (the rejects' accept)
    ok = subprocess.run([sys.executable, "-m", "cluster", "keys", "list"], cwd=tmp_path, capture_output=True,
                        text=True, env=_env(tmp_path, ZKHIVE_SRS__PARAM_CACHE=str(tmp_path / "keys")), timeout=60)
    assert ok.returncode == 0 and SQUARES_A.name in ok.stdout, ok.stdout + ok.stderr


def test_verify_without_the_clusters_keys_and_a_key_that_is_a_directory(tmp_path):
    from synthesis.circuits import get_circuit
    from synthesis.porep import SETS, c1_document, generate

    seed = (3).to_bytes(32, "little")
    c1 = tmp_path / "c1.json"
    c1.write_text(json.dumps(c1_document(generate(SETS["porep-lite-4k"], seed), seed)))
    circuit = get_circuit("porep-lite-4k")
    (tmp_path / "proof.bin").write_bytes(b"\0" * 384)
    empty = tmp_path / "empty"
    empty.mkdir()
    p = subprocess.run([sys.executable, "-m", "cluster", "verify", str(c1), str(tmp_path / "proof.bin"),
                        "--keys", str(empty)], cwd=tmp_path, capture_output=True, text=True,
                       env=_env(tmp_path), timeout=60)
    assert p.returncode == 2 and p.stderr.strip() == (
        f"zkhive verify: no verifying key for parameter set 'porep-lite-4k' in {empty}: pass --keys with "
        f"the key cache the proofs were made with (the cluster's [srs] param_cache)"), p.stderr
    assert "keys setup" not in p.stderr  # it would make another key under the same name

    from cluster.pipeline.keys import KeyCache

    KeyCache(empty).path(circuit, "vk").mkdir(parents=True)
    p = subprocess.run([sys.executable, "-m", "cluster", "verify", str(c1), str(tmp_path / "proof.bin"),
                        "--keys", str(empty)], cwd=tmp_path, capture_output=True, text=True,
                       env=_env(tmp_path), timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert p.stderr.strip().endswith("is a directory, not a key file"), p.stderr
