"""Run a fixed snippet as a CPU-only interpreter would, even in a test process that has the emulated device.

The project's test processes often have the emulated ``neuron`` device installed by the time a snippet runs
(a test module imported at collection installs it, e.g. ``tests/faults/fault_backend.py``), so
``torch.accelerator`` would report ``neuron``. The migration tests compare a fixed snippet with the original
on a host without an accelerator; :func:`cpu_only_host` makes ``torch.accelerator`` answer as torch 2.13 does
there (``is_available()`` False, ``current_accelerator()`` None, ``device_count()`` 0) for the duration.
"""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def cpu_only_host():
    """Patch ``torch.accelerator.is_available``, ``current_accelerator`` and ``device_count`` to a CPU-only
    host's answers; restored on exit."""
    acc = torch.accelerator
    saved = {name: getattr(acc, name) for name in ("is_available", "current_accelerator", "device_count")}
    acc.is_available = lambda: False
    acc.current_accelerator = lambda check_available=False: None
    acc.device_count = lambda: 0
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(acc, name, value)


def exec_cpu_only(src: str, filename: str = "<fixed>") -> dict:
    """Execute ``src`` (a test's own snippet) under :func:`cpu_only_host`; returns its namespace."""
    ns: dict = {}
    with cpu_only_host():
        exec(compile(src, filename, "exec"), ns)  # the snippets are the tests' own inputs
    return ns
