"""Session plugin of the deeper op suites, registered by ``conformance.plugin``'s ``pytest_configure``.

* aten coverage: every test's call phase runs under :func:`conformance.coverage.trace` (the backend's
  own op counter, else a ``TorchDispatchMode``; with the mode, the ``device_api`` suite is left out, as
  its ``torch.compile`` checks must not see a dispatch mode); each process
  writes ``<report-dir>/coverage/<worker>.json`` and the controller merges ``coverage.json`` before the
  report is built (``tryfirst``).
* ``--update-manifest``: the controller writes ``<report-dir>/manifest.proposed.toml``
  (:mod:`conformance.manifest_update`).
* Hypothesis profiles for ``test_properties``: ``conformance`` (default: :data:`CI_EXAMPLES` examples
  per test, no deadline) and ``thorough`` (``--hypothesis-profile thorough``: :data:`THOROUGH_EXAMPLES`).
"""

from __future__ import annotations

import pytest

CI_EXAMPLES = 20
THOROUGH_EXAMPLES = 400
_SKIP_COVERAGE_SUITES = {"device_api"}


def _register_profiles() -> None:
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # pragma: no cover - hypothesis is a dependency of the op suites
        return
    common = dict(deadline=None, derandomize=False, print_blob=True,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                         HealthCheck.data_too_large, HealthCheck.filter_too_much])
    settings.register_profile("conformance", max_examples=CI_EXAMPLES, **common)
    settings.register_profile("thorough", max_examples=THOROUGH_EXAMPLES, **common)


_register_profiles()


def _state(config):
    from conformance.plugin import STATE_KEY

    return config.stash.get(STATE_KEY, None)


def pytest_configure(config: pytest.Config) -> None:
    state = _state(config)
    if getattr(config.option, "hypothesis_profile", None) in (None, ""):
        try:
            from hypothesis import settings

            settings.load_profile("conformance")
        except ImportError:  # pragma: no cover
            pass
    if state is None:
        return
    from conformance import coverage

    config.stash[_COUNTS] = {}
    if _controls_run(state) and not config.option.collectonly:
        coverage.clear(state.report_dir)


def _controls_run(state) -> bool:
    """True in the process that owns the session's outputs (not an xdist worker or isolation child)."""
    return getattr(state, "controls_run", not state.is_worker)


_COUNTS = pytest.StashKey[dict]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    state = _state(item.config)
    counts = item.config.stash.get(_COUNTS, None)
    suite = _suite(item)
    if state is None or state.profile is None or counts is None or not _is_op_suite(item):
        yield
        return
    from conformance import coverage

    if suite in _SKIP_COVERAGE_SUITES and coverage.uses_dispatch_mode(state.profile):
        yield
        return
    with coverage.trace(state.profile, counts):
        yield


def _is_op_suite(item) -> bool:
    """Coverage is traced for the op suites only: a dispatch mode changes how model code runs (Dynamo
    compiles nothing under an active mode, and some transformers code paths hit a PyTorch assert)."""
    from pathlib import Path

    return Path(str(item.path)).resolve().parent == Path(__file__).resolve().parent


def _suite(item) -> str:
    mark = item.get_closest_marker("conformance")
    if mark is not None and mark.kwargs.get("suite"):
        return mark.kwargs["suite"]
    from pathlib import Path

    stem = Path(str(item.path)).stem
    return stem[5:] if stem.startswith("test_") else stem


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    config = session.config
    state = _state(config)
    if state is None or config.option.collectonly:  # --collect-only keeps the last run's coverage
        return
    from conformance import coverage

    counts = config.stash.get(_COUNTS, None)
    if counts:
        coverage.write_worker(state.report_dir, state.worker, counts, coverage.backend_key(state.profile))
    if not _controls_run(state):
        return
    if counts is not None:
        data = coverage.write_merged(state.report_dir)
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None and data["executed"]:
            tr.write_line(f"conformance: aten coverage: {data['executed_registered']} of "
                          f"{data['registered_total']} registered overloads, {len(data['core_executed'])} of "
                          f"{data['core_total']} core overloads executed on {state.profile.type}")
    from conformance.options import get_option

    if get_option(config, "update_manifest"):
        from conformance.manifest_update import write_proposed

        path, added, removed = write_proposed(state.report_dir, state.manifest)
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(f"conformance: proposed manifest {path} ({len(added)} added, {len(removed)} removed)")
