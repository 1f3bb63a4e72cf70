"""``zkhive c2``'s siblings: a WinningPoSt, a WindowPoSt partition and a SnapDeals update proved
by the running cluster from the files lotus-bench writes, or from the fields Curio sends.

    zkhive winning-post INPUTS.txt [-o proof]               # `lotus-bench simple winning-post --show-inputs`
    zkhive winning-post --vanilla VP.bin --sector-size 2KiB [--randomness HEX] [--miner-addr t01000]
    zkhive window-post --vanilla VP0.bin [--vanilla VP1.bin ...] --sector-size 2KiB [--partition N]
    zkhive prove-update SECTOR_KEY_CID NEW_SEALED_CID NEW_UNSEALED_CID VPROOFS.json --sector-size 2KiB
    zkhive window-post|winning-post|prove-update --request REQUEST.json  # cuzk's SubmitProofRequest, proto3 JSON

What lotus-bench writes (filecoin-project/lotus ``cmd/lotus-bench/simple.go``):

- SnapDeals: ``simple provereplicaupdate1 ... [vproofs.json]`` writes Go's JSON of
  ``storiface.ReplicaVanillaProofs`` (``[][]byte``): a JSON array of standard base64 strings, one
  bincode ``PartitionProof`` a partition, what Curio's ``ProveUpdateCuzk`` sends as
  ``vanilla_proofs``. ``simple provereplicaupdate2 [sectorKey] [newSealed] [newUnsealed]
  [vproofs.json]`` proves it with the three commitments given as CIDs (``bagboea4b5abc…`` sealed:
  codec 0xf102, multihash 0xb401; ``baga6ea4seaq…`` unsealed: 0xf101, 0x1012); ``prove-update``
  takes the same four arguments and ``--sector-size``.
- WinningPoSt: ``simple winning-post --show-inputs`` prints the inputs of
  ``GenerateWinningPoStWithVanilla`` (``wpt: %d``, ``mid: %d``, ``rand: %x``, ``vp: %x``:
  the registered proof, the miner id, the randomness and the bincode ``FallbackPoStSectorProof``):
  that output saved to a file is ``winning-post``'s input (its other lines are ignored).
- WindowPoSt: lotus-bench writes no file (``simple window-post`` makes its vanilla proof and
  proves it in one process, printing only the proof). ``window-post`` takes what Curio sends
  (``WindowPoStCuzk``): each sector's bincode ``FallbackPoStSectorProof`` as a file of its raw
  bytes (what ``ffi.GenerateSingleVanillaProof`` returns), ``--randomness`` (default 32 zero
  bytes, lotus-bench's), ``--partition``, ``--miner-addr``, and the registered proof from
  ``--sector-size`` (Go's ``StackedDrgWindow*V1_1``, numbers 10-14, as lotus-bench and Curio use)
  or ``--registered-proof``.

Every file is bounded before it is read (its size against the kind's largest honest input), and
a bad one is one line naming the file, the field and the byte offset. The request made from them
is the one Curio sends and is checked by the gateway's own code (``postinput.job_document``,
``snap.job_document``: every vanilla proof verified) before anything reaches the cluster. The
proof goes through the cluster (``submit_job`` at the kind's default priority, cuzk's:
CRITICAL, HIGH, NORMAL); the command prints lotus-bench's lines (the time, then the proof as
base64, as ``simple window-post`` / ``winning-post`` print it, ``p: <base64>`` for an update) and,
with ``-o``, writes the proof bytes as cuzk returns them (192 bytes; N x 192 for an update).
"""
from __future__ import annotations

import base64
import binascii
import json
import re
import sys
import time
from pathlib import Path

from cluster.cli import CommandError, cli_name
from cluster.ops.current import settings_for

from .pb import proving_pb2 as pb

