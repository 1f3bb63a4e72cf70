"""The import graph of zkhive's packages, read from the source (``ast``; nothing is imported).

    python -m tools.import_graph            # package -> packages it imports, and any cycles
    python -m tools.import_graph --modules  # the same between modules, inside each package too
    python -m tools.import_graph --cluster  # cluster's parts (its subpackages and base modules)

Every import counts, also one inside a function (a lazy import is still a dependency). Exit 1
when a layering rule is broken or a cycle exists:

    arith      imports nothing of ours
    synthesis  imports only arith
    gpu        imports synthesis and arith, never cluster
    cluster    may import all of them

and inside cluster, each part imports only parts below it (``CLUSTER_LAYERS``, bottom first):
the base modules (errors, version; settings), the task layer ``cluster.pipeline``, the Python
API ``cluster.client``, the ``zkhive`` entry ``cluster.cli`` (it finds the command modules by
name), the operator's ``cluster.ops``, the user's ``cluster.user``, the sealing pipeline's door
``cluster.gateway``; and no module cycle in it.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("arith", "synthesis", "gpu", "cluster")
#: what each package may import (besides itself)
ALLOWED = {"arith": set(), "synthesis": {"arith"}, "gpu": {"arith", "synthesis"},
           "cluster": {"arith", "synthesis", "gpu"}}


#: cluster's parts, bottom first: a part may import only parts of a lower layer
CLUSTER_LAYERS = (
    ("cluster", "cluster.errors", "cluster.version"),
    ("cluster.settings",),
    ("cluster.pipeline",),
    ("cluster.client",),
    ("cluster.cli",),
    ("cluster.ops",),
    ("cluster.user",),
    ("cluster.gateway",),
    ("cluster.__main__",),
)
CLUSTER_SUBPACKAGES = ("cluster.pipeline", "cluster.ops", "cluster.user", "cluster.gateway")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports_of(path: Path, known: dict | None = None) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved). With
    ``known`` (module names), ``from pkg import sub`` naming only submodules does not count as
    an import of ``pkg`` itself."""
    me = module_name(path)
    pkg = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = {f"{mod}.{a.name}" for a in node.names}
            # `from pkg import sub` may name a submodule
            out.update(subs)
            if known is None or not subs <= known.keys():
                out.add(mod)
    return {m for m in out if m.split(".")[0] in PACKAGES}


def graph(modules: bool) -> dict[str, set[str]]:
    known = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    g: dict[str, set[str]] = {}
    for name, path in sorted(known.items()):
        deps = set()
        for m in imports_of(path, known):
            # the longest known module that the imported name starts with
            while m and m not in known:
                m = m.rpartition(".")[0]
            if m and m != name:
                deps.add(m)
        node = name if modules else name.split(".")[0]
        g.setdefault(node, set()).update(d if modules else d.split(".")[0] for d in deps)
        g[node].discard(node)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    # the recursive walk needs more than the default 1000 frames on a long chain; restored after,
    # as the limit is the whole process's (a test run goes on with it)
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, 10000))
    try:
        for v in sorted(g):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(before)
    return out


def violations(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for node, deps in sorted(g.items()):
        pkg = node.split(".")[0]
        for d in sorted(deps):
            if d.split(".")[0] != pkg and d.split(".")[0] not in ALLOWED[pkg]:
                bad.append(f"{node} imports {d}")
    return bad


def cluster_part(module: str) -> str:
    """The part of cluster a module belongs to: its subpackage, else the module itself."""
    for sub in CLUSTER_SUBPACKAGES:
        if module == sub or module.startswith(sub + "."):
            return sub
    return module


def cluster_graph(g: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Part -> parts it imports, inside cluster (from the module graph ``g``)."""
    g = graph(True) if g is None else g
    out: dict[str, set[str]] = {}
    for node, deps in g.items():
        if node.split(".")[0] != "cluster":
            continue
        part = cluster_part(node)
        out.setdefault(part, set()).update(cluster_part(d) for d in deps if d.split(".")[0] == "cluster")
        out[part].discard(part)
    return out


def cluster_violations(g: dict[str, set[str]]) -> list[str]:
    """Modules of cluster importing a part that is not below their own (module graph ``g``)."""
    rank = {part: i for i, layer in enumerate(CLUSTER_LAYERS) for part in layer}
    bad = []
    for node, deps in sorted(g.items()):
        if node.split(".")[0] != "cluster":
            continue
        mine = cluster_part(node)
        for d in sorted(deps):
            theirs = cluster_part(d)
            if d.split(".")[0] != "cluster" or theirs == mine:
                continue
            if mine not in rank or theirs not in rank:
                bad.append(f"{node} imports {d} ({mine if mine not in rank else theirs} is in no "
                           f"layer of CLUSTER_LAYERS)")
            elif rank[theirs] >= rank[mine]:
                bad.append(f"{node} imports {d} ({theirs} is not below {mine})")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", action="store_true", help="module-level graph (default: packages)")
    ap.add_argument("--cluster", action="store_true", help="the graph of cluster's parts")
    args = ap.parse_args(argv)
    modules = graph(True)
    g = cluster_graph(modules) if args.cluster else modules if args.modules else graph(False)
    for node in sorted(g):
        print(f"{node:<32} -> {', '.join(sorted(g[node])) or '(nothing of ours)'}")
    cyc = cycles(g)
    bad = violations(modules) + cluster_violations(modules)
    if args.cluster:
        inside = {n: {d for d in ds if d.startswith("cluster")} for n, ds in modules.items()
                  if n.startswith("cluster")}
        cyc += cycles(inside)
    print(f"cycles: {len(cyc)}")
    for c in cyc:
        print("  " + " <-> ".join(c))
    print(f"layering violations: {len(bad)}")
    for b in bad:
        print("  " + b)
    return 1 if cyc or bad else 0


if __name__ == "__main__":
    sys.exit(main())
