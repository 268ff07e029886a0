"""aten coverage from inside the emulated device: count the overloads its kernels run.

The harness's generic coverage trace is a ``TorchDispatchMode`` (:class:`neuron_conformance.conformance.results.coverage.CoverageMode`),
which routes every aten call of a test (CPU reference included) through Python. A backend that already
sees each of its ops can count them itself at no extra cost; it offers that through the backend-module
hook ``CONFORMANCE_COUNT_OPS`` (docs/architecture.md, "Device under test"), which the emulator defines as
:func:`count_ops`. Every aten overload that reaches the emulator's PrivateUse1 kernels is counted: the
boxed fallback, the mirror-mode direct registrations and the required kernels (``_to_copy``,
``_copy_from``, ``set_``...). Composite ops that decompose above the PrivateUse1 key are counted as what
they decompose into, which is what the device executes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from . import fallback


@contextlib.contextmanager
def count_ops(counts: dict[str, int]) -> Iterator[dict[str, int]]:
    """Count, in ``counts``, the aten overloads the emulated device runs inside the ``with`` block.

    Args:
        counts: dispatcher name (``aten::add.Tensor``; ``aten::relu`` for a ``default`` overload) ->
            number of calls; updated in place, so one dict can collect a whole session.

    Nested use counts into the innermost dict and restores the outer one on exit. Not thread-safe across
    threads that count into different dicts (the harness counts one test at a time per process).
    """
    previous = fallback.OP_COUNTS
    fallback.OP_COUNTS = counts
    try:
        yield counts
    finally:
        fallback.OP_COUNTS = previous


__all__ = ["count_ops"]
