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


def test_preparing_the_circuits_caches_the_digest_then_the_densities_and_errors_wait_for_the_load():
    """cluster/pipeline/lifecycle.py prepare_circuits: the matrices' digest before its event
    (the load may start), the densities and both indices after; a name it cannot prepare is
    left for the load (no exception on the thread, the event still set)."""
    from pathlib import Path

    from tests.integration.circuits_for_tests import COMPACT as TOY   # over compact matrices
    from cluster.pipeline.lifecycle import prepare_circuits
    from gpu.groth16 import bellperson as bp
    from synthesis.circuits import get_circuit

    # the instance the registry holds (what prepare_circuits takes): the module is imported
    # under two names in a full run (circuits_for_tests and tests.integration.…), each
    # registering its own object, the last one kept
    COMPACT = get_circuit(TOY.name)

    cr = COMPACT.compact_r1cs()
    for k in ("_digest", "_bellperson_shape"):
        cr.__dict__.pop(k, None)

    class Keys:   # a key cache holding a bellperson .params for the set
        def find(self, circuit, kind):
            return Path(f"/nonexistent/{circuit.name}.params")

    assert prepare_circuits(["no-such-set", COMPACT.name], Keys()).wait(60)
    assert "_digest" in cr.__dict__
    for _ in range(600):
        shape = cr.__dict__.get("_bellperson_shape")
        if shape is not None and set(shape.__dict__.get("_index", {})) == {"a", "b"}:
            break
        time.sleep(0.05)
    assert shape is bp.shape_of(COMPACT) and shape.index("a") is shape.__dict__["_index"]["a"]
    # no .params in the cache (a key made in process, a .pk): no densities prepared
    cr.__dict__.pop("_bellperson_shape")

    class NoParams:   # an older .pk of ours: no bellperson densities to read it by
        def find(self, circuit, kind):
            return Path(f"/nonexistent/{circuit.name}.pk")

    assert prepare_circuits([COMPACT.name], NoParams()).wait(60)
    time.sleep(0.3)
    assert "_bellperson_shape" not in cr.__dict__


def test_celerys_start_is_made_ahead_by_warm_celery():
    """cluster/pipeline/lifecycle.py warm_celery (a standby's wait): the worker's command line
    with its plugins (Flower's command) and the result backend, made before the takeover; a
    fresh process that imports the lifecycle alone has none of them, so the start after the
    takeover would pay them (0.571 s against 0.092 s on the dev VM: docs/performance.md)."""
    import subprocess
    import sys
    from pathlib import Path

    probe = ("import sys; from cluster.pipeline.app import app; "
             "from cluster.pipeline import lifecycle; "
             "before = ('celery.bin.celery' in sys.modules, 'flower.command' in sys.modules, "
             "app._backend is not None); lifecycle.warm_celery(); "
             "print(before, ('celery.bin.celery' in sys.modules, 'flower.command' in sys.modules, "
             "type(app._backend).__name__))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         cwd=str(Path(__file__).resolve().parents[2]))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == \
        "(False, False, False) (True, True, 'ResultStore')", out.stdout
