"""``zkhive export snarkjs``: a proof and its verifying key as snarkjs JSON files.

    zkhive export snarkjs --key vk.key --result result.json [--partition 3] --out DIR
    zkhive export snarkjs --key vk.key --proof proof.bin --inputs 0x1f,42 --out DIR
    snarkjs groth16 verify DIR/verification_key.json DIR/public.json DIR/proof.json

``--result`` takes the JSON that ``zkhive result JOB`` prints (proof hex, public inputs per
partition); ``--proof`` raw proof bytes (N x 192 for N partitions) with the inputs from
``--inputs`` (comma-separated, decimal or 0x-hex) or ``--public`` (a JSON list, as public.json).
``--key`` is a verifying key file or a proving key file (its verifying key is used).
Hooked into the ``zkhive`` command by cluster.cli through ``register(subparsers)``; errors are
this module's own ``CommandError``.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import snarkjs


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="write a proof in another prover's format")
    sub = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    s = sub.add_parser("snarkjs", help="verification_key.json, proof.json, public.json for "
                                       "`snarkjs groth16 verify` (curve bls12381)")
    s.add_argument("--key", required=True, help="verifying (or proving) key file")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--result", help="the JSON printed by `zkhive result JOB`")
    src.add_argument("--proof", help="proof bytes (192 per partition)")
    inputs = s.add_mutually_exclusive_group()
    inputs.add_argument("--inputs", help="with --proof: public inputs, comma-separated")
    inputs.add_argument("--public", help="with --proof: a JSON list of the public inputs")
    s.add_argument("--partition", type=int, default=None,
                   help="which partition's proof (needed when there are several)")
    s.add_argument("--out", default=".", help="output folder (default: the current one)")
    s.set_defaults(func=cmd_export_snarkjs)


class CommandError(Exception):
    """A user-facing failure of an export; the ``zkhive`` command prints it as one line
    (cluster.cli.main), exit status 2."""


def _int(text, what: str) -> int:
    try:
        if isinstance(text, int) and not isinstance(text, bool):
            return text
        text = str(text).strip()
        return int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        raise CommandError(f"{what}: {text!r} is not a decimal or 0x-hex integer") from None


def _read(path: str, what: str, binary: bool = False):
    try:
        return Path(path).read_bytes() if binary else Path(path).read_text()
    except OSError as e:
        raise CommandError(f"{what} {path}: {e.strerror or e}") from None


def _load_vk(path: str):
    from gpu.groth16 import Groth16Error, ProvingKey, VerifyingKey, read_header
    from gpu.groth16.keys import KIND_PK

    from gpu.groth16 import bellperson
    try:
        if path.endswith((".vk", ".params")) and bellperson.is_bellperson_vk(path):
            return bellperson.read_vk(path)  # bellperson's format (docs/params.md)
        if read_header(path)["kind"] == KIND_PK:
            return ProvingKey.load(path).vk
        return VerifyingKey.load(path)
    except OSError as e:
        raise CommandError(f"key {path}: {e.strerror or e}") from None
    except Groth16Error as e:
        raise CommandError(str(e)) from None


def _from_result(path: str) -> tuple[bytes, list[list[int]]]:
    text = _read(path, "result")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise CommandError(f"{path}: not JSON (line {e.lineno} column {e.colno}: {e.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("proof"), str) \
            or not isinstance(doc.get("public_inputs"), list):
        raise CommandError(f"{path}: expected the JSON of `zkhive result` with fields 'proof' (hex) "
                     "and 'public_inputs' (a list per partition)")
    try:
        proof = bytes.fromhex(doc["proof"])
    except ValueError:
        raise CommandError(f"{path}: field 'proof' is not hex") from None
    public = []
    for i, part in enumerate(doc["public_inputs"]):
        if not isinstance(part, list):
            raise CommandError(f"{path}: public_inputs[{i}] is not a list")
        public.append([_int(x, f"public_inputs[{i}][{j}]") for j, x in enumerate(part)])
    return proof, public


def cmd_export_snarkjs(args) -> int:
    from gpu.groth16 import PROOF_BYTES, ProofFormatError, split_proofs

    if args.result:
        if args.inputs or args.public:
            raise CommandError("--result carries the public inputs: drop --inputs/--public")
        raw, public_by_partition = _from_result(args.result)
    else:
        raw = _read(args.proof, "proof", binary=True)
        if args.inputs is not None:
            inputs = [_int(x, f"--inputs item {i}") for i, x in
                      enumerate(t for t in args.inputs.split(",") if t.strip())]
        elif args.public is not None:
            try:
                inputs = snarkjs.public_from_json(json.loads(_read(args.public, "public inputs")))
            except (json.JSONDecodeError, snarkjs.SnarkjsFormatError) as e:
                raise CommandError(f"{args.public}: {e}") from None
        else:
            raise CommandError("--proof needs the public inputs: --inputs or --public")
        public_by_partition = None
    try:
        proofs = split_proofs(raw)
    except ProofFormatError as e:
        raise CommandError(str(e)) from None
    if not proofs:
        raise CommandError(f"no proof: expected {PROOF_BYTES} bytes per partition, got 0")
    part = args.partition
    if part is None:
        if len(proofs) > 1:
            raise CommandError(f"the proof has {len(proofs)} partitions: choose one with --partition")
        part = 0
    if not 0 <= part < len(proofs):
        raise CommandError(f"--partition {part} is outside 0..{len(proofs) - 1}")
    if public_by_partition is not None:
        if len(public_by_partition) != len(proofs):
            raise CommandError(f"{args.result}: {len(proofs)} proofs but public inputs for "
                         f"{len(public_by_partition)} partitions")
        inputs = public_by_partition[part]

    vk = _load_vk(args.key)
    try:
        paths = snarkjs.export(vk, proofs[part], inputs, args.out)
    except snarkjs.SnarkjsFormatError as e:
        raise CommandError(str(e)) from None
    except OSError as e:
        raise CommandError(f"--out {args.out}: {e.strerror or e}") from None
    out = Path(args.out)
    print(f"wrote {', '.join(str(p) for p in paths.values())}\n"
          f"check: snarkjs groth16 verify {out / 'verification_key.json'} "
          f"{out / 'public.json'} {out / 'proof.json'}")
    return 0
