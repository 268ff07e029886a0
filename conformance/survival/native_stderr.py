"""Silence what native code writes to file descriptor 2 during a short probe.

torch 2.13's profiler (kineto's ``SyncActivityProfilerHandler``) prints a ``USDT: ... profiler_start`` and a
``profiler_stop`` line to the process's stderr for every ``torch.profiler.profile`` it opens, from C++, past
``sys.stderr``. The start-up probes of the device API table open such profiles in every session; without
this, each session's stderr begins with those lines, and a one-line error of the harness is no longer one
line.
"""

from __future__ import annotations

import contextlib
import os
import sys


@contextlib.contextmanager
def silenced_native_stderr():
    """Redirect file descriptor 2 to ``os.devnull`` inside the block, then restore it.

    Python's ``sys.stderr`` is flushed first, so nothing written before the block is lost. Anything any thread
    writes to descriptor 2 inside the block is discarded: keep the block to the native call that needs it.
    Where descriptor 2 cannot be duplicated (closed, or an unusual embedding), the block runs unchanged.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
