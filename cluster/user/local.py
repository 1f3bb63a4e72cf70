"""Local proving without a cluster: ``zkhive prove`` and ``zkhive verify`` on one machine.

The same steps a job's partitions go through (synthesis, prove, verify), in this process, in
partition order; keys come from the same key cache (``[srs] param_cache``) the cluster uses.

    zkhive prove c1.json --out proof.bin        # N x 192 bytes, partition order
    zkhive verify c1.json proof.bin             # exit 0 when every partition verifies
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from cluster.cli import CommandError, cli_name
from synthesis.cli import load_c1


def _keys(args):
    from cluster.pipeline.keys import KeyCache
    from cluster.settings import SettingsError, load

    if args.keys:
        return KeyCache(args.keys)
    try:
        s = load(args.config)
        return KeyCache.from_settings(s)
    except SettingsError as e:
        raise CommandError(str(e)) from None


def _partitions(c1, circuit) -> int:
    n = getattr(c1, "num_partitions", None)
    return n() if callable(n) else (n or circuit.num_partitions())


def cmd_prove(args) -> int:
    from cluster.pipeline.keys import KeyMissing
    from gpu.groth16.errors import KeyFormatError

    circuit, c1 = load_c1(args.c1)
    cache = _keys(args)
    if not cache.has(circuit):
        if not args.setup:
            raise CommandError(f"no keys for {circuit.name} in {cache.root}: run `{cli_name()} keys setup "
                               f"--params {circuit.name}` or pass --setup")
        t = time.time()
        cache.setup(circuit)
        print(f"keys for {circuit.name}: made in {time.time() - t:.1f} s under {cache.root}")
    try:
        proofs = prove_c1(circuit, c1, cache, args.backend)
    except (KeyMissing, KeyFormatError) as e:  # a corrupt key: one line naming the file
        raise CommandError(str(e)) from None
    out = Path(args.out)
    out.write_bytes(b"".join(proofs))
    print(f"wrote {out} ({len(proofs)} partitions x 192 bytes)")
    return 0


def prove_c1(circuit, c1, cache, backend: str = "auto", out=print) -> list[bytes]:
    """Every partition of a parsed C1 input, synthesized, proved and verified in this process, in
    partition order (``zkhive prove``; ``zkhive c2`` without a cluster). KeyMissing without keys."""
    from gpu import prove, verify
    from gpu.timing import StageTimer
    from synthesis.circuits import C1Error

    pk, vk = cache.load_pk(circuit), cache.load_vk(circuit)
    r1cs = circuit.r1cs()
    proofs = []
    for k in range(_partitions(c1, circuit)):
        timer = StageTimer(partition=k)
        t0 = time.time()
        try:
            with timer.stage("synthesis"):
                z = circuit.synthesize(c1, k)
        except C1Error as e:
            raise CommandError(str(e)) from None
        proof = prove(pk, r1cs, z, backend=backend, timer=timer)
        ok = verify(vk, circuit.public_inputs(c1, k), proof)
        if not ok:  # a bad key (its .params not the .vk's, a point off the subgroup) or a prover bug
            raise CommandError(f"partition {k}: the proof does not verify with the key "
                               f"{cache.find(circuit, 'params')} and {cache.find(circuit, 'vk')}: "
                               f"`zkhive keys check --params {circuit.name}` checks it; if it passes, "
                               "a prover bug: report it")
        stages = ", ".join(f"{n} {s:.2f}s" for n, s in timer.totals().items())
        out(f"partition {k}: proved and verified in {time.time() - t0:.2f} s ({stages})")
        proofs.append(proof.to_bytes())
    return proofs


def cmd_verify(args) -> int:
    from cluster.pipeline.keys import KeyMissing
    from gpu import verify
    from gpu.groth16 import ProofFormatError, split_proofs

    circuit, c1 = load_c1(args.c1)
    cache = _keys(args)
    try:
        vk = cache.load_vk(circuit)
    except KeyMissing as e:
        if cache.path(circuit, "vk").is_dir():
            raise CommandError(str(e)) from None
        # not `keys setup`: a new setup makes another key under the same name, and no proof made
        # with the cluster's key would verify against it
        raise CommandError(f"no verifying key for parameter set {circuit.name!r} in {cache.root}: "
                           f"pass --keys with the key cache the proofs were made with (the cluster's "
                           f"[srs] param_cache)") from None
    try:
        proofs = split_proofs(Path(args.proof).read_bytes())
    except (FileNotFoundError, ProofFormatError) as e:
        raise CommandError(f"{args.proof}: {e}") from None
    want = _partitions(c1, circuit)
    if len(proofs) != want:
        raise CommandError(f"{args.proof}: holds {len(proofs)} partition proofs, the C1 input has {want}")
    bad = [k for k, p in enumerate(proofs) if not verify(vk, circuit.public_inputs(c1, k), p)]
    for k in range(want):
        print(f"partition {k}: {'INVALID' if k in bad else 'valid'}")
    if bad:
        print(invalid_hint(cache, circuit, len(bad), want), file=sys.stderr)
    return 1 if bad else 0


def invalid_hint(cache, circuit, bad: int, want: int) -> str:
    """Why proofs may not verify that are not wrong: a development key of another checkout
    (``keys setup`` draws a new trapdoor each time) verified "INVALID" with no hint (issue 39)."""
    import hashlib

    vk = cache.find(circuit, "vk")
    kid = hashlib.sha256(vk.read_bytes()).hexdigest()[:16] if vk is not None else "?"
    return (f"{cli_name()} verify: {bad} of {want} partition proofs do not verify against the "
            f"verifying key {vk} (key id {kid}, the sha256 of the file). A proof made with another key "
            f"for {circuit.name} never does: a development key of another checkout or key cache "
            f"(each `keys setup` makes a new one) is another key. Pass --keys with the key cache "
            f"the proofs were made with (the cluster's [srs] param_cache)")


def register(sub) -> None:
    p = sub.add_parser("prove", help="prove a C1 input locally (no cluster): N x 192 bytes")
    p.add_argument("c1", help="C1 input JSON (zkhive sector c1)")
    p.add_argument("--out", required=True, help="where to write the proof")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--setup", action="store_true", help="make the keys first if the cache has none")
    p.add_argument("--keys", help="key cache directory (default: [srs] param_cache)")
    p.add_argument("--config", help="settings TOML (default: $ZKHIVE_CONFIG)")
    p.set_defaults(func=cmd_prove)
    v = sub.add_parser("verify", help="verify a multi-partition proof against its C1 input")
    v.add_argument("c1")
    v.add_argument("proof")
    v.add_argument("--keys", help="key cache directory (default: [srs] param_cache)")
    v.add_argument("--config", help="settings TOML (default: $ZKHIVE_CONFIG)")
    v.set_defaults(func=cmd_verify)
