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
* ``pytest_sessionfinish``: mark the run complete (or not) and build the report (:mod:`reports`); print
  the ``--baseline`` diff and fail on a regression when asked.

Surviving the backend (docs/harness.md): crash files, the canary and the restart of a worker whose device
is unusable (:mod:`conformance.survival`), per-test time limits (:mod:`conformance.timeouts`), the xdist
controller's crash records (:mod:`conformance.crashes`), isolation mode without xdist
(:mod:`conformance.isolation`), SIGTERM (:mod:`conformance.interrupt`), shards
(:mod:`conformance.sharding`), repro files (:mod:`conformance.repro`), the live progress display
(:mod:`conformance.progress`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from . import crashes, interrupt, isolation, progress, sharding, survival, timeouts
from . import options as opts
from .device import DeviceError, DeviceProfile, resolve_profile
from .failures import classify_exception
from .manifest import Manifest, ManifestError, load_manifest
from .records import RecordWriter, clear_records, write_json_atomic
from .siblings import ensure_own_package

ensure_own_package("reports")  # before a ./reports folder (the default report dir) can shadow it

STATE_KEY = pytest.StashKey["ConformanceState"]()
_RECORD_KEY = pytest.StashKey[dict]()
_REPORTS_KEY = pytest.StashKey[dict]()
EMULATOR_MANIFEST = Path(__file__).parent / "emulator" / "manifest.toml"
"""Expected failures of the emulated device in every numeric mode."""
EMULATOR_MODE_MANIFESTS = {"device": Path(__file__).parent / "emulator" / "manifest-device.toml",
                           "mirror": Path(__file__).parent / "emulator" / "manifest-mirror.toml"}
"""Extra expected failures of the emulated device in one numeric mode (device: its decompositions differ;
mirror: bitwise equality is required where torch itself branches on the device type above the dispatcher)."""


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
        self.isolation_child = bool(os.environ.get(ISOLATION_CHILD_ENV))
        # the xdist worker id comes from this session's config: PYTEST_XDIST_WORKER in the environment may
        # be inherited from an outer pytest-xdist run that started this one as a subprocess
        self.worker = os.environ.get(WORKER_ENV) or (config.workerinput["workerid"] if self.is_worker
                                                     else "main")
        self.controls_run = not self.is_worker and not self.isolation_child
        self.watch: survival.CrashWatch | None = None
        self.timeouts = opts.get_option(config, "test_timeout")
        self.canary = not opts.get_option(config, "no_canary")
        self.isolate = opts.get_option(config, "isolate")
        self.shard_id = opts.get_option(config, "shard_id")
        self.num_shards = opts.get_option(config, "num_shards")
        sharding.check_shard_options(self.shard_id, self.num_shards)
        self.baseline = opts.get_option(config, "baseline")
        self.stop_reason: str | None = None
        self.poisoned: dict | None = None
        self.exit_pending = False
        self.crash_handled: dict[str, str] = {}
        self.identities: dict[str, dict] = {}
        self.summary: dict | None = None
        self.channel: isolation.ChildChannel | None = None
        self.repro_count = 0
        self.display: progress.ProgressDisplay | None = None
        self.ops_checked = False  # the xdist controller checks --ops names once, on the first collection
        self._tw_file = None

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
            extra = EMULATOR_MODE_MANIFESTS.get(self.profile.emulator_mode)
            if extra is not None and extra.is_file():
                self.manifest.extend(load_manifest(extra))

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
            "shard": {"id": self.shard_id, "count": self.num_shards} if self.num_shards else None,
            "stop_reason": self.stop_reason,
            "isolate": self.isolate,
        }

    def record_writer(self) -> RecordWriter:
        """This process's record writer (created on first use)."""
        if self.writer is None:
            self.writer = RecordWriter(self.report_dir, worker=self.worker)
        return self.writer

    def repro_command(self, nodeid: str, sample) -> str:
        """The one-line command that replays ``nodeid`` (and one sample of it when ``sample`` is given)."""
        return _repro_command(nodeid, self, sample)


