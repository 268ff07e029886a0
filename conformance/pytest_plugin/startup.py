"""The start of a conformance session: check the inputs, resolve the device, lay out the report dir.

:func:`start` runs in ``pytest_configure`` of every process. Bad input (an unknown device, a backend
module that fails to import, a malformed manifest, an option that does not parse, an unreadable
``--conformance-baseline`` or ``--conformance-shard-durations``, a path option that made pytest pick the wrong root folder) ends
the session before any test with one line naming the input, and exit code 2 (:func:`usage_exit`); the
last run's records are only cleared once every input has been read.

Also here: the ``--dist loadgroup`` default under ``-n N`` (:func:`default_dist`), the report header
(:func:`header_lines`) and the freezing of the heap after collection (:func:`freeze_heap`).
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest
import torch

from neuron_conformance.conformance.backend import environment, precision, transfer
from neuron_conformance.conformance.backend.device import DeviceError
from neuron_conformance.conformance.backend.fallbacks import check_require_native
from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.pytest_plugin import reporting, sharding, threads, torch_floor, tracing
from neuron_conformance.conformance.pytest_plugin.session import ConformanceSession, enter
from neuron_conformance.conformance.results.manifest import ManifestError
from neuron_conformance.conformance.results.records import clear_records, write_json_atomic
from neuron_conformance.conformance.survival import crash_files as survival
from neuron_conformance.conformance.survival import interrupt

PATH_OPTIONS = (
    "--conformance-report-dir",
    "--conformance-manifest",
    "--conformance-baseline",
    "--conformance-shard-durations",
)
"""Options whose value is a path: written ``--opt PATH`` with an existing PATH outside the current folder,
pytest (which picks its root folder before plugins register their options) takes PATH for a test path."""


def usage_exit(message: str) -> None:
    """End the session before any test runs: one line on stderr, exit code 2."""
    pytest.exit(f"conformance: {message}", returncode=2)


def start(config: pytest.Config) -> ConformanceSession | None:
    """Create this process's :class:`~neuron_conformance.conformance.pytest_plugin.session.ConformanceSession` (see the module docstring).

    Returns None (and ends the session through :func:`usage_exit`) on bad input.
    """
    too_old = torch_floor.below_floor()
    if too_old is not None:
        usage_exit(too_old)
        return None
    try:
        session = ConformanceSession(config)
        session.load()
        if session.controls_run:
            check_report_inputs(session)
        check_require_native(session)
        durations = opts.get_option(config, "shard_durations")
        if durations and (session.num_shards or session.controls_run):  # the controller checks it even unused
            summary = reporting.read_summary(durations, "--conformance-shard-durations")
            if session.num_shards:
                session.set_shard_durations(sharding.durations_from_summary(summary))
    except (DeviceError, ManifestError, opts.OptionError) as exc:
        usage_exit(str(exc))
        return None
    enter(session)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get("workercount"):
        threads.share_cores(int(workerinput["workercount"]))
    tracing.start_session(config, session)
    if session.controls_run:
        torch_floor.tell(config)
    if session.controls_run and not config.option.collectonly:  # --collect-only keeps the last run's records
        clear_records(session.report_dir)
        survival.clear_crash_files(session.report_dir)
        write_json_atomic(session.report_dir / "run.json", session.run_metadata(complete=False))
        interrupt.install()
    return session


def check_report_inputs(session: ConformanceSession) -> None:
    """Read ``--conformance-baseline``, ``--conformance-ops``, ``--conformance-progress`` and ``--conformance-memory-budget`` now, so that a bad value stops the run before any
    test (``--conformance-shard-durations`` is read right after, by :func:`start`).

    Raises:
        neuron_conformance.conformance.pytest_plugin.options.OptionError: the first bad value, named.
    """
    config = session.config
    opts.get_option(config, "ops")  # both parse (and raise) on first use
    opts.get_option(config, "progress")
    opts.get_option(config, "memory_budget")
    check_path_options(config)
    check_report_dir_outside_packages(session)
    if session.baseline:
        reporting.read_summary(session.baseline, "--conformance-baseline")


def check_report_dir_outside_packages(session: ConformanceSession) -> None:
    """Refuse the default report folder (``reports/latest``) when it would lie inside a Python package of
    the user's (a folder with ``__init__.py`` between the current folder and the report folder, e.g. a
    project's own ``reports`` package): the records and HTML would be written into that package's source.
    A report folder the user gave (flag, environment variable, ``[tool.conformance]``) is theirs to choose.

    Raises:
        neuron_conformance.conformance.pytest_plugin.options.OptionError: names the package and the option to set.
    """
    _value, where = opts.resolve_option(session.config, "report_dir")
    if where != "default":
        return
    base = Path(str(session.config.invocation_params.dir)).resolve()
    folder = session.report_dir.resolve()
    while folder != base and base in folder.parents:
        if (folder / "__init__.py").is_file():
            raise opts.OptionError(
                f"the default report folder {session.report_dir} lies inside the Python package {folder} "
                f"(it has __init__.py); give another with --conformance-report-dir=DIR, "
                f"{opts.BY_DEST['report_dir'].env} or [tool.conformance] report-dir"
            )
        folder = folder.parent


def check_path_options(config: pytest.Config) -> None:
    """Stop with a clear error when a path option was written with a space and its existing value outside
    the current folder made pytest choose the wrong root folder (pyproject.toml and testpaths ignored).

    Raises:
        neuron_conformance.conformance.pytest_plugin.options.OptionError: naming the option and the ``--opt=PATH`` spelling to use.
    """
    args = list(config.invocation_params.args)
    cwd = Path(config.invocation_params.dir).resolve()
    for flag in PATH_OPTIONS:
        for i, arg in enumerate(args[:-1]):
            if arg != flag:
                continue
            value = Path(args[i + 1]).expanduser()
            path = (cwd / value).resolve() if not value.is_absolute() else value.resolve()
            if (
                path.exists()
                and cwd not in (path, *path.parents)
                and config.rootpath != cwd
                and config.rootpath in (path, *path.parents)
            ):
                raise opts.OptionError(
                    f"{flag} {args[i + 1]}: pytest took {args[i + 1]} for a test path and chose "
                    f"{config.rootpath} as its root folder (so {cwd}'s pytest configuration is ignored); "
                    f"write {flag}={args[i + 1]}"
                )


def refuse_renamed_flags(parser: pytest.Parser, args: list) -> None:
    """End the session (exit code 2, one line) when an argument no plugin claimed is one of the harness's
    flags before the ``--conformance-`` prefix (:data:`~neuron_conformance.conformance.pytest_plugin.options.RENAMED`);
    pytest itself would only say "unrecognized arguments". A flag another plugin registered (``--device``
    of TorchCTS) is that plugin's and passes."""
    _namespace, unknown = parser.parse_known_and_unknown_args([str(a) for a in args])
    message = opts.renamed_flag_error(unknown)
    if message is not None:  # before pytest is configured, pytest.exit would print a traceback
        sys.stderr.write(f"conformance: {message}\n")
        raise SystemExit(2)


