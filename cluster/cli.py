"""The ``zkhive`` command. Each package contributes its own subcommands through a ``register``
function, so the command stays one entry point while the code lives with what it drives:

- ``synthesis.cli``: sectors and C1 inputs (``zkhive sector new|c1``), local synthesis;
- ``gpu.export.cli``: exports for other verifiers (``zkhive export snarkjs``);
- ``cluster.local``: proving on this machine without a cluster (``zkhive prove|verify``);
- ``cluster.commands``: the cluster (workers, ``submit``, ``result``, ``status``, ``timeline``,
  ``up``, ``down``, ``demo``).
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = ("synthesis.cli", "gpu.export.cli", "cluster.local", "cluster.commands")


class CommandError(Exception):
    """A user-facing failure of a cluster command: printed as one line without a traceback,
    exit status 2. The other packages' commands raise their own ``CommandError`` (synthesis.cli,
    gpu.export.cli: they never import cluster); ``main`` prints each the same way."""


def command_errors() -> tuple[type[Exception], ...]:
    """Every package's command error class (each command module's ``CommandError``)."""
    errors = [CommandError]
    for name in COMMAND_MODULES:
        cls = getattr(sys.modules.get(name), "CommandError", None)
        if isinstance(cls, type) and issubclass(cls, Exception) and cls not in errors:
            errors.append(cls)
    return tuple(errors)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zkhive", description="zkhive: distributed Groth16 (BLS12-381) proving for Filecoin-style C2 jobs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except command_errors() as e:
        print(f"zkhive {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
