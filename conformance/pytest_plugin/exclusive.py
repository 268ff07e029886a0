"""Tests that need the whole device: they never run beside other tests, in any test process.

A test marked ``@pytest.mark.device_exclusive`` (the stress suite's out-of-memory check asks for more than
the device's free memory) would starve every test running beside it in another worker: their allocations
fail, or wait, while it holds the memory. Every test therefore holds a lock on one file of the report
folder while it runs (setup, call and teardown): a shared lock for an ordinary test, an exclusive one for a
``device_exclusive`` test. An exclusive test waits for the tests in flight in the other workers to finish,
and they wait for it; each test process holds one lock at a time, so no two can wait on each other.

The lock is ``fcntl.flock`` on ``<report dir>/.device.lock`` (POSIX; where ``fcntl`` is missing, no lock is
taken and the marker only documents the need).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

try:
    import fcntl
except ImportError:  # not POSIX: no lock
    fcntl = None  # type: ignore[assignment]

MARKER = "device_exclusive"
"""``@pytest.mark.device_exclusive``: the test needs the whole device (no other test in flight)."""

LOCK_NAME = ".device.lock"
"""The lock file, in the report folder every test process of a run shares."""


def register(config: pytest.Config) -> None:
    """Declare the marker (``pytest_configure``)."""
    config.addinivalue_line(
        "markers", f"{MARKER}: the test needs the whole device; no other test runs beside it in any test process"
    )


@contextlib.contextmanager
def held(item: pytest.Item, report_dir: Path):
    """Hold the device lock for ``item``: exclusive for a ``device_exclusive`` test, shared otherwise."""
    if fcntl is None:
        yield
        return
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(report_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # an unwritable report folder is reported elsewhere; the test still runs
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if item.get_closest_marker(MARKER) is not None else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing releases the lock


__all__ = ["LOCK_NAME", "MARKER", "held", "register"]
