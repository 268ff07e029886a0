"""The pytest plugin (entry point ``pytest11: conformance``): pytest hooks and fixtures only.

Every hook hands its work to the module that owns it; the session's state is a
:class:`~neuron_conformance.conformance.pytest_plugin.session.ConformanceSession` in ``config.stash``. Whether a session is a conformance
session is decided once, at start-up, by :mod:`neuron_conformance.conformance.pytest_plugin.activation`; in any other session no session
object is created and every hook does nothing (it finds no session).

==================================  ===============================================================
hook                                work done by
==================================  ===============================================================
``pytest_addoption``                :mod:`neuron_conformance.conformance.pytest_plugin.options`
``pytest_addhooks``                 :mod:`neuron_conformance.conformance.pytest_plugin.hookspecs` (hooks the suites implement)
``pytest_load_initial_conftests``   :func:`neuron_conformance.conformance.pytest_plugin.activation.decide_early`,
                                    :func:`neuron_conformance.conformance.pytest_plugin.startup.default_dist` (``--dist loadgroup``)
``pytest_configure``                :func:`neuron_conformance.conformance.pytest_plugin.activation.decide`, :func:`neuron_conformance.conformance.pytest_plugin.startup.start`,
                                    :func:`neuron_conformance.conformance.backend.capabilities.start`
``pytest_configure_node``           hands the activation and :mod:`neuron_conformance.conformance.backend.probe`'s preflight to xdist
                                    workers
``pytest_report_header``            :func:`neuron_conformance.conformance.pytest_plugin.activation.header_line`,
                                    :func:`neuron_conformance.conformance.pytest_plugin.startup.header_lines`,
                                    :func:`neuron_conformance.conformance.backend.capabilities.header_line`
``pytest_collection_modifyitems``   :func:`neuron_conformance.conformance.pytest_plugin.selection.select_items`,
                                    :func:`neuron_conformance.conformance.backend.capabilities.mark_unclaimed` (``not-claimed``)
``pytest_collection_finish``        :func:`neuron_conformance.conformance.pytest_plugin.startup.freeze_heap`, :mod:`neuron_conformance.conformance.pytest_plugin.progress`
``pytest_sessionstart``             :class:`neuron_conformance.conformance.survival.crash_files.CrashWatch`, the isolation child's pipe
``pytest_runtestloop``              :func:`neuron_conformance.conformance.survival.isolation.run` (``--conformance-isolate``)
``pytest_runtest_protocol``         :mod:`neuron_conformance.conformance.survival.guard` (crash file, time limit, poisoned device)
``pytest_runtest_setup``            :func:`neuron_conformance.conformance.pytest_plugin.seeding.manual_seed`
``pytest_runtest_call``             :func:`neuron_conformance.conformance.pytest_plugin.tracing.traced` (aten coverage),
                                    :mod:`neuron_conformance.conformance.backend.fallbacks` (native versus CPU-fallback ops)
``pytest_runtest_makereport``       :mod:`neuron_conformance.conformance.survival.safe_repr`, :func:`neuron_conformance.conformance.verdict.expectations.enforce`
                                    (an expected failure of another class or size fails),
                                    :func:`neuron_conformance.conformance.pytest_plugin.recording.on_report` (the result record),
                                    :func:`neuron_conformance.conformance.pytest_plugin.terminal_output.shorten_report`
``pytest_runtest_logreport``        the isolation child's pipe, :mod:`neuron_conformance.conformance.pytest_plugin.progress`
``pytest_testnodedown``,            :mod:`neuron_conformance.conformance.survival.crashes` (xdist controller: a dead worker,
``pytest_handlecrashitem``,         the restart limit, the scheduler's guard)
``pytest_xdist_make_scheduler``
``pytest_sessionfinish``            :mod:`neuron_conformance.conformance.pytest_plugin.tracing`, :mod:`neuron_conformance.conformance.pytest_plugin.reporting`
==================================  ===============================================================

Fixtures for the suites: ``device_profile``, ``device``, ``conformance_record``, ``conformance_repro``,
``sample_index``, ``sample_budget``, ``memory_budget``, ``claimed_capabilities`` (docs/architecture.md, "Writing a test that records").
"""

