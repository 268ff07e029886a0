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
PACKAGES = ("conformance", "emulator", "opsuites", "model_zoo", "migrate", "reports", "benchmarks")
HARNESS = ("conformance", "opsuites", "model_zoo", "migrate", "reports")
"""The harness and its tools: everything that judges a backend, as opposed to ``emulator`` (a backend)."""
NAMESPACE = "neuron_conformance"
"""The one top-level import package of the distribution: every package above but ``benchmarks`` (which is
not installed) is imported as ``neuron_conformance.<package>`` (``neuron_conformance/__init__.py``)."""
MAX_LINES = 600
RULE_MODULES_OVER_LIMIT: set = set()
"""Rule modules whose size is their docs (each rule's documentation lives with its code)."""
DEFERRED_REASON = re.compile(r"#.*\S")


def _in_package(path: Path, root: Path) -> bool:
    """True when every folder from ``root`` down to ``path`` is a Python package: a run's output written
    into the tree (``reports/latest/repro/*.py``) is not the project's code."""
    folder = path.parent
    while folder != root:
        if not (folder / "__init__.py").is_file():
            return False
        folder = folder.parent
    return True


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "fixtures" in path.parts or not _in_package(path, ROOT / pkg):
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
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


END_LINES: dict[tuple[str, int], int] = {}
"""(module, first line of an import statement) -> its last line (the formatter may wrap a long import)."""


def _imports(module: str, path: Path, typing_too: bool = False):
    """``(target module, line, deferred)`` for every project import of ``module`` that runs (and, with
    ``typing_too``, those under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []

    def resolve(name: str) -> str | None:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node, deferred: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test) and not typing_too:
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
                    base = base[: len(base) - (child.level - 1)] if child.level > 1 else base
                    base_name = ".".join(base + ([child.module] if child.module else []))
                else:
                    base_name = child.module or ""
                for alias in child.names:
                    full = f"{base_name}.{alias.name}"
                    target = full if full in MODULES else resolve(base_name)
                    if target:
                        found.append((target, child.lineno, deferred))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                END_LINES[(module, child.lineno)] = child.end_lineno or child.lineno
            inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, inner)

    visit(tree, False)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}
TYPING_GRAPH = {m: _imports(m, p, typing_too=True) for m, p in MODULES.items()}


def _cycles(graph: dict | None = None) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan), or a self-import."""
    graph = GRAPH if graph is None else graph
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
        for w, _line, _deferred in graph.get(v, ()):
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

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_graph_sees_the_projects_imports():
    """Should find known edges, deferred ones included (a graph that finds nothing would pass anything)."""
    assert ("neuron_conformance.conformance.pytest_plugin.session", False) in {
        (t, d) for t, _l, d in GRAPH["neuron_conformance.conformance.pytest_plugin.plugin"]
    }
    assert any(
        t == "neuron_conformance.conformance.results.records"
        for t, _l, _d in GRAPH["neuron_conformance.reports.collect"]
    )
    assert any(d for edges in GRAPH.values() for _t, _l, d in edges)


def test_no_import_cycle():
    cycles = _cycles()
    detail = []
    for comp in cycles:
        members = set(comp)
        detail.append(
            " <-> ".join(comp)
            + ": "
            + "; ".join(f"{m}:{line} -> {t}" for m in comp for t, line, _d in GRAPH[m] if t in members and t != m)
        )
    assert not cycles, "import cycles among the project's modules:\n" + "\n".join(detail)


def test_no_import_cycle_through_type_checking_imports():
    """Imports made for annotations only count too: a cycle there is a dependency the design hides."""
    cycles = _cycles(TYPING_GRAPH)
    assert not cycles, "import cycles (TYPE_CHECKING imports included):\n" + "\n".join(
        " <-> ".join(comp) for comp in cycles
    )


def _package(module: str) -> str:
    return module.split(".")[1] if module.startswith(NAMESPACE + ".") else module.split(".")[0]


