"""gpu/phases.py: the seconds of each phase of a prover's start, kept by the recorder made
current and logged one line each (issue 40 item 3)."""
import logging
import time

import pytest

from gpu import phases


def test_phases_are_kept_by_the_current_recorder_summed_by_name_and_logged(caplog):
    rec = phases.Phases(origin=time.time() - 5)
    caplog.set_level(logging.INFO, logger="zkhive.start")
    with phases.collect(rec):
        with phases.phase("scan"):
            time.sleep(0.02)
        with phases.phase("scan"):
            time.sleep(0.02)
        phases.add("section a", 1.5)
        with pytest.raises(RuntimeError):   # a start that fails still says how far it got
            with phases.phase("vk"):
                raise RuntimeError("bad point")
    got = rec.as_dict()
    assert list(got) == ["scan", "section a", "vk"], got
    assert 0.04 <= got["scan"] < 1 and got["section a"] == 1.5 and got["vk"] < 0.5
    assert 5 <= rec.ended["vk"] < 6    # seconds since the process started
    lines = [r.getMessage() for r in caplog.records]
    assert sum(ln.startswith("start phase scan: ") for ln in lines) == 2, lines
    assert any(ln.startswith("start phase vk: ") for ln in lines), lines
    # no recorder current: logged, kept nowhere
    with phases.phase("later"):
        pass
    assert "later" not in rec.as_dict() and phases.current() is None
    assert any(r.getMessage().startswith("start phase later: ") for r in caplog.records)


def test_the_process_start_is_before_now():
    t = phases.process_started()
    assert 0 < time.time() - t < 24 * 3600
