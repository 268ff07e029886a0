"""The project's shape, checked: no import cycle, small modules, a plugin of hooks only, a module map
that names every module, and a reason beside every deferred import.

The import graph is read from the source with :mod:`ast` (nothing is imported): every ``import`` and
``from ... import`` of a project module, at module top or inside a function, is an edge; imports under
``if TYPE_CHECKING:`` are not (they never run). ``from pkg import name`` is an edge to ``pkg.name`` when
that is a module, else to ``pkg``. The implicit import of a package's ``__init__`` by its submodules is
not an edge (Python runs it first, whatever the submodule imports).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("conformance", "opsuites", "model_zoo", "migrate", "reports", "benchmarks")
NAMESPACE = "neuron_conformance"
"""The one top-level import package of the distribution: every package above but ``benchmarks`` (which is
not installed) is imported as ``neuron_conformance.<package>`` (``neuron_conformance/__init__.py``)."""
MAX_LINES = 600
RULE_MODULES_OVER_LIMIT: set = set()
"""Rule modules whose size is their docs (each rule's documentation lives with its code)."""
DEFERRED_REASON = re.compile(r"#.*\S")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "fixtures" in path.parts:
                continue
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(([NAMESPACE] if pkg != "benchmarks" else []) + parts)] = path
    out[NAMESPACE] = ROOT / NAMESPACE / "__init__.py"
    return out


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: str, path: Path):
    """``(target module, line, deferred)`` for every project import of ``module`` that runs."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []

    def resolve(name: str) -> str | None:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node, deferred: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:
                    visit(sub, deferred)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    target = resolve(alias.name)
                    if target:
                        found.append((target, child.lineno, deferred))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[:len(base) - (child.level - 1)] if child.level > 1 else base
                    base_name = ".".join(base + ([child.module] if child.module else []))
                else:
                    base_name = child.module or ""
                for alias in child.names:
                    full = f"{base_name}.{alias.name}"
                    target = full if full in MODULES else resolve(base_name)
                    if target:
                        found.append((target, child.lineno, deferred))
            inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, inner)

    visit(tree, False)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _cycles() -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan), or a self-import."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w, _line, _deferred in GRAPH.get(v, ()):
            if w == v or (w in MODULES and v.startswith(w + ".")):
                continue  # a submodule importing its own package's __init__ runs nothing new
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            strong(v)
    return out


def test_the_graph_sees_the_projects_imports():
    """Should find known edges, deferred ones included (a graph that finds nothing would pass anything)."""
    assert ("neuron_conformance.conformance.session", False) in {(t, d) for t, _l, d in GRAPH["neuron_conformance.conformance.plugin"]}
    assert any(t == "neuron_conformance.conformance.records" for t, _l, _d in GRAPH["neuron_conformance.reports.collect"])
    assert any(d for edges in GRAPH.values() for _t, _l, d in edges)


def test_no_import_cycle():
    cycles = _cycles()
    detail = []
    for comp in cycles:
        members = set(comp)
        detail.append(" <-> ".join(comp) + ": " + "; ".join(
            f"{m}:{line} -> {t}" for m in comp for t, line, _d in GRAPH[m] if t in members and t != m))
    assert not cycles, "import cycles among the project's modules:\n" + "\n".join(detail)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    path = MODULES[module]
    rel = path.relative_to(ROOT).as_posix()
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if rel in RULE_MODULES_OVER_LIMIT:
        return
    assert lines <= MAX_LINES, f"{rel} has {lines} lines (at most {MAX_LINES}: split it by concern)"


def test_deferred_imports_say_why():
    """An import of a project module inside a function carries a comment on its line or the line above
    (start-up cost, optional dependency, fork safety, ...); otherwise it belongs at the module's top."""
    missing = []
    for module, edges in GRAPH.items():
        lines = MODULES[module].read_text(encoding="utf-8").splitlines()
        for _target, line, deferred in edges:
            if not deferred:
                continue
            here, above = lines[line - 1], lines[line - 2] if line >= 2 else ""
            if "#" not in here and not above.strip().startswith("#"):
                missing.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {here.strip()}")
    assert not missing, "deferred imports without a reason:\n" + "\n".join(missing)


def test_plugin_is_hooks_and_fixtures_only():
    tree = ast.parse((ROOT / "conformance" / "plugin.py").read_text(encoding="utf-8"))
    others = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = ast.unparse(node.decorator_list) if node.decorator_list else ""
            if not node.name.startswith("pytest_") and "fixture" not in decorators:
                others.append(node.name)
        elif isinstance(node, ast.ClassDef):
            others.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            others.append(ast.unparse(node)[:40])
    assert not others, f"conformance/plugin.py must hold pytest hooks and fixtures only; also has {others}"


def test_architecture_map_names_every_module():
    """docs/architecture.md's module map lists every module of the shipped packages, one line each."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("```", 2)[1]
    listed = set()
    folders: list[tuple[int, str]] = []  # (indent, path) of the folders enclosing the current line
    for line in block.splitlines():
        m = re.match(r"^(\s*)(\S+)\s", line + " ")
        if not m:
            continue
        indent, name = len(m.group(1)), m.group(2)
        while folders and folders[-1][0] >= indent:
            folders.pop()
        path = (folders[-1][1] if folders else "") + name
        if name.endswith("/"):
            folders.append((indent, path))
        else:
            listed.add(path)
    wanted = {p.relative_to(ROOT).as_posix() for m, p in MODULES.items()
              if m.split(".")[0] == NAMESPACE and p.parent != ROOT / NAMESPACE
              and p.name != "__init__.py" and "emulator" not in p.parts}
    missing = sorted(w for w in wanted if w not in listed)
    assert not missing, f"docs/architecture.md's module map does not list: {missing}"