ISOLATION_CHILD_ENV = "CONFORMANCE_ISOLATION_CHILD"
"""Set (to the parent's channel file descriptor) in the child processes of isolation mode."""
WORKER_ENV = "CONFORMANCE_WORKER_ID"
"""Overrides the record-file stem of a process (isolation children: ``iso0``, ``iso1``, ...)."""


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
        if state.controls_run:
            _check_report_inputs(state)
    except (DeviceError, ManifestError, opts.OptionError) as exc:
        usage_exit(str(exc))
        return
    config.stash[STATE_KEY] = state
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get("workercount"):
        from .threads import share_cores

        share_cores(int(workerinput["workercount"]))
    config.pluginmanager.import_plugin("opsuites.suite_plugin")  # coverage, --update-manifest, profiles
    _CURRENT.append(state)  # a stack: pytester's inline sessions nest inside the project's own run
    if state.controls_run and not config.option.collectonly:  # --collect-only keeps the last run's records
        clear_records(state.report_dir)
        survival.clear_crash_files(state.report_dir)
        write_json_atomic(state.report_dir / "run.json", state.run_metadata(complete=False))
        interrupt.install()


def _check_report_inputs(state: ConformanceState) -> None:
    """Read ``--baseline``, ``--shard-durations``, ``--ops`` and ``--progress`` now, so a bad value stops
    the run before any test (raises :class:`conformance.options.OptionError`)."""
    from reports import ReportInputError, load_summary

    opts.get_option(state.config, "ops")  # both parse (and raise) on first use
    opts.get_option(state.config, "progress")
    _check_path_options(state.config)

    if state.baseline:
        path = Path(state.baseline)
        try:
            load_summary(path / "summary.json" if path.is_dir() else path)
        except ReportInputError as exc:
            raise opts.OptionError(f"--baseline {exc}") from None
    durations = opts.get_option(state.config, "shard_durations")
    if durations:
        sharding.load_durations(durations)


PATH_OPTIONS = ("--report-dir", "--manifest", "--baseline", "--shard-durations")
"""Options whose value is a path: written ``--opt PATH`` with an existing PATH outside the current folder,
pytest (which picks its root folder before plugins register their options) takes PATH for a test path."""


def _check_path_options(config: pytest.Config) -> None:
    """Stop with a clear error when a path option was written with a space and its existing value outside
    the current folder made pytest choose the wrong root folder (pyproject.toml and testpaths ignored)."""
    args = list(config.invocation_params.args)
    cwd = Path(config.invocation_params.dir).resolve()
    for flag in PATH_OPTIONS:
        for i, arg in enumerate(args[:-1]):
            if arg != flag:
                continue
            value = Path(args[i + 1]).expanduser()
            path = (cwd / value).resolve() if not value.is_absolute() else value.resolve()
            if path.exists() and cwd not in (path, *path.parents) and config.rootpath != cwd \
                    and config.rootpath in (path, *path.parents):
                raise opts.OptionError(
                    f"{flag} {args[i + 1]}: pytest took {args[i + 1]} for a test path and chose "
                    f"{config.rootpath} as its root folder (so {cwd}'s pytest configuration is ignored); "
                    f"write {flag}={args[i + 1]}")


def _runs_tests_here(config: pytest.Config) -> bool:
    """True in a process that runs tests: an xdist worker, or the main process without xdist/isolation."""
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return False
    if state.is_worker or state.isolation_child:
        return True
    return not config.pluginmanager.has_plugin("dsession") and state.isolate == "off"


