"""`zkhive gc` (issue 27): dir-store blobs older than the TTL that no job record references are
removed; referenced or young ones stay. Real Redis, a real submitted job, the real CLI."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from circuits_for_tests import SQUARES_A, make_c1
from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def test_gc_removes_old_unreferenced_blobs_only(cluster, tmp_path):
    from cluster.pipeline.workflow import submit_job

    cluster.flush()
    cluster.configure_here()
    cluster.setup_keys(SQUARES_A)
    rt = cluster.runtime()
    rec, _ = submit_job(rt, make_c1(SQUARES_A, seed=9), job_id="gc-kept")  # its C1, its public inputs: blobs
    old_orphan = rt.blobs.put(b"nobody needs me", kind="result")
    young_orphan = rt.blobs.put(b"written a moment ago", kind="result")
    week = time.time() - 8 * 86400
    for ref in (rec.c1, rec.publics, old_orphan):
        os.utime(rt.blobs._path(ref.sha256), (week, week))
    tmp = rt.blobs._path(old_orphan.sha256).parent / ".tmp-dead"
    tmp.write_bytes(b"half")
    os.utime(tmp, (week, week))

    def gc(*extra):
        p = subprocess.run([sys.executable, "-m", "cluster", "gc", *extra], cwd=ROOT, capture_output=True,
                           text=True, timeout=60, env=cluster.env)
        assert p.returncode == 0, p.stderr
        return p.stdout

    assert gc("--dry-run").startswith("would remove 2 blobs")
    assert rt.blobs._path(old_orphan.sha256).exists()
    out = gc()
    assert out.startswith(f"removed 2 blobs ({len(b'nobody needs me') + 4} bytes) older than 604800 s"), out
    assert "kept 2 still referenced by a job and" in out, out
    assert not rt.blobs._path(old_orphan.sha256).exists() and not tmp.exists()
    assert rt.blobs._path(rec.c1.sha256).exists() and rt.blobs._path(young_orphan.sha256).exists()
    assert rt.blobs.get(rec.c1) and rt.blobs.get(rec.publics)  # the job's blobs still read back whole
