"""Opt-in shim for the device APIs torch 2.13 cannot route to a Python PrivateUse1 backend.

With a Python backend, these calls fail inside C++ (checked on torch 2.13.0+cpu):

* ``torch.accelerator.synchronize()`` -> ``Backend doesn't support synchronizing all streams on device.``
* ``torch.accelerator.memory_allocated()`` and the other allocator statistics, ``empty_cache()``,
  ``get_memory_info()`` -> ``device_allocator INTERNAL ASSERT FAILED`` (no C++ device allocator);
* ``torch.accelerator.get_device_capability()`` -> ``Backend doesn't support getting device capabilities.``
* ``torch.Event.synchronize()`` / ``elapsed_time()`` -> ``Backend doesn't support synchronizing events.``
* ``torch.accelerator.set_device_index(1)`` is accepted silently (the Python device guard cannot check
  ordinals); the shim raises ``invalid device ordinal`` like a one-device backend.

Code rewritten by neuron-migrate calls exactly these, so :func:`install` (called by
``neuron_conformance.emulator.install(shim=True)``, the default) replaces them with wrappers that serve the
``neuron`` device from :mod:`.device` / :mod:`.memory` and delegate to the original function for every other
device type. ``torch.Event`` becomes a subclass that also stores a host timestamp on ``record()``; events
created by C++ (``Stream.record_event``) remain plain ``torch.Event`` objects without timing.
:func:`uninstall` restores the originals; :func:`disabled` restores them temporarily (used by
:mod:`.support` to tell ``native`` from ``shim``).
"""

from __future__ import annotations

import contextlib
import functools
import time

import torch

from . import _state, memory, streams

ACCELERATOR_FUNCS = (
    "synchronize",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "memory_stats",
    "reset_peak_memory_stats",
    "reset_accumulated_memory_stats",
    "empty_cache",
    "get_memory_info",
    "get_device_capability",
    "set_device_index",
    "set_device_idx",
)
"""``torch.accelerator`` functions the shim wraps."""

_originals: dict[str, object] = {}
_OriginalEvent = torch.Event


def _is_neuron_target(device: object) -> bool:
    """True when a ``torch.accelerator`` call with ``device`` addresses the emulated device."""
    if isinstance(device, (str, torch.device)):
        return torch.device(device).type == _state.BACKEND_NAME
    acc = torch.accelerator.current_accelerator()
    return acc is not None and acc.type == _state.BACKEND_NAME


def _neuron_impl(name: str):
    from . import device as _device  # deferred: .device imports this module

    def capability(device=None):
        _device.check_index(device if not isinstance(device, int) else device, "get_device_capability")
        return {
            "major": 0,
            "minor": 0,
            "supported_dtypes": [
                torch.float32,
                torch.float64,
                torch.float16,
                torch.bfloat16,
                torch.int64,
                torch.int32,
                torch.int16,
                torch.int8,
                torch.uint8,
                torch.bool,
                torch.complex64,
                torch.complex128,
            ],
        }

    def synchronize(device=None):
        _device.check_index(device, "torch.accelerator.synchronize")
        if _state.async_mode:
            streams.synchronize_all()

    def set_device_index(device=None):
        # torch 2.13's Python device guard accepts any index silently; a real single-device backend raises.
        _device.check_index(device, "torch.accelerator.set_device_index")

    def get_memory_info(device=None):
        return memory.mem_get_info(device)

    def memory_stats(device=None):
        import collections

        return collections.OrderedDict(memory.memory_stats(device))

    table = {
        "synchronize": synchronize,
        "memory_allocated": memory.memory_allocated,
        "max_memory_allocated": memory.max_memory_allocated,
        "memory_reserved": memory.memory_reserved,
        "max_memory_reserved": memory.max_memory_reserved,
        "memory_stats": memory_stats,
        "reset_peak_memory_stats": memory.reset_peak_memory_stats,
        "reset_accumulated_memory_stats": memory.reset_accumulated_memory_stats,
        "empty_cache": lambda: memory.empty_cache(),
        "get_memory_info": get_memory_info,
        "get_device_capability": capability,
        "set_device_index": set_device_index,
        "set_device_idx": set_device_index,
    }
    return table[name]


