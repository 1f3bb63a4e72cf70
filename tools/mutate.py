"""Mutation testing of the modules where a silent bug is a forged proof or a lost job, with
cosmic-ray (tests/requirements-mutation.txt): ``./test --mutate MODULE`` (or
``python -m tools.mutate MODULE``). Not part of CI: a run takes minutes to an hour per module.

Each target names a module, the focused tests that should kill its mutants, and optionally the
functions to mutate (the rest of the file is skipped: a SHA-256 round-constant table is tested
by hashlib vectors, not worth a test run per digit). Binary and comparison operators are
replaced by one neighbour each (``a + b`` -> ``a - b``, ``<`` -> ``<=``), as mutmut does, not by
all eleven cosmic-ray offers; numbers, booleans, ``not``, ``break``/``continue``, exception
handlers and loops are mutated as cosmic-ray does. A line with ``# pragma: no mutate`` is
skipped (say why on the line).

The module is restored after every mutant by cosmic-ray, and once more here at the end (also
on Ctrl-C / SIGTERM), from a copy taken before the first. Output: one line per surviving mutant
(line, operator, the diff), then ``MODULE: N mutants, K killed, S survived (P% killed)``; the
session is kept in .mutation/NAME/ (``cr-report .mutation/NAME/session.sqlite``).
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    module: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()  # empty: the whole module
    timeout_s: float = 120.0


SOUNDNESS = "tests/unit/test_soundness.py"
TARGETS: dict[str, Target] = {
    "verifier": Target("gpu/groth16/verifier.py",
                       ("tests/unit/test_verifier_inputs.py", "tests/unit/test_groth16.py",
                        "tests/unit/test_snarkjs_format.py")),
    "proof": Target("gpu/groth16/proof.py",
                    ("tests/unit/test_proof_decoding.py", "tests/unit/test_groth16.py", "-k",
                     "subgroup or encoding")),
    "compress": Target("gpu/groth16/compress.py", ("tests/unit/test_compress.py",)),
    # the one gadget library (synthesis/bellpepper, issue 36): bits, insertion, neptune's Poseidon
    "boolean": Target("synthesis/bellpepper/boolean.py",
                      (SOUNDNESS, "tests/unit/test_bellpepper_boolean.py", "-k",
                       "audit or bits or boolean or merkle")),
    "insertion": Target("synthesis/bellpepper/insertion.py",
                        (SOUNDNESS, "tests/unit/test_soundness_circuits.py", "tests/unit/test_filecoin_circuit.py",
                         "-k", "merkle or por or insert or pick")),
    "poseidon": Target("synthesis/bellpepper/neptune.py",
                       ("tests/unit/test_bellpepper_poseidon.py", SOUNDNESS, "-k", "poseidon")),
    "sha256": Target("synthesis/bellpepper/sha256.py",
                     ("tests/unit/test_bellpepper_sha256.py",), timeout_s=300.0),
    "limits": Target("synthesis/limits.py", ("tests/unit/test_input_bounds.py",
                                             "tests/unit/test_faults_c1_fuzz.py", "-k",
                                             "bound or document or array or object or keys or "
                                             "read or c1 or input_class")),
    # the text's size bound and the decoder's entry points (the rest: the "limits" target)
    "limits_size": Target("synthesis/limits.py", ("tests/unit/test_input_bounds.py",
                                                  "tests/unit/test_filecoin_seal_limits.py"),
                          ("loads", "read")),
    "bounds": Target("cluster/pipeline/bounds.py", ("tests/unit/test_input_bounds.py",),
                     ("limits_of", "check_c1", "check_canonical_size")),
    "lease": Target("cluster/pipeline/lease.py", ("tests/unit/test_leases.py",), timeout_s=240.0),
    # the stub's fakeredis is always "settled": the rule itself is judged over a real Redis
    "reconcile": Target("cluster/pipeline/reconcile.py",
                        ("tests/integration/test_reconcile_rules.py", "tests/integration/test_reconcile_settled.py",
                         "tests/unit/test_leases.py"),
                        timeout_s=240.0),
    # the uptime gate alone (``look``): a run of minutes, not the hour of the whole module
    "settled": Target("cluster/pipeline/reconcile.py",
                      ("tests/integration/test_reconcile_settled.py", "tests/unit/test_leases.py"), ("look",),
                      240.0),
    # first writer wins for a partition proof: the store's SET NX and the prove task's last step
    "store": Target("cluster/pipeline/jobs.py", ("tests/integration/test_first_writer_wins.py",),
                    ("store_partition",)),
    "store_proof": Target("cluster/pipeline/tasks.py", ("tests/integration/test_first_writer_wins.py",),
                          ("store_proof",)),
    # the verifying key kept per version of its files: a stale key must never verify a job
    "vkcache": Target("cluster/pipeline/keys.py", ("tests/unit/test_inprocess_keys.py", "-k", "load_vk"),
                      ("load_vk", "_identity")),
    # the Commit2 wrapper's bounds and fields (the gRPC limit's tests need no mutant of this file)
    "c2input": Target("cluster/gateway/c2input.py",
                      ("tests/unit/test_gateway_units.py", "tests/unit/test_input_limits_exact.py", "-k",
                       "not grpc and not commit2_file"), ("decode", "_c1_doc", "_filecoin_doc")),
    # issue 35: the input-binding audit (its recomputation and verdicts: the Filecoin header's
    # tests and the SHA-256 recomputation, ~25 s a mutant) and the sealer's C1 vanilla checks
    "input_audit": Target("synthesis/input_audit.py",
                          ("tests/unit/test_soundness_inputs.py", "-k", "filecoin_header or sha256 or carry_row or empty_side"
                           " or single_definition or ten_undefined or constant_a_side or through_b or x_plus_r"
                           " or report_"),
                          ("check", "audit_inputs")),
    # the PoSt and SnapDeals vanilla checks (issue 35's "as they land"): what the native
    # verification refuses before a proof reaches a prover (seconds a mutant)
    "post": Target("synthesis/filecoin/post.py",
                   ("tests/unit/test_filecoin_post_verify.py", "tests/unit/test_filecoin_post.py",
                    "tests/unit/test_filecoin_bincode.py", "-k",
                    "verify or vanilla_proofs_checked or window_round_trip or winning_round_trip or named"),
                   ("verify",)),
    "snap": Target("synthesis/filecoin/snap.py",
                   ("tests/unit/test_filecoin_snap_verify.py", "tests/unit/test_filecoin_snap.py", "-k",
                    "tampered or round_trips or other_challenges or poseidon_variant_1k or named or below "
                    "or reference or modulus"),
                   ("verify_partition", "_below_modulus")),
    "vanilla": Target("synthesis/filecoin/vanilla.py",
                      ("tests/unit/test_filecoin_seal.py", "-k", "tampered or untampered"),
                      ("check_partition",), 240.0),
    "keeper": Target("cluster/ops/keeper.py",
                     ("tests/integration/test_keeper_backoff.py", "tests/integration/test_keeper.py",
                      "-k", "not up_restarts"),
                     ("delay", "step"), 240.0),  # the backoff and reset (issue 27 changes the rest)
    # key files (issues 35, 39): the layout, the lengths, decoding and every point check
    "keyfiles": Target("gpu/groth16/bellperson.py",
                       ("tests/unit/test_bellperson_params.py", "-k",
                        "not trapdoor and not compact and not snarkjs and not proves and not v28 "
                        "and not encoding_is"),
                       ("_u32", "scan", "_expect", "_fail", "_below_p", "from_uncompressed",
                        "first_bad", "_check_points", "read_section", "_single", "_read_vk_parts",
                        "read_vk", "check_file", "set_subgroup_check", "not_in_subgroup")),
    # issue 40 item 3: the .params' compressed mirror read instead of it (opt-in): its binding,
    # its block digests, the flags and the points decompressed on the host; a mirror must
    # never hand a prover a point the .params does not hold
    "mirror": Target("gpu/groth16/mirror.py", ("tests/unit/test_params_mirror.py",),
                     ("binding", "check_block", "open_mirror", "host_mirror", "check_flags",
                      "read_section_host"), 240.0),
    # issue 40 item 3: a/b's lengths checked when their densities arrive (read_params(later=
    # True), FileQuery.resolve) and the density index built in steps
    "keyfiles_later": Target("gpu/groth16/bellperson.py",
                             ("tests/unit/test_bellperson_params.py", "tests/unit/test_start_phases.py",
                              "-k", "not trapdoor and not snarkjs and not v28 and not encoding_is"),
                             ("density_index", "densities_of", "resolve", "read_params", "_dense_want", "result",
                              "_run"), 240.0),
    "keyopen": Target("gpu/groth16/keys.py", ("tests/unit/test_bellperson_params.py", "-k", "fifo"),
                      ("open_regular",)),
}

#: the one replacement kept per binary / comparison operator (mutmut's choices)
NEIGHBOUR = {
    "Add": "Sub", "Sub": "Add", "Mul": "Div", "Div": "Mul", "FloorDiv": "Mul", "Mod": "FloorDiv",
    "Pow": "Mul", "LShift": "RShift", "RShift": "LShift", "BitOr": "BitAnd", "BitAnd": "BitOr",
    "BitXor": "BitOr",
    "Eq": "NotEq", "NotEq": "Eq", "Lt": "LtE", "LtE": "Lt", "Gt": "GtE", "GtE": "Gt",
    "Is": "IsNot", "IsNot": "Is", "In": "NotIn", "NotIn": "In",
}
_PAIR = re.compile(r"Replace(?:Binary|Comparison)Operator_([A-Za-z]+)_([A-Za-z]+)$")
SKIPPED_OPERATORS = ("core/ReplaceUnaryOperator_", )  # -x -> +x, ~x: noise on field code


def keep_operator(name: str) -> bool:
    m = _PAIR.search(name)
    if m:
        return NEIGHBOUR.get(m.group(1)) == m.group(2)
    return not name.startswith(SKIPPED_OPERATORS)


def function_lines(path: Path, names: tuple[str, ...]) -> set[int]:
    """Lines of the named functions (methods too), decorators and nested code included."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines.update(range(start, node.end_lineno + 1))
    return lines