#: go-units RAMInBytes' suffixes (lotus-bench's --sector-size): K, KB and KiB are all 1024
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)(?:i?b)?\s*$", re.I)
_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}
#: CIDs of Filecoin's commitments (go-fil-commcid): (codec, multihash) of each kind
SEALED = (0xF102, 0xB401)       # fil-commitment-sealed, poseidon-bls12_381-a2-fc1
UNSEALED = (0xF101, 0x1012)     # fil-commitment-unsealed, sha2-256-trunc254-padded
#: Go's window proof of a sector size (abi ``RegisteredWindowPoStProof``: the V1_1 numbers)
WINDOW_OF_SIZE = {2 << 10: 10, 8 << 20: 11, 512 << 20: 12, 32 << 30: 13, 64 << 30: 14}
WINNING_OF_SIZE = {2 << 10: 0, 8 << 20: 1, 512 << 20: 2, 32 << 30: 3, 64 << 30: 4}
UPDATE_OF_SIZE = {2 << 10: 0, 8 << 20: 1, 512 << 20: 2, 32 << 30: 3, 64 << 30: 4}


class InputFileError(CommandError):
    """A file or argument refused: one line naming it, the field and the byte offset."""


# --- small readers -----------------------------------------------------------------------------

def sector_size(text: str) -> int:
    """lotus-bench's ``--sector-size`` (go-units RAMInBytes: ``2K``, ``2KiB``, ``32GiB``, bytes)."""
    m = _SIZE.match(text or "")
    if not m:
        raise InputFileError(f"--sector-size {text!r}: a size such as 2KiB, 8MiB, 512MiB, 32GiB, 64GiB")
    return int(m.group(1)) << _SHIFT[m.group(2).lower()]


def _varint(raw: bytes, at: int, what: str) -> tuple[int, int]:
    x = shift = 0
    for i in range(at, min(len(raw), at + 9)):
        x |= (raw[i] & 0x7F) << shift
        shift += 7
        if raw[i] < 0x80:
            return x, i + 1
    raise InputFileError(f"{what}: byte {at}: an unterminated varint")


def commitment(cid: str, kind: tuple[int, int], what: str) -> bytes:
    """The 32 raw bytes of a Filecoin commitment CID (CIDv1, base32 ``b…``), as Curio's
    ``CIDToReplicaCommitmentV1`` / ``CIDToDataCommitmentV1`` give them; errors name the argument
    and the byte offset within the CID's bytes."""
    if not cid or len(cid) > 100 or cid[0] != "b" or not re.fullmatch(r"b[a-z2-7]+", cid):
        raise InputFileError(f"{what} {cid[:80]!r}: not a CIDv1 in base32 (bagboea4b5abc… or baga6ea4seaq…)")
    body = cid[1:].upper()
    try:
        raw = base64.b32decode(body + "=" * (-len(body) % 8))
    except binascii.Error as e:
        raise InputFileError(f"{what}: not base32 ({e})") from None
    version, at = _varint(raw, 0, what)
    if version != 1:
        raise InputFileError(f"{what}: byte 0: CID version {version}, 1 expected")
    codec, at2 = _varint(raw, at, what)
    names = {SEALED: "a sealed (comm_r)", UNSEALED: "an unsealed (comm_d)"}
    if codec != kind[0]:
        raise InputFileError(f"{what}: byte {at}: codec 0x{codec:x}, {names[kind]} commitment's is 0x{kind[0]:x}")
    mh, at3 = _varint(raw, at2, what)
    if mh != kind[1]:
        raise InputFileError(f"{what}: byte {at2}: multihash 0x{mh:x}, {names[kind]} commitment's is 0x{kind[1]:x}")
    n, at4 = _varint(raw, at3, what)
    if n != 32 or len(raw) - at4 != 32:
        raise InputFileError(f"{what}: byte {at3}: a digest of {n} bytes ({len(raw) - at4} present), 32 expected")
    return raw[at4:]


def cid_of(comm: bytes, kind: tuple[int, int]) -> str:
    """The CID lotus prints for a 32-byte commitment (``commitment``'s inverse)."""
    def varint(x: int) -> bytes:
        out = bytearray()
        while True:
            out.append((x & 0x7F) | (0x80 if x > 0x7F else 0))
            x >>= 7
            if not x:
                return bytes(out)
    raw = varint(1) + varint(kind[0]) + varint(kind[1]) + varint(len(comm)) + comm
    return "b" + base64.b32encode(raw).decode().lower().rstrip("=")


