"""Issue 18's move of ``cluster/`` into subpackages, as a table, and a rewriter for code written
against the old flat layout.

    python -m tools.relayout --apply [PATH ...]   # rewrite old module paths (default: every tracked file)
    python -m tools.relayout --check [PATH ...]   # list what still names an old path; exit 1 if any
    python -m tools.relayout --table              # the table, old -> new
    python -m tools.relayout --resolve            # in a merge of main: settle the conflicts the move made

After ``git merge main`` in a branch that edited the old files: ``--resolve`` looks at every
conflict hunk of every unmerged file (as diff3: yours, the base, main's) and, where main changed
the hunk only by this move (old module paths renamed, imports re-pointed), keeps your side with
the old paths rewritten; other hunks stay conflicts for you. Your edits to ``up_commands.py``
(split on main: a modify/delete conflict) are ported hunk by hunk to ``ops/plan.py`` or
``ops/commands.py``, wherever their old lines stand now; the ones that find no place are
printed. Then ``--apply`` (moves your new top-level modules, re-points imports) and ``--check``.

What it rewrites, in the .py, .md, .toml, .yml/.yaml, .json, .sh, Dockerfile and shebang-script
files it is given:

- ``from cluster.X import a, b`` (split in two where a and b moved to different modules),
  ``from cluster import X``, ``import cluster.X [as y]``;
- inside ``cluster/``: ``from .X import ...`` and ``from . import X`` whose target moved
  (same subpackage: stays relative; another one: absolute);
- ``cluster.X`` and ``cluster/X.py`` in strings, comments and docstrings of .py files (a
  ``-A cluster.app``, a patch target, an ``include=[...]``), and anywhere in the other files.

Code such as ``cluster.jobs`` where ``cluster`` is a variable (a test fixture) is left alone: in
.py files only import statements, strings and comments are rewritten. Running it twice changes
nothing the second time (no new name is an old one).
"""
from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the subpackages of cluster/ and what they hold (their __init__ docstrings say more)
PIPELINE, OPS, USER = "cluster.pipeline", "cluster.ops", "cluster.user"

#: old module -> new module (issue 18)
MOVES: dict[str, str] = {
    # the task layer: a job's path and the workers that run it
    **{f"cluster.{m}": f"{PIPELINE}.{m}" for m in (
        "app", "tasks", "workflow", "jobs", "routing", "registry", "blobs", "retry", "timeline",
        "prover", "prefetch", "lifecycle", "watchdog", "keys", "busy_heartbeat")},
    # the operator's tools: what `zkhive up` starts and keeps running
    **{f"cluster.{m}": f"{OPS}.{m}" for m in (
        "supervisor", "keeper", "redis_server", "readiness", "metrics", "current")},
    "cluster.up_commands": f"{OPS}.commands",  # its plan half: cluster.ops.plan (SYMBOLS)
    # the user's commands
    **{f"cluster.{m}": f"{USER}.{m}" for m in ("commands", "local", "progress", "demo")},
    # modules the other helpers of this session added at cluster/'s top level (issues 15, 16):
    # where they belong by what imports them (--apply moves them with git mv when they exist)
    "cluster.lease": f"{PIPELINE}.lease",          # tasks, app, reconcile
    "cluster.reconcile": f"{PIPELINE}.reconcile",  # the watchdog
    "cluster.bounds": f"{PIPELINE}.bounds",        # workflow.submit_job, Flower's decoding
    "cluster.assignments": f"{PIPELINE}.assignments",  # the prove task
    "cluster.inprocess": f"{PIPELINE}.inprocess",  # the worker lifecycle (in-process keys)
    "cluster.devshare": f"{PIPELINE}.devshare",    # inprocess, and zkhive up's plan (ops imports it)
}

#: modules that stay where they are (below every subpackage, or public entry points)
KEPT = ("cluster.cli", "cluster.client", "cluster.errors", "cluster.settings", "cluster.version",
        "cluster.__main__")

_PLAN = ("LOCAL_HOSTS", "STOP_MARGIN_S", "_zkhive", "_child_env", "detect_devices",
         "_nvidia_smi_gpus", "_redis_endpoint", "_ready_unless", "_local_url", "redis_spec",
         "worker_spec", "flower_url", "flower_spec", "keeper_spec", "metrics_url", "metrics_spec",
         "_flower_password", "_devices", "plan")