def default_dist(args: list, has_xdist: bool) -> None:
    """Under ``-n N`` with no ``--dist`` given, append ``--dist loadgroup`` to ``args`` (in place).

    An op's (or a model's) tests carry one ``xdist_group`` mark, so with ``loadgroup`` they stay on one
    worker and share its caches of samples and CPU/fp64 references. An explicit ``--dist`` (or
    ``-p no:xdist``) wins.
    """
    text = [str(a) for a in args]
    workers = None
    for i, a in enumerate(text):
        if a in ("-n", "--numprocesses") and i + 1 < len(text):
            workers = text[i + 1]
        elif a.startswith("--numprocesses="):
            workers = a.split("=", 1)[1]
        elif a.startswith("-n") and not a.startswith("--") and len(a) > 2:
            workers = a[2:]
    wants_workers = workers not in (None, "0")
    if wants_workers and not any(a.startswith(("--dist", "-d")) for a in text) and has_xdist:
        args[:] = [*args, "--dist", "loadgroup"]


def header_lines(session: ConformanceSession) -> list[str]:
    """The report header: what is under test, the manifests, the report dir, the options set by env."""
    p = session.profile
    if p is None:
        return []
    kind = f"emulated ({p.emulator_mode} mode)" if p.emulated else "real"
    lines = [
        f"conformance: device {p.type!r} [{kind}], backend {p.backend} {p.backend_version}",
        f"conformance: torch {torch.__version__}, dtypes {','.join(session.dtypes)}, "
        f"seed {session.seed}, exact comparison: {'yes' if p.mirrors_cpu else 'no'}, "
        f"collectives: {p.dist_backend or 'none'}",
        f"conformance: manifests {', '.join(session.manifest.paths) or 'none'} ({len(session.manifest)} "
        f"entries); report dir {session.report_dir}",
    ]
    lines += precision.header_line(precision.detect(p.type))
    if p.transfer != "set_":
        lines.append(
            f"conformance: samples move to the device by {p.transfer} (set_ with a storage offset fails "
            f"here); weakened: {', '.join(transfer.FALLBACK_WEAKENS)}"
        )
    shims = sorted(k for k, v in p.api_support.items() if v == "shim")
    missing = sorted(k for k, v in p.api_support.items() if v == "missing")
    if shims:
        lines.append(f"conformance: device APIs provided by the emulator's shim: {', '.join(shims)}")
    if missing:
        notes = session.preflight.notes if session.preflight is not None else {}
        lines.append(
            "conformance: device APIs missing: "
            + ", ".join(f"{k} ({notes[k]})" if notes.get(k) else k for k in missing)
        )
    if session.preflight is not None and session.preflight.harness_lacks:
        lines.append(
            "conformance: the harness needs what this backend lacks: " + "; ".join(session.preflight.harness_lacks)
        )
    if session.backend_environment:
        lines.append(
            f"conformance: loading the backend here set {environment.describe(session.backend_environment)} in "
            "the process environment; put back, so that each test process sets the backend up itself"
        )
    env = [f"{o.env}={os.environ[o.env]}" for o in opts.OPTIONS if os.environ.get(o.env)]
    if env:
        lines.append("conformance: environment " + " ".join(env))
    return lines


def freeze_heap() -> None:
    """Move every object alive after collection (torch, the OpInfo database, the test items: millions of
    objects) to the garbage collector's permanent generation (``gc.freeze``, Python >= 3.7), so that later
    collections, and the five full ones pytest's unraisable-exception plugin runs at session end, walk
    only what the tests create. Measured on the whole op suite: a full collection took ~0.3 s before."""
    gc.freeze()