def read_bounded(path: Path, most: int, what: str) -> bytes:
    """A file's bytes, its size checked against ``most`` before it is read."""
    try:
        size = path.stat().st_size
        if size > most:
            raise InputFileError(f"{path}: {size} bytes, over the limit of {most} ({what})")
        return path.read_bytes()
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: a directory, not a file") from None
    except OSError as e:
        raise InputFileError(f"{path}: {e.strerror or e}") from None


def _hex(text: str, where: str, n: int | None = None) -> bytes:
    text = text.strip().removeprefix("0x")
    if n is not None and len(text) != 2 * n:
        raise InputFileError(f"{where}: {len(text)} hex digits, {2 * n} expected ({n} bytes)")
    bad = re.search(r"[^0-9a-fA-F]", text)
    if bad or len(text) % 2:
        raise InputFileError(f"{where}: not hex" + (f" (character {bad.start()}: {bad.group()!r})" if bad else
                                                     f" ({len(text)} digits, an odd number)"))
    return bytes.fromhex(text)


def miner_id(addr: str) -> int:
    from .commands import miner_id as of
    return of(addr)


# --- what lotus-bench writes ----------------------------------------------------------------------

def post_bytes_max(kind: str) -> int:
    """The largest FallbackPoStSectorProof of any size of ``kind`` (winning / window)."""
    from synthesis.filecoin import post, post_job as pj
    return max(pj.max_proof_bytes(p) for p in post.SETS.values() if p.kind == kind)


def read_show_inputs(path: Path) -> dict:
    """``lotus-bench simple winning-post --show-inputs``' output: ``wpt``, ``mid``, ``rand``,
    ``vp`` (each once, ``name: value`` after a space); other lines ignored. Bounded: twice the
    largest WinningPoSt vanilla proof as hex plus 64 KiB of other lines."""
    raw = read_bounded(path, 2 * post_bytes_max("winning") + (64 << 10),
                       "a winning-post --show-inputs output: the largest vanilla proof as hex + 64 KiB")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as e:
        raise InputFileError(f"{path}: byte {e.start}: not ASCII (lotus-bench prints ASCII)") from None
    got: dict[str, tuple[int, str]] = {}
    for no, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^ (wpt|mid|rand|vp): (.*)$", line)
        if m:
            if m.group(1) in got:
                raise InputFileError(f"{path}: line {no}: {m.group(1)} again (line {got[m.group(1)][0]} has it)")
            got[m.group(1)] = (no, m.group(2).strip())
    for name in ("wpt", "mid", "rand", "vp"):
        if name not in got:
            raise InputFileError(f"{path}: no ' {name}: ' line (the output of `lotus-bench simple winning-post "
                                 "--show-inputs`, its GenerateWinningPoStWithVanilla info)")
    out = {}
    for name in ("wpt", "mid"):
        no, v = got[name]
        if not v.isdigit() or len(v) > 20:
            raise InputFileError(f"{path}: line {no}, {name}: {v[:40]!r} is not a decimal number")
        out[name] = int(v)
    no, v = got["rand"]
    out["rand"] = _hex(v, f"{path}: line {no}, rand", 32)
    no, v = got["vp"]
    out["vp"] = _hex(v, f"{path}: line {no}, vp")
    out["vp_line"] = no
    return out


def read_replica_vanilla_proofs(path: Path, prm) -> list[bytes]:
    """``provereplicaupdate1``'s vproofs.json (Go's JSON of ``[][]byte``) for update params
    ``prm``: a JSON array of exactly ``partition_count`` standard base64 strings, each the
    bincode of a PartitionProof (its length checked by the caller); bounded before it is read."""
    from synthesis.filecoin import snap_circuit as sc

    one = (sc.proof_bytes(prm) + 2) // 3 * 4
    most = prm.partition_count * (one + 3) + 2 + 4096
    raw = read_bounded(path, most, f"{prm.partition_count} base64 partition proofs of {sc.proof_bytes(prm)} "
                                   "bytes as Go's JSON, + 4 KiB")
    try:
        doc = json.loads(raw)
    except UnicodeDecodeError as e:
        raise InputFileError(f"{path}: byte {e.start}: not UTF-8") from None
    except json.JSONDecodeError as e:
        raise InputFileError(f"{path}: byte {e.pos}: not JSON ({e.msg})") from None
    if not isinstance(doc, list):
        raise InputFileError(f"{path}: a JSON array of base64 strings (Go's [][]byte) expected, "
                             f"not {type(doc).__name__}")
    if len(doc) != prm.partition_count:
        raise InputFileError(f"{path}: {len(doc)} partition proofs, a {prm.sector_size}-byte sector's "
                             f"update has {prm.partition_count}")
    out = []
    for k, item in enumerate(doc):
        if not isinstance(item, str):
            raise InputFileError(f"{path}: [{k}]: a base64 string expected, not {type(item).__name__}")
        try:
            out.append(base64.b64decode(item, validate=True))
        except (binascii.Error, ValueError) as e:
            raise InputFileError(f"{path}: [{k}]: not standard base64 ({e})") from None
    return out