def test_no_harness_module_imports_or_names_the_emulator():
    """The emulated device is a backend like any other: the harness reaches it only through the backend
    contract (its module's CONFORMANCE_* declarations, found through the emulated-devices entry point)."""
    offenders = []
    for module, path in MODULES.items():
        if _package(module) not in HARNESS:
            continue
        offenders += [
            f"{module}:{line} imports {t}" for t, line, _d in TYPING_GRAPH[module] if _package(t) == "emulator"
        ]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        offenders += [
            f"{module}:{n.lineno} names {n.value!r}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and id(n) not in docstrings
            and f"{NAMESPACE}.emulator" in n.value
        ]
    assert not offenders, "harness modules that import or name the emulator:\n" + "\n".join(offenders)


def test_the_emulator_imports_nothing_of_the_harness():
    """The emulator is written as a vendor would write a backend: torch and itself, nothing of the harness."""
    assert any(_package(m) == "emulator" for m in MODULES), "no emulator module found"
    offenders = [
        f"{m}:{line} imports {t}"
        for m, edges in TYPING_GRAPH.items()
        if _package(m) == "emulator"
        for t, line, _d in edges
        if _package(t) != "emulator" and t != NAMESPACE
    ]
    assert not offenders, "the emulator imports the harness:\n" + "\n".join(offenders)


def _import_styles(package: str) -> dict[str, list[str]]:
    """``{"relative": [...], "absolute": [...]}``: the package's imports of its own modules, by style."""
    styles: dict[str, list[str]] = {"relative": [], "absolute": []}
    own = f"{NAMESPACE}.{package}"
    for module, path in MODULES.items():
        if _package(module) != package:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                styles["relative"].append(f"{module}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(own):
                styles["absolute"].append(f"{module}:{node.lineno}")
            elif isinstance(node, ast.Import) and any(a.name.startswith(own) for a in node.names):
                styles["absolute"].append(f"{module}:{node.lineno}")
    return styles


@pytest.mark.parametrize("package", [p for p in PACKAGES if p != "benchmarks"])
def test_one_import_style_inside_each_package(package):
    """A package imports its own modules one way: all relative or all absolute."""
    styles = _import_styles(package)
    assert styles["relative"] or styles["absolute"], f"{package}: no import of its own modules found"
    mixed = min(styles.values(), key=len)
    assert not (styles["relative"] and styles["absolute"]), f"{package} mixes import styles; the fewer: {mixed}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    path = MODULES[module]
    rel = path.relative_to(ROOT).as_posix()
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if rel in RULE_MODULES_OVER_LIMIT:
        return
    assert lines <= MAX_LINES, f"{rel} has {lines} lines (at most {MAX_LINES}: split it by concern)"


def test_deferred_imports_say_why():
    """An import of a project module inside a function carries a comment on its lines or the line above
    (start-up cost, optional dependency, fork safety, ...); otherwise it belongs at the module's top."""
    missing = []
    for module, edges in GRAPH.items():
        lines = MODULES[module].read_text(encoding="utf-8").splitlines()
        for _target, line, deferred in edges:
            if not deferred:
                continue
            statement = lines[line - 1 : END_LINES.get((module, line), line)]
            above = lines[line - 2] if line >= 2 else ""
            if not any("#" in text for text in statement) and not above.strip().startswith("#"):
                missing.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {statement[0].strip()}")
    assert not missing, "deferred imports without a reason:\n" + "\n".join(missing)


def test_plugin_is_hooks_and_fixtures_only():
    tree = ast.parse((ROOT / "conformance" / "pytest_plugin" / "plugin.py").read_text(encoding="utf-8"))
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
    assert not others, (
        f"conformance/pytest_plugin/plugin.py must hold pytest hooks and fixtures only; also has {others}"
    )


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
    wanted = {
        p.relative_to(ROOT).as_posix()
        for m, p in MODULES.items()
        if m.split(".")[0] == NAMESPACE
        and p.parent != ROOT / NAMESPACE
        and p.name != "__init__.py"
        and "emulator" not in p.parts
    }
    missing = sorted(w for w in wanted if w not in listed)
    assert not missing, f"docs/architecture.md's module map does not list: {missing}"
