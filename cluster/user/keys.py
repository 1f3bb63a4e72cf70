"""``zkhive keys``: the key cache, a directory of bellperson parameter files (docs/params.md).
None of these commands needs Redis.

    zkhive keys setup  --params NAME [--force] [--backend B]   a development key, written in bellperson's format
    zkhive keys list                                           every set, its key file and size
    zkhive keys check  [FILE] --params NAME [--points full|curve|none] [--manifest parameters.json]
    zkhive keys import [FILE.params [FILE.vk]] --params NAME [--points P] [--manifest M]

(the files right after the action: argparse takes positionals only before the options)
    zkhive keys export --params NAME --out DIR                 the cached key as .params/.vk (migrates a .pk)
    zkhive keys mirror --params NAME [--points curve|full|none] the .params' compressed mirror in
                                                               param_cache (gpu/groth16/mirror.py)
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from cluster.cli import CommandError


def _cache(args):
    import importlib

    from cluster.ops.current import settings_for
    from cluster.pipeline.keys import KeyCache
    s = settings_for(args)
    for mod in s.worker.circuit_modules:  # circuit families registered by plugins
        importlib.import_module(mod)
    return KeyCache.from_settings(s)   # a mirror leaves the blob store its min_free_bytes


def _circuit(args):
    from synthesis.circuits import get_circuit
    if not args.params:
        raise CommandError(f"keys {args.action} needs --params NAME")
    try:
        return get_circuit(args.params)
    except KeyError as e:
        raise CommandError(e.args[0]) from None


def cmd_keys(args) -> int:
    keys = _cache(args)
    return {"setup": _setup, "list": _list, "check": _check, "import": _import,
            "export": _export, "mirror": _mirror}[args.action](args, keys)


def _mirror(args, keys) -> int:
    """The compressed mirror of the set's .params (the prover writes it itself after a load;
    this one first checks every point on the host: --points, curve by default)."""
    from gpu.groth16.errors import KeyFormatError
    from gpu.groth16.mirror import host_points_check
    circuit = _circuit(args)
    path = keys.find(circuit, "params")
    if path is None or path.suffix != ".params":
        raise CommandError(f"no .params file for {circuit.name} (looked in {keys.places(circuit)})")
    points = args.points or "curve"
    t = time.time()
    try:
        from gpu.groth16 import bellperson
        lay = bellperson.scan(path, params=True, want=bellperson.shape_of(circuit).want_why())
        out = keys.write_mirror(path, lay=lay, points_check=None if points == "none" else
                                host_points_check(points))
    except (KeyFormatError, OSError) as e:
        raise CommandError(str(e).splitlines()[0]) from None
    if out is None:
        raise CommandError(f"another process is writing the mirror of {path} "
                           f"({keys.mirror_path(path)}.lock)")
    held = keys.mirrors.get(path.name, {}).get("sections") or []
    part = ("" if len(held) in (0, len(bellperson.QUERIES)) else
            f", sections {', '.join(held)}: the disk had room for no more, the others stay read "
            "from the .params")
    print(f"{circuit.name}: {out} ({out.stat().st_size} B, from {path} of {path.stat().st_size} B, "
          f"points checked: {points}{part}) in {time.time() - t:.1f} s")
    from cluster.pipeline.keys import mirrors_enabled
    if not mirrors_enabled():
        print("provers read it only with ZKHIVE_PARAMS_MIRROR=1 in their environment (docs/params.md)")
    return 0


def _list(args, keys) -> int:
    from synthesis.circuits import get_circuit, known
    for name in known():
        c = get_circuit(name)
        p = keys.find(c, "params")
        state = f"{p.stat().st_size} B at {p}" if p is not None and keys.has(c) else "no key"
        print(f"{name:<24} partitions={c.num_partitions():<3} {state}")
    return 0


def _setup(args, keys) -> int:
    from .progress import spinner
    circuit = _circuit(args)
    t0 = time.time()
    if keys.has(circuit) and not args.force:
        pk, vk = keys.find(circuit, "params"), keys.find(circuit, "vk")
        print(f"{args.params}: already set up: {pk} ({pk.stat().st_size} B), {vk} (--force makes new ones)")
        return 0
    with spinner(f"keys setup {args.params}: {circuit.r1cs().num_constraints} constraints, "
                 f"backend {args.backend}"):
        try:
            pk, vk = keys.setup(circuit, force=args.force, backend=args.backend)
        except ValueError as e:  # KeyFormatError: a circuit bellperson's format cannot hold
            raise CommandError(f"{args.params}: {e}") from None
    print(f"{args.params}: {pk} ({pk.stat().st_size} B), {vk} in {time.time() - t0:.1f} s")
    return 0


def _check_files(circuit, params: Path | None, vk: Path | None, points: str, manifest) -> list[str]:
    """Check the files; one line a file on success, KeyFormatError (one line) otherwise."""
    from gpu.groth16 import bellperson
    out = []
    if params is not None:
        t0 = time.time()
        lay = bellperson.check_file(params, circuit, points=points)  # every point, a chunk at a time
        counts = " ".join(f"{n}={lay.sections[n].count}" for n in ("ic", "h", "l", "a", "b_g1", "b_g2"))
        line = f"{params}: ok ({lay.size} B, {counts}; points {points}"
        if manifest:
            line += f", digest {bellperson.check_digest(params, manifest)}"
        out.append(line + f"; {time.time() - t0:.1f} s)")
    if vk is not None:
        bellperson.read_vk(vk, circuit=circuit, points="full" if points == "full" else "curve")
        line = f"{vk}: ok ({vk.stat().st_size} B"
        if manifest:
            line += f", digest {bellperson.check_digest(vk, manifest)}"
        out.append(line + ")")
    return out


def _pair(circuit, keys, files: list[str]) -> tuple[Path | None, Path | None]:
    """(.params, .vk) from FILE arguments, or the cache's own files."""
    if not files:
        p, v = keys.find(circuit, "params"), keys.find(circuit, "vk")
        if p is None and v is None:
            raise CommandError(f"{circuit.name}: no key in the cache (`zkhive keys setup` or `import`)")
        if p is not None and p.suffix == ".pk":
            raise CommandError(f"{p}: a zkhive key file, not bellperson's: `zkhive keys export "
                               f"--params {circuit.name} --out DIR` migrates it")
        return p, v
    params = vk = None
    for f in map(Path, files):
        if f.suffix == ".vk":
            vk = f
        elif f.suffix == ".params":
            params = f
        else:
            raise CommandError(f"{f}: expected a .params or .vk file")
    if params is not None and vk is None and params.with_suffix(".vk").exists():
        vk = params.with_suffix(".vk")
    return params, vk


