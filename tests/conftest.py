"""Project tests. ``pytester`` drives the conformance plugin end to end in subprocesses."""

import pytest

from neuron_conformance.conformance.options import BY_DEST

pytest_plugins = ["pytester"]

ACTIVATE_ENV = BY_DEST["activate"].env
"""``CONFORMANCE_ACTIVATE``: the explicit opt-in of :mod:`neuron_conformance.conformance.activation`."""


@pytest.fixture(autouse=True)
def conformance_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opt every pytester and subprocess pytest session of a test in (``CONFORMANCE_ACTIVATE=on``): their
    test files are not the harness's suites, so by the activation rule they would not be conformance
    sessions. Tests of the rule itself remove the variable."""
    monkeypatch.setenv(ACTIVATE_ENV, "on")
