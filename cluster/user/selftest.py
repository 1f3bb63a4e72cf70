"""``zkhive selftest``: are zkhive's circuits Filecoin's? Settled on an operator's machine with
Filecoin's parameter cache ($FIL_PROOFS_PARAMETER_CACHE, default /var/tmp/filecoin-proof-parameters).

For each proof kind (``KINDS``: PoRep C2, WinningPoSt, WindowPoSt, SnapDeals update) whose
circuit this build registers and whose size was asked for, and whose key files are in the cache
(a kind with neither file is skipped and listed, unless named with ``--kind``: then it must be
there): each of its two files' digest as paramfetch computes it against ``parameters.json``
(filecoin-proofs' own, carried as synthesis/filecoin/parameters.json, rust-fil-proofs 87348a7),
then a freshly sealed sector's partition 0 (PoSt: its vanilla proofs as Curio sends them;
SnapDeals: a CC sector updated with new data) proved with the ceremony's ``.params`` and the proof
verified with its ``.vk`` against the public inputs zkhive computes. Filecoin's keys encode
Filecoin's circuit, variable order included (each variable's points are u_i(tau), v_i(tau),
w_i(tau) of *its* column): a proof made by a circuit that differs, even by two exchanged
variables holding different values, does not verify. One table; exit 0 only when at least
one kind was checked and every file of every checked kind is present, its digest is
parameters.json's, and it proved and verified (3: nothing checked, or a named kind's files missing).

Limits, said where they bite: a green row says the circuit agrees with the keys on this
witness. Two exchanged variables that hold the same value in it give the same polynomials and
go unnoticed (``zkhive circuits --digest`` / ``--pce`` compare the matrices themselves).

``--manifest`` (or $ZKHIVE_SELFTEST_MANIFEST) replaces parameters.json: for a stand-in run on
files made by ``zkhive keys setup`` (a development ceremony: its digests are not Filecoin's), and
the output says so on its first line. ``--swap-aux I,J`` is the negative control: every circuit
replaced by a copy whose auxiliary variables I and J are exchanged (the witness likewise).

Kinds are registered here (``register_kind``); a kind whose circuit set is not registered in
this build (``synthesis.circuits.get_circuit`` refuses it) is skipped and named.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field as dc_field
from pathlib import Path
from typing import Any, Callable

from cluster.cli import CommandError

#: filecoin-proofs' parameters.json (rust-fil-proofs 87348a7, the file's 44 entries unchanged)
PARAMETERS_JSON = Path(__file__).resolve().parents[2] / "synthesis" / "filecoin" / "parameters.json"
DEFAULT_CACHE = "/var/tmp/filecoin-proof-parameters"
#: exit statuses: every check green / a check failed (not Filecoin's circuit, or a damaged
#: file) / files missing and nothing failed
OK, FAILED, MISSING = 0, 1, 3


@dataclass(frozen=True)
class Kind:
    """One proof kind the self-test proves. ``instance(circuit, seed)`` seals a sector and
    returns (witness of partition 0, its public inputs); ``stem()`` is parameters.json's name
    without ``.params``/``.vk``."""
    name: str
    params: str
    sector_size: int
    what: str
    stem: Callable[[], str]
    instance: Callable[[Any, int], tuple[Any, list[int]]]


KINDS: dict[str, Kind] = {}


def register_kind(kind: Kind) -> Kind:
    KINDS[kind.name] = kind
    return kind


def _porep_instance(circuit, seed: int):
    from synthesis.filecoin.samples import sample_c1
    doc = sample_c1(circuit.prm, seed)
    c1 = circuit.parse_c1(json.loads(json.dumps(doc)))
    return circuit.synthesize_compact(c1, 0), circuit.public_inputs(c1, 0)


def _porep_stem(size: int) -> Callable[[], str]:
    def stem() -> str:
        from gpu.groth16.bellperson import filecoin_stem
        return filecoin_stem(size)
    return stem


register_kind(Kind("porep-2k", "filecoin-2k", 2048, "PoRep C2 (StackedDrg2KiBV1_1), a sealed 2 KiB sector",
                   _porep_stem(2048), _porep_instance))
register_kind(Kind("porep-8m", "filecoin-8m", 8 << 20, "PoRep C2 (StackedDrg8MiBV1_1), a sealed 8 MiB sector",
                   _porep_stem(8 << 20), _porep_instance))


#: the PoSt challenges' randomness (lotus masks the top bits: a field element) and the miner
POST_RANDOMNESS, POST_MINER = bytes(range(1, 32)) + b"\x1f", 1000


def _post_instance(circuit, seed: int):
    """A freshly sealed 2 KiB sector's WinningPoSt (66 challenges) or WindowPoSt (a one-sector
    partition, padded) as Curio sends it: its bincode vanilla proof, the job document, checked
    (``parse_c1``: the vanilla proof verified), the witness and the public inputs."""
    from synthesis.filecoin import bincode as bc
    from synthesis.filecoin import params as fp
    from synthesis.filecoin import post, post_job as pj
    from synthesis.filecoin import sector as fs

    prm = circuit.prm
    sealed = fs.seal(fp.get("filecoin-2k"), seed.to_bytes(4, "little") * 254, fs.prover_id_from_miner(POST_MINER),
                     seed, bytes([seed & 0xFF]) * 32)
    rp = prm.registered_proofs[-1]
    api = pj.api_version(rp)
    if prm.kind == "winning":
        sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, POST_RANDOMNESS, sealed.sector_id, i, api))
              for i in range(prm.sector_count)]
    else:
        sp = [post.vanilla_proof(sealed, post.sector_challenges(prm, POST_RANDOMNESS, sealed.sector_id, 0, api))]
    doc = pj.document(prm, rp, POST_RANDOMNESS, POST_MINER, [bc.write_post_sector_proof(prm, sp)])
    job = circuit.parse_c1(json.loads(json.dumps(doc)))
    return circuit.synthesize_compact(job, 0), circuit.public_inputs(job, 0)


def _update_instance(circuit, seed: int):
    """A 2 KiB CC sector sealed and updated with new data (``samples.sample_update``), its
    partition proof as Curio sends it, checked, the witness and the public inputs."""
    from synthesis.filecoin import snap_circuit as sc
    from synthesis.filecoin.samples import sample_update

    u = sample_update(f"selftest {seed}".encode())
    job = circuit.parse_c1(json.loads(json.dumps(sc.job_document(circuit.name, u))))
    return circuit.synthesize(job, 0), circuit.public_inputs(job, 0)


def _circuit_stem(params: str) -> Callable[[], str]:
    def stem() -> str:
        from synthesis.circuits import get_circuit
        c = get_circuit(params)
        return getattr(c, "filecoin_file_stem", None) or c.file_stem
    return stem


register_kind(Kind("winning-post-2k", "winning-post-2k", 2048, "WinningPoSt (StackedDrgWinning2KiBV1), a sealed "
                   "2 KiB sector's 66 challenges", _circuit_stem("winning-post-2k"), _post_instance))
register_kind(Kind("window-post-2k", "window-post-2k", 2048, "WindowPoSt (StackedDrgWindow2KiBV1_2), a sealed "
                   "2 KiB sector's partition", _circuit_stem("window-post-2k"), _post_instance))
register_kind(Kind("snap-update-2k", "snap-update-2k", 2048, "SnapDeals update (StackedDrg2KiBV1), a 2 KiB CC "
                   "sector updated with new data", _circuit_stem("snap-update-2k"), _update_instance))


# --- the negative control --------------------------------------------------------------------

class Reordered:
    """A copy of ``circuit`` whose auxiliary variables ``i`` and ``j`` are exchanged: the full
    matrices' columns and the witness alike (so it is still satisfied)."""

    def __init__(self, circuit, i: int | None, j: int | None, z=None):
        import numpy as np

        from gpu.backends.forms import assignment_vector
        from synthesis.r1cs import R1CS, SparseMatrix
        r = circuit.r1cs()
        if i is None:  # auto: aux 0 and the first aux holding another value in this witness
            v = assignment_vector(z, r.num_variables)[1 + r.num_public:]
            i, j = 0, 1 + int(np.flatnonzero((v[1:] != v[0]).any(axis=1))[0])
        if not (0 <= i < r.num_aux and 0 <= j < r.num_aux) or i == j:
            raise CommandError(f"--swap-aux {i},{j}: two different auxiliary variables below {r.num_aux}")
        self.name, self.i, self.j = f"{circuit.name} (aux {i} and {j} exchanged)", i, j
        self.ci, self.cj = 1 + r.num_public + i, 1 + r.num_public + j

        def swap(m):
            idx = m.indices.copy()
            idx[m.indices == self.ci], idx[m.indices == self.cj] = self.cj, self.ci
            # each row sorted by column again (the form every R1CS here holds)
            row_of = np.repeat(np.arange(m.rows), np.diff(m.indptr))
            order = np.lexsort((idx, row_of))
            return SparseMatrix(m.indptr, idx[order], m.coeffs[order])
        self._r1cs = R1CS(r.num_public, r.num_aux, swap(r.a), swap(r.b), swap(r.c))

    def r1cs(self):
        return self._r1cs

    def witness(self, z):
        from gpu.backends.forms import assignment_vector
        v = assignment_vector(z, self._r1cs.num_variables).copy()
        if (v[self.ci] == v[self.cj]).all():
            raise CommandError(f"--swap-aux {self.i},{self.j}: both hold the same value in this witness, so "
                               "the exchange changes no polynomial a proof sees; choose another pair (or auto)")
        v[[self.ci, self.cj]] = v[[self.cj, self.ci]]
        return v


