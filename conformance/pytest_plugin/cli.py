"""``neuron-conformance``: run the installed op suites and model zoo from any folder.

::

    neuron-conformance run [SUITE ...] [OPTION ...]
    neuron-conformance list
    neuron-conformance hf-spec [--dir DIR] [--device NAME] [--backend-module MODULE]
    neuron-conformance --help | run --help

``run`` calls pytest, in this process, on the suites' files inside the installed distribution (the folder
next to this package, :data:`neuron_conformance.conformance.pytest_plugin.siblings.ROOT`; never the current folder), so it runs the same
from a wheel, an editable install or a clone, from any folder, and the report goes to ``reports/latest/``
under the current folder (``--conformance-report-dir`` is relative to it). SUITE (see :func:`resolve_suite`) comes
first; every OPTION after it (pytest's, pytest-xdist's, the harness's) passes through to pytest unchanged,
except for the additions of :func:`pytest_args`.

Exit codes: pytest's (0 passed, 1 tests failed, 2 usage, ...); 2 with one line on stderr for an unknown
SUITE, an unimportable ``--conformance-backend-module`` or a bad ``[tool.conformance]`` table of ``./pyproject.toml``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
from pathlib import Path

from neuron_conformance.conformance.pytest_plugin.siblings import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

PROG = "neuron-conformance"
EXIT_USAGE = 2
ALL_OPS = "opsuites"
"""SUITE name of every op suite (the default: the op suites are what a plain ``pytest`` runs in a clone)."""
ZOO = "zoo"
"""SUITE name of the model zoo (``model_zoo/``: Hugging Face models and distributed scenarios)."""
PATH_OPTIONS = (
    "--conformance-report-dir",
    "--conformance-manifest",
    "--conformance-baseline",
    "--conformance-shard-durations",
)
"""The harness's path options (:data:`neuron_conformance.conformance.pytest_plugin.startup.PATH_OPTIONS`); ``run`` writes them ``--opt=PATH``."""
NO_XDIST = ("-n", "--numprocesses", "--conformance-isolate", "--pdb", "--trace")
"""Options before which ``run`` does not add ``-n auto``: the worker count is chosen, or the run needs one
process (``--conformance-isolate`` runs its own child processes; a debugger needs the terminal)."""

REWRITE_WARNING_FILTER = (
    "ignore:Module already imported so cannot be rewritten; neuron_conformance:pytest.PytestAssertRewriteWarning"
)
"""This command imported ``neuron_conformance`` before pytest starts, so pytest cannot rewrite the asserts of the
plugin's package and warns once; the plugin reports through its own exceptions, not plain asserts. (A
command-line ``-W`` message is a literal prefix of the warning's text, pytest 9's wording.)"""

USAGE = f"""usage: {PROG} run [SUITE ...] [OPTION ...]
       {PROG} list
       {PROG} hf-spec [--dir DIR] [--device NAME] [--backend-module MODULE]
       {PROG} --help

Run the conformance suites installed with this package, from any folder; the report goes to
./reports/latest/ (or --conformance-report-dir=DIR, relative to the current folder).

SUITE (default: {ALL_OPS}):
  NAME          an op suite, e.g. compare_cpu, layouts, autograd ('{PROG} list' names them all)
  {ALL_OPS:<13} every op suite
  {ZOO:<13} the model zoo (Hugging Face models, distributed scenarios; e.g. with -m model_zoo_ci)
  NAME::TEST    one test of a suite, e.g. 'compare_cpu::test_compare_cpu[add-float32]'
  PATH          an existing test file or folder of your own
OPTION: any pytest, pytest-xdist or harness option, after the SUITEs, e.g. --conformance-ops add,mul --conformance-dtypes float32
  --conformance-device neuron --conformance-backend-module torch_neuronx --conformance-manifest=my_xfails.toml -k EXPR -m MARK -n 8 -x
  ('pytest --help', group 'device conformance harness', lists the harness options).
Added unless given: -n auto, --rootdir=<the installed suites' folder>, -o cache_dir=./.pytest_cache.
[tool.conformance] of ./pyproject.toml is read (below environment variables and flags).
Exit code: pytest's; 2 for bad input (one line naming it).

hf-spec writes a transformers device spec (TRANSFORMERS_TEST_DEVICE_SPEC) into DIR, so that
transformers' own tests run on the device (docs/model_zoo.md, "transformers' own tests")."""


class UsageError(Exception):
    """A bad command line or ``[tool.conformance]`` table; the message names the input and what is accepted."""


def op_suites() -> dict[str, Path]:
    """Op-suite name -> its installed test module: ``opsuites/test_<name>.py`` under :data:`ROOT`, sorted."""
    return {p.stem[len("test_") :]: p for p in sorted((ROOT / "opsuites").glob("test_*.py"))}


def suite_targets() -> dict[str, Path]:
    """Every SUITE name ``run`` accepts -> the file or folder pytest collects for it."""
    return {**op_suites(), ALL_OPS: ROOT / "opsuites", ZOO: ROOT / "model_zoo"}


