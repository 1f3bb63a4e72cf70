"""The ``zkhive`` command. Each package contributes its own subcommands through a ``register``
function, so the command stays one entry point while the code lives with what it drives:

- ``synthesis.cli``: sectors and C1 inputs (``zkhive sector new|c1``), local synthesis;
- ``gpu.export.cli``: exports for other verifiers (``zkhive export snarkjs``);
- ``cluster.user.local``: proving on this machine without a cluster (``zkhive prove|verify``);
- ``cluster.user.commands``: the cluster's users (workers, ``keys``, ``submit``, ``result``,
  ``status``, ``timeline``, ``cancel``);
- ``cluster.ops.commands``: the operator's (``up``, ``down``, ``ps``, ``restart``, ``flower``,
  ``metrics``, ``ready``);
- ``cluster.user.demo``: ``demo``;
- ``cluster.gateway.commands``: ``gateway`` (cuzk's gRPC service), ``c2`` (lotus-bench prove's drop-in);
- ``cluster.gateway.proofcli``: ``winning-post``, ``window-post``, ``prove-update`` (c2's siblings).

The modules are imported by name when the parser is built: this module imports none of them (they
import ``CommandError`` and ``cli_name`` from here), so ``cluster.ops`` and ``cluster.user`` sit
above it with no cycle; ``cluster.pipeline`` never imports it (docs/architecture.md).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from .errors import cli_name  # noqa: F401  (the command modules import it from here)

COMMAND_MODULES = ("synthesis.cli", "gpu.export.cli", "cluster.user.local", "cluster.user.commands",
                   "cluster.ops.commands", "cluster.user.demo", "cluster.gateway.commands",
                   "cluster.gateway.proofcli")


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


class _Version(argparse.Action):
    """``--version``: the package version and the digest of the code (as workers report it);
    computed only when asked (the digest reads every source file)."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, help="print the version and the code digest, then exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from .version import code_digest, package_version

        print(f"zkhive {package_version()}+{code_digest()}")
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zkhive", description="zkhive: distributed Groth16 (BLS12-381) proving for Filecoin-style C2 jobs")
    parser.add_argument("--version", action=_Version)
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
    except BrokenPipeError:
        # `zkhive ps | head`: the reader left; what it did not read is not an error. stdout goes
        # to /dev/null so the interpreter's final flush does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except command_errors() as e:
        print(f"zkhive {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        line = _user_error(e)
        if line is None:
            raise  # a bug: its traceback is what we need
        print(f"zkhive {args.command}: {line}", file=sys.stderr)
        return 2


def _user_error(e: Exception) -> str | None:
    """One line for an error the user can act on that reached main without a CommandError: our
    error tree (cluster.errors) and a Redis that does not answer; None for anything else."""
    from .errors import ClusterError

    if isinstance(e, ClusterError):
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    try:
        import redis
    except ImportError:
        return None
    if isinstance(e, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                      redis.exceptions.AuthenticationError)):
        try:
            from .settings import load
            url = load().redis.url
        except Exception:
            url = "the configured URL"
        return f"cannot reach Redis at {url}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    return None


if __name__ == "__main__":
    # `python -m cluster.cli` runs this file as __main__, whose CommandError is not the class the
    # commands raise (cluster.cli.CommandError): run the imported module's main instead
    from cluster.cli import main as _main

    sys.exit(_main())
