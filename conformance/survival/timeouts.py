"""Per-test time limits: a hung test is recorded as ``timeout`` and the run goes on.

The limit of a test, first found wins:

1. ``@pytest.mark.timeout(SECONDS)`` (pytest-timeout's marker, also honoured without that plugin);
2. pytest-timeout's own setting (``--timeout``, ``PYTEST_TIMEOUT``, ``timeout`` ini key), for every test;
3. ``--conformance-test-timeout`` (``CONFORMANCE_TEST_TIMEOUT``, ``[tool.conformance] test-timeout``): a default and
   per-suite values, e.g. ``300,distributed=900,model_zoo=900`` (the default). 0 means no limit.

Two stages (this module replaces pytest-timeout's timer through its ``pytest_timeout_set_timer`` hook, so
only one timer runs):

* **soft**, at the limit: ``SIGALRM`` raises ``pytest.fail("Timeout ...")`` in the test (main thread only).
  Python-level hangs (a kernel sleeping or spinning in Python) end there: the record says ``timeout`` and
  the process goes on. Skipped with ``timeout_method = thread``.
* **hard**, at the limit plus a grace period (:func:`grace_seconds`), or at the limit with
  ``timeout_method = thread``: :func:`faulthandler.dump_traceback_later` writes every thread's traceback
  to the crash file and exits the process. It runs in a C thread that does not need the GIL, so it also
  ends a hang inside native code. Under xdist the worker is replaced and the controller records
  ``timeout`` (:mod:`neuron_conformance.conformance.survival.crash_files`); in isolation mode the parent does; under ``-n 0`` without
  isolation the run ends there (its records so far are kept, ``run.json`` says incomplete).
"""

from __future__ import annotations

import faulthandler
import signal
import threading

import pytest

from neuron_conformance.conformance.survival.crash_files import CrashWatch


def grace_seconds(limit: float) -> float:
    """Time between the soft and the hard stage: 10 % of the limit, at least 2 s, at most 60 s."""
    return min(60.0, max(2.0, 0.1 * limit))


def item_timeout(item: pytest.Item, spec: dict, suite: str | None) -> tuple[float, str]:
    """``(seconds, method)`` of a test item (rules in the module docstring); seconds 0 means none.

    Args:
        item: the test.
        spec: the parsed ``--conformance-test-timeout`` value (``{None: default, suite: seconds}``).
        suite: the test's suite name.
    """
    method = getattr(item.config, "_env_timeout_method", None) or "signal"
    mark = item.get_closest_marker("timeout")
    if mark is not None:
        value = mark.args[0] if mark.args else mark.kwargs.get("timeout")
        method = mark.kwargs.get("method", mark.args[1] if len(mark.args) > 1 else method) or method
        if value is not None:
            return float(value), method
    env = getattr(item.config, "_env_timeout", None)
    if env is not None:
        return float(env), method
    return float(spec.get(suite, spec.get(None, 0.0)) or 0.0), method


class Deadline:
    """The two-stage timer of one test (see the module docstring).

    Args:
        nodeid: the test, for the message.
        seconds: the limit (> 0).
        method: ``signal`` (soft then hard) or ``thread`` (hard only).
        watch: the crash file the hard stage writes to (None: the hard stage writes to stderr).
    """

    def __init__(self, nodeid: str, seconds: float, method: str = "signal", watch: CrashWatch | None = None):
        self.nodeid = nodeid
        self.seconds = seconds
        self.method = method
        self.watch = watch
        self._old_handler = None
        self._soft = False

    def _on_alarm(self, signum, frame):
        __tracebackhide__ = True
        pytest.fail(
            f"Timeout >{self.seconds:g}s: {self.nodeid} did not finish within {self.seconds:g} s "
            f"(per-test limit: --conformance-test-timeout or @pytest.mark.timeout)",
            pytrace=True,
        )

    def start(self) -> None:
        """Arm both stages."""
        soft = self.method != "thread" and threading.current_thread() is threading.main_thread()
        if soft:
            self._old_handler = signal.signal(signal.SIGALRM, self._on_alarm)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            self._soft = True
        hard = self.seconds + grace_seconds(self.seconds) if soft else self.seconds
        target = self.watch.fh if self.watch is not None else None
        if target is not None:
            faulthandler.dump_traceback_later(hard, exit=True, file=target)
        else:
            faulthandler.dump_traceback_later(hard, exit=True)

    def cancel(self) -> None:
        """Disarm both stages (idempotent)."""
        faulthandler.cancel_dump_traceback_later()
        if self._soft:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old_handler if self._old_handler is not None else signal.SIG_DFL)
            self._soft = False