def resolve_suite(name: str, cwd: Path) -> str:
    """The pytest argument for one SUITE word.

    ``name`` is a suite name (:func:`suite_targets`), ``NAME::TEST`` (a test of that suite, the rest of
    a pytest node id) or an existing path (relative to ``cwd``), passed on as given.

    Raises:
        UsageError: none of these, naming ``name`` and the accepted suite names.
    """
    targets = suite_targets()
    suite, sep, rest = name.partition("::")
    if suite in targets:
        return f"{targets[suite]}{sep}{rest}"
    if (cwd / suite).exists():
        return name
    raise UsageError(
        f"unknown suite {name!r}; accepted: {', '.join(targets)}, NAME::TEST, or an existing test file or folder"
    )


def split_run_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """Split ``run``'s arguments into the leading SUITE words and the options after them.

    Every word up to the first one that starts with ``-`` is a SUITE; from there on everything is an
    option or an option's value (``-k add`` keeps ``add`` with ``-k``), passed to pytest as written.
    """
    for i, word in enumerate(argv):
        if word.startswith("-"):
            return argv[:i], argv[i:]
    return list(argv), []


def _given(options: list[str], *flags: str) -> bool:
    """Whether ``options`` set any of ``flags`` (``-n 4``, ``-n4``, ``--numprocesses=4``, ``--rootdir=D``)."""
    for word in options:
        for flag in flags:
            if word == flag or word.startswith(flag + "="):
                return True
            if len(flag) == 2 and word.startswith(flag) and not word.startswith("--"):
                return True
    return False


def _xdist_off(options: list[str]) -> bool:
    """Whether ``options`` disable pytest-xdist (``-p no:xdist``, ``-pno:xdist``)."""
    pairs = zip(options, options[1:] + [""])
    return any(w == "-pno:xdist" or (w == "-p" and nxt == "no:xdist") for w, nxt in pairs)


def join_path_options(options: list[str]) -> list[str]:
    """``--conformance-manifest X`` -> ``--conformance-manifest=X`` for the harness's path options (:data:`PATH_OPTIONS`): written with
    a space, an existing path would make pytest take it for a test path (docs/harness.md)."""
    out: list[str] = []
    i = 0
    while i < len(options):
        word = options[i]
        if word in PATH_OPTIONS and i + 1 < len(options):
            out.append(f"{word}={options[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def option_value(options: list[str], flag: str) -> str | None:
    """The last value given to ``flag`` in ``options`` (``--flag V`` or ``--flag=V``), else None."""
    value = None
    for i, word in enumerate(options):
        if word == flag and i + 1 < len(options):
            value = options[i + 1]
        elif word.startswith(flag + "="):
            value = word.split("=", 1)[1]
    return value


def check_backend_module(options: list[str]) -> None:
    """Stop before pytest starts when the ``--conformance-backend-module`` (flag, else ``CONFORMANCE_BACKEND_MODULE``)
    cannot be found on this Python. Only located (:func:`importlib.util.find_spec`), not imported: the
    harness imports it, and probes a third-party one in a child process (:mod:`neuron_conformance.conformance.backend.probe`).

    Raises:
        UsageError: naming the module, the interpreter searched and what is accepted.
    """
    name = option_value(options, "--conformance-backend-module") or os.environ.get("CONFORMANCE_BACKEND_MODULE") or None
    if not name:
        return
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError) as exc:  # a parent package missing or failing, or a malformed name
        found, why = False, f" ({type(exc).__name__}: {exc})"
    else:
        why = ""
    if not found:
        raise UsageError(
            f"--conformance-backend-module {name!r}: no such module on {sys.executable}{why}; accepted: an "
            f"importable module that registers the device's backend (e.g. torch_neuronx), or "
            f"none for built-in devices and the emulated neuron device"
        )


