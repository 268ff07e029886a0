"""The guard around each test in a process that runs tests: crash file, time limit, poisoned device.

:func:`before_test` and :func:`after_test` wrap ``pytest_runtest_protocol`` (docs/harness.md):

* before: leave the process first when the previous test left the device unusable (the canary failed,
  :mod:`neuron_conformance.conformance.pytest_plugin.recording`), so that xdist or the isolation parent replaces it; write the test's
  identity to the crash file (:class:`neuron_conformance.conformance.survival.crash_files.CrashWatch`); tell an isolation parent that the
  test starts; arm the two-stage time limit (:class:`neuron_conformance.conformance.survival.timeouts.Deadline`);
* after: disarm the time limit; tell the isolation parent that the test finished; when the device is
  poisoned, either leave before the next test (a worker or isolation child) or stop the run (the main
  process under ``-n 0`` has nobody to replace it).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

import pytest

from neuron_conformance.conformance.pytest_plugin.selection import record_identity
from neuron_conformance.conformance.survival import crash_files as survival
from neuron_conformance.conformance.survival import timeouts

if TYPE_CHECKING:  # annotations only
    from neuron_conformance.conformance.pytest_plugin.session import ConformanceSession


def before_test(item: pytest.Item, session: ConformanceSession) -> timeouts.Deadline | None:
    """Prepare the guard of ``item`` (see the module docstring); returns its armed deadline, or None."""
    if session.exit_pending:
        exit_poisoned(session)
    ident = record_identity(item)
    limit, method = timeouts.item_timeout(item, session.timeouts, ident["suite"])
    session.watch.start_test({"nodeid": item.nodeid, **ident, "timeout": limit or None, "started": time.time()})
    if session.channel is not None:
        session.channel.send("start", item.nodeid)
    deadline = timeouts.Deadline(item.nodeid, limit, method, session.watch) if limit > 0 else None
    if deadline is not None:
        deadline.start()
    return deadline


def after_test(item: pytest.Item, session: ConformanceSession, deadline: timeouts.Deadline | None) -> None:
    """End the guard of ``item`` (see the module docstring)."""
    if deadline is not None:
        deadline.cancel()
    if session.channel is not None:
        session.channel.send("finish", item.nodeid)
    if session.poisoned is not None and not session.exit_pending:
        if session.is_worker or session.isolation_child:
            session.request_exit()  # exit before the next test: xdist / the parent replaces this process
        else:
            session.stop(
                f"the device is unusable after {session.poisoned['nodeid']} "
                f"({session.poisoned['canary']}); run with -n N or --conformance-isolate to restart "
                "and go on"
            )
            item.session.shouldstop = f"conformance: {session.stop_reason}"


def exit_poisoned(session: ConformanceSession) -> None:
    """Leave the process (exit status :data:`neuron_conformance.conformance.survival.crash_files.POISONED_EXIT_CODE`) so that it is
    replaced: the xdist controller or the isolation parent starts a fresh one."""
    if session.writer is not None:
        session.writer.close()
    session.watch.note_poisoned(session.poisoned or {})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(survival.POISONED_EXIT_CODE)
