"""Sample documents of the filecoin family for benchmarks, tests and demos: a sealed sector's C1
(SealCommitPhase1Output, as the cluster takes it: with ``params``). 2 KiB and 8 MiB sectors are
sealed for real; 512 MiB and up are benchmark sectors (``synthesis.filecoin.sector``)."""
from __future__ import annotations

import hashlib

from . import params as fparams


def sample_c1(prm: fparams.FilecoinParams | str, seed: int = 1) -> dict:
    """The cluster's C1 document of a sector made from ``seed`` (deterministic)."""
    from . import c1 as c1mod
    from . import sector

    prm = fparams.get(prm) if isinstance(prm, str) else prm
    tag = lambda what: hashlib.sha256(f"zkhive filecoin sample {what} {seed}".encode()).digest()  # noqa: E731
    prover_id, ticket, iseed = tag("prover"), tag("ticket"), tag("seed")
    if prm.benchmark:
        sec = sector.seal_benchmark(prm, prover_id, seed, ticket, iseed)
    else:
        data = (tag("data") * (prm.sector_size // 32 + 1))[:prm.sector_size * 127 // 128]
        sec = sector.seal(prm, data, prover_id, seed, ticket)
    doc = c1mod.c1_document(sec, iseed)
    return {"params": prm.name, **doc}


def sample_update(tag: bytes):
    """A 2 KiB CC sector (miner 1000, sector 7) sealed and updated with 2,032 bytes of new data,
    both made from ``tag`` (deterministic): synthesis.filecoin.snap's ``UpdatedSector``."""
    from . import sector
    from . import snap
    from . import update as upd

    sealed = sector.seal(fparams.get("filecoin-2k"), b"", sector.prover_id_from_miner(1000), 7,
                         sector.randomness("ticket", tag))
    return snap.update_sector(upd.get("empty-sector-update-2KiB"), sealed,
                              sector.data_from_seed(tag + b" data", 2032))