def export_pyproject(cwd: Path, environ: dict) -> list[str]:
    """Put ``[tool.conformance]`` of ``cwd/pyproject.toml`` into ``environ`` as the options' environment
    variables, for the keys whose variable is unset.

    ``run`` points pytest's rootdir at the installed suites, and the harness reads ``[tool.conformance]``
    from the rootdir (:mod:`neuron_conformance.conformance.pytest_plugin.options`); exported this way, the current folder's table keeps its
    place in the precedence: flag, then environment variable, then ``[tool.conformance]``. Returns the
    variables set. Nothing is done when ``cwd`` is the rootdir itself (a clone): the harness reads it.

    Raises:
        UsageError: the file is not valid TOML, or the table has a key that is no option's.
    """
    path = cwd / "pyproject.toml"
    if not path.is_file() or cwd.resolve() == ROOT:
        return []
    from neuron_conformance.conformance.pytest_plugin import (
        options as opts,
    )  # deferred: neuron_conformance.conformance.pytest_plugin.options imports pytest and the budget parser

    try:
        table = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("conformance", {}) or {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: invalid TOML: {exc}") from None
    by_key = {o.key: o for o in opts.OPTIONS}
    try:
        opts.check_table_keys(path, table)
    except opts.OptionError as exc:
        raise UsageError(str(exc)) from None
    exported = []
    for key, value in table.items():
        env = by_key[key].env
        if environ.get(env) in (None, ""):
            environ[env] = ("1" if value else "") if isinstance(value, bool) else str(value)
            exported.append(env)
    return exported


def opt_in(environ: dict) -> str | None:
    """Ask the plugin explicitly for a conformance session, where the plugin has that switch: set the
    environment variable of its ``activate`` option (``--conformance``, docs/harness.md "Opt-in activation") to
    ``on`` when unset. Collecting the installed suites activates the plugin anyway; this also covers a
    ``PATH`` SUITE of the user's own. Returns the variable set, else None (no such option, or already set).
    """
    from neuron_conformance.conformance.pytest_plugin import (
        options as opts,
    )  # deferred: neuron_conformance.conformance.pytest_plugin.options imports pytest and the budget parser

    option = opts.BY_DEST.get("activate")
    if option is None or environ.get(option.env) not in (None, ""):
        return None
    environ[option.env] = "on"
    return option.env


def pytest_args(suites: list[str], options: list[str], cwd: Path) -> list[str]:
    """The pytest command line of ``run SUITE... OPTION...`` (run from ``cwd``).

    Adds, each only when ``options`` do not set it: ``-n auto`` (not with :data:`NO_XDIST` or
    ``-p no:xdist``); ``--rootdir=ROOT``, so that node ids read ``opsuites/test_<suite>.py::...`` as in a
    clone (comparable with a clone's ``--conformance-baseline`` and ``--conformance-shard-durations``; with the current folder as
    rootdir pytest would drop the path from ids outside it); ``-o cache_dir=cwd/.pytest_cache`` (pytest's
    cache, which holds the suites' cached parameters, in the current folder, never in site-packages); and
    ``-W`` :data:`REWRITE_WARNING_FILTER`.

    Raises:
        UsageError: an unknown SUITE (:func:`resolve_suite`).
    """
    targets = [resolve_suite(s, cwd) for s in suites] or [str(suite_targets()[ALL_OPS])]
    options = join_path_options(options)
    added = []
    if not _given(options, *NO_XDIST) and not _xdist_off(options):
        added += ["-n", "auto"]
    if not _given(options, "--rootdir", "-c", "--config-file"):
        added.append(f"--rootdir={ROOT}")
    if not any(w.startswith("cache_dir=") for w in options):
        added += ["-o", f"cache_dir={cwd / '.pytest_cache'}"]
    added += ["-W", REWRITE_WARNING_FILTER]
    return [*targets, *added, *options]


def _summary_line(path: Path) -> str:
    """The first line of a module's docstring, read without importing it (importing a suite imports torch)."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (OSError, SyntaxError, UnicodeDecodeError):
        doc = None
    first = " ".join((doc or "").strip().split("\n\n")[0].split())
    return first if len(first) <= 110 else first[:109] + "…"


def list_suites() -> str:
    """The text of ``neuron-conformance list``: each SUITE name, what it checks, where it is installed."""
    rows = [(name, _summary_line(path)) for name, path in op_suites().items()]
    rows += [
        (ALL_OPS, "every op suite above (the default)"),
        (ZOO, "the model zoo: Hugging Face models and distributed scenarios (docs/model_zoo.md)"),
    ]
    width = max(len(n) for n, _ in rows)
    lines = [f"{n:<{width}}  {d}" for n, d in rows]
    return "\n".join([*lines, f"(installed in {ROOT})"])


def run(argv: list[str], cwd: Path) -> int:
    """``neuron-conformance run ARGV``: pytest's exit code.

    Raises:
        UsageError: bad input, before pytest starts.
    """
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        return 0
    suites, options = split_run_args(argv)
    args = pytest_args(suites, options, cwd)
    check_backend_module(options)
    export_pyproject(cwd, os.environ)
    opt_in(os.environ)
    import pytest  # deferred: pytest (and, through the plugin, torch) only for a run

    return int(pytest.main(args))


def main(argv: list[str] | None = None) -> int:
    """Console entry point (``[project.scripts] neuron-conformance``); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if not argv or argv[0] in ("-h", "--help"):
            print(USAGE)
            return 0 if argv else EXIT_USAGE
        command, rest = argv[0], argv[1:]
        if command == "run":
            return run(rest, Path.cwd())
        if command == "list":
            print(list_suites())
            return 0
        if command == "hf-spec":
            from neuron_conformance.model_zoo import hf_device_spec  # deferred: the spec writer only for its command

            return hf_device_spec.main(rest)
        raise UsageError(f"unknown command {command!r}; accepted: run, list, hf-spec, --help")
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # python -m neuron_conformance.conformance.pytest_plugin.cli
    sys.exit(main())