from __future__ import annotations

import contextlib
import os

import pytest

from neuron_conformance.conformance.backend import capabilities, dtype_claims, fallbacks, probe
from neuron_conformance.conformance.backend.budget import MemoryBudget, resolve_budget
from neuron_conformance.conformance.backend.device import DeviceProfile
from neuron_conformance.conformance.pytest_plugin import (
    activation,
    exclusive,
    hookspecs,
    progress,
    recording,
    reporting,
    selection,
    startup,
    terminal_output,
    tracing,
)
from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.pytest_plugin.seeding import manual_seed
from neuron_conformance.conformance.pytest_plugin.session import (
    ISOLATION_CHILD_ENV,
    current,
    find_session,
    get_session,
    leave,
)
from neuron_conformance.conformance.survival import crash_files as survival
from neuron_conformance.conformance.survival import crashes, guard, isolation, safe_repr
from neuron_conformance.conformance.verdict import expectations


def pytest_addoption(parser: pytest.Parser) -> None:
    opts.add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list) -> None:
    if activation.decide_early(early_config).active:
        startup.refuse_renamed_flags(parser, args)
        startup.default_dist(args, early_config.pluginmanager.has_plugin("xdist"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.option.help or getattr(config.option, "version", False):
        return
    decision = activation.decide(config, isolation_child=bool(os.environ.get(ISOLATION_CHILD_ENV)))
    if decision.error is not None:
        startup.usage_exit(decision.error)
    if not decision.active:
        return
    config.addinivalue_line(
        "markers",
        "conformance(op, dtype=None, variant=None, suite=None, kind='op'): "
        "identifies the op/model/scenario a test checks (manifest matching "
        "and result records)",
    )
    exclusive.register(config)
    config.addinivalue_line(
        "markers",
        "capability(*names): the capabilities a test needs; a test of one the "
        "backend does not claim is recorded as not-claimed (neuron_conformance.conformance.backend.capabilities)",
    )
    session = startup.start(config)
    if session is not None:
        capabilities.start(config, session)
        crashes.raise_restart_limit(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = find_session(config)
    if session is None:
        return []
    line = activation.header_line(config)
    op_dtypes = capabilities.dtype_claims_of(config)
    return [
        *([line] if line else []),
        *startup.header_lines(session),
        *capabilities.header_line(capabilities.claims_of(config)),
        *(dtype_claims.header_line(op_dtypes) if op_dtypes is not None else []),
    ]


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    conf = find_session(config)
    if conf is not None:
        selection.select_items(config, conf, items)
        capabilities.mark_unclaimed(
            capabilities.claims_of(config), items, selection.record_identity, capabilities.dtype_claims_of(config)
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    conf = find_session(session.config)
    if conf is None:
        return
    startup.freeze_heap()
    if conf.controls_run and not session.config.pluginmanager.has_plugin("dsession"):
        progress.start_display(session.config, conf, [i.nodeid for i in session.items])


@pytest.hookimpl(optionalhook=True, wrapper=True)
def pytest_xdist_make_scheduler(config, log):  # pytest-xdist hook (controller side)
    """Guard xdist's scheduler against a replacement worker that has not collected yet (crashes.py)."""
    sched = yield
    if find_session(config) is not None and sched is not None:
        crashes.guard_scheduler(sched)
    return sched


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # pytest-xdist hook (controller side), before a worker starts
    """Tell each worker that this is a conformance session, and hand it the controller's start-up preflight
    (``workerinput``), so that workers do not probe."""
    conf = find_session(node.config)
    if conf is not None:
        node.workerinput[activation.WORKERINPUT_KEY] = True
    if conf is not None and conf.preflight is not None:
        node.workerinput[probe.WORKERINPUT_KEY] = conf.preflight.to_json()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids) -> None:  # pytest-xdist hook (controller side)
    conf = current()
    if conf is None or not conf.controls_run:
        return
    selection.check_collected_ops(conf, list(ids))
    if conf.display is None:
        progress.start_display(conf.config, conf, list(ids))


def pytest_sessionstart(session: pytest.Session) -> None:
    conf = find_session(session.config)
    if conf is not None and conf.runs_tests_here():
        conf.attach_test_process(
            survival.CrashWatch(conf.report_dir, conf.worker),
            isolation.ChildChannel(int(os.environ[ISOLATION_CHILD_ENV])) if conf.isolation_child else None,
        )


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    """Isolation mode: the main process hands the tests to child processes (:mod:`neuron_conformance.conformance.survival.isolation`)."""
    conf = find_session(session.config)
    if (
        conf is None
        or not conf.controls_run
        or conf.isolate == "off"
        or session.config.pluginmanager.has_plugin("dsession")
    ):
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(
            f"{session.testsfailed} error{'s' if session.testsfailed != 1 else ''} during collection"
        )
    if not session.config.option.collectonly:
        isolation.run(session, conf)
    return True


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """Crash file, time limit and restart after a poisoned device around each test (docs/harness.md); the
    device lock (:mod:`neuron_conformance.conformance.pytest_plugin.exclusive`) while it runs."""
    conf = find_session(item.config)
    if conf is None:
        yield
        return
    with exclusive.held(item, conf.report_dir):
        if conf.watch is None:
            yield
            return
        deadline = guard.before_test(item, conf)
        try:
            yield
        finally:
            if deadline is not None:
                deadline.cancel()
        guard.after_test(item, conf, deadline)


def pytest_runtest_setup(item: pytest.Item) -> None:
    conf = find_session(item.config)
    if conf is not None:
        manual_seed(conf.seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    conf = find_session(item.config)
    if conf is None:
        yield
        return
    with tracing.traced(item, conf), fallbacks.tracked(item, conf):
        outcome = yield
    fallbacks.judge(item, conf, outcome)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """A failing test's report is formatted with metadata-only reprs of device tensors
    (:mod:`neuron_conformance.conformance.survival.safe_repr`); an expected failure that is not the expected one fails
    (:mod:`neuron_conformance.conformance.verdict.expectations`); then its record is written (:mod:`neuron_conformance.conformance.pytest_plugin.recording`)."""
    conf = find_session(item.config)
    guard_repr = conf is not None and call.excinfo is not None
    with safe_repr.metadata_only() if guard_repr else contextlib.nullcontext():
        outcome = yield
    if conf is not None:
        report = outcome.get_result()
        expectations.enforce(item, report, call.excinfo)
        recording.on_report(item, conf, report, call.excinfo)
        terminal_output.shorten_report(item, report, call.excinfo)  # after the record took the whole message


def pytest_runtest_logreport(report) -> None:
    """Isolation child: send each report to the parent. Run controller: feed the progress display."""
    conf = current()
    if conf is None:
        return
    if conf.controls_run:
        crashes.on_test_report(conf, report)
    if conf.channel is not None:
        data = conf.config.hook.pytest_report_to_serializable(config=conf.config, report=report)
        conf.channel.send("report", report.nodeid, data=data)
    if conf.display is not None:
        status = conf.config.hook.pytest_report_teststatus(report=report, config=conf.config)
        if status:
            conf.display.report(report, status[0])


def pytest_runtest_logfinish(nodeid, location) -> None:
    conf = current()
    if conf is not None and conf.display is not None:
        conf.display.finish(nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_report_teststatus(report, config):
    """While the progress display is live, pytest's one-letter-per-test output is dropped."""
    result = yield
    conf = find_session(config)
    if conf is not None and conf.display is not None and result and config.option.verbose <= 0:
        cat, _letter, word = result
        return cat, "", word
    return result


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    """pytest-timeout hook: the limits are enforced by :mod:`neuron_conformance.conformance.survival.timeouts` instead."""
    conf = find_session(item.config)
    return True if conf is not None and conf.watch is not None else None


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_cancel_timer(item):
    conf = find_session(item.config)
    return True if conf is not None and conf.watch is not None else None


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # pytest-xdist hook (controller side)
    conf = find_session(node.config) if hasattr(node, "config") else None
    if conf is not None:
        crashes.on_node_down(node.config, conf, node, error)
        selection.tell_left_out(node.config, getattr(node, "workeroutput", {}).get(selection.LEFT_OUT_KEY))


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched) -> None:  # pytest-xdist hook (controller side)
    """Record a test whose xdist worker died (segfault, abort, hard timeout) as ``crash`` / ``timeout``."""
    conf = find_session(sched.config)
    if conf is not None:
        crashes.on_crash_item(sched.config, conf, crashitem, report, sched)


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    conf = find_session(session.config)
    if conf is None:
        return
    if conf.writer is not None:
        conf.writer.close()
    if session.config.option.collectonly:  # --collect-only keeps the last run's records and coverage
        return
    tracing.finish_session(session.config, conf)
    if conf.controls_run:
        reporting.finish_session(session, conf, exitstatus)


def pytest_unconfigure(config: pytest.Config) -> None:
    conf = find_session(config)
    if conf is not None:
        progress.stop_display(config, conf)
        leave(conf)


@pytest.fixture(scope="session")
def device_profile(request) -> DeviceProfile:
    """The :class:`~neuron_conformance.conformance.backend.device.DeviceProfile` under test."""
    return get_session(request.config).profile


@pytest.fixture(scope="session")
def device(device_profile):
    """``torch.device`` of the device type under test."""
    return device_profile.device


@pytest.fixture(scope="session")
def compile_backend(request) -> str | None:
    """``--conformance-compile-backend``: the ``torch.compile`` backend name the compile checks use, or None (their
    defaults)."""
    return get_session(request.config).compile_backend


@pytest.fixture(scope="session")
def memory_budget(request, device_profile) -> MemoryBudget:
    """The stress suite's :class:`~neuron_conformance.conformance.backend.budget.MemoryBudget`: ``--conformance-memory-budget``, else the backend's
    ``CONFORMANCE_MEMORY_BUDGET``, else the accelerator's free memory (:func:`neuron_conformance.conformance.backend.budget.resolve_budget`)."""
    return resolve_budget(opts.get_option(request.config, "memory_budget"), device_profile)


@pytest.fixture
def conformance_record(request) -> recording.Record:
    """The result record of the running test; the plugin writes it when the test ends."""
    return recording.record_of(request.node)


@pytest.fixture
def conformance_repro(request, conformance_record):
    """``save(op_full_name, sample_index, dtype, sample) -> [paths]``: write the failing sample's repro pair
    (:func:`neuron_conformance.conformance.pytest_plugin.recording.repro_saver`)."""
    return recording.repro_saver(request.node, get_session(request.config), conformance_record)


@pytest.fixture
def sample_index(request) -> int | None:
    """The ``--conformance-sample`` index to replay, or None for every sample."""
    return get_session(request.config).sample


@pytest.fixture
def sample_budget(request) -> float | None:
    """``--conformance-sample-budget``: seconds a test of the deeper op suites spends on its samples (None: no limit)."""
    return get_session(request.config).sample_budget or None


@pytest.fixture(scope="session")
def claimed_capabilities(request) -> frozenset:
    """The capability names the backend claims (:func:`neuron_conformance.conformance.backend.capabilities.claims_of`)."""
    return capabilities.claims_of(request.config).claimed
