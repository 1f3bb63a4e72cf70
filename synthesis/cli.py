"""``zkhive sector new|c1`` (the sealing side), ``zkhive synth`` (one partition's assignment,
locally) and ``zkhive circuits`` (the parameter sets and their sizes)."""
from __future__ import annotations

import json
import time
from pathlib import Path

# what the filecoin commands share with these (they import it from there too)
from synthesis.command import CommandError, parse_seed  # noqa: F401

#: Largest C1 file a command reads (the porep-lite-16m document is ~140 MB).
MAX_C1_BYTES = 1 << 30


def _local_limits():
    # a local command reads the user's own file: the cluster's bounds except the document size
    from synthesis.limits import Limits
    return Limits(document_bytes=MAX_C1_BYTES)


def _circuit(name: str):
    from synthesis.circuits import get_circuit
    try:
        return get_circuit(name)
    except KeyError as e:
        raise CommandError(e.args[0]) from None


def _family(circuit) -> str:
    return getattr(circuit, "family", "porep-lite")


def cmd_sector_new(args) -> int:
    if args.params.startswith("filecoin-"):  # real data, miner, ticket: options of its own
        from synthesis.filecoin.commands import sector_new
        return sector_new(args)
    from synthesis import family
    circuit = _circuit(args.params)
    generate = family.sealing(_family(circuit)).generate
    out = Path(args.out)
    if (out / "sector.json").exists() and not args.force:
        raise CommandError(f"{out} already holds a sector (pass --force to replace it)")
    t = time.time()
    sector = generate(circuit.prm, parse_seed(args.seed))
    sector.save(out)
    print(f"sector {circuit.name} ({circuit.prm.nodes} nodes, {circuit.prm.layers} layers) in "
          f"{out}: comm_d {sector.comm_d:#066x}, comm_r {sector.comm_r:#066x} "
          f"({time.time() - t:.1f} s)")
    return 0


def cmd_sector_c1(args) -> int:
    from synthesis import family
    from synthesis.family.sector import SectorError, family_of
    if (args.family == "filecoin") if args.schema else \
            bool(args.sector) and family_of(args.sector, family.DEFAULT) == "filecoin":
        from synthesis.filecoin.commands import sector_c1  # serde's bytes, --commit2
        return sector_c1(args)
    if args.commit2:
        raise CommandError("--commit2 is for filecoin sectors (Filecoin's Commit2 input file)")
    if args.schema:
        print(json.dumps(family.schema(args.family).json_schema(), indent=2))
        return 0
    if not args.sector or not args.out:
        raise CommandError("give a sector directory and --out (or --schema)")
    try:
        side = family.sealing(family_of(args.sector, family.DEFAULT))
    except KeyError as e:
        raise CommandError(f"{args.sector}: {e.args[0]}") from None
    try:
        sector = side.Sector.load(args.sector)
    except SectorError as e:
        raise CommandError(str(e)) from None
    seed = parse_seed(args.challenge_seed) if args.challenge_seed else side.interactive_seed(sector)
    doc = side.c1_document(sector, seed)
    Path(args.out).write_text(json.dumps(doc))
    print(f"wrote {args.out}: {sector.prm.partitions} partitions x {sector.prm.challenges} "
          f"challenges of {sector.prm.name}")
    return 0


def load_c1(path: str):
    """(circuit, parsed C1) from a file; a one-line error for every kind of bad input. The one
    C1 loader of the commands (``zkhive synth``, ``prove``, ``verify``)."""
    try:  # the size before reading
        size = Path(path).stat().st_size
        if size > MAX_C1_BYTES:
            raise CommandError(f"{path}: {size} bytes, over the limit of {MAX_C1_BYTES} (the local C1 file limit)")
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file") from None
    except OSError as e:
        raise CommandError(f"{path}: {e.strerror or e}") from None
    return c1_from_bytes(raw, path)


