"""The layering rule, read from the source by tools/import_graph.py: arith imports nothing of
ours, synthesis only arith, gpu never cluster; and no cycle between the packages."""
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
    g = {"synthesis.circuit": {"gpu.backends"}, "gpu.msm": {"cluster.app"}, "arith.native": set()}
    assert ig.violations(g) == ["gpu.msm imports cluster.app", "synthesis.circuit imports gpu.backends"]
    assert ig.cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