def _check(args, keys) -> int:
    from gpu.groth16 import KeyFormatError
    circuit = _circuit(args)
    params, vk = _pair(circuit, keys, args.files)
    try:
        for line in _check_files(circuit, params, vk, args.points or "full", args.manifest):
            print(line)
    except (KeyFormatError, OSError) as e:
        raise CommandError(str(e)) from None
    return 0


def _import(args, keys) -> int:
    """Check, then copy into the cache under the name the cache reads (v28 names for the
    filecoin sets). Without FILE: a filecoin set's files from ``[srs] filecoin_cache``."""
    from gpu.groth16 import KeyFormatError
    circuit = _circuit(args)
    if args.files:
        params, vk = _pair(circuit, keys, args.files)
    else:
        names = keys.filecoin_names(circuit)
        if not names:
            raise CommandError(f"keys import --params {circuit.name} needs FILE.params [FILE.vk]")
        stem = names[-1]
        params, vk = stem.with_name(stem.name + ".params"), stem.with_name(stem.name + ".vk")
    if params is None or vk is None:
        raise CommandError("keys import needs both the .params and the .vk file")
    try:
        for line in _check_files(circuit, params, vk, args.points or "full", args.manifest):
            print(line)
    except (KeyFormatError, OSError) as e:
        raise CommandError(str(e)) from None
    names = keys.filecoin_names(circuit)
    stem = names[0] if names else keys.path(circuit, "params").with_suffix("")
    keys.root.mkdir(parents=True, exist_ok=True)
    for src, ext in ((params, ".params"), (vk, ".vk")):
        dst = stem.with_name(stem.name + ext)
        if dst.resolve() == src.resolve():
            print(f"{dst}: already in the cache")
            continue
        tmp = dst.with_name(dst.name + ".tmp")
        shutil.copyfile(src, tmp)
        tmp.replace(dst)
        print(f"{circuit.name}: {dst}")
    return 0


def _export(args, keys) -> int:
    """The cached key as bellperson's .params/.vk in ``--out`` (v28 names for the filecoin sets,
    ours otherwise); a zkhive .pk is converted (the migration), a .params copied."""
    from gpu.groth16 import KeyFormatError, ProvingKey, bellperson
    circuit = _circuit(args)
    if not args.out:
        raise CommandError("keys export needs --out DIR")
    src = keys.find(circuit, "params")
    if src is None:
        raise CommandError(f"{circuit.name}: no key in the cache (`zkhive keys setup` first)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = keys.filecoin_names(circuit)
    stem = out / (names[0].name if names else keys.path(circuit, "params").stem)
    pdst, vdst = stem.with_name(stem.name + ".params"), stem.with_name(stem.name + ".vk")
    try:
        if src.suffix == ".pk":
            pk = ProvingKey.load(src)
            bellperson.write_params(pk, circuit, pdst)
            bellperson.write_vk(pk, vdst)
        else:
            shutil.copyfile(src, pdst)
            vk = keys.find(circuit, "vk")
            if vk is not None and bellperson.is_bellperson_vk(vk):
                shutil.copyfile(vk, vdst)
            else:  # the verifying key at the head of the .params
                lay = bellperson.scan(pdst)
                with open(pdst, "rb") as f:
                    vdst.write_bytes(f.read(lay.sections["ic"].end))
    except (KeyFormatError, OSError) as e:
        raise CommandError(str(e)) from None
    print(f"{circuit.name}: {pdst} ({pdst.stat().st_size} B), {vdst}")
    return 0


def register(sub, add_config) -> None:
    p = sub.add_parser("keys", help="proving keys in the key cache ([srs] param_cache): bellperson's "
                                    ".params/.vk (docs/params.md)")
    p.add_argument("action", choices=["setup", "list", "check", "import", "export", "mirror"])
    p.add_argument("files", nargs="*", metavar="FILE", help="check/import: a .params and/or .vk file")
    p.add_argument("--params", help="parameter set name")
    p.add_argument("--force", action="store_true", help="setup: regenerate an existing key")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"],
                   help="setup: where the multiplications run (auto: the GPU when there is one)")
    p.add_argument("--points", default=None, choices=["none", "curve", "full"],
                   help="mirror: curve by default; check/import: every point on the curve and in the prime-order subgroup "
                        "(full, the default), on the curve only (curve: faster, a 2^27 file's "
                        "subgroup test takes hours on the host)")
    p.add_argument("--manifest", help="check/import: parameters.json whose digest the files must match")
    p.add_argument("--out", help="export: the directory to write into")
    add_config(p)
    p.set_defaults(func=cmd_keys)
