"""The pytest plugin (entry point ``pytest11: conformance``): thin hooks that delegate.

What it does in a session:

* ``pytest_addoption``: the options of :mod:`conformance.options`.
* ``pytest_configure``: resolve the device under test (:mod:`conformance.device`), load the
  expected-failure manifests (:mod:`conformance.manifest`), clear old records and write ``run.json``.
  Bad input (unknown device, broken backend module, malformed manifest or option) ends the run with one
  clear line and exit code 2, before any test runs.
* ``pytest_report_header``: what is under test.
* ``pytest_collection_modifyitems``: mark tests that a manifest entry covers as strict xfails.
* fixtures ``device_profile``, ``device``, ``conformance_record``.
* ``pytest_runtest_makereport``: one result record per test (:mod:`conformance.records`).
* ``pytest_sessionfinish``: mark the run complete and build the report (:mod:`reports`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from . import options as opts
from .device import DeviceError, DeviceProfile, resolve_profile
from .failures import classify_exception
from .manifest import Manifest, ManifestError, load_manifest
from .records import RecordWriter, clear_records, write_json_atomic

STATE_KEY = pytest.StashKey["ConformanceState"]()
_RECORD_KEY = pytest.StashKey[dict]()
_REPORTS_KEY = pytest.StashKey[dict]()
EMULATOR_MANIFEST = Path(__file__).parent / "emulator" / "manifest.toml"


class ConformanceState:
    """Per-process state of a conformance session (stored in ``config.stash``)."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.report_dir = Path(opts.get_option(config, "report_dir"))
        if not self.report_dir.is_absolute():
            self.report_dir = Path(str(config.invocation_params.dir)) / self.report_dir
        self.dtypes = opts.get_option(config, "dtypes")
        self.seed = opts.get_option(config, "seed")
        self.sample = opts.get_option(config, "sample")
        self.profile: DeviceProfile | None = None
        self.manifest = Manifest()
        self.writer: RecordWriter | None = None
        self.started = time.time()

    def load(self) -> None:
        """Resolve the device and the manifests (raises DeviceError / ManifestError / OptionError)."""
        manifest_path = opts.get_option(self.config, "manifest")
        if manifest_path:
            self.manifest.extend(load_manifest(manifest_path))
        self.profile = resolve_profile(
            device=opts.get_option(self.config, "device"),
            backend_module=opts.get_option(self.config, "backend_module"),
            emulator_mode=opts.get_option(self.config, "emulator_mode"))
        if self.profile.emulated and EMULATOR_MANIFEST.is_file():
            self.manifest.extend(load_manifest(EMULATOR_MANIFEST))

    def run_metadata(self, complete: bool, finished: float | None = None) -> dict:
        """The content of ``run.json``."""
        import torch

        return {
            "schema": 1,
            "device": self.profile.to_dict() if self.profile else None,
            "torch_version": torch.__version__,
            "harness_version": _harness_version(),
            "python": sys.version.split()[0],
            "dtypes": list(self.dtypes),
            "seed": self.seed,
            "manifests": self.manifest.paths,
            "started": self.started,
            "finished": finished,
            "complete": complete,
            "argv": list(self.config.invocation_params.args),
            "shard": None,
        }

    def record_writer(self) -> RecordWriter:
        """This process's record writer (created on first use)."""
        if self.writer is None:
            self.writer = RecordWriter(self.report_dir)
        return self.writer


def _harness_version() -> str:
    from .device import _harness_version as v

    return v()


def usage_exit(message: str) -> None:
    """End the session before any test runs: one line on stderr, exit code 2."""
    pytest.exit(f"conformance: {message}", returncode=2)


def pytest_addoption(parser: pytest.Parser) -> None:
    opts.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance(op, dtype=None, variant=None, suite=None, kind='op'): "
                                       "identifies the op/model/scenario a test checks (manifest matching "
                                       "and result records)")
    if config.option.help or getattr(config.option, "version", False):
        return
    try:
        state = ConformanceState(config)
        state.load()
    except (DeviceError, ManifestError, opts.OptionError) as exc:
        usage_exit(str(exc))
        return
    config.stash[STATE_KEY] = state
    if not state.is_worker:
        clear_records(state.report_dir)
        write_json_atomic(state.report_dir / "run.json", state.run_metadata(complete=False))