def _wrap(name: str, original):
    neuron_fn = _neuron_impl(name)

    if name == "empty_cache":

        @functools.wraps(original)
        def wrapper():
            if _is_neuron_target(None):
                return neuron_fn()
            return original()

    elif name in ("set_device_index", "set_device_idx"):

        @functools.wraps(original)
        def wrapper(device, /):
            if _is_neuron_target(device):
                neuron_fn(device)  # validates the ordinal, then torch records it
            return original(device)

    else:

        @functools.wraps(original)
        def wrapper(device=None, /):
            if _is_neuron_target(device):
                return neuron_fn(device)
            return original(device) if device is not None else original()

    wrapper.__neuron_shim__ = True
    return wrapper


class Event(_OriginalEvent):
    """``torch.Event`` with host timing for ``neuron`` events (see module docstring).

    ``elapsed_time(end)`` returns milliseconds (float) between the host times of two ``record()`` calls.

    Raises:
        RuntimeError: from ``elapsed_time`` when either event lacks ``enable_timing=True`` or was not
            recorded.
    """

    def __init__(self, *args, **kwargs):
        self._neuron_timing = bool(kwargs.get("enable_timing", False))
        self._neuron_time = None

    def _is_neuron(self) -> bool:
        dev = self.device
        if dev is None:
            return _is_neuron_target(None)
        return dev.type == _state.BACKEND_NAME

    def record(self, stream=None):
        out = super().record(stream) if stream is not None else super().record()
        self._neuron_time = time.perf_counter()
        return out

    def synchronize(self):
        if self._is_neuron():
            return None
        return super().synchronize()

    def elapsed_time(self, end_event):
        if self._is_neuron():
            if not (self._neuron_timing and getattr(end_event, "_neuron_timing", False)):
                raise RuntimeError(
                    "neuron emulator: Event.elapsed_time needs both events created with enable_timing=True"
                )
            if self._neuron_time is None or getattr(end_event, "_neuron_time", None) is None:
                raise RuntimeError("neuron emulator: Event.elapsed_time needs both events to be recorded first")
            return (end_event._neuron_time - self._neuron_time) * 1000.0
        return super().elapsed_time(end_event)


def install() -> None:
    """Patch ``torch.accelerator`` functions and ``torch.Event`` (idempotent)."""
    if _originals:
        return
    for name in ACCELERATOR_FUNCS:
        original = getattr(torch.accelerator, name, None)
        if original is None:
            continue
        _originals["accelerator." + name] = original
        wrapper = _wrap(name, original)
        setattr(torch.accelerator, name, wrapper)
        mem = getattr(torch.accelerator, "memory", None)
        if mem is not None and getattr(mem, name, None) is original:
            _originals["accelerator.memory." + name] = original
            setattr(mem, name, wrapper)
    _originals["Event"] = torch.Event
    torch.Event = Event


def uninstall() -> None:
    """Restore every patched function and ``torch.Event``."""
    for key, original in _originals.items():
        if key == "Event":
            torch.Event = original
        elif key.startswith("accelerator.memory."):
            setattr(torch.accelerator.memory, key[len("accelerator.memory.") :], original)
        else:
            setattr(torch.accelerator, key[len("accelerator.") :], original)
    _originals.clear()


def installed() -> bool:
    """True while the shim is patched in."""
    return bool(_originals)


@contextlib.contextmanager
def disabled():
    """Temporarily restore the original torch functions (no-op when the shim is not installed)."""
    was = installed()
    if was:
        uninstall()
    try:
        yield
    finally:
        if was:
            install()
            if _state.async_mode:
                from . import stream_api  # deferred: stream_api imports this module

                stream_api.repatch_event()
