"""Failure formatting that never runs device ops: metadata-only reprs of device tensors.

When a test fails, pytest formats its report (``item.repr_failure`` inside ``pytest_runtest_makereport``)
and, with its default long traceback style, ``saferepr``s the arguments of every frame. For a device
tensor that is ``torch.Tensor.__repr__``, which copies it to the host and runs kernels (``abs``, ``neg``,
``masked_select``...): on a backend whose kernel just hung or broke, formatting the failure hangs or
fails again, so every timeout also cost the hard limit's grace period.

:func:`metadata_only` replaces ``torch.Tensor.__repr__`` while the report is made, for tensors that are
not on the CPU (or ``meta``), by ``tensor(<neuron:0>, shape=(2, 3), dtype=torch.float32)``, which reads
only metadata. Chosen over a shorter traceback style (which would lose the frames and arguments people
debug with) and over catching hangs after the fact (the grace period is the cost to avoid). The patch is
in place only inside the ``with`` block, in the process that runs the test, and only for failing tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

_HOST_TYPES = ("cpu", "meta")


def describe(tensor: torch.Tensor) -> str:
    """``tensor(<neuron:0>, shape=(2, 3), dtype=torch.float32)``: a tensor's metadata, no device op."""
    try:
        return f"tensor(<{tensor.device}>, shape={tuple(tensor.shape)}, dtype={tensor.dtype})"
    except Exception as exc:  # noqa: BLE001 - a broken tensor's repr must still be a string
        return f"tensor(<metadata unavailable: {type(exc).__name__}>)"


@contextlib.contextmanager
def metadata_only() -> Iterator[None]:
    """Inside the block, ``repr()`` of a non-CPU tensor is :func:`describe` (module docstring)."""
    original = torch.Tensor.__repr__

    def safe_repr(self, *args, **kwargs):
        try:
            host = self.device.type in _HOST_TYPES
        except Exception:  # noqa: BLE001 - no device: describe() says what it can
            host = False
        return original(self, *args, **kwargs) if host else describe(self)

    torch.Tensor.__repr__ = safe_repr  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.Tensor.__repr__ = original  # type: ignore[method-assign]
