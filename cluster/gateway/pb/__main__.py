"""Regenerate ``proving_pb2.py`` and ``proving_pb2_grpc.py`` from ``proving.proto`` (needs
grpcio-tools, a dev dependency); ``--check`` compares instead of writing, exit 1 on a difference.

The .proto is compiled with the repository root as its include path, so the generated service
module imports ``cluster.gateway.pb.proving_pb2`` by its package path. The file's path is not on
the wire: the service's name there is ``cuzk.v1.ProvingEngine`` (the .proto's package).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROTO = "cluster/gateway/pb/proving.proto"
OUTPUTS = ("proving_pb2.py", "proving_pb2_grpc.py")


def generate(out_dir: Path) -> None:
    from grpc_tools import protoc

    rc = protoc.main(["grpc_tools.protoc", f"-I{ROOT}", f"--python_out={out_dir}",
                      f"--grpc_python_out={out_dir}", str(ROOT / PROTO)])
    if rc != 0:
        raise SystemExit(f"protoc failed on {PROTO} (exit {rc})")


def _tools_version() -> str:
    # the generated service module embeds this version, so a patch release alone changes it
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("grpcio-tools")
    except PackageNotFoundError:
        return "(not installed)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cluster.gateway.pb", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed modules, write nothing")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        made = {name: (Path(tmp) / "cluster/gateway/pb" / name).read_text() for name in OUTPUTS}
    stale = [n for n in OUTPUTS if not (HERE / n).exists() or (HERE / n).read_text() != made[n]]
    if args.check:
        for n in stale:
            print(f"{HERE / n}: not what {PROTO} generates with grpcio-tools {_tools_version()}: "
                  f"install the version pyproject.toml pins, or run python -m cluster.gateway.pb "
                  f"and commit the result", file=sys.stderr)
        return 1 if stale else 0
    for n in OUTPUTS:
        (HERE / n).write_text(made[n])
    print(f"wrote {', '.join(OUTPUTS)} from {PROTO}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
