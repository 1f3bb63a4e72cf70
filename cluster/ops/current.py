"""The running cluster, as ``zkhive up`` recorded it, so later commands in any shell find it.

``up`` writes two things once its processes are started:

- ``<run dir>/settings.toml``: the settings the cluster runs with, paths made absolute and
  passwords moved into 0600 files beside it (``<run dir>/secrets/``); its processes are started
  with it as ``ZKHIVE_CONFIG``;
- a pointer to the run directory in the user's state directory (``$ZKHIVE_STATE_DIR``, else
  ``$XDG_STATE_HOME/zkhive``, else ``~/.local/state/zkhive``), one per checkout: file
  ``current-<digest of the checkout's path>.json``, which names the checkout it belongs to. A
  command run from another checkout (another clone, another ``./run`` venv) reads its own pointer
  and never sees, uses or stops this cluster (issue 27: one per-user pointer made a fresh clone's
  ``./run demo`` refuse over, and offer to stop, another checkout's cluster), as compose scopes
  its containers by project.

A later command that is not told which cluster to use (no ``--config``, no ``$ZKHIVE_CONFIG``,
no ``$ZKHIVE_REDIS__URL``) loads ``settings.toml`` of the live cluster it finds: the one in
``--run-dir`` (or ``$ZKHIVE_RUN_DIR``) when given, else the one this checkout's pointer names,
else the one in ``./var/up``; other
``ZKHIVE_<SECTION>__<KEY>`` variables still override single keys. This is what makes
``ZKHIVE_REDIS__URL=... ./run demo`` in one shell and ``./run status`` in another talk to the
same Redis. ``down`` removes the pointer when it names the cluster it stopped.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from cluster.settings import CONFIG_ENV, Settings

SETTINGS_FILE = "settings.toml"
POINTER_FILE = "current.json"
DEFAULT_RUN_DIR = Path("var/up")


def state_dir() -> Path:
    explicit = os.environ.get("ZKHIVE_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "zkhive"


def checkout() -> str:
    """This code's checkout: the directory above the ``cluster`` package, and the interpreter's
    prefix (a venv of its own, for a non-editable install, whose package dir is shared by no
    other checkout)."""
    return f"{Path(__file__).resolve().parents[2]}{os.pathsep}{Path(sys.prefix).resolve()}"


def pointer_file() -> Path:
    digest = hashlib.sha256(checkout().encode()).hexdigest()[:16]
    return state_dir() / f"current-{digest}.json"


def told_which_cluster(explicit_config: str | None) -> bool:
    """The user named settings: the recorded cluster's are not used."""
    return bool(explicit_config or os.environ.get(CONFIG_ENV) or os.environ.get("ZKHIVE_REDIS__URL"))


def _alive(run_dir: Path) -> bool:
    from .supervisor import Supervisor, SupervisorError

    sup = Supervisor(run_dir)
    try:
        return sup.load() and bool(sup.alive())
    except SupervisorError:
        return True  # a state file we cannot read: let the command report it


