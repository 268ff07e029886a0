"""Registration of PrivateUse1 as ``neuron`` and the ``torch.neuron`` device module.

Registration uses ``torch.utils.backend_registration._setup_privateuseone_for_python_backend`` (torch 2.13),
which renames the key, generates ``Tensor.is_neuron`` / ``Tensor.neuron()`` / ``Module.neuron()``,
registers the device module as ``torch.neuron`` and installs Python PrivateUse1 hooks and a device guard.
The device module below is what ``torch.accelerator``, ``torch.autocast``, ``torch.manual_seed`` and
``torch.load`` look up.
"""

from __future__ import annotations

import contextlib
import types

import torch

from . import _state, memory, rng, streams

DEVICE_COUNT = 1
"""The emulator has exactly one device: torch 2.13's ``PythonDeviceGuard::deviceCount()`` returns 1."""


def check_index(index: object, what: str = "device") -> int:
    """Return a valid device index (0) for ``index`` (int, ``torch.device``, str or None).

    Raises:
        RuntimeError: for any ordinal other than 0 ("invalid device ordinal"), naming ``what``.
        ValueError: for a device of another type.
    """
    if index is None:
        return 0
    if isinstance(index, str):
        index = torch.device(index)
    if isinstance(index, torch.device):
        if index.type != _state.BACKEND_NAME:
            raise ValueError(f"neuron emulator: {what} {index!s} is not a {_state.BACKEND_NAME} device")
        index = 0 if index.index is None else index.index
    if not isinstance(index, int) or isinstance(index, bool):
        raise TypeError(f"neuron emulator: {what} must be an int or torch.device, got {index!r}")
    if index == -1:
        return 0
    if index != 0:
        raise RuntimeError(
            f"neuron emulator: invalid device ordinal {index} for {what}: the emulated device has "
            f"device_count() == {DEVICE_COUNT} (only neuron:0)"
        )
    return 0


class Stream:
    """A ``neuron`` stream: every op runs synchronously on the host, so streams are ordering no-ops.

    ``torch.Stream(device="neuron")`` (the generic class) also works; this class mirrors
    ``torch.cuda.Stream``'s small API for code written against a device module.
    """

    def __init__(self, device: object = None, priority: int = 0, **kwargs: object) -> None:
        check_index(device, "Stream device")
        self.device = torch.device(_state.BACKEND_NAME, 0)
        self.priority = priority
        self.stream_id = 0

    def synchronize(self) -> None:
        """Wait for the stream's work: nothing is pending."""

    def query(self) -> bool:
        """True: all work is complete."""
        return True

    def wait_stream(self, stream: object) -> None:
        """No-op: one synchronous stream."""

    def wait_event(self, event: object) -> None:
        """No-op: one synchronous stream."""

    def record_event(self, event: "Event | None" = None) -> "Event":
        """Record ``event`` (or a new one) now and return it."""
        event = event if event is not None else Event()
        event.record(self)
        return event

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream)

    def __hash__(self) -> int:
        return hash((_state.BACKEND_NAME, 0))

    def __repr__(self) -> str:
        return f"<neuron emulator Stream device={self.device} id=0>"


