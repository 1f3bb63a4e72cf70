"""Which cluster of ``zkhive up`` a ``zkhive worker`` process belongs to (issue 27).

- A worker ``up`` started carries ``ZKHIVE_RUN_DIR`` (cluster.ops.plan): it watches the keeper
  (``cluster.ops.keeper.watch_keeper``), so a SIGKILLed keeper comes back while any worker lives.
- A worker started by hand (``zkhive worker ROLE``) whose settings are those of a live cluster
  of ``up`` (its recorded ``settings.toml``, or the same Redis URL as the cluster this checkout
  finds) adds itself to that cluster's state file as ``<role>-hand-<pid>`` (``by_hand``): ``zkhive
  ps`` lists it, ``zkhive down`` stops it with the rest (it used to leave such workers running
  against a stopped Redis), the keeper never restarts it. It removes its record when it exits.
"""
from __future__ import annotations

import os
from pathlib import Path

import psutil

from .keeper import RUN_DIR_ENV, watch_keeper
from .supervisor import Busy, ProcessRecord, Supervisor, SupervisorError


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
            sup.records.append(ProcessRecord(
                name, os.getpid(), me.create_time(), list(me.cmdline()), "(its own terminal)",
                stop_grace_s=grace, address=device or role, group=group, by_hand=True,
                ready_at=0.0))
            sup.save()
    except (Busy, SupervisorError) as e:
        print(f"zkhive worker: not recorded in {sup.state_file} ({e}): `zkhive down` will not "
              f"stop this process", flush=True)
        return None
    print(f"zkhive worker: recorded as {name} in {sup.state_file}: `zkhive down` stops it too",
          flush=True)
    return Joined(sup, name)