def read_request(path: Path, kind: int) -> pb.SubmitProofRequest:
    """cuzk's ``SubmitProofRequest`` in proto3's JSON mapping (what ``grpcurl -d`` takes: bytes
    as base64, enums by name), bounded by the kind's largest request as base64 + 64 KiB."""
    from google.protobuf import json_format

    from .kindlimits import request_limit

    most = (request_limit(kind) + 2) // 3 * 4 + (64 << 10)
    raw = read_bounded(path, most, f"the largest {pb.ProofKind.Name(kind)} request as proto3 JSON")
    req = pb.SubmitProofRequest()
    try:
        json_format.Parse(raw.decode("utf-8"), req)
    except UnicodeDecodeError as e:
        raise InputFileError(f"{path}: byte {e.start}: not UTF-8") from None
    except json_format.ParseError as e:
        raise InputFileError(f"{path}: not a SubmitProofRequest in proto3 JSON: {str(e).splitlines()[0][:300]}") from None
    if req.proof_kind == pb.PROOF_KIND_UNSPECIFIED:
        req.proof_kind = kind
    if req.proof_kind != kind:
        raise InputFileError(f"{path}: field proof_kind: {pb.ProofKind.Name(req.proof_kind)}, this command proves "
                             f"{pb.ProofKind.Name(kind)}")
    return req


# --- the requests -----------------------------------------------------------------------------------

def _named(err: str, files: list[str]) -> str:
    """An error of the request's checks with the file its vanilla proof came from named first
    (``--request``: that file, whatever the error)."""
    if files and files[0].startswith("request "):
        return f"{files[0][8:]}: {err}"
    for pattern in (r"vanilla_proofs\[(\d+)\]", r"sector (\d+) \(id ", r"partition (\d+)[,:]"):
        m = re.search(pattern, err)
        if m:
            i = 0 if len(files) == 1 else int(m.group(1))
            return f"{files[i]}: {err}" if 0 <= i < len(files) else err
    return err


def post_request(args, kind: int) -> tuple[pb.SubmitProofRequest, list[str]]:
    """The request Curio's ``WinningPoStCuzk`` / ``WindowPoStCuzk`` fills, from the command's files."""
    if args.request:
        req = read_request(Path(args.request), kind)
        return req, ["request " + args.request]
    winning = kind == pb.WINNING_POST
    fields = dict(proof_kind=kind, priority=pb.CRITICAL if winning else pb.HIGH)
    files: list[str] = []
    if winning and args.inputs:
        if args.vanilla:
            raise InputFileError("give the --show-inputs output or --vanilla, not both")
        got = read_show_inputs(Path(args.inputs))
        fields.update(registered_proof=got["wpt"], miner_id=got["mid"], randomness=got["rand"],
                      vanilla_proofs=[got["vp"]])
        files = [f"{args.inputs} (line {got['vp_line']}, vp)"]
    else:
        if not args.vanilla:
            raise InputFileError("no vanilla proof: " + ("the --show-inputs output file or " if winning else "")
                                 + "--vanilla FILE (a bincode FallbackPoStSectorProof)")
        if args.registered_proof is not None:
            rp = args.registered_proof
        else:
            size = sector_size(args.sector_size)
            table = WINNING_OF_SIZE if winning else WINDOW_OF_SIZE
            if size not in table:
                raise InputFileError(f"--sector-size {args.sector_size}: {size} bytes is not a sector size "
                                     "(2KiB, 8MiB, 512MiB, 32GiB, 64GiB)")
            rp = table[size]
        most = post_bytes_max("winning" if winning else "window")
        proofs = [read_bounded(Path(f), most, "the largest FallbackPoStSectorProof") for f in args.vanilla]
        fields.update(registered_proof=rp, miner_id=miner_id(args.miner_addr),
                      randomness=_hex(args.randomness, "--randomness", 32), vanilla_proofs=proofs)
        files = list(args.vanilla)
    if not winning:
        fields["partition_index"] = args.partition
    return pb.SubmitProofRequest(**fields), files


