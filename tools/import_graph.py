"""The import graph of zkhive's packages, read from the source (``ast``; nothing is imported).

    python -m tools.import_graph            # package -> packages it imports, and any cycles
    python -m tools.import_graph --modules  # the same between modules, inside each package too

Every import counts, also one inside a function (a lazy import is still a dependency). Exit 1
when a layering rule is broken or a cycle exists:

    arith      imports nothing of ours
    synthesis  imports only arith
    gpu        imports synthesis and arith, never cluster
    cluster    may import all of them
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


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
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
            out.add(mod)
            # `from pkg import sub` may name a submodule
            out.update(f"{mod}.{a.name}" for a in node.names)
    return {m for m in out if m.split(".")[0] in PACKAGES}


def graph(modules: bool) -> dict[str, set[str]]:
    known = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    g: dict[str, set[str]] = {}
    for name, path in sorted(known.items()):
        deps = set()
        for m in imports_of(path):
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
    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def violations(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for node, deps in sorted(g.items()):
        pkg = node.split(".")[0]
        for d in sorted(deps):
            if d.split(".")[0] != pkg and d.split(".")[0] not in ALLOWED[pkg]:
                bad.append(f"{node} imports {d}")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", action="store_true", help="module-level graph (default: packages)")
    args = ap.parse_args(argv)
    g = graph(args.modules)
    for node in sorted(g):
        print(f"{node:<32} -> {', '.join(sorted(g[node])) or '(nothing of ours)'}")
    cyc, bad = cycles(g), violations(graph(True))
    print(f"cycles: {len(cyc)}")
    for c in cyc:
        print("  " + " <-> ".join(c))
    print(f"layering violations: {len(bad)}")
    for b in bad:
        print("  " + b)
    return 1 if cyc or bad else 0


if __name__ == "__main__":
    sys.exit(main())
