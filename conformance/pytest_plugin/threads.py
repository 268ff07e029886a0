"""CPU threads of a test process: share the cores between pytest-xdist workers.

PyTorch's CPU kernels use an intra-op thread pool as wide as the machine (``torch.get_num_threads()``
defaults to the number of cores). With ``-n N`` workers on the same cores, N pools compete: OpenMP
threads spin while they wait, so a run with two workers on 2 cores took *longer* than with one
(measured: 677 OpInfos x 3 dtypes, 51 s at ``-n 1`` and 84 s at ``-n 2``, with 2.4x the CPU time). The
op suites' tensors are small, so one thread per worker loses nothing. Each worker therefore takes
``cores // workers`` threads (at least 1), unless the user chose a width with ``OMP_NUM_THREADS`` or
``MKL_NUM_THREADS``.
"""

from __future__ import annotations

import os

import torch

USER_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Environment variables with which a user sets the thread count; when one is set it is left alone."""


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports it, else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def share_cores(workers: int) -> int | None:
    """Set ``torch.set_num_threads(max(1, cores // workers))`` for one of ``workers`` processes on this
    machine; returns the thread count set, or None when the user set one through the environment.

    Raises:
        ValueError: ``workers`` < 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if any(os.environ.get(v) for v in USER_THREAD_VARS):
        return None
    threads = max(1, available_cores() // workers)
    torch.set_num_threads(threads)
    return threads


__all__ = ["available_cores", "share_cores"]