def update_request(args) -> tuple[pb.SubmitProofRequest, list[str]]:
    """The request Curio's ``ProveUpdateCuzk`` fills, from provereplicaupdate2's arguments."""
    from synthesis.filecoin import snap_circuit as sc

    if args.request:
        req = read_request(Path(args.request), pb.SNAP_DEALS_UPDATE)
        return req, ["request " + args.request]
    if len(args.args) != 4:
        raise InputFileError(f"{len(args.args)} arguments: [sectorKey] [newSealed] [newUnsealed] [vproofs.json] "
                             "(provereplicaupdate2's), or --request FILE")
    size = sector_size(args.sector_size)
    if size not in UPDATE_OF_SIZE:
        raise InputFileError(f"--sector-size {args.sector_size}: {size} bytes is not a sector size "
                             "(2KiB, 8MiB, 512MiB, 32GiB, 64GiB)")
    rp = UPDATE_OF_SIZE[size]
    prm = sc.SETS[sc.name_of(sc.REGISTERED[rp])].params
    key, new_sealed, new_unsealed, vp = args.args
    comm_r_old = commitment(key, SEALED, "sectorKey (comm_r_old)")
    comm_r_new = commitment(new_sealed, SEALED, "newSealed (comm_r_new)")
    comm_d_new = commitment(new_unsealed, UNSEALED, "newUnsealed (comm_d_new)")
    proofs = read_replica_vanilla_proofs(Path(vp), prm)
    req = pb.SubmitProofRequest(
        proof_kind=pb.SNAP_DEALS_UPDATE, sector_size=size, registered_proof=rp, priority=pb.NORMAL,
        vanilla_proofs=proofs, sector_number=args.sector_number, miner_id=miner_id(args.miner_addr),
        comm_r_old=comm_r_old, comm_r_new=comm_r_new, comm_d_new=comm_d_new)
    return req, [f"{vp} [{k}]" for k in range(len(proofs))]


def job_of(req: pb.SubmitProofRequest, files: list[str]) -> tuple[dict, str]:
    """The job document and priority of ``req``, every vanilla proof verified here (before the
    cluster is asked), errors naming the file the proof came from."""
    from synthesis.circuits import C1Error, get_circuit

    from . import postinput, snap

    if req.proof_kind == pb.SNAP_DEALS_UPDATE:
        try:
            return snap.job_document(req), "normal"
        except snap.SnapRequestError as e:
            raise InputFileError(_named(str(e), files)) from None
    try:
        doc, priority = postinput.job_document(req)
    except postinput.PostRequestError as e:
        raise InputFileError(_named(str(e), files)) from None
    try:
        get_circuit(doc["params"]).parse_c1(doc)      # every vanilla proof verified, here
    except C1Error as e:
        raise InputFileError(_named(str(e), files)) from None
    return doc, priority


# --- the commands ---------------------------------------------------------------------------------

def _through_cluster(args, doc: dict, priority: str, what: str) -> tuple[bytes, float]:
    from cluster.client import Job, JobFailed, JobTimeout
    from cluster.errors import JobError
    from cluster.pipeline.workflow import submit_job

    from .commands import _cluster_up

    rt = _cluster_up(args)
    if rt is None:
        s = settings_for(args)
        raise CommandError(f"no cluster with a ready prover answers at the configured Redis ({s.redis.url}): "
                           f"`{cli_name()} up` first")
    t0 = time.monotonic()
    try:
        rec, created = submit_job(rt, doc, priority=priority)
    except JobError as e:
        raise CommandError(str(e).splitlines()[0]) from None
    print(f"{cli_name()} {what}: job {rec.job_id} ({rec.params}, {rec.num_partitions} partitions, priority "
          f"{priority}) {'submitted to' if created else 'already in'} the cluster at {rt.settings.redis.url}",
          file=sys.stderr)
    try:
        proof = Job(rec.job_id, rt).result(timeout=args.timeout).proof
    except (JobFailed, JobTimeout) as e:
        raise CommandError(str(e)) from None
    return proof, time.monotonic() - t0


