"""First-use work made at start for the preloaded kinds (cluster/pipeline/warmup.py, issue 37):
Poseidon's constants only for a set that hashes with it (in a process of its own, as the gateway
and the workers make them), the verifying keys read into the key cache, one written after the
worker started read by the watch, a bad one left to the first job without stopping the worker."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.errors import KeyMissing
from cluster.pipeline import warmup
from cluster.pipeline.keys import KeyCache
from tests.integration.circuits_for_tests import SQUARES_A, SQUARES_B, SQUARES_C

ROOT = Path(__file__).resolve().parents[2]


def test_poseidon_is_made_at_start_only_for_a_set_that_hashes_with_it(tmp_path):
    """The gateway's settle_heap and a worker's warm-up in a fresh process: nothing made for the
    test circuits or no preload; the four Filecoin arities for a PoSt set."""
    code = """
from tests.integration.circuits_for_tests import SQUARES_A
from cluster.gateway import server
from cluster.pipeline import warmup
from synthesis.bellpepper import neptune
server.settle_heap()
print(neptune.constants.cache_info().currsize, warmup.poseidon([SQUARES_A.name]), neptune.constants.cache_info().currsize)
server.settle_heap(["window-post-2k"])
n, hits = neptune.constants.cache_info().currsize, neptune.constants.cache_info().hits
for arity in (2, 4, 8, 11):
    neptune.constants(arity)
print(n, neptune.constants.cache_info().hits - hits, neptune.constants.cache_info().currsize)
print(warmup.poseidon(["winning-post-2k"]) < 0.05)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    none, after, again = out.stdout.splitlines()[-3:]
    assert none == "0 0.0 0", none
    assert after == "4 4 4", after  # the four arities, each found made
    assert again == "True", again  # made once: the second set finds them


def test_verifying_keys_read_at_start_and_when_written_later(tmp_path, caplog):
    keys = KeyCache(tmp_path)
    keys.setup(SQUARES_A)
    # a .vk that is not a key: logged, left to the first job (which fails naming it), the worker starts
    bad = keys.path(SQUARES_C, "vk")
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_bytes(b"not a verifying key")
    done, missing = warmup.verifier(keys, [SQUARES_A.name, SQUARES_B.name, SQUARES_C.name, "no-such-set"])
    assert done == [SQUARES_A.name]
    assert [c.name for c in missing] == [SQUARES_B.name]
    assert SQUARES_A.name in keys._vks and SQUARES_C.name not in keys._vks
    assert any(SQUARES_C.name in r.getMessage() for r in caplog.records), caplog.text
    with pytest.raises(Exception):
        keys.load_vk(SQUARES_C)

    # B's key written by another process's cache after the start: the watch reads it
    warmed: list[str] = []
    watch = warmup.VkWatch(keys, missing, poll_s=0.05, warmed=warmed).start()
    try:
        time.sleep(0.3)
        assert warmed == [] and watch.thread.is_alive()  # not there yet: still looking
        KeyCache(tmp_path).setup(SQUARES_B)
        end = time.monotonic() + 20
        while not warmed and time.monotonic() < end:
            time.sleep(0.05)
        assert warmed == [f"vk:{SQUARES_B.name}"]
        assert SQUARES_B.name in keys._vks
        watch.thread.join(5)
        assert not watch.thread.is_alive()  # nothing left to look for
    finally:
        watch.stop()


def test_the_watch_gives_up_after_its_time(tmp_path):
    keys = KeyCache(tmp_path)
    watch = warmup.VkWatch(keys, [SQUARES_A], watch_s=0.2, poll_s=0.05).start()
    watch.thread.join(5)
    assert not watch.thread.is_alive() and watch.warmed == []
    with pytest.raises(KeyMissing):
        keys.load_vk(SQUARES_A)
