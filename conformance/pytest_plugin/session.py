"""The per-process state of a conformance session: :class:`ConformanceSession`, kept in ``config.stash``.

Every pytest process of a conformance run has one session object: the xdist controller, each xdist
worker, the main process under ``-n 0``, the parent and the children of isolation mode
(:mod:`neuron_conformance.conformance.survival.isolation`). The plugin's hooks create it in ``pytest_configure`` and hand it to the
modules that do the work (selection, recording, guard, crashes, isolation, reporting); none of them
reaches back into the plugin.

The environment names a process reads at start-up are defined here too, so that the isolation parent and
its children agree on them without importing each other.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from neuron_conformance.conformance.backend import environment, precision, probe
from neuron_conformance.conformance.backend.device import (
    NUMERIC_MODE_ENV,
    DeviceProfile,
    backend_manifests,
    check_compile_backend,
    harness_version,
    resolve_profile,
)
from neuron_conformance.conformance.backend.fallbacks import tracking_meta
from neuron_conformance.conformance.pytest_plugin import activation, sharding
from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.pytest_plugin.selection import clean_nodeid
from neuron_conformance.conformance.results.manifest import Manifest, load_manifest
from neuron_conformance.conformance.results.records import RecordWriter
from neuron_conformance.conformance.survival.crash_files import CrashWatch

ISOLATION_CHILD_ENV = "CONFORMANCE_ISOLATION_CHILD"
"""Set (to the parent's channel file descriptor) in the child processes of isolation mode."""
WORKER_ENV = "CONFORMANCE_WORKER_ID"
"""Overrides the record-file stem of a process (isolation children: ``iso0``, ``iso1``, ...)."""


class ConformanceSession:
    """What one pytest process knows about the conformance run it belongs to.

    Args:
        config: the pytest config of this process.

    Raises:
        neuron_conformance.conformance.pytest_plugin.options.OptionError: an option value does not parse (shard options inconsistent, ...).

    Attributes (set at construction unless said otherwise):
        config: the pytest config.
        is_worker: True in an xdist worker.
        isolation_child: True in a child process of ``--conformance-isolate``.
        controls_run: True in the process that owns the run's outputs (run.json, the report): the xdist
            controller, or the main process without xdist (the isolation parent included).
        worker: this process's record-file stem (``gw0``, ``iso1``, ``main``).
        report_dir: absolute report directory.
        dtypes, seed, sample, sample_budget, timeouts, isolate, shard_id, num_shards, baseline: parsed options.
        shard_durations: node id -> seconds from ``--conformance-shard-durations`` (set at start-up), else None.
        profile: the :class:`~neuron_conformance.conformance.backend.device.DeviceProfile` (after :meth:`load`).
        manifest: the expected-failure manifests in force (after :meth:`load`).
        watch: this process's crash file when it runs tests (set in ``pytest_sessionstart``).
        channel: the isolation child's pipe to its parent.
        display: the live progress display of the controlling process.
        poisoned: the canary's finding after a failing test left the device unusable, else None.
        exit_pending: the process leaves before its next test (its device is poisoned).
        stop_reason: why the run stopped early (None: it ran to its end).
        crash_handled: xdist worker id -> node id of the crash already recorded for it.
        startup_crashes: xdist workers in a row that died before their first test (controller).
        identities: node id -> record identity of every collected test (controlling process only).
        summary: the report's summary, once built.
        repro_count: repro pairs written by this process.
        ops_checked: the xdist controller checked the ``--conformance-ops`` names (on the first collection).
        coverage_counts: aten overload -> calls traced in this process (None: coverage not traced); filled
            at the end of the session from ``coverage_by_suite``.
        coverage_by_suite: suite -> (aten overload -> calls) traced in this process.
        aten_audit: the controlling process's aten audit (:func:`neuron_conformance.conformance.results.aten_audit.audit`), else None.
        preflight: the start-up preflight of a third-party backend (:mod:`neuron_conformance.conformance.backend.probe`), else None.
        canary_variant: the canary run after failing tests (a key of ``survival.CANARIES``; None: off, by
            ``--conformance-no-canary`` or because none worked on a fresh device).
        backend_environment: the environment variables the backend set while this process loaded it, put back
            because this process starts the test processes (:mod:`neuron_conformance.conformance.backend.environment`).
    """

    def __init__(self, config: pytest.Config):
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        report_dir = Path(opts.get_option(config, "report_dir"))
        if not report_dir.is_absolute():
            report_dir = Path(str(config.invocation_params.dir)) / report_dir
        self.report_dir: Path = report_dir
        self.dtypes: tuple[str, ...] = opts.get_option(config, "dtypes")
        self.seed: int = opts.get_option(config, "seed")
        self.sample: int | None = opts.get_option(config, "sample")
        self.sample_budget: float = opts.get_option(config, "sample_budget")
        self.profile: DeviceProfile | None = None
        self.manifest = Manifest()
        self.writer: RecordWriter | None = None
        self.started = time.time()
        self.isolation_child = bool(os.environ.get(ISOLATION_CHILD_ENV))
        # the xdist worker id comes from this session's config: PYTEST_XDIST_WORKER in the environment may
        # be inherited from an outer pytest-xdist run that started this one as a subprocess
        self.worker: str = os.environ.get(WORKER_ENV) or (config.workerinput["workerid"] if self.is_worker else "main")
        self.controls_run = not self.is_worker and not self.isolation_child
        self.watch: CrashWatch | None = None
        self.timeouts: dict = opts.get_option(config, "test_timeout")
        self.isolate: str = opts.get_option(config, "isolate")
        self.shard_id: int | None = opts.get_option(config, "shard_id")
        self.num_shards: int | None = opts.get_option(config, "num_shards")
        sharding.check_shard_options(self.shard_id, self.num_shards)
        self.shard_durations: dict[str, float] | None = None  # set at start-up from --conformance-shard-durations
        self.baseline: str | None = opts.get_option(config, "baseline")
        self.stop_reason: str | None = None
        self.poisoned: dict | None = None
        self.exit_pending = False
        self.crash_handled: dict[str, str] = {}
        self.identities: dict[str, dict] = {}
        self.summary: dict | None = None
        self.channel: Any = None  # an isolation child's ChildChannel (survival/isolation.py)
        self.repro_count = 0
        self.display: Any = None  # the controller's ProgressDisplay (pytest_plugin/progress.py)
        self.terminal_file = None  # the terminal writer's own file while the progress display is live
        self.ops_checked = False
        self.coverage_counts: dict[str, int] | None = None
        self.coverage_by_suite: dict[str, dict[str, int]] = {}
        self.aten_audit: dict | None = None
        self.coverage_method: str | None = None
        """How aten coverage is traced: ``backend``, ``mode`` or None (not traced; ``coverage_reason`` why)."""
        self.coverage_reason: str | None = None
        self.compile_backend: str | None = None
        """``--conformance-compile-backend``: the torch.compile backend the compile checks use (None: their defaults)."""
        self.preflight: probe.Preflight | None = None
        self.canary_variant: str | None = None if opts.get_option(config, "no_canary") else "default"
        self.startup_crashes = 0
        self.backend_environment: list[str] = []

    def load(self) -> None:
        """Resolve the device and the manifests.

        Raises:
            neuron_conformance.conformance.backend.device.DeviceError: unknown device, broken backend module.
            neuron_conformance.conformance.results.manifest.ManifestError: a malformed manifest.
            neuron_conformance.conformance.pytest_plugin.options.OptionError: a bad option value.
        """
        manifest_path = opts.get_option(self.config, "manifest")
        if manifest_path:
            self.manifest.extend(load_manifest(manifest_path))
        snapshot = environment.Snapshot()  # before the backend is imported (module docstring there)
        self.profile = resolve_profile(
            device=opts.get_option(self.config, "device"),
            backend_module=opts.get_option(self.config, "backend_module"),
            emulator_mode=opts.get_option(self.config, "emulator_mode"),
        )
        if self.starts_test_processes():
            self.backend_environment = snapshot.restore(keep=(NUMERIC_MODE_ENV,))
        self.compile_backend = check_compile_backend(opts.get_option(self.config, "compile_backend"))
        if not self.profile.api_support and self.profile.type != "cpu":  # the backend does not report its own
            self.preflight = self._preflight(
                opts.get_option(self.config, "backend_module"), snapshot.environ(keep=(NUMERIC_MODE_ENV,))
            )
            self.profile.api_support = dict(self.preflight.api_support)
            if self.canary_variant is not None:  # --conformance-no-canary wins over the preflight's choice
                self.canary_variant = self.preflight.canary
        for shipped in backend_manifests(self.profile):  # the backend's own (CONFORMANCE_MANIFESTS)
            self.manifest.extend(load_manifest(shipped))

    def _preflight(self, backend_module: str | None, environ: dict) -> probe.Preflight:
        """The controller's preflight: handed down to xdist workers and isolation children, run (in a child
        process started with ``environ``) only where none was handed down."""
        given = self.config.workerinput.get(probe.WORKERINPUT_KEY) if self.is_worker else None
        if given is None and self.isolation_child:
            given = os.environ.get(probe.ENV)
        if given:
            return probe.Preflight.from_json(given)
        return probe.run_preflight(self.profile.type, backend_module, environ)

    def starts_test_processes(self) -> bool:
        """True in the process that controls the run and leaves its tests to processes it starts: the xdist
        controller (``-n N``, not ``--collect-only``) or the ``--conformance-isolate`` parent. Decided from the
        options, since xdist registers its controller after this plugin's ``pytest_configure``."""
        if not self.controls_run:
            return False
        option = self.config.option
        distributed = getattr(option, "dist", "no") != "no" and bool(getattr(option, "tx", None))
        return (distributed and not option.collectonly) or self.isolate != "off"

    def runs_tests_here(self) -> bool:
        """True in a process that runs tests: an xdist worker, an isolation child, or the main process
        without xdist and without isolation."""
        if self.is_worker or self.isolation_child:
            return True
        return not self.config.pluginmanager.has_plugin("dsession") and self.isolate == "off"

    def run_metadata(self, complete: bool, finished: float | None = None) -> dict:
        """The content of ``run.json`` (fields: docs/reports.md, "Inputs")."""
        return {
            "schema": 1,
            "device": self.profile.to_dict() if self.profile else None,
            "torch_version": torch.__version__,
            "harness_version": harness_version(),
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
            "aten_coverage": {"traced_by": self.coverage_method, "reason": self.coverage_reason},
            "op_tracking": tracking_meta(self.profile),
            "precision_modes": [m.to_dict() for m in precision.detect(self.profile.type)] if self.profile else [],
        }

    def record_writer(self) -> RecordWriter:
        """This process's record writer (created on first use)."""
        if self.writer is None:
            self.writer = RecordWriter(self.report_dir, worker=self.worker)
        return self.writer

    def backend_module(self) -> str | None:
        """The backend module a replay must import: ``--conformance-backend-module``, or the module the harness
        imported for an emulated device, else None."""
        backend = opts.get_option(self.config, "backend_module")
        if backend is None and self.profile is not None and self.profile.registered_by == "harness":
            backend = self.profile.backend
        return backend

    # The run's state changes only through the methods below: the modules that do the work read the session
    # and call these, so every change of state has one place.

    def stop(self, reason: str, *, unless_stopped: bool = False) -> None:
        """Record why the run stops (``run.json``'s ``stop_reason``); with ``unless_stopped`` a reason
        recorded earlier is kept."""
        if not (unless_stopped and self.stop_reason):
            self.stop_reason = reason

    def attach_test_process(self, watch: CrashWatch, channel=None) -> None:
        """This process runs tests: its crash watch, and an isolation child's channel to its parent."""
        self.watch = watch
        if channel is not None:
            self.channel = channel

    def request_exit(self) -> None:
        """Leave this process before its next test (a poisoned device: xdist or the parent replaces it)."""
        self.exit_pending = True

    def mark_poisoned(self, nodeid: str, canary: str) -> None:
        """The canary failed after ``nodeid``: the device of this process is unusable."""
        self.poisoned = {"nodeid": nodeid, "canary": canary, "worker": self.worker}

    def count_startup_crash(self) -> int:
        """One more worker died before its first test; the count of such deaths in a row."""
        self.startup_crashes += 1
        return self.startup_crashes

    def reset_startup_crashes(self) -> None:
        """A worker ran a test: the run is not stuck on workers that die at start-up."""
        self.startup_crashes = 0

    def start_coverage(self, method: str | None, reason: str | None) -> None:
        """How aten coverage is traced in this process (``method`` None: not traced, for ``reason``)."""
        self.coverage_method, self.coverage_reason = method, reason
        self.coverage_counts = {} if method is not None else None
        self.coverage_by_suite = {}

    def set_aten_audit(self, audit) -> None:
        """The merged aten audit of the run (controlling process)."""
        self.aten_audit = audit

    def set_shard_durations(self, durations: dict) -> None:
        """Per-group durations of an earlier run, to deal groups to shards by time."""
        self.shard_durations = durations

    def mark_ops_checked(self) -> bool:
        """True the first time: ``--conformance-ops`` is checked against the collected tests once."""
        first = not self.ops_checked
        self.ops_checked = True
        return first

    def count_repro(self) -> None:
        """One more repro pair written by this process."""
        self.repro_count += 1

    def attach_display(self, display, terminal_file) -> None:
        """The live progress display and the terminal file pytest wrote to before it."""
        self.display, self.terminal_file = display, terminal_file

    def detach_display(self) -> None:
        """The live display stopped."""
        self.display = None

    def repro_command(self, nodeid: str, sample: int | None) -> str:
        """The one-line command that replays ``nodeid`` (and only sample ``sample`` of it when given)."""
        p = self.profile
        cmd = f"pytest '{clean_nodeid(nodeid)}' --conformance-device {p.type}"
        if p.emulated and p.emulator_mode != "mirror":
            cmd += f" --conformance-emulator-mode {p.emulator_mode}"
        backend_module = opts.get_option(self.config, "backend_module")
        if backend_module:
            cmd += f" --conformance-backend-module {backend_module}"
        if sample is not None:
            cmd += f" --conformance-sample {sample}"
        if not activation.suite_args([clean_nodeid(nodeid)], Path(str(self.config.rootpath)), pyargs=False):
            cmd += " --conformance=on"  # a test outside the suites replays only in an opted-in session
        return cmd


SESSION_KEY = pytest.StashKey[ConformanceSession]()
"""Where a process's :class:`ConformanceSession` is kept in ``config.stash``."""

_CURRENT: list[ConformanceSession] = []
"""The sessions of this process, innermost last (pytester's inline sessions nest inside an outer run)."""


def get_session(config: pytest.Config) -> ConformanceSession:
    """The session of ``config`` (raises ``KeyError`` outside a configured conformance session)."""
    return config.stash[SESSION_KEY]


def find_session(config: pytest.Config) -> ConformanceSession | None:
    """The session of ``config``, or None when this pytest session is not a conformance session."""
    return config.stash.get(SESSION_KEY, None)


def enter(session: ConformanceSession) -> None:
    """Store ``session`` in its config and make it this process's current session."""
    session.config.stash[SESSION_KEY] = session
    _CURRENT.append(session)


def leave(session: ConformanceSession) -> None:
    """Forget ``session`` as current (``pytest_unconfigure``)."""
    if session in _CURRENT:
        _CURRENT.remove(session)


def current() -> ConformanceSession | None:
    """The innermost session of this process, for hooks that get no config (``pytest_runtest_logfinish``)."""
    return _CURRENT[-1] if _CURRENT else None