def get_state(config: pytest.Config) -> ConformanceState:
    """The session's :class:`ConformanceState` (raises KeyError outside a configured session)."""
    return config.stash[STATE_KEY]


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash.get(STATE_KEY, None)
    if state is None or state.profile is None:
        return []
    p = state.profile
    kind = f"emulated ({p.emulator_mode} mode)" if p.emulated else "real"
    lines = [
        f"conformance: device {p.type!r} [{kind}], backend {p.backend} {p.backend_version}",
        f"conformance: torch {__import__('torch').__version__}, dtypes {','.join(state.dtypes)}, "
        f"seed {state.seed}, exact comparison: {'yes' if p.mirrors_cpu else 'no'}, "
        f"collectives: {p.dist_backend or 'none'}",
        f"conformance: manifests {', '.join(state.manifest.paths) or 'none'} ({len(state.manifest)} entries); "
        f"report dir {state.report_dir}",
    ]
    shims = sorted(k for k, v in p.api_support.items() if v == "shim")
    missing = sorted(k for k, v in p.api_support.items() if v == "missing")
    if shims:
        lines.append(f"conformance: device APIs provided by the emulator's shim: {', '.join(shims)}")
    if missing:
        lines.append(f"conformance: device APIs missing: {', '.join(missing)}")
    env = [f"{o.env}={os.environ[o.env]}" for o in opts.OPTIONS if os.environ.get(o.env)]
    if env:
        lines.append("conformance: environment " + " ".join(env))
    return lines


def item_identity(item: pytest.Item) -> dict:
    """The ``conformance`` marker's fields of a test item (op, dtype, variant, suite, kind), or {}."""
    mark = item.get_closest_marker("conformance")
    if mark is None:
        return {}
    ident = dict(mark.kwargs)
    if mark.args:
        ident.setdefault("op", mark.args[0])
    return ident


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return
    wanted = opts.get_option(config, "ops")
    if wanted:
        keep, drop = [], []
        for item in items:
            (keep if item_identity(item).get("op") in wanted else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    if not len(state.manifest):
        return
    for item in items:
        ident = item_identity(item)
        if not ident.get("op"):
            continue
        entry = state.manifest.match(op=ident["op"], dtype=ident.get("dtype"), variant=ident.get("variant"),
                                     suite=ident.get("suite"))
        if entry is not None:
            item.add_marker(pytest.mark.xfail(
                strict=True, reason=f"[{entry.reason}] {entry.note} ({entry.source})".strip()))
            item.stash[_RECORD_KEY] = {"expected_failure": entry.reason, "manifest_entry": entry.source}


@pytest.fixture(scope="session")
def device_profile(request) -> DeviceProfile:
    """The :class:`~conformance.device.DeviceProfile` under test."""
    return get_state(request.config).profile


@pytest.fixture(scope="session")
def device(device_profile):
    """``torch.device`` of the device type under test."""
    return device_profile.device


class Record(dict):
    """A result record being filled by a test (see docs/architecture.md). Use ``update(**fields)``."""


@pytest.fixture
def conformance_record(request) -> Record:
    """The result record of the running test; the plugin writes it when the test ends."""
    rec = request.node.stash.get(_RECORD_KEY, None)
    if not isinstance(rec, Record):
        rec = Record(rec or {})
        request.node.stash[_RECORD_KEY] = rec
    return rec


def pytest_runtest_setup(item: pytest.Item) -> None:
    state = item.config.stash.get(STATE_KEY, None)
    if state is not None:
        import torch

        torch.manual_seed(state.seed)


def _repro(item: pytest.Item, state: ConformanceState, sample) -> str:
    p = state.profile
    cmd = f"pytest '{item.nodeid}' -p no:randomly --device {p.type}"
    if p.emulated and p.emulator_mode != "mirror":
        cmd += f" --emulator-mode {p.emulator_mode}"
    if state.config.getoption("backend_module", None):
        cmd += f" --backend-module {state.config.getoption('backend_module')}"
    if sample is not None:
        cmd += f" --sample {sample}"
    return cmd.replace(" -p no:randomly", "")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    state = item.config.stash.get(STATE_KEY, None)
    if state is None:
        return
    phases = item.stash.setdefault(_REPORTS_KEY, {})
    phases[report.when] = (report, call.excinfo)
    if report.when == "teardown":
        write_item_record(item, state, phases)


def _outcome(phases: dict) -> tuple[str, object, object]:
    """(outcome, deciding report, excinfo) of a test from its phase reports."""
    for when in ("setup", "call", "teardown"):
        if when not in phases:
            continue
        rep, exc = phases[when]
        if hasattr(rep, "wasxfail"):
            if rep.skipped:
                return "xfailed", rep, exc
            if rep.passed:
                return "xpassed", rep, exc
        if rep.failed:
            if when == "call" and "[XPASS(strict)]" in str(rep.longrepr):
                return "xpassed", rep, exc
            return ("failed" if when == "call" else "error"), rep, exc
        if rep.skipped:
            return "skipped", rep, exc
    return "passed", phases.get("call", phases["setup"])[0], None


def write_item_record(item: pytest.Item, state: ConformanceState, phases: dict) -> None:
    """Build and append the result record of a finished test item."""
    outcome, rep, excinfo = _outcome(phases)
    rec = dict(item_identity(item))
    rec.update(item.stash.get(_RECORD_KEY, {}) or {})
    rec.setdefault("suite", _suite_of(item))
    rec.setdefault("kind", "op")
    rec.setdefault("op", item.name)
    rec["nodeid"] = item.nodeid
    rec["outcome"] = outcome
    exc = excinfo.value if excinfo is not None else None
    message = ""
    if outcome in ("failed", "error", "xfailed"):
        message = str(exc) if exc is not None else str(getattr(rep, "longreprtext", ""))
        rec["failure_class"] = classify_exception(exc, message) if exc is not None else "error"
        if exc is not None and getattr(exc, "sample", None) is not None:
            rec["sample"] = exc.sample
    elif outcome == "xpassed":
        rec["failure_class"] = "stale"
        message = (f"expected failure ({rec.get('expected_failure')}) passed: the manifest entry "
                   f"{rec.get('manifest_entry')} is stale; remove it")
    elif outcome == "skipped":
        lr = rep.longrepr
        message = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr or "")
    if outcome == "xpassed":
        rec["outcome"] = "failed"
    rec["message"] = message
    rec.setdefault("dtype", None)
    rec.setdefault("variant", None)
    rec.setdefault("sample", None)
    if rec["outcome"] in ("failed", "error", "xfailed"):
        rec["repro"] = _repro(item, state, rec.get("sample"))
    rec["duration"] = sum(r.duration for r, _ in phases.values())
    rec["time"] = time.time()
    state.record_writer().write(rec)