def pytest_sessionstart(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE_KEY, None)
    if state is not None and _runs_tests_here(session.config):
        state.watch = survival.CrashWatch(state.report_dir, state.worker)
        if state.isolation_child:
            state.channel = isolation.ChildChannel(int(os.environ[ISOLATION_CHILD_ENV]))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    """Isolation mode: the main process hands the tests to child processes (:mod:`conformance.isolation`)."""
    state = session.config.stash.get(STATE_KEY, None)
    if state is None or not state.controls_run or state.isolate == "off" \
            or session.config.pluginmanager.has_plugin("dsession"):
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} error{'s' if session.testsfailed != 1 else ''} "
                                  "during collection")
    if session.config.option.collectonly:
        return True
    isolation.run(session, state)
    return True


def pytest_runtest_logreport(report) -> None:
    """Isolation child: send each report to the parent. Run controller: feed the progress display."""
    state = report_config_state(report)
    if state is None:
        return
    if state.channel is not None:
        data = state.config.hook.pytest_report_to_serializable(config=state.config, report=report)
        state.channel.send("report", report.nodeid, data=data)
    if state.display is not None:
        status = state.config.hook.pytest_report_teststatus(report=report, config=state.config)
        if status:
            state.display.report(report, status[0])


def pytest_runtest_logfinish(nodeid, location) -> None:
    state = _CURRENT[-1] if _CURRENT else None
    if state is not None and state.display is not None:
        state.display.finish(nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_report_teststatus(report, config):
    """While the progress display is live, pytest's one-letter-per-test output is dropped."""
    result = yield
    state = config.stash.get(STATE_KEY, None)
    if state is not None and state.display is not None and result and config.option.verbose <= 0:
        cat, _letter, word = result
        return cat, "", word
    return result


def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE_KEY, None)
    if state is not None:
        _freeze_heap()
    if state is not None and state.controls_run and not session.config.pluginmanager.has_plugin("dsession"):
        _start_display(session.config, state, [i.nodeid for i in session.items])


def _freeze_heap() -> None:
    """Move every object alive after collection (torch, the OpInfo database, the test items: millions of
    objects) to the garbage collector's permanent generation (``gc.freeze``, Python >= 3.7), so that later
    collections, and the five full ones pytest's unraisable-exception plugin runs at session end, walk
    only what the tests create. Measured on the whole op suite: a full collection took ~0.3 s before."""
    import gc

    gc.freeze()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids) -> None:  # pytest-xdist hook (controller side)
    state = _CURRENT[-1] if _CURRENT else None
    if state is None or not state.controls_run:
        return
    if not state.ops_checked:
        state.ops_checked = True
        wanted = opts.get_option(state.config, "ops")
        if wanted:
            matched = {n for n in wanted if any(f"[{n}-" in i or f"[{n}]" in i for i in ids)}
            if not ids:
                pytest.exit(f"conformance: --ops: no collected test checks {', '.join(sorted(wanted)[:10])} "
                            f"(names are OpInfo full names such as nn.functional.gelu, model ids or scenario "
                            f"names)", returncode=pytest.ExitCode.USAGE_ERROR)
            _report_unknown_ops(state.config, wanted, matched, True)
    if state.display is None:
        _start_display(state.config, state, list(ids))


def _start_display(config: pytest.Config, state: ConformanceState, nodeids: list[str]) -> None:
    tr = config.pluginmanager.get_plugin("terminalreporter")
    mode = opts.get_option(config, "progress")
    if tr is None or not progress.wanted(mode, config.option.verbose, sys.stdout.isatty()) or not nodeids:
        return

    def suite_of(nodeid: str) -> str:
        ident = state.identities.get(nodeid)
        return (ident or {}).get("suite") or survival.identity_from_nodeid(nodeid)["suite"]

    tr.ensure_newline()
    display = progress.ProgressDisplay(suite_of)
    display.start(nodeids)
    state.display = display
    state._tw_file = tr._tw._file
    tr._tw._file = sys.stdout  # rich's proxy while live: pytest's lines print above the bars


def _stop_display(config: pytest.Config, state: ConformanceState) -> None:
    if state.display is None:
        return
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.ensure_newline()  # ends pytest's partial line (``file.py [100%]``) above the bars
    state.display.stop()
    state.display = None
    if tr is not None and state._tw_file is not None:
        tr._tw._file = state._tw_file


