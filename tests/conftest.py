"""Project tests. ``pytester`` drives the conformance plugin end to end in subprocesses."""

import sys
import warnings

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


class DynamoStateLeak(UserWarning):
    """A test left Dynamo's process-wide state changed (:func:`isolated_dynamo_state` restored it)."""


def _dynamo_config_state() -> dict | None:
    """``{name: (user override, hidden)}`` of every ``torch._dynamo.config`` entry; None while ``torch._dynamo``
    is not imported, or on a torch whose config module stores its entries differently."""
    config = sys.modules.get("torch._dynamo.config")
    entries = getattr(config, "_config", None)
    if not isinstance(entries, dict):
        return None
    try:
        return {name: (entry.user_override.get(), entry.hide) for name, entry in entries.items()}
    except AttributeError:
        return None


def _dynamo_default_backend():
    registry = sys.modules.get("torch._dynamo.backends.registry")
    return getattr(registry, "_default_backend", "inductor")


@pytest.fixture(autouse=True)
def isolated_dynamo_state(request: pytest.FixtureRequest):
    """Every test starts with the ``torch._dynamo.config`` and default ``torch.compile`` backend the previous
    one started with: whatever a test changed is put back (``torch._dynamo.reset()`` after, so that nothing
    compiled under the changed settings is reused) and a :class:`DynamoStateLeak` warning names the test.

    The configuration is process-wide and outlives a test: an entry left hidden (``ConfigModule.__delattr__``,
    what ``monkeypatch``'s undo or ``unittest.mock.patch``'s exit does to an attribute it saw no value of,
    torch/utils/_config_module.py) made every later ``torch.compile`` of the worker raise
    ``AttributeError: torch._dynamo.config.disable does not exist`` (Dynamo reads ``config.disable`` on every
    frame, torch/_dynamo/convert_frame.py), in whichever tests xdist handed that worker next. Costs a dict of
    the entries before and after each test, and nothing while ``torch._dynamo`` is not imported."""
    before, backend = _dynamo_config_state(), _dynamo_default_backend()
    yield
    after = _dynamo_config_state()
    if after is None:
        return
    from torch.utils._config_module import _UNSET_SENTINEL as UNSET  # noqa: N811 - torch's private sentinel

    config = sys.modules["torch._dynamo.config"]
    changed = []
    for name, (override, hidden) in after.items():
        prior, prior_hidden = (before or {}).get(name, (UNSET, False))
        entry = config._config[name]

        def value(o, entry=entry):
            return entry.default if o is UNSET else o

        try:
            same = value(override) is value(prior) or bool(value(override) == value(prior))
        except Exception:  # noqa: BLE001 - a value without a usable ==: compare identity only
            same = False
        if hidden == prior_hidden and same:
            continue  # unchanged (a mutable default copied on first read is not a change)
        changed.append(name)
        entry.user_override.set(prior)
        entry.hide = prior_hidden
        if hasattr(config, "_hash_dirty_var"):
            config._hash_dirty_var.set(True)
        if hasattr(config, "_mark_get_dict_dirty"):
            config._mark_get_dict_dirty(name)
    now = _dynamo_default_backend()
    if now is not backend and (callable(now) or callable(backend) or now != backend):
        changed.append("default backend")
        sys.modules["torch._dynamo.backends.registry"].set_default_backend(backend)
    if changed:
        import torch._dynamo

        torch._dynamo.reset()
        warnings.warn(
            DynamoStateLeak(f"{request.node.nodeid} left Dynamo's state changed, restored: {', '.join(changed)}")
        )


class EmulatorModeLeak(UserWarning):
    """A test left the emulated device in another mode (:func:`isolated_emulator_mode` restored it)."""


def _emulator_mode() -> tuple[str, bool] | None:
    """The emulated device's (mode, asynchronous), or None while it is not installed."""
    state = sys.modules.get("neuron_conformance.emulator._state")
    return (state.mode, state.async_mode) if state is not None and state.installed else None


def _restore_emulator_mode(before: tuple[str, bool] | None, nodeid: str) -> None:
    now = _emulator_mode()
    if now is None:
        return
    state = sys.modules["neuron_conformance.emulator._state"]
    mode, asynchronous = before or (state.default_mode(), state.default_async())
    if now == (mode, asynchronous):
        return
    emulator = sys.modules["neuron_conformance.emulator"]
    emulator.set_mode(mode)
    emulator.set_async(asynchronous)
    warnings.warn(
        EmulatorModeLeak(f"{nodeid} left the emulated device in mode {now[0]!r}, asynchronous {now[1]}: restored")
    )


@pytest.fixture(autouse=True, scope="module")
def isolated_emulator_mode_per_module(request: pytest.FixtureRequest):
    """As :func:`isolated_emulator_mode`, for a module whose own module-scoped fixture switched the mode."""
    before = _emulator_mode()
    yield
    _restore_emulator_mode(before, request.node.nodeid)


@pytest.fixture(autouse=True)
def isolated_emulator_mode(request: pytest.FixtureRequest):
    """Every test starts with the emulated device's numeric mode and execution setting the previous one
    started with (once it is installed; before that, the ones a first ``install()`` picks).

    ``install()`` without a mode keeps the current one, so a test that switched to device mode and did not
    switch back handed it to whichever test xdist gave that worker next: a module fixture's ``install()``
    then ran a mirror-mode check (the zoo's SDPA fault test, whose fault sits on the CPU flash kernel that
    only mirror mode calls) in device mode. An :class:`EmulatorModeLeak` warning names the test."""
    before = _emulator_mode()
    yield
    _restore_emulator_mode(before, request.node.nodeid)


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
    order in which xdist handed out the tests. The project's tests need a torch the emulated device runs on:
    an older one stops the session with one line naming it (exit code 2)."""
    from neuron_conformance import emulator  # deferred: torch is imported only for a session

    reason = emulator.CONFORMANCE_TORCH_REQUIREMENT()
    if reason is not None:
        pytest.exit(f"the project's tests run on the emulated device: {reason}", returncode=2)
    emulator.install()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """``-n`` without ``--dist``: schedule with pytest-xdist's ``worksteal`` instead of its default ``load``
    (pytest-xdist >= 3.2), so that no worker sits idle while another still holds a queue of long tests. An
    explicit ``--dist`` wins; without pytest-xdist this does nothing."""
    explicit = any(str(a).startswith(("--dist", "-d")) for a in config.invocation_params.args)
    if config.pluginmanager.has_plugin("xdist") and getattr(config.option, "dist", None) == "load" and not explicit:
        config.option.dist = "worksteal"
