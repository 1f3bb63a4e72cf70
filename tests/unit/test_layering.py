"""The layering rule, read from the source by tools/import_graph.py: arith imports nothing of
ours, synthesis only arith, gpu never cluster; no cycle between the packages; inside cluster,
each part (cluster.pipeline, cluster.ops, cluster.user, the base modules) imports only the parts
below it; and no two modules anywhere import each other, directly or through others (a lazy
import inside a function counts: the shared piece goes into a lower module both import)."""
from __future__ import annotations

from tools import import_graph as ig


def test_packages_keep_the_layering_and_form_no_cycle():
    g = ig.graph(modules=False)
    assert g["arith"] == set()
    assert g["synthesis"] <= {"arith"}
    assert "cluster" not in g["gpu"]
    assert ig.cycles(g) == []
    assert ig.violations(ig.graph(modules=True)) == []


def test_a_forbidden_import_is_reported():
    g = {"synthesis.circuit": {"gpu.backends"}, "gpu.msm": {"cluster.pipeline.app"}, "arith.native": set()}
    assert ig.violations(g) == ["gpu.msm imports cluster.pipeline.app", "synthesis.circuit imports gpu.backends"]
    assert ig.cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def test_cluster_parts_import_only_the_parts_below_them():
    modules = ig.graph(modules=True)
    assert ig.cluster_violations(modules) == []
    parts = ig.cluster_graph(modules)
    assert set(ig.CLUSTER_SUBPACKAGES) <= parts.keys()
    # the task layer runs in workers without the operator's tools or the command line
    assert parts["cluster.pipeline"] <= {"cluster", "cluster.errors", "cluster.settings", "cluster.version"}
    assert not parts["cluster.ops"] & {"cluster.user", "cluster.client"}
    assert ig.cycles(parts) == []


def test_no_module_cycle_anywhere():
    """`python -m tools.import_graph --modules` reports cycles: 0 (issue 36)."""
    cyc = ig.cycles(ig.graph(modules=True))
    assert cyc == [], "module cycles: " + "; ".join(" <-> ".join(c) for c in cyc)


def test_no_module_cycle_inside_cluster():
    inside = {n: {d for d in deps if d.startswith("cluster")}
              for n, deps in ig.graph(modules=True).items() if n.startswith("cluster")}
    assert ig.cycles(inside) == []


def test_every_cluster_module_is_in_a_part_of_the_layers():
    """A new module at cluster/'s top level must be placed: in a subpackage, or in a layer."""
    ranked = {p for layer in ig.CLUSTER_LAYERS for p in layer}
    parts = {ig.cluster_part(n) for n in ig.graph(modules=True) if n.split(".")[0] == "cluster"}
    assert parts <= ranked


def test_an_upward_or_unplaced_import_inside_cluster_is_reported():
    g = {"cluster.pipeline.tasks": {"cluster.ops.metrics", "cluster.errors"},
         "cluster.ops.plan": {"cluster.user.demo", "cluster.pipeline.app"},
         "cluster.user.demo": {"cluster.ops.commands"},
         "cluster.leases": {"cluster.pipeline.jobs"}}
    assert ig.cluster_violations(g) == [
        "cluster.leases imports cluster.pipeline.jobs (cluster.leases is in no layer of CLUSTER_LAYERS)",
        "cluster.ops.plan imports cluster.user.demo (cluster.user is not below cluster.ops)",
        "cluster.pipeline.tasks imports cluster.ops.metrics (cluster.ops is not below cluster.pipeline)",
    ]
    assert ig.cluster_graph(g)["cluster.ops"] == {"cluster.user", "cluster.pipeline"}


#: synthesis/'s layers, bottom up (docs/circuits.md, "synthesis/ in one page"): a module may
#: import its own layer's modules and those below, never above; families never each other
SYNTHESIS_FAMILIES = ("synthesis.porep", "synthesis.filecoin")
#: the retired stack's names (issue 36): nothing may import them again
RETIRED = ("synthesis.gadgets", "synthesis.poseidon")


def synthesis_violations(g: dict[str, set[str]]) -> list[str]:
    """Imports that break synthesis/'s layering: the gadget library (synthesis.bellpepper)
    importing a family or the family base, one family importing another, anything but
    anything importing the retired names."""
    out = []
    for mod, deps in sorted(g.items()):
        if not mod.startswith("synthesis."):
            continue
        fam = next((f for f in SYNTHESIS_FAMILIES if mod == f or mod.startswith(f + ".")), None)
        for d in sorted(deps):
            if mod.startswith("synthesis.bellpepper") and (
                    d.startswith(SYNTHESIS_FAMILIES) or d.startswith(("synthesis.family", "synthesis.assignment"))):
                out.append(f"{mod} imports {d} (the gadget library is below the families)")
            other = next((f for f in SYNTHESIS_FAMILIES if d == f or d.startswith(f + ".")), None)
            if fam and other and other != fam:
                out.append(f"{mod} imports {d} (a family never imports another)")
            if d.startswith(RETIRED):
                out.append(f"{mod} imports {d} (retired in issue 36: synthesis.bellpepper)")
    return out


def test_synthesis_layers_hold():
    assert synthesis_violations(ig.graph(modules=True)) == []


def test_synthesis_layers_are_refused_naming_the_import():
    g = {"synthesis.porep.gadget": {"synthesis.filecoin.stacked", "synthesis.gadgets.core"},
         "synthesis.bellpepper.insertion": {"synthesis.porep.params"},
         "synthesis.filecoin.post": {"synthesis.poseidon"}}
    assert synthesis_violations(g) == [
        "synthesis.bellpepper.insertion imports synthesis.porep.params (the gadget library is below the families)",
        "synthesis.filecoin.post imports synthesis.poseidon (retired in issue 36: synthesis.bellpepper)",
        "synthesis.porep.gadget imports synthesis.filecoin.stacked (a family never imports another)",
        "synthesis.porep.gadget imports synthesis.gadgets.core (retired in issue 36: synthesis.bellpepper)",
    ]