_CURRENT: list = []


def report_config_state(report):
    """The state of the session a report belongs to (the running process's only session)."""
    return _CURRENT[-1] if _CURRENT else None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list) -> None:
    """Under ``-n N`` with no ``--dist`` given, distribute with ``loadgroup``: an op's (or a model's) tests
    carry one ``xdist_group`` mark, so they stay on one worker and share its caches of samples and CPU/fp64
    references. An explicit ``--dist`` (or ``-p no:xdist``) wins."""
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
    if wants_workers and not any(a.startswith(("--dist", "-d")) for a in text) \
            and early_config.pluginmanager.has_plugin("xdist"):
        args[:] = [*args, "--dist", "loadgroup"]


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
        if not state.is_worker:  # under xdist the controller reports, from the collected ids
            _report_unknown_ops(config, wanted, {item_identity(i).get("op") for i in keep}, bool(drop or keep))
    if state.isolation_child:
        isolation.select_child_items(config, items)
    elif state.num_shards:
        _select_shard(config, state, items)
    if state.controls_run:
        for item in items:
            state.identities[item.nodeid] = _identity_for_record(item)
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


def _report_unknown_ops(config: pytest.Config, wanted, matched: set, collected: bool) -> None:
    """``--ops`` names that match no collected test: an error when none matches (a typo must not look
    like an empty, green run), a warning line naming them otherwise."""
    unknown = sorted(set(wanted) - matched)
    if not unknown or not collected:
        return
    shown = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
    if not matched:
        raise pytest.UsageError(f"conformance: --ops: no collected test checks {shown} (names are OpInfo full "
                                f"names such as nn.functional.gelu, model ids or scenario names)")
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(f"conformance: --ops: no collected test checks {shown}", yellow=True)


def _select_shard(config: pytest.Config, state: ConformanceState, items: list) -> None:
    groups = {item.nodeid: (item_identity(item).get("op") or item.nodeid) for item in items}
    path = opts.get_option(config, "shard_durations")
    durations = sharding.load_durations(path) if path else None
    shard_of = sharding.assign_shards([i.nodeid for i in items], groups.__getitem__, state.num_shards, durations)
    keep = [i for i in items if shard_of[i.nodeid] == state.shard_id]
    drop = [i for i in items if shard_of[i.nodeid] != state.shard_id]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _identity_for_record(item: pytest.Item) -> dict:
    ident = item_identity(item)
    return {"suite": ident.get("suite") or _suite_of(item), "kind": ident.get("kind") or "op",
            "op": ident.get("op") or item.name, "dtype": ident.get("dtype"), "variant": ident.get("variant")}


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


@pytest.fixture
def conformance_repro(request, conformance_record):
    """``save(op_full_name, sample_index, dtype, sample) -> [paths]``: write the failing sample's repro pair.

    Calls :func:`conformance.repro.save_sample_repro` for the running test and puts the paths (relative to
    the report dir) in the record's ``repro_files``. At most :data:`MAX_REPRO_PAIRS` pairs per process.
    """
    state = get_state(request.config)

    def save(op_full_name: str, sample_index: int, dtype: str, sample) -> list[str]:
        from .repro import save_sample_repro

        if state.repro_count >= MAX_REPRO_PAIRS or state.profile is None:
            return []
        p = state.profile
        backend = request.config.getoption("backend_module", None) or opts.get_option(request.config,
                                                                                       "backend_module")
        if backend is None and p.emulated:
            backend = "conformance.emulator.backend"
        paths = save_sample_repro(state.report_dir, survival.clean_nodeid(request.node.nodeid), op_full_name, sample_index, dtype, sample,
                                  device_type=p.type, backend_module=backend,
                                  emulator_mode=p.emulator_mode if p.emulated and p.emulator_mode != "mirror" else None)
        if paths:
            state.repro_count += 1
            conformance_record["repro_files"] = paths
        return paths

    return save