def _write(args, proof: bytes) -> None:
    if args.out:
        Path(args.out).write_bytes(proof)
        print(f"wrote {args.out}: {len(proof)} bytes ({len(proof) // 192} x 192)", file=sys.stderr)


def cmd_post(args) -> int:
    from .commands import go_duration, size_rate
    from synthesis.filecoin import post_job as pj

    kind = pb.WINNING_POST if args.command == "winning-post" else pb.WINDOW_POST_PARTITION
    req, files = post_request(args, kind)
    doc, priority = job_of(req, files)
    size = pj.params_of(doc["registered_proof"]).sector_size
    proof, took = _through_cluster(args, doc, priority, args.command)
    print(f"Proof {go_duration(took)} ({size_rate(size, took)})")
    print(base64.b64encode(proof).decode())
    _write(args, proof)
    return 0


def cmd_update(args) -> int:
    from .commands import go_duration, size_rate

    req, files = update_request(args)
    doc, priority = job_of(req, files)
    proof, took = _through_cluster(args, doc, priority, "prove-update")
    print(f"ProveReplicaUpdate2 {go_duration(took)} ({size_rate(req.sector_size or 2048, took)})")
    print("p:", base64.b64encode(proof).decode())
    _write(args, proof)
    return 0


def _common(p) -> None:
    p.add_argument("--request", metavar="FILE", help="cuzk's SubmitProofRequest as proto3 JSON (grpcurl -d's "
                                                     "form: bytes base64) instead of lotus-bench's files")
    p.add_argument("--miner-addr", default="t01000", help="the miner's ID address (default t01000, as lotus-bench)")
    p.add_argument("-o", "--out", metavar="FILE", help="also write the proof's bytes here (as cuzk returns them)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="give up on the cluster's job after S seconds")
    p.add_argument("--config", metavar="FILE", help="settings TOML (default: $ZKHIVE_CONFIG)")


def register(sub) -> None:
    for name, what in (("winning-post", "a WinningPoSt (lotus-bench simple winning-post --show-inputs' output, "
                                        "or a vanilla proof file) through the cluster"),
                       ("window-post", "a WindowPoSt partition (the sectors' vanilla proof files, as Curio sends "
                                       "them) through the cluster")):
        p = sub.add_parser(name, help=what)
        if name == "winning-post":
            p.add_argument("inputs", nargs="?", metavar="SHOW_INPUTS.txt",
                           help="the saved output of `lotus-bench simple winning-post --show-inputs` (wpt, mid, rand, vp)")
        p.add_argument("--vanilla", action="append", metavar="FILE",
                       help="a sector's bincode FallbackPoStSectorProof (raw bytes; repeatable, partition order)")
        p.add_argument("--sector-size", default="512MiB", help="the sector size (default 512MiB, as lotus-bench)")
        p.add_argument("--registered-proof", type=int, help="Go's abi.RegisteredPoStProof number instead of "
                                                            "the sector size's (window: the V1_1 ones, 10-14)")
        p.add_argument("--randomness", default="00" * 32, metavar="HEX",
                       help="the 32-byte randomness as hex (default all zero, as lotus-bench)")
        if name == "window-post":
            p.add_argument("--partition", type=int, default=0, help="the partition index (default 0)")
        _common(p)
        p.set_defaults(func=cmd_post)
    p = sub.add_parser("prove-update", help="a SnapDeals update proof from provereplicaupdate1's vproofs.json "
                                            "(lotus-bench simple provereplicaupdate2's arguments) through the cluster")
    p.add_argument("args", nargs="*", metavar="ARG", help="[sectorKey CID] [newSealed CID] [newUnsealed CID] [vproofs.json]")
    p.add_argument("--sector-size", default="512MiB", help="the sector size (default 512MiB, as lotus-bench)")
    p.add_argument("--sector-number", type=int, default=1, help="recorded with the job (default 1, as lotus-bench)")
    _common(p)
    p.set_defaults(func=cmd_update)
