"""Whether a pytest session is a conformance session (docs/harness.md, "When the plugin is active").

The distribution installs the plugin as a ``pytest11`` entry point, so pytest loads it into every session
of the environment. It acts only in a conformance session; in any other it does nothing (no device, no
thread settings, no header, no records, no report, no time limits, no ``--dist`` default). The rule, decided
once per process at start-up:

1. ``--conformance WHEN`` (env ``CONFORMANCE_ACTIVATE``, ``[tool.conformance]`` key ``activate``; the
   usual option precedence) is ``on``: active; ``off``: not active, whatever the session collects (an
   opt-out that still names the suites is an error, since the suites need the session).
2. ``auto`` (the default): active when one of the session's test paths (its arguments, else pytest's
   ``testpaths`` when run from the rootdir, else the current folder) is, or lies inside, a suite package
   (:data:`SUITE_PACKAGES` next to a ``conformance`` package: the installed folders or a clone's); a
   node id counts by its file; under ``--pyargs`` a module name counts when it names a suite package
   (``neuron_conformance.opsuites[.test_x]``) that Python finds. A folder that merely contains the suites (a project folder holding a virtual environment) does
   not count.
3. A process a conformance session starts follows it: an xdist worker is active when its controller said
   so in ``workerinput`` (:data:`WORKERINPUT_KEY`), an ``--conformance-isolate`` child always.

The mere presence of a ``[tool.conformance]`` table does not opt in: the table also configures runs of
the suites in a project whose own tests must stay untouched. The table is validated whenever it is read
(an unknown key is an error), i.e. unless the flag or the variable already decided.
"""

from __future__ import annotations

import glob
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pytest

from neuron_conformance.conformance.pytest_plugin import options as opts

DISTRIBUTION_PACKAGE = "neuron_conformance"
"""The distribution's one top-level import package (``neuron_conformance/__init__.py``)."""

SUITE_PACKAGES = ("opsuites", "model_zoo")
"""The packages of the distribution that hold the suites (``neuron_conformance.opsuites``, ...; folders next
to ``conformance``)."""

WORKERINPUT_KEY = "conformance_active"
"""Key an active xdist controller sets (to True) in each worker's ``workerinput``."""


@dataclass(frozen=True)
class Activation:
    """The decision for one pytest process.

    Attributes:
        active: True in a conformance session.
        reason: why, for the report header (e.g. ``collects opsuites/test_compare_cpu.py``).
        error: a one-line message for bad input found while deciding (an unparsable ``activate`` value,
            unknown ``[tool.conformance]`` keys, an opt-out that names the suites); then ``active`` is
            False and the plugin ends the session with exit code 2.
    """

    active: bool
    reason: str
    error: str | None = None


ACTIVATION_KEY = pytest.StashKey[Activation]()
"""Where the decision is kept in ``config.stash`` (set in ``pytest_load_initial_conftests``)."""


def is_suite_package(folder: Path) -> bool:
    """True for a folder of this distribution's layout that holds suites: named as one of
    :data:`SUITE_PACKAGES`, a package, next to a ``conformance`` package that has this module (the installed
    folders in site-packages, this clone's, or another clone's)."""
    return (
        folder.name in SUITE_PACKAGES
        and (folder / "__init__.py").is_file()
        and (folder.parent / "conformance" / "pytest_plugin" / "activation.py").is_file()
    )


def suite_roots() -> tuple[Path, ...]:
    """The resolved suite folders next to this package (those that exist)."""
    parent = Path(__file__).resolve().parents[2]
    return tuple(parent / name for name in SUITE_PACKAGES if is_suite_package(parent / name))


def _in_suites(path: Path) -> bool:
    return any(is_suite_package(folder) for folder in (path, *path.parents))