MAX_REPRO_PAIRS = 500
"""Most repro .py/.pt pairs one process writes (a badly broken backend must not fill the disk)."""


def pytest_runtest_setup(item: pytest.Item) -> None:
    state = item.config.stash.get(STATE_KEY, None)
    if state is not None:
        from conformance.seeding import manual_seed

        manual_seed(state.seed)


def _repro(item: pytest.Item, state: ConformanceState, sample) -> str:
    return _repro_command(item.nodeid, state, sample)


def _repro_command(nodeid: str, state: ConformanceState, sample) -> str:
    p = state.profile
    cmd = f"pytest '{survival.clean_nodeid(nodeid)}' -p no:randomly --device {p.type}"
    if p.emulated and p.emulator_mode != "mirror":
        cmd += f" --emulator-mode {p.emulator_mode}"
    if state.config.getoption("backend_module", None):
        cmd += f" --backend-module {state.config.getoption('backend_module')}"
    if sample is not None:
        cmd += f" --sample {sample}"
    return cmd.replace(" -p no:randomly", "")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """Crash file, time limit and restart after a poisoned device around each test (docs/harness.md)."""
    state = item.config.stash.get(STATE_KEY, None)
    if state is None or state.watch is None:
        yield
        return
    if state.exit_pending:
        _exit_poisoned(state)
    ident = _identity_for_record(item)
    limit, method = timeouts.item_timeout(item, state.timeouts, ident["suite"])
    state.watch.start_test({"nodeid": item.nodeid, **ident, "timeout": limit or None, "started": time.time()})
    if state.channel is not None:
        state.channel.send("start", item.nodeid)
    deadline = timeouts.Deadline(item.nodeid, limit, method, state.watch) if limit > 0 else None
    if deadline is not None:
        deadline.start()
    try:
        yield
    finally:
        if deadline is not None:
            deadline.cancel()
    if state.channel is not None:
        state.channel.send("finish", item.nodeid)
    if state.poisoned is not None and not state.exit_pending:
        if state.is_worker or state.isolation_child:
            state.exit_pending = True  # exit before the next test: xdist / the parent replaces this process
        else:
            state.stop_reason = (f"the device is unusable after {state.poisoned['nodeid']} "
                                 f"({state.poisoned['canary']}); run with -n N or --isolate to restart and go on")
            item.session.shouldstop = f"conformance: {state.stop_reason}"


def _exit_poisoned(state: ConformanceState) -> None:
    """Leave the process so that it is replaced (xdist worker, isolation child)."""
    if state.writer is not None:
        state.writer.close()
    state.watch.note_poisoned(state.poisoned or {})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(survival.POISONED_EXIT_CODE)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    """pytest-timeout hook: the limits are enforced by :mod:`conformance.timeouts` instead."""
    state = item.config.stash.get(STATE_KEY, None)
    return True if state is not None and state.watch is not None else None


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_cancel_timer(item):
    state = item.config.stash.get(STATE_KEY, None)
    return True if state is not None and state.watch is not None else None


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
    rec["nodeid"] = survival.clean_nodeid(item.nodeid)
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
    if rec["outcome"] in ("failed", "error", "xfailed") and rec.get("failure_class") != "stale":
        _canary_after_failure(item, state, rec)
    state.record_writer().write(rec)


def _canary_after_failure(item: pytest.Item, state: ConformanceState, rec: dict) -> None:
    """Run the canary op after a failing test; a failing canary marks the device poisoned."""
    if not state.canary or state.profile is None or state.profile.type == "cpu" or state.watch is None:
        return
    problem = survival.run_canary(state.profile.device)
    if problem is None:
        return
    state.poisoned = {"nodeid": item.nodeid, "canary": problem, "worker": state.worker}
    rec["device_poisoned"] = True
    restart = ("this worker restarts" if state.is_worker or state.isolation_child
               else "the run stops (use -n N or --isolate to restart and go on)")
    rec["message"] = (f"{rec.get('message') or ''}\n[conformance] the device is unusable after this test: "
                      f"{problem} ({survival.CANARY_SOURCE}); {restart}").strip()


