"""Project tests. ``pytester`` drives the conformance plugin end to end in subprocesses."""

import pytest

from neuron_conformance.conformance.pytest_plugin.options import BY_DEST

pytest_plugins = ["pytester"]

ACTIVATE_ENV = BY_DEST["activate"].env
"""``CONFORMANCE_ACTIVATE``: the explicit opt-in of :mod:`neuron_conformance.conformance.pytest_plugin.activation`."""


@pytest.fixture(autouse=True)
def conformance_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opt every pytester and subprocess pytest session of a test in (``CONFORMANCE_ACTIVATE=on``): their
    test files are not the harness's suites, so by the activation rule they would not be conformance
    sessions. Tests of the rule itself remove the variable."""
    monkeypatch.setenv(ACTIVATE_ENV, "on")


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Run the long end-to-end tests (marker ``slow``) first, the rest in collection order after them.

    Under ``-n`` the scheduler is ``worksteal`` (:func:`pytest_configure`): an idle worker takes half of a
    busy one's queue. Started first, the long tests overlap with everything else; left at the end of their
    folders' order they made a tail where one worker ran them alone (measured: the last 16 % of the
    project's tests took about half its wall time on 2 cores with the default ``load`` scheduler).
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Install the emulated ``neuron`` device before any test runs, as the harness does at its session
    start. torch's autograd engine sizes its per-device ready queues once, at the first backward of the
    process (``Engine::start_device_threads``, torch/csrc/autograd/engine.cpp), from the devices registered
    then: a test that ran a CPU backward before any test installed the emulator made every later backward
    on ``neuron`` in that worker fail with an internal assert (``device_ready_queues_``), depending on the
    order in which xdist handed out the tests."""
    from neuron_conformance import emulator  # deferred: torch is imported only for a session

    emulator.install()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """``-n`` without ``--dist``: schedule with pytest-xdist's ``worksteal`` instead of its default ``load``
    (pytest-xdist >= 3.2), so that no worker sits idle while another still holds a queue of long tests. An
    explicit ``--dist`` wins; without pytest-xdist this does nothing."""
    explicit = any(str(a).startswith(("--dist", "-d")) for a in config.invocation_params.args)
    if config.pluginmanager.has_plugin("xdist") and getattr(config.option, "dist", None) == "load" and not explicit:
        config.option.dist = "worksteal"
