"""Resident keys on request: two Celery remote-control commands a prover answers, and the
broadcast that asks them (the gateway's PreloadSRS and EvictSRS, cuzk's names for them).

    zkhive_preload_key(params)  make the parameter set's proving key resident (Prover.load)
    zkhive_evict_key(params)    drop it (Prover.evict)

A control command runs in the worker's main process, where the Prover and its device context
live (provers use the solo pool, cluster.pipeline.lifecycle): between tasks, so a prover busy
with a proof answers when the proof ends. Each reply is a small JSON dict, never an exception:
``{"ok": true, "already": bool, "ms": int}`` (preload), ``{"ok": true, "was_loaded": bool,
"freed": int}`` (evict), ``{"ok": false, "error": "<one line>"}``. The registry's
``resident_keys`` follows at the prover's next heartbeat.
"""
from __future__ import annotations

import logging
import time

from celery.worker.control import control_command

log = logging.getLogger(__name__)

PRELOAD = "zkhive_preload_key"
EVICT = "zkhive_evict_key"


def _prover():
    from .app import runtime

    prover = runtime().prover
    if prover is None:
        raise RuntimeError("this worker holds no device (not a prover)")
    return prover


def _one_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return f"{type(e).__name__}: {text}" if not isinstance(e, (KeyError, ValueError, RuntimeError)) else text


@control_command(args=[("params", str)], signature="<params>")
def zkhive_preload_key(state, params):
    """Make a parameter set's proving key resident on this prover."""
    from synthesis.circuits import get_circuit

    try:
        prover = _prover()
        circuit = get_circuit(params)
        if prover.is_resident(circuit):
            return {"ok": True, "already": True, "ms": 0}
        t0 = time.monotonic()
        prover.load(circuit)
        ms = int((time.monotonic() - t0) * 1000)
        log.info("loaded the proving key of %s on request in %d ms", params, ms)
        return {"ok": True, "already": False, "ms": ms}
    except Exception as e:  # the gateway reports it; the worker goes on serving
        log.warning("preload of %s refused: %s", params, e)
        return {"ok": False, "error": _one_line(e)}


@control_command(args=[("params", str)], signature="<params>")
def zkhive_evict_key(state, params):
    """Drop a parameter set's resident proving key from this prover."""
    try:
        freed = _prover().evict(params)
        return {"ok": True, "was_loaded": freed is not None, "freed": int(freed or 0)}
    except Exception as e:
        return {"ok": False, "error": _one_line(e)}


def ask_provers(app, command: str, params: str, nodenames: list[str], timeout_s: float) -> dict[str, dict]:
    """Broadcast ``command`` to the named provers and collect their replies for up to
    ``timeout_s`` ({nodename: reply}); a prover that did not answer in time is missing."""
    replies = app.control.broadcast(command, arguments={"params": params}, destination=nodenames,
                                    reply=True, timeout=timeout_s, limit=len(nodenames))
    out: dict[str, dict] = {}
    for item in replies or ():
        for node, reply in item.items():
            out[node] = reply if isinstance(reply, dict) else {"ok": False, "error": str(reply)}
    return out