def pointed_run_dir() -> Path | None:
    """The run directory this checkout's ``up`` last recorded (never another checkout's)."""
    try:
        doc = json.loads(pointer_file().read_text())
        if doc.get("checkout") != checkout():
            return None
        return Path(doc["run_dir"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def resolve_run_dir(explicit: str | os.PathLike | None) -> Path:
    """``--run-dir`` (or ``$ZKHIVE_RUN_DIR``) when given; else this checkout's pointer's run
    directory when its cluster is alive; else ``var/up`` (relative to the current directory)."""
    explicit = explicit or os.environ.get("ZKHIVE_RUN_DIR")
    if explicit:
        return Path(explicit)
    pointed = pointed_run_dir()
    if pointed is not None and pointed.resolve() != DEFAULT_RUN_DIR.resolve() \
            and not _alive(DEFAULT_RUN_DIR) and _alive(pointed):
        return pointed
    return DEFAULT_RUN_DIR


def recorded_settings(explicit_run_dir: str | os.PathLike | None) -> Path | None:
    """The settings file of the live cluster a command should use, or None."""
    run_dir = resolve_run_dir(explicit_run_dir)
    f = run_dir / SETTINGS_FILE
    return f.resolve() if f.exists() and _alive(run_dir) else None


# -- what a command uses ------------------------------------------------------------------------

def run_dir_for(args) -> Path:
    """The run directory a command acts on (``--run-dir``, else ``resolve_run_dir``), resolved
    once per command: ``args.run_dir`` is set to it and ``args.run_dir_explicit`` says whether
    the user named it."""
    if not getattr(args, "run_dir_resolved", False):
        args.run_dir_explicit = args.run_dir is not None
        args.run_dir = str(resolve_run_dir(args.run_dir))
        args.run_dir_resolved = True
    return Path(args.run_dir).resolve()


def settings_for(args) -> Settings:
    """Load settings once, for this process, from --config (before cluster.pipeline.app is
    imported); without --config, $ZKHIVE_CONFIG or $ZKHIVE_REDIS__URL, from the settings the
    running cluster was started with, so every shell talks to the same cluster. A bad setting is
    a CommandError (one line)."""
    from cluster import settings
    from cluster.cli import CommandError

    if hasattr(args, "run_dir"):
        run_dir_for(args)
    if getattr(args, "config", None):
        os.environ[CONFIG_ENV] = str(args.config)
    elif not told_which_cluster(None):
        recorded = recorded_settings(getattr(args, "run_dir", None))
        if recorded is not None:
            os.environ[CONFIG_ENV] = str(recorded)
    try:
        return settings.load()
    except settings.SettingsError as e:
        raise CommandError(str(e)) from None


# -- written by `up` ----------------------------------------------------------------------------

def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # JSON string escapes are TOML basic-string escapes


def _secret_file(run_dir: Path, name: str, value: str) -> Path:
    d = run_dir / "secrets"
    d.mkdir(mode=0o700, exist_ok=True)
    path = (d / name).resolve()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    return path


def write_settings(s: Settings, run_dir: Path, *, flower_password_file: str | None = None) -> Path:
    """``run_dir/settings.toml``: ``s`` with absolute paths and no password in it."""
    run_dir = run_dir.resolve()
    doc = s.model_dump(mode="python", exclude={"source"})
    redis_pw = s.redis.secret()
    doc["redis"].pop("password", None)
    doc["redis"]["password_file"] = _secret_file(run_dir, "redis.pass", redis_pw) if redis_pw else None
    seed = s.srs.setup_seed
    doc["srs"].pop("setup_seed", None)
    if seed is not None:  # the dev ceremony's seed, like a password: a 0600 file, not the toml
        doc["srs"]["setup_seed_file"] = _secret_file(run_dir, "setup.seed", seed.get_secret_value())
    flower_pw = s.flower.secret()
    doc["flower"].pop("password", None)
    if flower_password_file:
        doc["flower"]["password_file"] = flower_password_file
    elif flower_pw:
        doc["flower"]["password_file"] = _secret_file(run_dir, "flower.pass", flower_pw)
    token = s.gateway.token  # the gateway's bearer token, like a password: a 0600 file
    doc["gateway"].pop("token", None)
    if token is not None:
        doc["gateway"]["token_file"] = _secret_file(run_dir, "gateway.token", token.get_secret_value())
    lines = ["# written by `zkhive up`: the settings this cluster runs with (cluster/ops/current.py)"]
    for section, values in doc.items():
        lines.append(f"\n[{section}]")
        for k, v in values.items():
            if v is None:
                continue
            if isinstance(v, Path):
                v = str(v if v.is_absolute() else v.resolve())
            lines.append(f"{k} = {_toml_value(v)}")
    path = run_dir / SETTINGS_FILE
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


def point_at(run_dir: Path) -> None:
    d = state_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / (pointer_file().name + f".{os.getpid()}")
        tmp.write_text(json.dumps({"run_dir": str(run_dir.resolve()), "checkout": checkout()}))
        os.replace(tmp, pointer_file())
    except OSError:
        pass  # a read-only home: commands still find ./var/up


def forget(run_dir: Path) -> None:
    pointed = pointed_run_dir()
    if pointed is not None and pointed.resolve() == run_dir.resolve():
        pointer_file().unlink(missing_ok=True)