#: (old module, name) -> (new module, new name): names of a split module that went elsewhere
SYMBOLS: dict[tuple[str, str], tuple[str, str]] = {
    **{("cluster.up_commands", n): (f"{OPS}.plan", n) for n in _PLAN},
    ("cluster.up_commands", "_check_options"): (f"{OPS}.plan", "check_options"),
    ("cluster.up_commands", "_replan"): (f"{OPS}.plan", "replan"),
    ("cluster.up_commands", "_flat"): (f"{OPS}.plan", "flat"),
    ("cluster.up_commands", "_run_dir"): (f"{OPS}.current", "run_dir_for"),
    ("cluster.up_commands", "_settings"): (f"{OPS}.current", "settings_for"),
    ("cluster.up_commands", "_add_common"): (f"{OPS}.commands", "add_config"),
    ("cluster.up_commands", "_add_run_dir"): (f"{OPS}.commands", "add_run_dir"),
    ("cluster.up_commands", "_add_up_options"): (f"{OPS}.commands", "add_up_options"),
    # the queues out of app and routing (app -> workflow -> routing -> app was a cycle); app and
    # routing still import these names, so the old imports keep working
    **{("cluster.app", n): (f"{PIPELINE}.queues", n) for n in (
        "SYNTHESIS_QUEUE", "AGGREGATE_QUEUE", "UNASSIGNED_QUEUE", "PRIORITY_STEPS")},
    **{("cluster.routing", n): (f"{PIPELINE}.queues", n) for n in (
        "queue_depth", "queued_messages", "priority_lists")},
    # a private helper of commands.py that up_commands imported (the cycle issue 18 names)
    ("cluster.commands", "_settings"): (f"{OPS}.current", "settings_for"),
}

SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".json", ".sh", ".cfg", ".ini", ".txt"}
#: this file holds the table, its test the old names on purpose: never rewritten
SELF = Path(__file__).resolve()
EXCLUDED = {SELF, ROOT / "tests" / "unit" / "test_relayout.py"}

_OLD = sorted((m.split(".", 1)[1] for m in MOVES), key=len, reverse=True)
#: cluster.X[.name] not inside a longer dotted name
DOTTED = re.compile(r"(?<![\w.])cluster\.(" + "|".join(_OLD) + r")(?:\.(\w+))?(?!\w)")
#: cluster/X.py as a path
PATHS = re.compile(r"(?<![\w./-])cluster/(" + "|".join(_OLD) + r")\.py\b")


def _new_dotted(m: re.Match) -> str:
    old = f"cluster.{m.group(1)}"
    name = m.group(2)
    if name is not None and (old, name) in SYMBOLS:
        mod, new = SYMBOLS[old, name]
        return f"{mod}.{new}"
    return MOVES[old] + (f".{name}" if name is not None else "")


def _new_path(m: re.Match) -> str:
    return MOVES[f"cluster.{m.group(1)}"].replace(".", "/") + ".py"


def rewrite_text(text: str) -> str:
    """Old dotted module names and cluster/X.py paths in free text."""
    return PATHS.sub(_new_path, DOTTED.sub(_new_dotted, text))


# -- import statements ------------------------------------------------------------------------------

