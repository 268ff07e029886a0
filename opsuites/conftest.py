"""The op suites' conftest: Hypothesis profiles, and the harness hook that asks for aten coverage.

* Hypothesis profiles for ``test_properties``: ``conformance`` (loaded unless ``--hypothesis-profile``
  names another: :data:`CI_EXAMPLES` examples per test, no deadline) and ``thorough``
  (``--hypothesis-profile thorough``: :data:`THOROUGH_EXAMPLES`).
* ``pytest_conformance_trace_coverage`` (:mod:`neuron_conformance.conformance.pytest_plugin.hookspecs`): every op-suite test is traced,
  except the ``device_api``, ``compile`` and ``flex_attention`` suites when tracing needs a
  ``TorchDispatchMode`` (their ``torch.compile`` checks must not see a dispatch mode: Dynamo runs a
  frame eagerly under one).

* ``pytest_collection_modifyitems``: a malformed ``CONFORMANCE_CUSTOM_OPS`` the ``custom_ops`` suite met at
  collection (:mod:`neuron_conformance.conformance.backend.custom_ops`) ends the run with one line and exit code 2;
  the compile suite's tests are deselected unless asked for
  (:func:`neuron_conformance.opsuites.compile.selection.deselect_unrequested`), and the float8 cast suite's
  placeholder when no float8 dtype is selected (:func:`neuron_conformance.opsuites.float8_cases.deselect_unselected`);
  ``pytest_sessionstart``: under xdist the controller checks an imported backend module's declaration
  itself before workers start (a worker's exit would reach the terminal as a lost worker, not the line).

The OpInfo parametrization lives with the suites (:func:`neuron_conformance.opsuites.suite_helpers.parametrize_opinfos`).
"""

from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, settings

from neuron_conformance.conformance.backend.custom_ops import ERROR_KEY, CustomOpError, declared_ops
from neuron_conformance.conformance.pytest_plugin.session import find_session
from neuron_conformance.opsuites.compile.selection import deselect_unrequested
from neuron_conformance.opsuites.float8_cases import deselect_unselected

CI_EXAMPLES = 20
THOROUGH_EXAMPLES = 400
_COMMON = dict(
    deadline=None,
    derandomize=False,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
settings.register_profile("conformance", max_examples=CI_EXAMPLES, **_COMMON)
settings.register_profile("thorough", max_examples=THOROUGH_EXAMPLES, **_COMMON)

_UNTRACED_WITH_DISPATCH_MODE = {"device_api", "compile", "flex_attention"}


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "hypothesis_profile", None) in (None, ""):
        settings.load_profile("conformance")


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return  # without xdist, and on each worker, the suite's collection checks the declaration
    conformance_session = find_session(config)
    name = conformance_session.backend_module() if conformance_session is not None else None
    if name in sys.modules:  # the emulator's own module is not imported here only to check it
        try:
            declared_ops(name)
        except CustomOpError as exc:
            pytest.exit(f"conformance: {exc}", returncode=2)


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    error = getattr(config, ERROR_KEY, None)
    if error is not None:
        pytest.exit(f"conformance: {error}", returncode=2)
    if find_session(config) is not None:
        deselect_unrequested(config, items)
        deselect_unselected(config, items)


def pytest_conformance_trace_coverage(item: pytest.Item, uses_dispatch_mode: bool) -> bool:
    mark = item.get_closest_marker("conformance")
    suite = (mark.kwargs.get("suite") if mark is not None else None) or item.path.stem.removeprefix("test_")
    return not (uses_dispatch_mode and suite in _UNTRACED_WITH_DISPATCH_MODE)
