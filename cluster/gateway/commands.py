"""``zkhive gateway`` (cuzk's ProvingEngine gRPC service in front of the cluster) and ``zkhive
c2`` (a drop-in for ``lotus-bench prove``).

    zkhive gateway [--socket PATH | --address A --port P]   # `zkhive up` starts it; [gateway] settings
    zkhive c2 COMMIT2_INPUT.json [-o proof]        # through the cluster when one is up, else here

``zkhive c2`` prints what ``lotus-bench prove`` prints (the proof as hex after ``proof:``, the
``results (v28)`` line and the commit phase 2 time with its rate) and, with ``-o``, writes the
proof's bytes (N x 192, partition order) to a file.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from cluster.cli import CommandError, cli_name
from cluster.ops.current import settings_for

# -- gateway ---------------------------------------------------------------------------------------

def cmd_gateway(args) -> int:
    from cluster.user.commands import _rt

    from .server import GatewayError, serve

    rt = _rt(args)
    s = rt.settings
    over = {k: v for k, v in (("address", args.address), ("port", args.port)) if v is not None}
    if args.socket is not None:
        over.update(address="unix", socket=Path(args.socket))
    if over:
        s = s.model_copy(update={"gateway": s.gateway.model_copy(update=over)})
    try:
        return serve(s, rt)
    except GatewayError as e:
        raise CommandError(str(e)) from None


# -- c2 ------------------------------------------------------------------------------------------------

def miner_id(addr: str) -> int:
    """The actor id of an ID address (``t01000``, ``f01000``), as lotus-bench's --miner-addr."""
    if len(addr) > 2 and addr[0] in "tf" and addr[1] == "0" and addr[2:].isdigit():
        return int(addr[2:])
    raise CommandError(f"--miner-addr {addr!r}: an ID address (t0<number> or f0<number>)")