def _module_exists(mod: str) -> bool:
    p = ROOT.joinpath(*mod.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def _file_package(path: Path) -> str | None:
    try:
        rel = path.resolve().relative_to(ROOT)
    except ValueError:
        return None
    parts = rel.with_suffix("").parts
    return ".".join(parts[:-1]) if parts else None


def _target(old_mod: str, name: str | None) -> tuple[str, str | None]:
    """Where ``name`` of ``old_mod`` lives now (module, name)."""
    if name is not None and (old_mod, name) in SYMBOLS:
        return SYMBOLS[old_mod, name]
    return MOVES.get(old_mod, old_mod), name


def _alias(a: ast.alias, new_name: str | None) -> str:
    name = new_name or a.name
    if a.asname:
        return f"{name} as {a.asname}" if a.asname != name else name
    return f"{name} as {a.name}" if name != a.name else name


def _render_from(indent: str, module: str, names: list[str]) -> str:
    line = f"{indent}from {module} import {', '.join(names)}"
    if len(line) <= 110:
        return line
    inner = f"\n{indent}    ".join(f"{n}," for n in names)
    return f"{indent}from {module} import (\n{indent}    {inner}\n{indent})"


def _relative_or_absolute(target: str, pkg: str | None) -> str:
    parent, _, leaf = target.rpartition(".")
    return f".{leaf}" if parent == pkg else target


def _rewrite_import(node, pkg: str | None, indent: str) -> str | None:
    """The new text of one import statement, or None when it needs no change."""
    if isinstance(node, ast.Import):
        out, changed = [], False
        for a in node.names:
            if a.name in MOVES:
                changed = True
                new = MOVES[a.name]
                out.append(f"{indent}import {new}" + (f" as {a.asname}" if a.asname else ""))
            else:
                out.append(f"{indent}import {a.name}" + (f" as {a.asname}" if a.asname else ""))
        return "\n".join(out) if changed else None
    if any(a.name == "*" for a in node.names):
        if node.level == 0 and node.module in MOVES:
            return f"{indent}from {MOVES[node.module]} import *"
        return None
    in_cluster = pkg is not None and (pkg == "cluster" or pkg.startswith("cluster."))
    groups: dict[str, list[str]] = {}
    changed = False
    if node.level == 0 and node.module in MOVES:
        for a in node.names:
            mod, new = _target(node.module, a.name)
            groups.setdefault(mod, []).append(_alias(a, new))
        changed = True
    elif node.level == 0 and node.module == "cluster":
        for a in node.names:
            old = f"cluster.{a.name}"
            mod = MOVES[old].rpartition(".")[0] if old in MOVES else "cluster"
            changed |= old in MOVES
            groups.setdefault(mod, []).append(_alias(a, None))
    elif node.level == 1 and in_cluster:
        if node.module is not None:
            here = f"{pkg}.{node.module}"
            old = f"cluster.{node.module}"
            if old not in MOVES and old not in KEPT:
                return None
            if _module_exists(here) and not any((old, a.name) in SYMBOLS for a in node.names):
                return None
            for a in node.names:
                mod, new = _target(old, a.name)
                groups.setdefault(_relative_or_absolute(mod, pkg), []).append(_alias(a, new))
            changed = True
        else:
            for a in node.names:
                old = f"cluster.{a.name}"
                if _module_exists(f"{pkg}.{a.name}") or (old not in MOVES and old not in KEPT):
                    groups.setdefault(".", []).append(_alias(a, None))
                    continue
                parent = MOVES.get(old, old).rpartition(".")[0]
                groups.setdefault("." if parent == pkg else parent, []).append(_alias(a, None))
                changed = True
    else:
        return None
    if not changed:
        return None
    return "\n".join(_render_from(indent, mod, names) for mod, names in groups.items())


def rewrite_python(src: str, path: Path) -> str:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return rewrite_text(src)
    lines = src.splitlines(keepends=True)
    pkg = _file_package(path)
    edits = []  # (first line index, last line index, new text)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        first, last = node.lineno - 1, node.end_lineno - 1
        line = lines[first]
        indent = line[:len(line) - len(line.lstrip())]
        if line[len(indent):].startswith(("import ", "from ")) is False or node.col_offset != len(indent):
            continue  # `x; import y`: left for --check
        new = _rewrite_import(node, pkg, indent)
        if new is None:
            continue
        tail = lines[last][node.end_col_offset:]
        edits.append((first, last, new + (tail if tail.strip() else "\n")))
    for first, last, new in sorted(edits, reverse=True):
        lines[first:last + 1] = [new]
    src = "".join(lines)
    return _rewrite_strings_and_comments(src)


def _rewrite_strings_and_comments(src: str) -> str:
    """rewrite_text inside string and comment tokens only: code is imports (done) and names."""
    kinds = {tokenize.STRING, tokenize.COMMENT}
    if hasattr(tokenize, "FSTRING_MIDDLE"):
        kinds.add(tokenize.FSTRING_MIDDLE)
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, SyntaxError):
        return src
    starts = [0]
    for line in src.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = []
    for t in toks:
        if t.type in kinds and ("cluster." in t.string or "cluster/" in t.string):
            a = starts[t.start[0] - 1] + t.start[1]
            b = starts[t.end[0] - 1] + t.end[1]
            spans.append((a, b))
    for a, b in sorted(spans, reverse=True):
        src = src[:a] + rewrite_text(src[a:b]) + src[b:]
    return src


# -- files ------------------------------------------------------------------------------------------

def _wanted(path: Path) -> bool:
    if path.resolve() in EXCLUDED or not path.is_file():
        return False
    if path.suffix in SUFFIXES or path.name.startswith("Dockerfile"):
        return True
    if path.suffix == "":
        try:
            with path.open("rb") as f:
                return f.read(2) == b"#!"
        except OSError:
            return False
    return False