def c1_from_bytes(raw: bytes, where: str = "C1"):
    """(circuit, parsed C1) from a document's bytes: UTF-8, nesting, numbers and sizes bounded
    first (synthesis.limits), then the parameter set's schema; CommandError (one line, ``where``:
    and the field) for anything else."""
    from synthesis import limits
    from synthesis.circuits import C1Error
    try:
        if raw.lstrip()[:1] == b"{" and b'"Phase1Out"' in raw[:256]:
            # Filecoin's Commit2 input file (lotus-bench, Curio): the C1 is base64 inside it
            from synthesis.filecoin.c1 import read_commit2
            raw = read_commit2(raw)[1]
        doc = limits.loads(raw, _local_limits(), setting="the local C1 file limit")
    except (limits.InputError, C1Error) as e:
        raise CommandError(f"{where}: {e}") from None
    if isinstance(doc, dict) and "params" not in doc and "registered_proof" in doc:
        from synthesis.filecoin.c1 import params_of  # a SealCommitPhase1Output names its proof
        try:
            doc = {"params": params_of(doc).name, **doc}
        except C1Error as e:
            raise CommandError(f"{where}: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("params"), str):
        raise CommandError(f"{where}: field params: missing (the parameter set, e.g. porep-lite-2k)")
    try:
        circuit = _circuit(doc["params"])
    except CommandError as e:
        raise CommandError(f"{where}: field params: {e}") from None
    try:
        return circuit, circuit.parse_c1(doc)
    except C1Error as e:
        raise CommandError(f"{where}: {e}") from None


def cmd_synth(args) -> int:
    import numpy as np
    from synthesis.circuits import C1Error
    from synthesis.r1cs import UnsatisfiedConstraint
    circuit, c1 = load_c1(args.c1)
    parts = range(circuit.num_partitions()) if args.partition is None else [args.partition]
    t = time.time()
    r1cs = circuit.r1cs()
    print(f"{circuit.name}: {r1cs.num_constraints} constraints, {r1cs.num_variables} variables, "
          f"{r1cs.nnz} nonzeros (matrices {time.time() - t:.2f} s)")
    for k in parts:
        t = time.time()
        try:
            z = circuit.synthesize(c1, k, check=args.check)
        except (C1Error, UnsatisfiedConstraint) as e:
            raise CommandError(str(e)) from None
        msg = f"partition {k}: {len(z)} values in {time.time() - t:.2f} s"
        if args.check:
            msg += ", satisfies the R1CS"
        if args.out:
            out = Path(args.out.replace("{k}", str(k)))
            np.save(out, z, allow_pickle=False)
            msg += f", wrote {out}"
        print(msg)
    return 0


#: above this many nonzeros ``--digest``/``--pce`` refuse to expand a set's full matrices
#: (32 B a coefficient, 8 a column: filecoin-32g's 722 M would need ~30 GB)
MAX_PCE_NONZEROS = 100_000_000


def _ours_as_pce(name: str, limit: int):
    from synthesis import pce
    c = _circuit(name)
    z = c.size() if hasattr(c, "size") else None
    if z is not None and "nonzeros" in z and z["nonzeros"] > limit:
        raise CommandError(f"{name}: {z['nonzeros']:,} nonzeros, over --max-nonzeros {limit:,}: its full "
                           f"matrices are not expanded here (~{z['nonzeros'] * 40 / 1e9:.0f} GB)")
    return c, pce.from_r1cs(c.r1cs())


def cmd_circuits_pce(args) -> int:
    """``--digest``, ``--write-pce``, ``--pce``: our matrices in cuzk's pre-compiled form
    (synthesis/pce.py); exit 1 when a compared file differs."""
    from synthesis import pce
    names = args.params or ["filecoin-2k"]
    if (args.pce or args.write_pce) and len(names) != 1:
        raise CommandError("--pce and --write-pce take one --params NAME")
    status = 0
    for name in names:
        t = time.time()
        c, ours = _ours_as_pce(name, args.max_nonzeros)
        if args.digest:
            print(f"{name}: digest {pce.digest(ours)} ({ours.num_constraints} rows with the "
                  f"{ours.num_inputs} input rows, {ours.num_inputs} inputs, {ours.num_aux} aux, "
                  f"A/B/C nonzeros {ours.a.nnz}/{ours.b.nnz}/{ours.c.nnz}; {time.time() - t:.1f} s)")
        if args.write_pce:
            pce.write(ours, args.write_pce)
            print(f"{name}: wrote {args.write_pce} ({Path(args.write_pce).stat().st_size} B, cuzk-pce format v2)")
        if args.pce:
            try:
                theirs = pce.read(args.pce)
            except (pce.PCEError, OSError) as e:
                raise CommandError(str(e)) from None
            diff = pce.compare(ours, theirs, describe=getattr(c, "describe_row", None))
            d = pce.digest(theirs)
            if diff is None:
                print(f"{name}: {args.pce} equals ours row by row (digest {d})")
            else:
                print(f"{name}: {args.pce} differs: {diff} (its digest {d})")
                status = 1
    if not args.params and args.digest:
        print("(other sets: --params NAME, repeatable)")
    return status


def cmd_circuits(args) -> int:
    from synthesis.circuits import get_circuit, known
    if any(getattr(args, k, None) for k in ("digest", "pce", "write_pce")):
        return cmd_circuits_pce(args)

    def order(name):  # smallest first (the PoSt sets after the PoRep ones, by sector size)
        prm = getattr(get_circuit(name), "prm", None)
        if prm is not None and not hasattr(prm, "log_nodes"):
            return (1, prm.nodes.bit_length(), prm.sector_count)
        return (0, prm.log_nodes, prm.challenges) if prm else (2, 0, 0)
    for name in sorted(known(), key=order):
        c = get_circuit(name)
        prm = getattr(c, "prm", None)
        line = f"{name}: {c.num_partitions()} partitions"
        if hasattr(c, "describe"):  # a set that says what it is (the PoSt sets: post_job.PostCircuit)
            print(f"{line}, {c.describe()}")
            continue
        if _family(c) == "filecoin":
            z = c.size()  # the census (cached) or the built matrices
            print(f"{line}, {prm.nodes} nodes, {prm.layers} layers, {prm.challenges} challenges/partition"
                  f"{' (benchmark sector)' if prm.benchmark else ''}; {z['constraints'] + z['public_inputs'] + 1} "
                  f"constraints ({z['constraints']} + {z['public_inputs'] + 1} input rows), {z['aux']} aux, "
                  f"{z['public_inputs'] + 1} inputs (ONE included), "
                  f"{z['nonzeros'] + z['public_inputs'] + 1} nonzeros, domain 2^{z['domain'].bit_length() - 1}")
            continue
        if prm is not None:
            line += (f", {prm.nodes} nodes, {prm.layers} layers, {prm.parents} parents, "
                     f"{prm.challenges} challenges/partition")
        compact = hasattr(c, "compact_r1cs")  # built as a header and replicated challenge blocks
        if compact and (args.build or getattr(c, "is_built", lambda: False)()):  # a test circuit may not say
            t = time.time()
            z = c.size()
            line += (f"; {z['constraints']} constraints, {z['variables']} variables, "
                     f"{z['nonzeros']} nonzeros, domain 2^{z['domain'].bit_length() - 1}")
            if args.build:
                line += f" (compact matrices {c.compact_r1cs().nbytes / 1e6:.0f} MB, {time.time() - t:.1f} s)"
        elif compact:
            line += "; sizes: --build (builds and caches the compact matrices)"
        elif args.build:
            r = c.r1cs()
            domain = (r.num_constraints + r.num_public).bit_length()
            line += (f"; {r.num_constraints} constraints, {r.num_variables} variables, {r.nnz} "
                     f"nonzeros, domain 2^{domain}")
        print(line)
    return 0


def register(subparsers) -> None:
    sec = subparsers.add_parser("sector", help="synthetic sectors and their C1 inputs (porep-lite, filecoin)")
    sub = sec.add_subparsers(dest="sector_command", metavar="SUBCOMMAND", required=True)
    p = sub.add_parser("new", help="seal a synthetic sector from a seed")
    p.add_argument("--params", required=True, help="parameter set, e.g. porep-lite-4k or filecoin-test-256b")
    p.add_argument("--seed", required=True, help="0x + 64 hex digits, or any text (hashed)")
    p.add_argument("--out", required=True, help="sector directory")
    p.add_argument("--force", action="store_true", help="replace a sector already there")
    f = p.add_argument_group("filecoin sets")
    f.add_argument("--data", help="filecoin-2k/-8m: the piece bytes to seal (default: bytes from --seed)")
    f.add_argument("--miner", type=int, default=1000, help="miner actor id (prover_id = its ID address payload)")
    f.add_argument("--sector-id", type=int, default=1, help="sector number")
    f.add_argument("--ticket", help="sealing ticket (default: derived from --seed)")
    f.add_argument("--challenge-seed", help="benchmark sectors: the interactive seed they are populated for")
    p.set_defaults(func=cmd_sector_new)
    p = sub.add_parser("c1", help="the C1 input of a proof job (vanilla proofs) as JSON")
    p.add_argument("sector", nargs="?", help="sector directory (zkhive sector new)")
    p.add_argument("--out", help="C1 JSON file to write")
    p.add_argument("--challenge-seed", help="interactive seed (default: derived from the sector's)")
    p.add_argument("--commit2", action="store_true",
                   help="filecoin: write the Commit2 input file ({SectorNum, Phase1Out, SectorSize})")
    p.add_argument("--schema", action="store_true", help="print the C1 JSON schema and exit")
    from synthesis.family import DEFAULT, FAMILIES
    p.add_argument("--family", choices=sorted(FAMILIES), default=DEFAULT,
                   help="with --schema: which family's schema")
    p.set_defaults(func=cmd_sector_c1)

    p = subparsers.add_parser("synth", help="synthesize partitions of a C1 input locally")
    p.add_argument("c1", help="C1 JSON file")
    p.add_argument("--partition", type=int, help="only this partition (default: all)")
    p.add_argument("--check", action="store_true", help="also check z against the R1CS")
    p.add_argument("--out", help="write z as .npy ('{k}' is replaced by the partition)")
    p.set_defaults(func=cmd_synth)

    p = subparsers.add_parser("circuits", help="list the parameter sets")
    p.add_argument("--build", action="store_true", help="build (or load) each set's matrices "
                   "and print constraints, variables, nonzeros")
    p.add_argument("--digest", action="store_true",
                   help="a digest of each set's matrices in cuzk's pre-compiled form, variable order "
                        "included (--params; default filecoin-2k): two installations compare it")
    p.add_argument("--params", action="append", metavar="NAME", help="with --digest/--pce/--write-pce: the set")
    p.add_argument("--pce", metavar="FILE", help="compare the set with cuzk's pre-compiled circuit file "
                   "(cuzk-bench pce-bench --save-pce) row by row; exit 1 naming the first difference")
    p.add_argument("--write-pce", metavar="FILE", help="write the set's matrices in cuzk's PCE format")
    p.add_argument("--max-nonzeros", type=int, default=MAX_PCE_NONZEROS,
                   help="refuse to expand a set's full matrices above this many nonzeros")
    p.set_defaults(func=cmd_circuits)