def _python() -> str:
    return sys.executable


def _config(target: Target, out: Path) -> Path:
    cmd = [_python(), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *target.tests]
    text = (f'[cosmic-ray]\nmodule-path = "{target.module}"\ntimeout = {target.timeout_s}\n'
            f'excluded-modules = []\ntest-command = "{shlex.join(cmd)}"\n\n'
            '[cosmic-ray.distributor]\nname = "local"\n')
    path = out / "config.toml"
    path.write_text(text)
    return path


def _filter(session: Path, target: Target) -> tuple[int, int]:
    """Mark the mutants outside the target's scope skipped; (kept, skipped)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    path = ROOT / target.module
    src = path.read_text().splitlines()
    scope = function_lines(path, target.functions) if target.functions else None
    kept = skipped = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            m = item.mutations[0]
            line = m.start_pos[0]
            why = None
            if not keep_operator(m.operator_name):
                why = "operator"
            elif scope is not None and line not in scope:
                why = "outside the target's functions"
            elif "pragma: no mutate" in src[line - 1]:
                why = "pragma"
            if why:
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                      output=why))
                skipped += 1
            else:
                kept += 1
    return kept, skipped


def _results(session: Path):
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    rows = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            m = item.mutations[0]
            killed = result.test_outcome in (TestOutcome.KILLED, TestOutcome.INCOMPETENT) \
                or result.worker_outcome != WorkerOutcome.NORMAL
            rows.append((m.start_pos[0], m.operator_name.replace("core/", ""), killed,
                         result.diff or "", m.occurrence))
    return sorted(rows)


def run(name: str, *, out_root: Path, list_only: bool = False, tests: list[str] | None = None,
        tag: str = "") -> int:
    target = TARGETS[name]
    if tests:
        target = Target(target.module, tuple(tests), target.functions, target.timeout_s)
    out = out_root / (name + (f"-{tag}" if tag else ""))
    out.mkdir(parents=True, exist_ok=True)
    session = out / "session.sqlite"
    if session.exists():
        session.unlink()
    config = _config(target, out)
    cr = [_python(), "-m", "cosmic_ray.cli"]
    subprocess.run([*cr, "init", str(config), str(session)], check=True, cwd=ROOT)
    kept, skipped = _filter(session, target)
    print(f"{target.module}: {kept} mutants to run ({skipped} skipped: operators with one "
          f"neighbour kept, scope, pragmas); tests: {' '.join(target.tests)}", flush=True)
    if list_only:
        return 0
    module = ROOT / target.module
    original = module.read_bytes()

    def restore(*_):
        module.write_bytes(original)
        if _:
            raise SystemExit(130)
    old = {s: signal.signal(s, restore) for s in (signal.SIGINT, signal.SIGTERM)}
    t0 = time.monotonic()
    try:
        base = subprocess.run(shlex.split(_test_command(config)), cwd=ROOT, capture_output=True, text=True)
        if base.returncode:
            print(f"the tests fail without any mutant; fix them first:\n{base.stdout[-3000:]}")
            return 2
        subprocess.run([*cr, "exec", str(config), str(session)], check=True, cwd=ROOT)
    finally:
        module.write_bytes(original)
        for s, h in old.items():
            signal.signal(s, h)
    rows = _results(session)
    survivors = [r for r in rows if not r[2]]
    lines = []
    for line, op, _, diff, occ in survivors:
        body = [d for d in diff.splitlines() if d.startswith(("+", "-")) and not d.startswith(("+++", "---"))]
        lines.append(f"SURVIVED {target.module}:{line} {op}: " + " | ".join(b.strip() for b in body))
    total, killed = len(rows), len(rows) - len(survivors)
    pct = 100.0 * killed / total if total else 100.0
    summary = (f"{target.module}: {total} mutants, {killed} killed, {len(survivors)} survived "
               f"({pct:.1f}% killed) in {time.monotonic() - t0:.0f} s")
    (out / "survivors.txt").write_text("\n".join(lines + [summary]) + "\n")
    print("\n".join(lines + [summary]))
    return 0


def _test_command(config: Path) -> str:
    for line in config.read_text().splitlines():
        if line.startswith("test-command"):
            return line.split("=", 1)[1].strip().strip('"')
    raise ValueError(f"{config}: no test-command")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="./test --mutate", description=__doc__.split("\n\n")[0])
    ap.add_argument("module", nargs="*", help=f"one or more of: {', '.join(TARGETS)} (or 'all')")
    ap.add_argument("--list", action="store_true", help="count the mutants, run nothing")
    ap.add_argument("--out", default=str(ROOT / ".mutation"), help="session directory")
    ap.add_argument("--tests", help="another test selection (pytest arguments, one string): "
                                    "to compare, e.g. the tests of an older commit")
    ap.add_argument("--tag", default="", help="suffix of the session directory (with --tests)")
    args = ap.parse_args(argv)
    names = list(TARGETS) if args.module == ["all"] else args.module
    if not names:
        ap.print_help()
        return 2
    for n in names:
        if n not in TARGETS:
            by_path = [k for k, t in TARGETS.items() if t.module == n]
            if not by_path:
                print(f"./test --mutate: unknown module {n!r}; known: {', '.join(TARGETS)}", file=sys.stderr)
                return 2
    rc = 0
    for n in names:
        n = n if n in TARGETS else next(k for k, t in TARGETS.items() if t.module == n)
        rc |= run(n, out_root=Path(args.out), list_only=args.list,
                  tests=shlex.split(args.tests) if args.tests else None, tag=args.tag)
    return rc


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