def tracked(paths: list[str]) -> list[Path]:
    """The files to look at: the given paths (folders: their tracked files), else every
    tracked file of the repository."""
    cmd = ["git", "-C", str(ROOT), "ls-files", "-z", "--", *paths]
    names = subprocess.run(cmd, capture_output=True, check=True).stdout.decode().split("\0")
    files = [ROOT / n for n in names if n]
    files += [Path(p) for p in paths if Path(p).is_file() and (ROOT / p).resolve() not in
              {f.resolve() for f in files}]
    return [f for f in files if _wanted(f)]


def rewrite_file(path: Path) -> str | None:
    """The file's new text, or None when nothing changes."""
    try:
        old = path.read_text()
    except (UnicodeDecodeError, OSError):
        return None
    new = rewrite_python(old, path) if path.suffix == ".py" else rewrite_text(old)
    return None if new == old else new


def leftovers(path: Path) -> list[str]:
    """Lines that still name an old module path after a rewrite (what --apply cannot fix)."""
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError):
        return []
    out = []
    fixed = rewrite_file(path)
    if fixed is not None:
        out.append(f"{path}: needs --apply")
    if path.suffix == ".py":
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return out
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name in MOVES for a in node.names):
                out.append(f"{path}:{node.lineno}: import statement the rewriter could not place")
        rel = _file_package(path)
        if rel == "cluster" and f"cluster.{path.stem}" not in KEPT and path.name != "__init__.py":
            out.append(f"{path}: a module at cluster/'s top level: move it into a subpackage "
                       f"({PIPELINE}, {OPS}, {USER})")
    return out


def move_files() -> list[str]:
    """``git mv`` every module of the table still at its old place (a branch's new module, or a
    file a merge left there), unless its new place is taken."""
    done = []
    for old, new in MOVES.items():
        src = ROOT.joinpath(*old.split(".")).with_suffix(".py")
        dst = ROOT.joinpath(*new.split(".")).with_suffix(".py")
        if not src.is_file():
            continue
        if dst.exists():
            done.append(f"left {src.relative_to(ROOT)}: {dst.relative_to(ROOT)} exists (merge them by hand)")
            continue
        tracked_src = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--error-unmatch", str(src)],
                                     capture_output=True).returncode == 0
        cmd = ["git", "-C", str(ROOT), "mv", str(src), str(dst)] if tracked_src else None
        if cmd is None or subprocess.run(cmd, capture_output=True).returncode != 0:
            src.rename(dst)
        done.append(f"moved {src.relative_to(ROOT)} -> {dst.relative_to(ROOT)}")
    return done


_IMPORT_LINE = re.compile(r"^(\s*)from (\.|cluster\.)((?:\w+\.)*)(\w+) import ", re.M)
_FROM_PKG = re.compile(r"^(\s*)from (\.|cluster\.\w+|cluster) import ", re.M)


def _mechanical(text: str) -> str:
    """``text`` with what the move changes made uniform: module paths rewritten, imports named
    by their last component (relative or absolute alike)."""
    text = rewrite_text(text)
    text = _IMPORT_LINE.sub(lambda m: f"{m.group(1)}from @{m.group(4)} import ", text)
    return _FROM_PKG.sub(lambda m: f"{m.group(1)}from @ import ", text)


_HUNK = re.compile(r"^<<<<<<< [^\n]*\n(.*?)^\|\|\|\|\|\|\| [^\n]*\n(.*?)^=======\n(.*?)^>>>>>>> [^\n]*\n",
                   re.S | re.M)


def resolve_text(text: str) -> tuple[str, int, int]:
    """(text, hunks settled, hunks left) for a file with diff3 conflict markers (ours = the
    branch, theirs = main)."""
    settled = left = 0

    def one(m: re.Match) -> str:
        nonlocal settled, left
        ours, base, theirs = m.group(1), m.group(2), m.group(3)
        if _mechanical(base) == _mechanical(theirs):
            settled += 1
            return rewrite_text(ours)
        left += 1
        return m.group(0)
    return _HUNK.sub(one, text), settled, left


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout


def _hunks(diff: str) -> list[list[tuple[str, str]]]:
    """Each hunk of a unified diff as (op, line): op ' ' context, '-' removed, '+' added."""
    out: list[list[tuple[str, str]]] = []
    for line in diff.splitlines(keepends=True):
        if line.startswith("@@"):
            out.append([])
        elif out and line[:1] in (" ", "-", "+"):
            out[-1].append((line[0], line[1:]))
    return out


