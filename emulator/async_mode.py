"""Switching the emulator's asynchronous mode on and off ($CONFORMANCE_EMULATOR_ASYNC).

The execution mode is independent of the numeric mode (``mirror`` / ``device``): ``"0"`` (the default)
runs every kernel on the calling thread, as before; ``"1"`` queues them on per-stream workers
(:mod:`.streams`, :mod:`.async_ops`, :mod:`.caching`, :mod:`.stream_api`). :func:`enable` sets the fallback's
hook, registers the asynchronous copy kernels on PrivateUse1 (``_copy_from``, ``_copy_from_and_resize``,
``_to_copy``, ``record_stream``, and ``histc`` and the eval-mode batch-norm kernels, which read device bytes
on the host, after a drain) in a
``torch.library.Library`` of their own, and patches the stream API; :func:`disable` waits for all queued
work and undoes all of it.

What is real and what is approximated is listed in the emulator README ("Asynchronous mode").
"""

from __future__ import annotations

import warnings

import torch

from . import _state, async_ops, batch_norm, caching, fallback, histc, registrations, stream_api, streams

_lib: torch.library.Library | None = None


def _kernels() -> dict:
    return {
        "_copy_from": async_ops.copy_from,
        "_copy_from_and_resize": async_ops.copy_from_and_resize,
        "_to_copy": async_ops.to_copy,
        "record_stream": async_ops.record_stream,
        **{name: async_ops.drained(fn) for name, fn in histc.KERNELS.items()},
        **{name: async_ops.drained(fn) for name, fn in batch_norm.KERNELS.items()},
    }


def enable() -> None:
    """Switch the asynchronous mode on (idempotent)."""
    global _lib
    if _lib is None:
        lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # shadowing the synchronous kernels is the point
            for name, fn in _kernels().items():
                lib.impl(name, registrations._counted(f"aten::{name}", fn), "PrivateUse1", allow_override=True)
        _lib = lib
    fallback.ASYNC_RUN = async_ops.run
    stream_api.patch()
    _state.async_mode = True


def disable() -> None:
    """Wait for every queued job, then switch the asynchronous mode off (idempotent)."""
    global _lib
    if _state.async_mode:
        streams.synchronize_all()
    fallback.ASYNC_RUN = None
    stream_api.unpatch()
    if _lib is not None:
        _lib._destroy()
        _lib = None
    caching.empty()
    _state.async_mode = False
