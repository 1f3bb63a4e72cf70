"""Which cluster of ``zkhive up`` a ``zkhive worker`` process belongs to (issue 27).

- A worker ``up`` started carries ``ZKHIVE_RUN_DIR`` (cluster.ops.plan): it watches the keeper
  (``watch_keeper`` below), so a SIGKILLed keeper comes back while any worker lives.
- A worker started by hand (``zkhive worker ROLE``) whose settings are those of a live cluster
  of ``up`` (its recorded ``settings.toml``, or the same Redis URL as the cluster this checkout
  finds) adds itself to that cluster's state file as ``<role>-hand-<pid>`` (``by_hand``): ``zkhive
  ps`` lists it, ``zkhive down`` stops it with the rest (it used to leave such workers running
  against a stopped Redis), the keeper never restarts it. It removes its record when it exits.
"""
from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path

import psutil

from cluster.cli import cli_name

from .keeper import KEEPER
from .plan import _child_env, keeper_spec
from .supervisor import Busy, ProcessRecord, Supervisor, SupervisorError, start_stamp

#: set by `up` in its processes' environment (cluster.ops.plan): the run directory they belong to
RUN_DIR_ENV = "ZKHIVE_RUN_DIR"


class Joined:
    def __init__(self, sup: Supervisor, name: str):
        self.sup, self.name = sup, name

    def leave(self) -> None:
        try:
            with self.sup.locked(wait_s=5.0):
                if self.sup.load():
                    self.sup.records = [r for r in self.sup.records
                                        if not (r.name == self.name and r.pid == os.getpid())]
                    self.sup.save()
        except SupervisorError:
            pass  # `down` is stopping everything, this process included


def _cluster_of(s) -> Path | None:
    from . import current

    config = os.environ.get(current.CONFIG_ENV)
    candidates = []
    if config and Path(config).name == current.SETTINGS_FILE:
        candidates.append(Path(config).resolve().parent)
    candidates.append(current.resolve_run_dir(None).resolve())
    for run_dir in candidates:
        sup = Supervisor(run_dir)
        try:
            if sup.load() and sup.alive() and sup.meta.get("redis") == s.redis.url \
                    and not sup.meta.get("stopping"):
                return run_dir
        except SupervisorError:
            continue
    return None


def attach(s, role: str, device: str | None) -> Joined | None:
    """Watch the keeper (a worker of ``up``) or join the cluster's state (a worker by hand)."""
    own = os.environ.get(RUN_DIR_ENV)
    if own:
        watch_keeper(Path(own), out=lambda m: print(f"zkhive worker: {m}", flush=True))
        return None
    run_dir = _cluster_of(s)
    if run_dir is None:
        return None
    sup = Supervisor(run_dir)
    me = psutil.Process()
    name = f"{role}-hand-{os.getpid()}" if device is None else \
        f"prove-{device.replace(':', '')}-hand-{os.getpid()}"
    grace = {"prove": s.delivery.prove_time_limit_s,
             "synthesis": s.delivery.synthesis_time_limit_s}.get(role, 60) + 30.0
    try:
        with sup.locked(wait_s=10.0):
            if not sup.load():
                return None
            group = max((r.group for r in sup.records if r.role in ("aggregate", "synthesis", "prove")),
                        default=1)
            _, created, since_boot = start_stamp(os.getpid())
            sup.records.append(ProcessRecord(
                name, os.getpid(), created, list(me.cmdline()), "(its own terminal)",
                stop_grace_s=grace, address=device or role, group=group, by_hand=True,
                ready_at=0.0, since_boot=since_boot))
            sup.save()
    except (Busy, SupervisorError) as e:
        print(f"zkhive worker: not recorded in {sup.state_file} ({e}): `{cli_name()} down` will not "
              f"stop this process", flush=True)
        return None
    print(f"zkhive worker: recorded as {name} in {sup.state_file}: `{cli_name()} down` stops it too",
          flush=True)
    return Joined(sup, name)


# -- who watches the keeper ----------------------------------------------------------------------


def revive_keeper(run_dir: Path, out=print) -> ProcessRecord | None:
    """Start the cluster's keeper again when its record names no live process and ``down`` has
    not begun; returns the new record, or None when nothing was needed (or another process holds
    the state directory's lock: it looks again later)."""
    sup = Supervisor(run_dir)
    try:
        if not sup.load() or sup.meta.get("stopping"):
            return None
        rec = sup.record(KEEPER)
        if rec is None or rec.process() is not None:
            return None
        if not any(r.process() is not None for r in sup.records if r.name != KEEPER):
            return None  # the whole cluster is gone: a stale state file, for `up` to replace
        with sup.locked():
            if not sup.load() or sup.meta.get("stopping"):
                return None
            rec = sup.record(KEEPER)
            if rec is None or rec.process() is not None:
                return None
            config = sup.meta.get("config")
            env = _child_env(argparse.Namespace(config=None), Path(run_dir),
                             {"ZKHIVE_CONFIG": config} if config else {})
            new = sup.replace(keeper_spec(Path(run_dir), env))
    except SupervisorError:
        return None  # Busy, or a state file `down` is rewriting
    out(f"keeper (pid {rec.pid}) was gone; started again as pid {new.pid}")
    return new


#: how often a worker of `up` looks at its keeper (seconds; the environment variable overrides)
WATCH_S = float(os.environ.get("ZKHIVE_KEEPER_WATCH_S", "5"))


def watch_keeper(run_dir: Path, interval_s: float = WATCH_S, out=print) -> threading.Thread:
    """A daemon thread of a worker ``up`` started: every ``interval_s``, ``revive_keeper``. The
    workers outlive a SIGKILLed keeper; any of them brings it back."""
    def loop():
        children = []
        while True:
            time.sleep(interval_s)
            for p in list(children):  # reap the keepers this worker started (no zombies)
                if p.poll() is not None:
                    children.remove(p)
            try:
                new = revive_keeper(run_dir, out=out)
            except Exception as e:  # never take the worker down with it
                out(f"could not check the keeper: {type(e).__name__}: {e}")
                continue
            if new is not None and getattr(new, "_popen", None) is not None:
                children.append(new._popen)
    t = threading.Thread(target=loop, daemon=True, name="zkhive-keeper-watch")
    t.start()
    return t
