"""``zkhive sector new|c1`` for the filecoin parameter sets (synthesis/cli.py dispatches here).

``sector new --params filecoin-2k|filecoin-8m`` seals real data (``--data FILE``, or bytes drawn
from ``--seed``) as rust-fil-proofs does; ``--params filecoin-512m|-32g|-64g`` makes a benchmark
sector, populated for one interactive seed (``--challenge-seed``, default derived from
``--seed``). ``sector c1 DIR --out FILE`` writes SealCommitPhase1Output as serde_json writes it;
``--commit2`` writes lotus-bench's / Curio's Commit2 input file instead (``{"SectorNum",
"Phase1Out", "SectorSize"}``).
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path


def _bytes32(text: str, what: str) -> bytes:
    """0x + 64 hex digits as is, other text hashed; trimmed to 254 bits as Lotus's randomness."""
    from synthesis.cli import parse_seed
    b = bytearray(parse_seed(text))
    b[31] &= 0x3F
    return bytes(b)


def default_challenge_seed(seed_text: str) -> bytes:
    return _bytes32("filecoin interactive seed\0" + seed_text, "challenge seed")


def sector_new(args) -> int:
    from synthesis.cli import CommandError
    from . import params as P
    from . import sector as S

    try:
        prm = P.get(args.params)
    except ValueError as e:
        raise CommandError(str(e)) from None
    out = Path(args.out)
    if (out / "sector.json").exists() and not args.force:
        raise CommandError(f"{out} already holds a sector (pass --force to replace it)")
    ticket = _bytes32(args.ticket or "ticket\0" + args.seed, "ticket")
    prover = S.prover_id_from_miner(args.miner)
    t = time.time()
    try:
        if prm.benchmark:
            if args.data:
                raise CommandError(f"{prm.name} is a benchmark sector here: it seals no data (drop --data)")
            seed = _bytes32(args.challenge_seed, "") if args.challenge_seed else default_challenge_seed(args.seed)
            sector = S.seal_benchmark(prm, prover, args.sector_id, ticket, seed)
        else:
            if args.data:
                try:
                    data = Path(args.data).read_bytes()[:prm.sector_size]
                except OSError as e:
                    raise CommandError(f"{args.data}: {e.strerror or e}") from None
            else:
                data = _stream(args.seed, prm.sector_size // 128 * 127)
            sector = S.seal(prm, data, prover, args.sector_id, ticket)
    except S.SectorError as e:
        raise CommandError(str(e)) from None
    sector.save(out)
    kind = ("BENCHMARK SECTOR (a committed-capacity sector populated only where seed "
            f"0x{sector.seed.hex()}'s challenges open it; not a replica)") if sector.benchmark else "sealed"
    print(f"sector {prm.name} ({prm.registered_proof}, {prm.nodes} nodes, {prm.layers} layers) in {out}: "
          f"{kind}; comm_d 0x{sector.comm_d.hex()}, comm_r 0x{sector.comm_r.hex()} ({time.time() - t:.1f} s)")
    return 0


def _stream(seed: str, n: int) -> bytes:
    """n pseudo-random bytes from a text seed (SHA-256 in counter mode)."""
    key = hashlib.sha256(b"filecoin sector data\0" + seed.encode()).digest()
    return b"".join(hashlib.sha256(key + i.to_bytes(8, "little")).digest() for i in range(-(-n // 32)))[:n]


def sector_c1(args) -> int:
    from synthesis.cli import CommandError
    from . import c1 as C
    from . import sector as S

    if args.schema:
        import json
        print(json.dumps(C.json_schema(), indent=2))
        return 0
    if not args.sector or not args.out:
        raise CommandError("give a sector directory and --out (or --schema)")
    try:
        sector = S.Sector.load(args.sector)
    except S.SectorError as e:
        raise CommandError(str(e)) from None
    if args.challenge_seed:
        seed = _bytes32(args.challenge_seed, "challenge seed")
    elif sector.benchmark:
        seed = sector.seed
    else:
        seed = default_challenge_seed(sector.replica_id.hex())
    try:
        raw = C.dumps(C.c1_document(sector, seed))
    except ValueError as e:
        raise CommandError(str(e)) from None
    what = "C1 (SealCommitPhase1Output)"
    if args.commit2:
        raw = C.commit2_input(raw, sector.sector_id, sector.prm.sector_size)
        what = "Commit2 input (SectorNum, Phase1Out, SectorSize)"
    Path(args.out).write_bytes(raw)
    bench = " of a BENCHMARK SECTOR" if sector.benchmark else ""
    print(f"wrote {args.out}: {what}{bench}, {sector.prm.partitions} partitions x {sector.prm.challenges} "
          f"challenges of {sector.prm.name} ({sector.prm.registered_proof}), seed 0x{seed.hex()}, "
          f"{len(raw)} bytes")
    return 0