class Event:
    """A ``neuron`` event with host timing: ``record`` stores ``time.perf_counter()``.

    ``elapsed_time`` returns milliseconds between two recorded events (float, ms), like
    ``torch.cuda.Event.elapsed_time``.

    Raises:
        RuntimeError: from ``elapsed_time`` when timing was not enabled or an event was not recorded.
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self._time: float | None = None

    def record(self, stream: object = None) -> None:
        import time

        self._time = time.perf_counter()

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """No-op: the host is always synchronised with the emulated device."""

    def wait(self, stream: object = None) -> None:
        """No-op."""

    def elapsed_time(self, end_event: "Event") -> float:
        if not (self.enable_timing and getattr(end_event, "enable_timing", False)):
            raise RuntimeError("neuron emulator: Event.elapsed_time needs both events created with enable_timing=True")
        if self._time is None or end_event._time is None:
            raise RuntimeError("neuron emulator: Event.elapsed_time needs both events to be recorded first")
        return (end_event._time - self._time) * 1000.0


_current_stream = None


def _module_functions() -> dict[str, object]:
    def is_available() -> bool:
        """True once the emulator is installed."""
        return True

    def is_initialized() -> bool:
        return True

    def _lazy_init() -> None:
        pass

    def device_count() -> int:
        """Number of emulated devices: always 1."""
        return DEVICE_COUNT

    def current_device() -> int:
        """Index of the current device: always 0."""
        return 0

    def set_device(device: object) -> None:
        """Select the device; only 0 (or ``neuron:0``) is valid.

        Raises:
            RuntimeError: for any other ordinal.
        """
        check_index(device, "set_device")

    def synchronize(device: object = None) -> None:
        """Wait for all work on the device (every queued kernel in the asynchronous mode)."""
        check_index(device, "synchronize")
        if _state.async_mode:
            streams.synchronize_all()

    def _is_in_bad_fork() -> bool:
        return False

    def get_amp_supported_dtype() -> list[torch.dtype]:
        """dtypes ``torch.autocast(device_type="neuron")`` accepts: float16 and bfloat16."""
        return [torch.float16, torch.bfloat16]

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return True

    def get_device_name(device: object = None) -> str:
        check_index(device, "get_device_name")
        return "neuron emulator (CPU memory)"

    def get_device_capability(device: object = None) -> tuple[int, int]:
        check_index(device, "get_device_capability")
        return (0, 0)

    def get_device_properties(device: object = None) -> types.SimpleNamespace:
        check_index(device, "get_device_properties")
        _, total = memory.mem_get_info()
        return types.SimpleNamespace(name=get_device_name(), total_memory=total, major=0, minor=0)

    @contextlib.contextmanager
    def device(device: object):
        """Context manager selecting the device (used by ``torch.load`` and ``storage.to``)."""
        check_index(device, "device")
        yield

    def current_stream(device: object = None) -> Stream:
        global _current_stream
        check_index(device, "current_stream")
        if _current_stream is None:
            _current_stream = Stream()
        return _current_stream

    def default_stream(device: object = None) -> Stream:
        return current_stream(device)

    @contextlib.contextmanager
    def stream(s: object):
        yield

    def set_stream(s: object) -> None:
        pass

    return {k: v for k, v in locals().items()}


def build_module() -> types.ModuleType:
    """Build the ``torch.neuron`` device module (a real module object)."""
    mod = types.ModuleType(
        "torch." + _state.BACKEND_NAME, "The emulated neuron device module (neuron_conformance.emulator)."
    )
    for name, fn in _module_functions().items():
        setattr(mod, name, fn)
    for name in (
        "manual_seed",
        "manual_seed_all",
        "seed",
        "seed_all",
        "initial_seed",
        "get_rng_state",
        "set_rng_state",
        "get_rng_state_all",
        "set_rng_state_all",
    ):
        setattr(mod, name, getattr(rng, name))
    for name in (
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "reset_peak_memory_stats",
        "reset_accumulated_memory_stats",
        "memory_stats",
        "empty_cache",
        "mem_get_info",
    ):
        setattr(mod, name, getattr(memory, name))
    mod.Stream = Stream
    mod.Event = Event
    mod.is_emulated = True
    # an initialized device (CUDA's flag): torch.utils.checkpoint saves and restores the device RNG state only
    # when the device module's `_initialized` is true, else a recomputed dropout draws another mask
    mod._initialized = True
    return mod


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    def is_available(self) -> bool:
        return True

    def has_primary_context(self, dev_id: int) -> bool:
        return True

    def is_built(self) -> bool:
        return True


class _Guard(torch._C._acc.DeviceGuard):
    def type_(self):
        return torch._C._autograd.DeviceType.PrivateUse1


def foreign_backend_name() -> str | None:
    """Name of a PrivateUse1 backend registered by someone else, else None.

    The key is free while its name is ``privateuseone``; it is ours when renamed to ``neuron`` and the
    ``torch.neuron`` module is the emulator's.
    """
    name = torch._C._get_privateuse1_backend_name()
    if name == "privateuseone":
        return None
    mod = getattr(torch, name, None)
    if name == _state.BACKEND_NAME and getattr(mod, "is_emulated", False):
        return None
    return name


def register() -> types.ModuleType:
    """Rename PrivateUse1 to ``neuron`` and register the device module, hooks and guard.

    Raises:
        RuntimeError: when another PrivateUse1 backend is already registered (e.g. a real
            ``torch_neuronx``); the emulator never clobbers it.
    """
    other = foreign_backend_name()
    if other is not None:
        raise RuntimeError(
            f"neuron emulator: PrivateUse1 is already registered as {other!r} by another backend "
            f"(torch._C._get_privateuse1_backend_name() == {other!r}); refusing to install the emulated "
            f"'neuron' device over it. Use that backend, or run the emulator in a fresh process."
        )
    existing = getattr(torch, _state.BACKEND_NAME, None)
    if existing is not None and getattr(existing, "is_emulated", False):
        return existing
    mod = build_module()
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    _setup_privateuseone_for_python_backend(_state.BACKEND_NAME, mod, _Hooks(), _Guard())
    return mod