# --- the run ---------------------------------------------------------------------------------

@dataclass
class Row:
    kind: str
    file: str
    present: bool
    digest: str = "-"          # "ok" or why not
    proved: str = "-"
    verified: str = "-"
    seconds: float | None = None
    green: bool = False


@dataclass
class Report:
    cache: Path
    manifest: str
    rows: list[Row] = dc_field(default_factory=list)
    missing: list[tuple[str, str]] = dc_field(default_factory=list)   # (kind, file)
    skipped: list[str] = dc_field(default_factory=list)
    absent: list[str] = dc_field(default_factory=list)    # kinds skipped: neither file in the cache
    swapped: tuple[int, int] | None = None

    @property
    def status(self) -> int:
        if any(r.present and not r.green for r in self.rows):
            return FAILED
        if self.missing or not self.rows:
            return MISSING
        return OK


def _digest(path: Path, manifest: dict) -> tuple[str, bool]:
    from gpu.groth16.bellperson import file_digest
    entry = manifest.get(path.name)
    if not isinstance(entry, dict) or "digest" not in entry:
        return f"NO: {path.name} is not in the manifest", False
    got = file_digest(path)
    if got != entry["digest"]:
        return f"NO: {got}, the manifest says {entry['digest']}", False
    return "ok", True


def check_kind(kind: Kind, cache: Path, manifest: dict, report: Report, *, backend: str = "cpu",
               swap: tuple[int, int] | None = None, seed: int = 1, named: bool = True) -> None:
    """Digest, prove, verify ``kind`` from ``cache``; rows appended to ``report``. A kind not
    ``named`` by the operator whose two files are both absent is skipped (listed, not failed)."""
    from gpu.groth16 import KeyFormatError, bellperson, prove, verify
    from synthesis.circuits import get_circuit
    try:
        circuit = get_circuit(kind.params)
    except KeyError:
        report.skipped.append(f"{kind.name}: circuit {kind.params} is not registered in this build")
        return
    stem = kind.stem()
    params, vk = cache / f"{stem}.params", cache / f"{stem}.vk"
    prow, vrow = Row(kind.name, params.name, params.is_file()), Row(kind.name, vk.name, vk.is_file())
    if not named and not (prow.present or vrow.present):
        report.skipped.append(f"{kind.name}: absent ({_short(params.name)} and .vk are not in {cache}; "
                              f"--kind {kind.name} to require it)")
        report.absent.append(kind.name)
        return
    report.rows += [prow, vrow]
    for row, path in ((prow, params), (vrow, vk)):
        if not row.present:
            row.digest = "MISSING"
            report.missing.append((kind.name, path.name))
    if not (prow.present and vrow.present):
        return
    pd_ok = vd_ok = False
    prow.digest, pd_ok = _digest(params, manifest)
    vrow.digest, vd_ok = _digest(vk, manifest)
    t0 = time.time()
    proof = pub = None
    try:
        z, pub = kind.instance(circuit, seed)
        target = circuit
        if swap is not None:
            reo = Reordered(circuit, *swap, z=z)
            report.swapped = (reo.i, reo.j)
            target, z = reo.r1cs(), reo.witness(z)
        pk = bellperson.read_params(params, target, points="curve")
        proof = prove(pk, target, z, backend)
        prow.proved = f"yes, {len(proof.to_bytes())} B"
    except (KeyFormatError, ValueError, OSError) as e:
        prow.proved = f"NO: {str(e).splitlines()[0]}"
    prow.seconds = time.time() - t0
    prow.green = pd_ok and proof is not None
    t0 = time.time()
    if proof is not None:
        try:
            key = bellperson.read_vk(vk, circuit=target)
            ok = verify(key, pub, proof)
            vrow.verified = "yes" if ok else "NO: the proof does not verify with this .vk"
        except (KeyFormatError, ValueError, OSError) as e:
            ok = False
            vrow.verified = f"NO: {str(e).splitlines()[0]}"
        vrow.green = vd_ok and ok
    else:
        vrow.verified = "not tried: no proof"
    vrow.seconds = time.time() - t0