def go_duration(seconds: float) -> str:
    """A duration as Go's time.Duration prints it (``1m2.5s``, ``812.4ms``), lotus-bench's format."""
    ns = int(round(seconds * 1e9))
    if ns < 1000:
        return f"{ns}ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:g}µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:g}ms"
    h, rest = divmod(ns, 3_600_000_000_000)
    m, rest = divmod(rest, 60_000_000_000)
    secs = f"{rest / 1e9:.9f}".rstrip("0").rstrip(".") + "s"
    return (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + secs


def size_rate(sector_size: int, seconds: float) -> str:
    """Bytes a second as lotus's types.SizeStr prints them (``%.4g`` and binary units)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB")
    rate = sector_size / seconds if seconds > 0 else 0.0
    i = 0
    while rate >= 1024 and i + 1 < len(units):
        rate, i = rate / 1024, i + 1
    return f"{rate:.4g} {units[i]}/s"


def _cluster_up(args):
    """The runtime of a cluster with a ready prover, or None (then ``c2`` proves here)."""
    import redis

    from cluster.pipeline import registry
    from cluster.user.commands import _rt

    try:
        rt = _rt(args)
        if registry.workers(rt.redis, role="prove", ready_only=True):
            return rt
    except (CommandError, redis.exceptions.RedisError):
        pass
    return None


def cmd_c2(args) -> int:
    from synthesis import limits as lim

    from . import c2input

    s = settings_for(args)
    path = Path(args.input)
    try:
        size = path.stat().st_size
        cap = (s.limits.c1_max_bytes + 2) // 3 * 4 + 4096
        if size > cap:
            raise CommandError(f"{path}: {size} bytes, over the limit of {cap} (limits.c1_max_bytes, base64)")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file") from None
    except OSError as e:
        raise CommandError(f"{path}: {e.strerror or e}") from None
    try:
        c2 = c2input.decode(raw, s.limits.limits(), miner_id=miner_id(args.miner_addr), where=str(path))
    except c2input.C2InputError as e:
        raise CommandError(str(e)) from None
    rt = None if args.local else _cluster_up(args)
    if args.cluster and rt is None:
        raise CommandError("--cluster: no cluster with a ready prover answers at the configured Redis "
                           f"({s.redis.url}): `{cli_name()} up` first, or drop --cluster to prove here")
    print("----\nstart proof computation", flush=True)
    t0 = time.monotonic()
    proof = _through_cluster(rt, c2.doc, args.timeout) if rt is not None else _here(c2.doc, s, args)
    took = time.monotonic() - t0
    print(f"proof: {proof.hex()}")
    sector_size = c2.sector_size or 0
    print(f"----\nresults (v28) ({sector_size})")
    print(f"seal: commit phase 2: {go_duration(took)} ({size_rate(sector_size, took)})")
    if args.out:
        Path(args.out).write_bytes(proof)
        print(f"wrote {args.out}: {len(proof)} bytes ({len(proof) // 192} partitions x 192)", file=sys.stderr)
    return 0


def _through_cluster(rt, doc: dict, timeout: float | None) -> bytes:
    from cluster.client import Job, JobFailed, JobTimeout
    from cluster.errors import JobError
    from cluster.pipeline.workflow import submit_job

    try:
        rec, created = submit_job(rt, doc)
    except JobError as e:
        raise CommandError(str(e).splitlines()[0]) from None
    print(f"zkhive c2: job {rec.job_id} ({rec.params}, {rec.num_partitions} partitions) "
          f"{'submitted to' if created else 'already in'} the cluster at {rt.settings.redis.url}", file=sys.stderr)
    try:
        return Job(rec.job_id, rt).result(timeout=timeout).proof
    except (JobFailed, JobTimeout) as e:
        raise CommandError(str(e)) from None


def _here(doc: dict, s, args) -> bytes:
    from cluster.pipeline.keys import KeyCache, KeyMissing
    from cluster.user.local import prove_c1
    from gpu.groth16.errors import KeyFormatError
    from synthesis.cli import CommandError as InputCommandError
    from synthesis.cli import c1_from_bytes

    try:
        circuit, c1 = c1_from_bytes(json.dumps(doc).encode(), args.input)
    except InputCommandError as e:
        raise CommandError(str(e)) from None
    cache = KeyCache.from_settings(s, args.keys)  # and Filecoin's cache: `c2 --local` ignored it
    print(f"zkhive c2: no cluster: proving {circuit.name} in this process (keys {cache.root})", file=sys.stderr)
    try:
        proofs = prove_c1(circuit, c1, cache, args.backend, out=lambda m: print(m, file=sys.stderr))
    except (KeyMissing, KeyFormatError) as e:  # a damaged key file: one line naming it
        raise CommandError(str(e)) from None
    return b"".join(proofs)


# -- registration ---------------------------------------------------------------------------------------

def register(sub) -> None:
    p = sub.add_parser("gateway", help="serve cuzk's ProvingEngine gRPC service (Curio's external prover) "
                                       "in front of the cluster")
    p.add_argument("--config", metavar="FILE", help="settings TOML (default: $ZKHIVE_CONFIG)")
    p.add_argument("--address", help="TCP interface to listen on instead of the unix socket (e.g. 127.0.0.1; "
                                     "default [gateway] address: unix)")
    p.add_argument("--port", type=int, help="TCP port (default [gateway] port: 9820)")
    p.add_argument("--socket", metavar="PATH", help="unix socket to listen on (default [gateway] socket: "
                                                    "<run dir>/gateway.sock)")
    p.set_defaults(func=cmd_gateway)

    p = sub.add_parser("c2", help="prove a Commit2 input file (lotus-bench prove's input and output)")
    p.add_argument("input", metavar="COMMIT2_INPUT.json",
                   help="lotus-bench --save-commit2-input's file (SectorNum, Phase1Out, SectorSize), "
                        "or a zkhive C1 document")
    p.add_argument("-o", "--out", metavar="FILE", help="also write the proof's bytes here")
    p.add_argument("--miner-addr", default="t01000", help="the miner's ID address (default t01000, as lotus-bench)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--cluster", action="store_true", help="only through the cluster (fail without one)")
    where.add_argument("--local", action="store_true", help="prove in this process even when a cluster is up")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="give up on the cluster's job after S seconds")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help="local proving backend")
    p.add_argument("--keys", help="local key cache directory (default: [srs] param_cache)")
    p.add_argument("--config", metavar="FILE", help="settings TOML (default: $ZKHIVE_CONFIG)")
    p.set_defaults(func=cmd_c2)
