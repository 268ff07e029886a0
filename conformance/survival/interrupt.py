"""SIGTERM as Ctrl-C: an interrupted run still writes its report, marked incomplete.

CI systems stop a job with SIGTERM (GitHub Actions on cancel or ``timeout-minutes``, ``timeout(1)``,
Kubernetes), which by default kills Python without unwinding. :func:`install` (called in the controlling
process: the xdist controller, or the main process under ``-n 0``) turns the first SIGTERM into
``KeyboardInterrupt``, so pytest unwinds through ``pytest_sessionfinish`` exactly as for Ctrl-C: ``run.json``
gets ``complete: false`` and ``stop_reason``, and the report is built from the records written so far.
A second SIGTERM kills the process the default way.
"""

from __future__ import annotations

import signal
import threading

_received: list[str] = []
_previous = None


def _handler(signum, frame):
    name = signal.Signals(signum).name
    _received.append(name)
    # a second SIGTERM while unwinding: give up and die the default way
    signal.signal(signum, signal.SIG_DFL)
    raise KeyboardInterrupt(f"{name} received: stopping the run and writing the report of what ran")


def install() -> bool:
    """Install the SIGTERM handler (main thread only); return True when installed."""
    global _previous
    if threading.current_thread() is not threading.main_thread():
        return False
    _previous = signal.signal(signal.SIGTERM, _handler)
    return True


def uninstall() -> None:
    """Restore the SIGTERM handler that was there before :func:`install`."""
    global _previous
    if _previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _previous)
        _previous = None


def received() -> str | None:
    """Name of the signal that interrupted the run (``"SIGTERM"``), or None."""
    return _received[0] if _received else None