def _suite_of(item: pytest.Item) -> str:
    name = Path(str(item.path)).stem
    return name[5:] if name.startswith("test_") else name


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    state = session.config.stash.get(STATE_KEY, None)
    if state is None:
        return
    if state.writer is not None:
        state.writer.close()
    if not state.controls_run or session.config.option.collectonly:
        return
    _stop_display(session.config, state)
    interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, 2)
    if interrupted and state.stop_reason is None:
        sig = interrupt.received()
        state.stop_reason = f"interrupted by {sig}" if sig else "interrupted (KeyboardInterrupt)"
    if state.stop_reason is None and (session.shouldfail or session.shouldstop):
        state.stop_reason = f"stopped early: {session.shouldfail or session.shouldstop}"
    ds = session.config.pluginmanager.get_plugin("dsession")
    if state.stop_reason is None and ds is not None:
        why = getattr(ds, "shouldstop", None) or getattr(ds, "_summary_report", None)
        if why:  # -x / --maxfail under xdist, or "maximum crashed workers reached"
            state.stop_reason = f"stopped early: {why}"
    complete = state.stop_reason is None
    write_json_atomic(state.report_dir / "run.json", state.run_metadata(complete=complete, finished=time.time()))
    interrupt.uninstall()
    if not opts.get_option(session.config, "no_report"):
        build_report(session.config, state)
    if state.baseline:
        _baseline_diff(session, state)


def _baseline_diff(session: pytest.Session, state: ConformanceState) -> None:
    """Print the ``--baseline`` diff; exit status 1 on a regression with ``--fail-on-regression``."""
    import reports
    from reports.collect import collect
    from reports.summary import summary_from_collected

    base = Path(state.baseline)
    base = base / "summary.json" if base.is_dir() else base
    try:
        current = state.summary or summary_from_collected(collect(state.report_dir))
        diff = reports.diff_summaries(base, current)
    except reports.ReportInputError as exc:
        sys.stderr.write(f"conformance: --baseline: {exc}\n")
        return
    text = diff.to_text()
    (state.report_dir / "baseline-diff.md").write_text(text, encoding="utf-8")
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.ensure_newline()
        tr.write(text)
    else:
        sys.stdout.write(text)
    if diff.has_regressions and opts.get_option(session.config, "fail_on_regression"):
        sys.stdout.write(f"conformance: {len(diff.regressions)} regression(s) against {base}: failing the run "
                         "(--fail-on-regression)\n")
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def build_report(config: pytest.Config, state: ConformanceState) -> None:
    """Build summary.json / summary.md / index.html with :mod:`reports` and print the summary table."""
    try:
        import reports
    except ImportError:  # pragma: no cover - reports is part of this distribution
        return
    try:
        result = reports.build(state.report_dir)
        state.summary = result.summary
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
def pytest_testnodedown(node, error) -> None:  # pytest-xdist hook (controller side)
    state = node.config.stash.get(STATE_KEY, None) if hasattr(node, "config") else None
    if state is not None:
        crashes.on_node_down(node.config, state, node, error)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched) -> None:  # pytest-xdist hook (controller side)
    """Record a test whose xdist worker died (segfault, abort, hard timeout) as ``crash`` / ``timeout``."""
    config = sched.config
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return
    crashes.on_crash_item(config, state, crashitem, report, sched)


def _suite_of_nodeid(nodeid: str) -> str:
    stem = Path(nodeid.split("::")[0]).stem
    return stem[5:] if stem.startswith("test_") else stem


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        _stop_display(config, state)
    if state is not None and state in _CURRENT:
        _CURRENT.remove(state)