def selected(sizes: set[int], names: list[str] | None = None) -> list[Kind]:
    if names:
        unknown = [n for n in names if n not in KINDS]
        if unknown:
            raise CommandError(f"--kind {unknown[0]}: not a kind (known: {', '.join(KINDS)})")
        return [KINDS[n] for n in names]
    return [k for k in KINDS.values() if k.sector_size in sizes]


FETCH = ("fetch them into $FIL_PROOFS_PARAMETER_CACHE ({cache}) as operators usually do: "
         "`curio fetch-params {size}` (Curio), `lotus fetch-params {size}` (Lotus), or filecoin-proofs' "
         "paramfetch (`paramfetch --sector-sizes {bytes}`); each checks parameters.json's digests")


def _size_name(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _short(name: str) -> str:
    """v28-stacked-proof-of-replication-…-032d3138d225.params: the kind and the hash's head."""
    stem, dot, ext = name.rpartition(".")
    return name if len(stem) < 48 else f"{stem[:32]}…{stem[-64:-52]}.{ext}"


def render(report: Report, *, stand_in: bool, console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    console = console or Console(highlight=False, width=max(Console().width, 140))
    t = Table(title="zkhive selftest", title_justify="left")
    for col in ("kind", "file", "digest", "proved", "verified", "time"):
        t.add_column(col, overflow="fold")
    for r in report.rows:
        style = "green" if r.green else ("red" if r.present else "yellow")
        t.add_row(r.kind, _short(r.file), r.digest, r.proved, r.verified,
                  "-" if r.seconds is None else f"{r.seconds:.1f} s", style=style)
    console.print(t)
    for line in report.skipped:
        console.print(f"skipped {line}", soft_wrap=True)
    for kind, name in report.missing:
        console.print(f"[yellow]missing[/yellow] {report.cache / name} ({kind})", soft_wrap=True)
    if report.missing or report.absent:
        sizes = sorted({KINDS[k].sector_size for k, _ in report.missing} | {KINDS[k].sector_size for k in report.absent})
        for s in sizes:
            console.print(FETCH.format(cache=report.cache, size=_size_name(s), bytes=s), soft_wrap=True)
    red = [r for r in report.rows if r.present and not r.green]
    if report.status == OK:
        verdict = ("[green]PASS[/green]: every file matches the manifest, proved and verified: zkhive's "
                   "circuits are the ones these keys were made for")
        if stand_in:
            verdict += (" (a STAND-IN run: these are not Filecoin's keys, so this says nothing about "
                        "Filecoin's circuits)")
        else:
            verdict += ": Filecoin's"
    elif report.status == FAILED:
        verdict = "[red]FAIL[/red]: " + "; ".join(
            f"{r.file} ({r.kind}): " + ", ".join(x for x in (r.digest, r.proved, r.verified) if x.startswith("NO"))
            for r in red)
    else:
        verdict = "[yellow]INCOMPLETE[/yellow]: no kind could be checked" if not any(
            r.present for r in report.rows) else "[yellow]INCOMPLETE[/yellow]: files missing"
    console.print(verdict, soft_wrap=True)


def cmd_selftest(args) -> int:
    cache = Path(args.cache or os.environ.get("FIL_PROOFS_PARAMETER_CACHE") or DEFAULT_CACHE)
    manifest_path = args.manifest or os.environ.get("ZKHIVE_SELFTEST_MANIFEST")
    stand_in = manifest_path is not None
    src = Path(manifest_path) if stand_in else PARAMETERS_JSON
    try:
        manifest = json.loads(src.read_text())
    except (OSError, ValueError) as e:
        raise CommandError(f"manifest {src}: {e}") from None
    if not isinstance(manifest, dict):
        raise CommandError(f"manifest {src}: not a JSON object of file names")
    swap = None
    if args.swap_aux == "auto":
        swap = (None, None)
    elif args.swap_aux:
        try:
            i, j = (int(x) for x in args.swap_aux.split(","))
        except ValueError:
            raise CommandError(f"--swap-aux {args.swap_aux!r}: two auxiliary variable numbers, I,J") from None
        swap = (i, j)
    if stand_in:
        print(f"STAND-IN RUN: digests are checked against {src}, NOT Filecoin's parameters.json "
              f"({PARAMETERS_JSON}): a green table says only that these files match that manifest "
              "and zkhive's circuits, nothing about Filecoin's ceremony keys")
    else:
        print(f"digests against Filecoin's parameters.json ({PARAMETERS_JSON}, rust-fil-proofs 87348a7)")
    print(f"parameter cache {cache}; backend {args.backend}")
    sizes = {2048} | ({8 << 20} if args.with_8m else set())
    report = Report(cache, str(src))
    for kind in selected(sizes, args.kind):
        check_kind(kind, cache, manifest, report, backend=args.backend, swap=swap, named=bool(args.kind))
    if report.swapped:
        print(f"NEGATIVE CONTROL: auxiliary variables {report.swapped[0]} and {report.swapped[1]} exchanged "
              "in every circuit (a red table is the expected result)")
    render(report, stand_in=stand_in)
    return report.status


def register(sub) -> None:
    p = sub.add_parser("selftest", help="prove and verify with Filecoin's own parameter files: are "
                                        "zkhive's circuits Filecoin's? (docs/interop.md)")
    p.add_argument("--cache", help=f"the parameter cache (default $FIL_PROOFS_PARAMETER_CACHE, else {DEFAULT_CACHE})")
    p.add_argument("--manifest", help="a parameters.json to check digests against instead of Filecoin's "
                                      "(a stand-in run; $ZKHIVE_SELFTEST_MANIFEST)")
    p.add_argument("--with-8m", action="store_true", help="also seal, prove and verify an 8 MiB sector")
    p.add_argument("--kind", action="append", help=f"only this kind (repeatable; known: {', '.join(KINDS)})")
    p.add_argument("--backend", default="cpu", help="prover backend: cpu, cuda, cuda:N, auto")
    p.add_argument("--swap-aux", metavar="I,J", help="negative control: prove with a copy of each circuit "
                                                     "whose auxiliary variables I and J are exchanged (must fail); "
                                                     "auto: aux 0 and the first one holding another value")
    p.set_defaults(func=cmd_selftest)