def _place(hunk: list[tuple[str, str]], lines: list[str]) -> int | None:
    """The one index where the hunk's old lines (context and removed) stand in ``lines``,
    compared after this move's mechanical changes; None when nowhere or more than once."""
    old = [_mechanical(x).strip() for op, x in hunk if op != "+"]
    norm = [_mechanical(x).strip() for x in lines]
    hits = [i for i in range(len(lines) - len(old) + 1) if norm[i:i + len(old)] == old]
    return hits[0] if len(hits) == 1 and old else None


def _apply(hunk: list[tuple[str, str]], lines: list[str], at: int) -> list[str]:
    out, i = lines[:at], at
    for op, x in hunk:
        if op == " ":
            out.append(lines[i]); i += 1   # the target's own text of a context line
        elif op == "-":
            i += 1
        else:
            out.append(rewrite_text(x))
    return out + lines[i:]


def port_split(name: str) -> list[str]:
    """Your edits to a module this move split (``cluster/up_commands.py``, deleted on main):
    each hunk of ``git diff MERGE_BASE HEAD`` is applied to the new module where its old lines
    stand exactly once (compared after the move's renames); the old file is removed when every
    hunk found its place, else it stays, and the hunks that did not are listed."""
    old = ".".join(Path(name).with_suffix("").parts)
    targets = [MOVES[old]] + sorted({m for (o, _), (m, _) in SYMBOLS.items() if o == old})
    base = _git("merge-base", "HEAD", "MERGE_HEAD").strip()
    out, missed = [], 0
    for hunk in _hunks(_git("diff", "-U3", base, "HEAD", "--", name)):
        for t in targets:
            path = ROOT.joinpath(*t.split(".")).with_suffix(".py")
            lines = path.read_text().splitlines(keepends=True)
            at = _place(hunk, lines)
            if at is not None:
                path.write_text("".join(_apply(hunk, lines, at)))
                out.append(f"{name}: a hunk ported to {path.relative_to(ROOT)}")
                break
        else:
            missed += 1
            out.append(f"{name}: a hunk found no place; port it by hand:\n" +
                       "".join(f"    {op}{x}" for op, x in hunk))
    if not missed:
        _git("rm", "-q", "-f", "--", name)
        out.append(f"{name}: every hunk ported, the file removed (git add the targets after --apply)")
    return out


def resolve() -> list[str]:
    out = []
    res = subprocess.run(["git", "-C", str(ROOT), "diff", "--name-only", "--diff-filter=U"],
                         capture_output=True, text=True, check=True)
    for name in res.stdout.split():
        path = ROOT / name
        old = ".".join(Path(name).with_suffix("").parts)
        if old in MOVES and path.is_file() and ROOT.joinpath(*MOVES[old].split(".")).with_suffix(".py").is_file():
            out += port_split(name)  # modify/delete: main moved (and split) it
            continue
        if not path.is_file():
            out.append(f"{name}: not a file here (a rename/delete conflict: see the table)")
            continue
        # the conflict again, with the base: was main's side of each hunk only this move?
        subprocess.run(["git", "-C", str(ROOT), "checkout", "--conflict=diff3", "--", name],
                       capture_output=True)
        text, settled, left = resolve_text(path.read_text())
        path.write_text(text)
        out.append(f"{name}: {settled} hunk(s) settled, {left} left"
                   + ("" if left else " (git add it after --apply)"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--apply", action="store_true", help="rewrite the files in place")
    mode.add_argument("--check", action="store_true", help="list files that still name old paths")
    mode.add_argument("--table", action="store_true", help="print the table old -> new")
    mode.add_argument("--resolve", action="store_true",
                      help="settle merge conflicts that only this move made (after git merge main)")
    ap.add_argument("paths", nargs="*", help="files or folders (default: every tracked file)")
    args = ap.parse_args(argv)
    if args.table:
        for old, new in MOVES.items():
            print(f"{old:<28} -> {new}")
        for (old, name), (mod, new) in SYMBOLS.items():
            print(f"{old + '.' + name:<40} -> {mod}.{new}")
        return 0
    if args.resolve:
        for line in resolve():
            print(line)
        return 0
    if args.apply:
        for line in move_files():
            print(line)
    files = tracked(args.paths)
    if args.apply:
        n = 0
        for f in files:
            new = rewrite_file(f)
            if new is not None:
                f.write_text(new)
                n += 1
                print(f"rewrote {f.relative_to(ROOT) if f.is_relative_to(ROOT) else f}")
        print(f"{n} file(s) rewritten")
        return 0
    bad = [line for f in files for line in leftovers(f)]
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
