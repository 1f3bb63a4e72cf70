"""Every kernel a driver looks up by name exists in the module it looks in, checked without a GPU.

After msm.cu was split into one module per heavy kernel, gpu/cuda/params.py still asked
``load_module("msm")`` for ``g1_load_bases`` (now in msm_g1.cu): a prover loading a key from a
``.params`` file failed to start on the H200, and no CPU test could see it. Here the kernels of
each module come from the C preprocessor (g++ -E, the macro instantiations of msm_points.cuh
included), and the lookups from the drivers' source: ``get_function(load_module("M"), NAME)``
anywhere in gpu/, and ``gpu.cuda.msm.kernel(NAME)`` through the module map that function uses.
A name with ``{g}``, ``{g.name}`` (or ``g{kind}``) stands for both groups, a conditional for both
of its names.
"""
from __future__ import annotations

import ast
import functools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "gpu" / "kernels"
# a kernel's name comes after its __launch_bounds__(...), where it has them
BOUNDS = r'(?:__launch_bounds__\s*\([^)]*\)\s*)?'
GLOBAL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+' + BOUNDS + r'([A-Za-z0-9_]+)')


@functools.cache
def preprocessed(module: str) -> str:
    """``module``.cu after the C preprocessor (skips without one)."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ preprocessor (g++)")
    res = subprocess.run([cxx, "-E", "-P", "-x", "c++", f"-I{KERNELS}", f"-I{ROOT / 'arith' / 'include'}",
                          str(KERNELS / f"{module}.cu")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@functools.cache
def kernels_of(module: str) -> frozenset[str]:
    return frozenset(GLOBAL.findall(preprocessed(module)))


def _names(node: ast.expr) -> list[str] | None:
    """The kernel names a string or f-string argument stands for (None: not a literal)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):  # "a" if encoded else "b": both
        a, b = _names(node.body), _names(node.orelse)
        return a + b if a is not None and b is not None else None
    if isinstance(node, ast.JoinedStr):
        text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        holes = [v for v in node.values if isinstance(v, ast.FormattedValue)]
        if len(holes) == 1:
            src = ast.unparse(holes[0].value)
            if src in ("g", "g.name") and text.startswith("{}"):
                return [text.replace("{}", grp, 1) for grp in ("g1", "g2")]
            if src == "kind" and text.startswith("g{}"):  # compress.py: g{1,2}_decompress
                return [text.replace("{}", k, 1) for k in ("1", "2")]
    return None


def lookups() -> list[tuple[str, int, str, str]]:
    """(file, line, module, kernel) of every lookup in the two forms the module docstring names."""
    from gpu.cuda.msm import module_of

    found = []
    for path in sorted((ROOT / "gpu").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call) or not call.args:
                continue
            fn = ast.unparse(call.func)
            if fn.endswith("get_function") and len(call.args) == 2:
                mod = call.args[0]
                if (isinstance(mod, ast.Call) and ast.unparse(mod.func).endswith("load_module")
                        and isinstance(mod.args[0], ast.Constant)):
                    for name in _names(call.args[1]) or []:
                        found.append((path.name, call.lineno, mod.args[0].value, name))
            elif fn in ("kernel", "msm_kernel") and len(call.args) == 1:
                for name in _names(call.args[0]) or []:
                    found.append((path.name, call.lineno, module_of(name), name))
    return found


def test_every_looked_up_kernel_is_in_its_module():
    found = lookups()
    # the scan sees the lookups it is meant to see (params' load, msm's, compress's)
    assert {(m, k) for _, _, m, k in found} >= {("msm_g1", "g1_load_bases"), ("msm_g2", "g2_load_bases"),
                                                ("msm_merge", "g1_merge_buckets"), ("decompress", "g1_decompress"),
                                                ("params", "g2_store_file_points"), ("subgroup", "g1_check_points")}
    missing = [f"{f}:{line}: {name} is not a kernel of {mod}.cu" for f, line, mod, name in found
               if name not in kernels_of(mod)]
    assert not missing, "\n".join(missing)


def test_a_kernel_looked_up_in_the_wrong_module_is_found():
    """The check itself bites: the lookup params.py had after the split."""
    assert "g1_load_bases" not in kernels_of("msm") and "g1_load_bases" in kernels_of("msm_g1")


def kernel_arity(module: str, name: str) -> int:
    """The number of parameters of kernel ``name`` in ``module``.cu (preprocessed)."""
    text = preprocessed(module)
    m = re.search(r'__global__\s+void\s+' + BOUNDS + name + r'\s*\(', text)
    assert m, f"{name} not found in {module}.cu"
    depth, params, start = 1, [], m.end()
    i = start
    while depth:
        c = text[i]
        if c in "(<":
            depth += 1
        elif c in ")>":
            depth -= 1
        if (c == "," and depth == 1) or depth == 0:
            params.append(text[start:i].strip())
            start = i + 1
        i += 1
    return len([p for p in params if p])


def prepared_signatures() -> list[tuple[int, str, str]]:
    """(line, kernel, PyCUDA signature) of NttEngine's prepared launches (gpu/cuda/ntt.py)."""
    tree = ast.parse((ROOT / "gpu" / "cuda" / "ntt.py").read_text())
    out = []
    for call in ast.walk(tree):
        if (isinstance(call, ast.Call) and ast.unparse(call.func) == "f" and len(call.args) == 2
                and all(isinstance(a, ast.Constant) for a in call.args)):
            out.append((call.lineno, call.args[0].value, call.args[1].value))
    return out


def test_prepared_signatures_have_the_kernels_arity():
    """A prepared launch packs exactly its signature's arguments: one letter short or over and
    every argument after it lands in the wrong parameter, with no error (a8bbd05 gave the
    radix-4 passes an 11th parameter)."""
    sigs = prepared_signatures()
    assert {k for _, k, _ in sigs} >= {"ntt_dif_pass4", "ntt_dit_pass4", "ntt_h_pointwise"}
    arity = {name: kernel_arity("ntt", name) for _, name, _ in sigs}
    wrong = [f"ntt.py:{line}: {name} prepared with {len(sig)} arguments ({sig}), the kernel "
             f"takes {arity[name]}" for line, name, sig in sigs if len(sig) != arity[name]]
    assert not wrong, "\n".join(wrong)
    assert kernel_arity("ntt", "ntt_dif_pass4") == 11 and kernel_arity("ntt", "ntt_dif_pass") == 10


def test_every_ones_chains_form_is_a_kernel_of_its_module():
    """Each form of gpu/affine_plan.py ONES_KERNELS names a kernel its module defines
    (gpu/cuda/split_msm.py builds module and name from the form, which the lookups above cannot
    read): "whole" in ones_affine.cu / ones_affine_g2.cu, the others in their *_variants.cu."""
    from gpu.affine_plan import ONES_KERNELS, ones_chains_kernel
    for g, forms in ONES_KERNELS.items():
        for form in forms:
            mod, name = ones_chains_kernel(g, form)
            assert name in kernels_of(mod), (form, mod, sorted(kernels_of(mod)))


def test_every_apply_form_is_a_kernel_of_its_module():
    """Each form of gpu/affine_plan.py APPLY_KERNELS names both apply kernels in the module
    apply_kernel_of gives (gpu/cuda/affine_acc.py loads them by it)."""
    from gpu.affine_plan import APPLY_KERNELS, apply_kernel_of
    for form in APPLY_KERNELS:
        for k in ("g1_pair_apply_table", "g1_pair_apply"):
            mod, name = apply_kernel_of(k, form)
            assert name in kernels_of(mod), (form, mod, name)
