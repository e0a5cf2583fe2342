"""No import cycles among the project's modules, and no function-level import inside a package.

The import graph is read statically (``ast``) from ``tiledsl/``, ``search/`` and ``schedules/``: an edge
A -> B for every ``import``/``from … import`` of a project module B anywhere in A, at module level or
inside a function (a ``from pkg import name`` counts as an edge to ``pkg.name`` when that is a module,
else to ``pkg``), so a lazy import cannot hide a cycle. A function-level import of a module of the same
package (``tiledsl`` -> ``tiledsl``, ``search`` -> ``search``) is the usual way to hide one, so it is
refused; lazy imports of optional third-party libraries (cupy, torch, optuna, matplotlib) and of
``tiledsl`` from ``search`` (``python -m search.tune --help`` stays fast) are fine. Each ``tiledsl``
module is also imported alone in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tiledsl", "search", "schedules")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str) -> list[tuple[str, bool]]:
    """(imported project module, at module level?) of ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    is_package = path.name == "__init__.py"
    top = {id(n) for n in tree.body}
    for n in tree.body:  # imports under a module-level `if`/`try` are module level too
        if isinstance(n, (ast.If, ast.Try)):
            top |= {id(c) for c in ast.walk(n)}
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.append((name, id(node) in top))
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_analysis_sees_the_package_structure():
    assert {"tiledsl", "tiledsl.api", "tiledsl.gemm.emit", "search.tune"} <= set(MODULES)
    assert ("tiledsl.gemm.kernel_plan", True) in _imports("tiledsl.gemm.emit")
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]  # the detector finds a cycle


def test_no_import_cycles():
    graph = {m: {name for name, _ in _imports(m)} for m in MODULES}
    # a package's __init__ re-exporting its own submodules is not a cycle through the package's users
    for m in graph:
        graph[m] = {d for d in graph[m] if not (m.startswith(d + ".") and d in MODULES)}
    assert _cycles(graph) == []


def test_no_function_level_import_within_a_package():
    lazy = sorted(f"{m} -> {name}" for m in MODULES for name, top in _imports(m)
                  if not top and name.split(".")[0] == m.split(".")[0])
    assert lazy == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("tiledsl") or m == "search.tune"))
def test_each_module_imports_alone(module):
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