def _suite_of(item: pytest.Item) -> str:
    name = Path(str(item.path)).stem
    return name[5:] if name.startswith("test_") else name


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    state = session.config.stash.get(STATE_KEY, None)
    if state is None:
        return
    if state.writer is not None:
        state.writer.close()
    if state.is_worker:
        return
    interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, 2)
    write_json_atomic(state.report_dir / "run.json", state.run_metadata(complete=not interrupted,
                                                                        finished=time.time()))
    if opts.get_option(session.config, "no_report"):
        return
    build_report(session.config, state)


def build_report(config: pytest.Config, state: ConformanceState) -> None:
    """Build summary.json / summary.md / index.html with :mod:`reports` and print the summary table."""
    try:
        import reports
    except ImportError:  # pragma: no cover - reports is part of this distribution
        return
    try:
        result = reports.build(state.report_dir)
    except Exception as exc:  # noqa: BLE001 - a report bug must not hide the test results
        sys.stderr.write(f"conformance: building the report in {state.report_dir} failed: "
                         f"{type(exc).__name__}: {exc}\n")
        return
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        from reports import terminal

        tr.ensure_newline()
        terminal.print_summary(result.summary, quiet=config.option.verbose < 0, file=sys.stdout)
        tr.write_line(f"conformance report: {state.report_dir / 'index.html'}")


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched) -> None:  # pytest-xdist hook (controller side)
    """Record a test whose xdist worker died (segfault, abort) as ``crash``."""
    config = sched.config
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return
    text = str(getattr(report, "longrepr", "") or "")
    RecordWriter(state.report_dir, worker="controller").write({
        "nodeid": crashitem, "suite": _suite_of_nodeid(crashitem), "kind": "op", "op": crashitem,
        "outcome": "failed", "failure_class": "crash", "message": text[:2000], "duration": 0.0,
        "time": time.time(),
    })


def _suite_of_nodeid(nodeid: str) -> str:
    stem = Path(nodeid.split("::")[0]).stem
    return stem[5:] if stem.startswith("test_") else stem