def _module_in_suites(name: str) -> bool:
    """``--pyargs`` name ``neuron_conformance.PKG[.module]``: True when PKG is one of :data:`SUITE_PACKAGES`
    and the package Python finds for it holds suites (the installed folder or a clone's)."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != DISTRIBUTION_PACKAGE or parts[1] not in SUITE_PACKAGES:
        return False
    try:  # imports neuron_conformance (a few lines, no torch) to find the subpackage without importing it
        spec = importlib.util.find_spec(".".join(parts[:2]))
    except (ImportError, ValueError):
        return False
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return any(_in_suites(Path(loc).resolve()) for loc in locations)


def suite_args(args: Sequence[str], invocation_dir: Path, pyargs: bool) -> list[str]:
    """The arguments of ``args`` (paths or node ids, relative to ``invocation_dir``) that are, or lie inside,
    a suite folder (:func:`is_suite_package`); with ``pyargs`` also module names of a suite package."""
    found = []
    for arg in args:
        target = str(arg).split("::", 1)[0]
        if not target:
            continue
        path = Path(target).expanduser()
        path = (path if path.is_absolute() else invocation_dir / path).resolve()
        if _in_suites(path) if path.exists() else (pyargs and _module_in_suites(target)):
            found.append(str(arg))
    return found


def session_args(
    args: Sequence[str], pyargs: bool, testpaths: Sequence[str], invocation_dir: Path, rootpath: Path
) -> list[str]:
    """The test paths a session collects, by pytest's documented rule (``testpaths`` ini option): the
    arguments; else, run from the rootdir, the ``testpaths`` (glob patterns unless ``pyargs``); else the
    invocation folder."""
    if args:
        return [str(a) for a in args]
    result: list[str] = []
    if invocation_dir == rootpath:
        for entry in testpaths:
            result.extend([entry] if pyargs else sorted(glob.iglob(str(invocation_dir / entry), recursive=True)))
    return result or [str(invocation_dir)]


def _decide(config: pytest.Config, args: Sequence[str], pyargs: bool) -> Activation:
    try:
        when, where = opts.resolve_option(config, "activate")
    except opts.OptionError as exc:  # a bad value (named), or unknown [tool.conformance] keys
        return Activation(False, "bad input", str(exc))
    invocation_dir = Path(str(config.invocation_params.dir)).resolve()
    testpaths = config.getini("testpaths") if not args else []
    paths = session_args(args, pyargs, testpaths, invocation_dir, Path(str(config.rootpath)))
    suites = suite_args(paths, invocation_dir, pyargs)
    if when == "off":
        if suites:
            return Activation(
                False,
                f"{where}: off",
                f"{where} is off (not a conformance session), but the "
                f"session collects the harness's suites ({suites[0]}), "
                "which need one; remove the opt-out or the suite path",
            )
        return Activation(False, f"{where}: off")
    if when == "on":
        return Activation(True, f"{where}: on")
    if suites:
        more = f" and {len(suites) - 1} more" if len(suites) > 1 else ""
        return Activation(True, f"collects {suites[0]}{more}")
    return Activation(False, "collects no suite of the harness")


def decide_early(config: pytest.Config) -> Activation:
    """Decide in ``pytest_load_initial_conftests`` (before xdist reads ``--dist``) and stash the result.

    The test paths are the positional arguments of pytest's early parse (``known_args_namespace``, the
    ``addopts`` included); pytest sets ``config.args`` only after this hook.
    """
    ns = getattr(config, "known_args_namespace", None)
    positional = list(getattr(ns, "file_or_dir", None) or [])
    decision = _decide(config, positional, bool(getattr(ns, "pyargs", False)))
    config.stash[ACTIVATION_KEY] = decision
    return decision


def decide(config: pytest.Config, isolation_child: bool) -> Activation:
    """The decision for this process (``pytest_configure``): an xdist worker's from its controller, an
    isolation child's (``isolation_child``: active), else the one :func:`decide_early` stashed, else decided
    now from ``config.args`` (the plugin was registered after the initial conftests, e.g. from a conftest)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        active = bool(workerinput.get(WORKERINPUT_KEY))
        decision = Activation(
            active,
            "xdist worker of a conformance session"
            if active
            else "xdist worker of a session that is not a conformance session",
        )
    elif isolation_child:
        decision = Activation(True, "isolation child of a conformance session")
    elif ACTIVATION_KEY in config.stash:
        return config.stash[ACTIVATION_KEY]
    else:
        decision = _decide(config, list(config.args), bool(config.option.pyargs))
    config.stash[ACTIVATION_KEY] = decision
    return decision


def header_line(config: pytest.Config) -> str | None:
    """``conformance: active (REASON)`` for the report header, or None before a decision."""
    decision = config.stash.get(ACTIVATION_KEY, None)
    return f"conformance: active ({decision.reason})" if decision is not None and decision.active else None
