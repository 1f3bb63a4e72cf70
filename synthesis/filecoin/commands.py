"""``zkhive sector new|c1`` for the filecoin parameter sets (synthesis/cli.py dispatches here).

``sector new --params filecoin-2k|filecoin-8m`` seals real data (``--data FILE``, or bytes drawn
from ``--seed``) as rust-fil-proofs does; ``--params filecoin-512m|-32g|-64g`` makes a benchmark
sector, populated for one interactive seed (``--challenge-seed``, default derived from
``--seed``). ``sector c1 DIR --out FILE`` writes SealCommitPhase1Output as serde_json writes it;
``--commit2`` writes lotus-bench's / Curio's Commit2 input file instead (``{"SectorNum",
"Phase1Out", "SectorSize"}``).
"""
from __future__ import annotations

import time
from pathlib import Path


def _bytes32(text: str) -> bytes:
    """0x + 64 hex digits as is, other text hashed; trimmed to 254 bits as Lotus's randomness."""
    from synthesis.command import parse_seed
    from .sector import trim
    return trim(parse_seed(text))


def sector_new(args) -> int:
    from synthesis.command import CommandError, parse_seed
    from . import params as P
    from . import sector as S

    try:
        prm = P.get(args.params)
    except ValueError as e:
        raise CommandError(str(e)) from None
    out = Path(args.out)
    if (out / "sector.json").exists() and not args.force:
        raise CommandError(f"{out} already holds a sector (pass --force to replace it)")
    seed = parse_seed(args.seed)
    t = time.time()
    try:
        if args.data and prm.benchmark:
            raise CommandError(f"{prm.name} is a benchmark sector here: it seals no data (drop --data)")
        opts = dict(miner=args.miner, sector_id=args.sector_id,
                    ticket=_bytes32(args.ticket) if args.ticket else None,
                    challenge_seed=_bytes32(args.challenge_seed) if args.challenge_seed else None)
        if args.data:
            try:
                size = Path(args.data).stat().st_size
                if size > prm.sector_size:
                    raise CommandError(f"{args.data}: {size} bytes do not fit a {prm.sector_size}-byte sector")
                data = Path(args.data).read_bytes()
            except OSError as e:
                raise CommandError(f"{args.data}: {e.strerror or e}") from None
            sector = S.seal(prm, data, S.prover_id_from_miner(args.miner), args.sector_id,
                            opts["ticket"] or S.randomness("filecoin ticket", seed))
        else:
            sector = S.generate(prm, seed, **opts)
    except S.SectorError as e:
        raise CommandError(str(e)) from None
    sector.save(out)
    kind = ("BENCHMARK SECTOR (a committed-capacity sector populated only where seed "
            f"0x{sector.seed.hex()}'s challenges open it; not a replica)") if sector.benchmark else "sealed"
    print(f"sector {prm.name} ({prm.registered_proof}, {prm.nodes} nodes, {prm.layers} layers) in {out}: "
          f"{kind}; comm_d 0x{sector.comm_d.hex()}, comm_r 0x{sector.comm_r.hex()} ({time.time() - t:.1f} s)")
    return 0


def sector_c1(args) -> int:
    from synthesis.command import CommandError
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
    seed = _bytes32(args.challenge_seed) if args.challenge_seed else S.interactive_seed(sector)
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


def job_document(path, bounds) -> dict | None:
    """A Filecoin C1 or Commit2 input file as a job's C1 input (``{"params": set, **C1}``), or
    None when the file is neither (the caller reads it as any other C1). ``bounds``: the
    synthesis.limits.Limits the C1 must keep (the Commit2 file may be 4/3 of it: base64)."""
    from synthesis import limits
    from . import c1 as C

    p = Path(path)
    with p.open("rb") as f:
        head = f.read(256)
    commit2 = head.lstrip()[:1] == b"{" and b'"Phase1Out"' in head
    if not commit2 and b'"registered_proof"' not in head:
        return None
    size = p.stat().st_size
    cap = bounds.document_bytes * 4 // 3 + 256 if commit2 else bounds.document_bytes
    if size > cap:
        raise limits.InputError(f"{size} bytes, over the limit of {cap} (limits.c1_max_bytes"
                                f"{', as base64' if commit2 else ''})")
    raw = p.read_bytes()
    if commit2:
        raw = C.read_commit2(raw)[1]
    doc = limits.loads(raw, bounds)
    if not isinstance(doc, dict):
        return None
    if not commit2 and isinstance(doc.get("params"), str):
        return doc  # a zkhive job document naming its set (a PoSt job: post_job.document)
    return {"params": C.params_of(doc).name, **doc}
