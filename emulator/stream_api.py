"""Streams and events of the asynchronous mode, behind PyTorch's device-generic API.

torch 2.13 routes ``torch.Stream`` / ``torch.Event`` / ``torch.accelerator.current_stream`` through the
PrivateUse1 device guard, which a Python backend cannot fill: every neuron stream is stream 0 and every
event is complete at once (checked on 2.13.0+cpu). :func:`patch` (called when the asynchronous mode is
switched on) replaces them, for the ``neuron`` device only, with:

* :class:`Stream`, a ``torch.Stream`` subclass whose C++ part carries the id of an emulated
  :class:`.streams.WorkQueue` (so the id survives the dispatcher, e.g. ``Tensor.record_stream(s)``);
  ``with s:`` makes it current for the thread, ``wait_event`` / ``wait_stream`` queue a wait,
  ``synchronize`` / ``query`` look at the queue;
* :class:`Event`, a ``torch.Event`` subclass recorded as a position of a queue; its timestamp is taken by
  the worker when the queue reaches it, so ``elapsed_time`` measures the work between two events (ms);
* ``torch.accelerator.current_stream`` / ``set_stream`` and ``torch.neuron.{Stream, Event,
  current_stream, default_stream, stream, set_stream}`` on the same objects.

Other device types go to the original classes and functions. :func:`unpatch` restores everything.
"""

from __future__ import annotations

import contextlib

import torch

from . import _state, streams

_PRIVATEUSE1 = 20
"""``c10::DeviceType::PrivateUse1`` (c10/core/DeviceType.h), the device type a neuron ``torch.Stream`` carries."""

_OriginalStream = torch._C.Stream
_OriginalEvent = torch._C.Event
_objects: dict[int, "Stream"] = {}
_saved: dict[str, object] = {}


def _is_neuron_device(device) -> bool:
    if device is None:
        acc = torch.accelerator.current_accelerator()
        return acc is not None and acc.type == _state.BACKEND_NAME
    if isinstance(device, int):
        return _is_neuron_device(None)
    return torch.device(device).type == _state.BACKEND_NAME


def stream_for(q: streams.WorkQueue) -> "Stream":
    """The one :class:`Stream` object of queue ``q``."""
    s = _objects.get(q.stream_id)
    if s is None:
        s = _OriginalStream.__new__(Stream, stream_id=q.stream_id, device_index=0, device_type=_PRIVATEUSE1)
        s._queue = q
        _objects[q.stream_id] = s
    return s


def queue_of(stream) -> streams.WorkQueue:
    """The queue behind ``stream`` (None: the current one; any neuron ``torch.Stream`` by its id).

    Raises:
        ValueError: a stream of another device, or an id no emulated stream has.
    """
    if stream is None:
        return streams.current()
    q = getattr(stream, "_queue", None)
    if q is not None:
        return q
    dev = getattr(stream, "device", None)
    if dev is None or torch.device(dev).type != _state.BACKEND_NAME:
        raise ValueError(f"neuron emulator: {stream!r} is not a {_state.BACKEND_NAME} stream")
    return streams.queue_by_id(getattr(stream, "stream_id", 0))


class Stream(_OriginalStream):
    """An emulated ``neuron`` stream (``torch.Stream(device="neuron", priority=0)``); see module docstring."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if not _is_neuron_device(device) or "stream_id" in kwargs:
            if "stream_id" in kwargs and _is_neuron_device(device if device is not None else "neuron"):
                return stream_for(streams.queue_by_id(kwargs["stream_id"]))
            return (
                _OriginalStream(device=device, priority=priority, **kwargs)
                if device is not None
                else _OriginalStream(priority=priority, **kwargs)
            )
        if device is not None:
            from .device import check_index  # deferred: .device builds the module this file patches

            check_index(torch.device(device) if not isinstance(device, int) else device, "Stream device")
        return stream_for(streams.new_queue(priority))

    def __init__(self, *args, **kwargs) -> None:
        pass

    def query(self) -> bool:
        """True when the stream has no work left (:meth:`.streams.WorkQueue.query`)."""
        return self._queue.query()

    def synchronize(self) -> None:
        """Wait for every job submitted to the stream so far."""
        self._queue.synchronize()

    def wait_event(self, event) -> None:
        """Later work on this stream waits until ``event`` has completed (a recorded neuron :class:`Event`)."""
        event.wait(self)

    def wait_stream(self, stream) -> None:
        """Later work on this stream waits for all work submitted to ``stream`` so far."""
        other = queue_of(stream)
        self._queue.wait_job(other, other.enqueued)

    def record_event(self, event=None):
        """Record ``event`` (a new :class:`Event` when None) on this stream and return it."""
        event = event if event is not None else Event(device=_state.BACKEND_NAME)
        event.record(self)
        return event

    def __enter__(self):
        self._previous = streams.current()
        streams.set_current(self._queue)
        return self

    def __exit__(self, *exc) -> None:
        streams.set_current(getattr(self, "_previous", streams.DEFAULT))

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, _OriginalStream)
            and getattr(other, "device", None) == self.device
            and other.stream_id == self.stream_id
        )

    def __hash__(self) -> int:
        return hash((_state.BACKEND_NAME, self.stream_id))

    def __repr__(self) -> str:
        return f"torch.Stream device_type={_state.BACKEND_NAME}, device_index=0, stream_id={self.stream_id} (emulated)"


class Event(_OriginalEvent):
    """An emulated ``neuron`` event: a position on a stream's queue (see module docstring).

    Raises:
        RuntimeError: from ``elapsed_time`` without ``enable_timing=True`` on both events, or when an event
            was not recorded (or has not completed after the wait, which only a fault causes).
    """

    def __init__(
        self, device=None, *, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> None:
        self._neuron = _is_neuron_device(device)
        self._timing = bool(enable_timing)
        self._q: streams.WorkQueue | None = None
        self._pos = 0
        self._time: float | None = None

    def record(self, stream=None) -> None:
        """Record the current position of ``stream`` (None: the current stream)."""
        if not self._neuron:
            return super().record(stream) if stream is not None else super().record()
        q = queue_of(stream)
        self._time = None

        def stamp() -> None:
            self._time = streams.now()

        self._pos = q.submit(stamp)
        self._q = q

    def query(self) -> bool:
        """True when the recorded position has been passed (or nothing was recorded)."""
        if not self._neuron:
            return super().query()
        return self._q is None or self._q.passed(self._pos)

    def synchronize(self) -> None:
        """Block the host until the recorded position has been passed."""
        if not self._neuron:
            return super().synchronize()
        if self._q is not None:
            self._q.wait_for(self._pos)

    def wait(self, stream=None) -> None:
        """Make later work on ``stream`` (None: current) wait for this event."""
        if not self._neuron:
            return super().wait(stream) if stream is not None else super().wait()
        if self._q is not None:
            queue_of(stream).wait_job(self._q, self._pos)

    def elapsed_time(self, end_event) -> float:
        """Milliseconds (float) between this event and ``end_event``, both waited for first."""
        if not self._neuron:
            return super().elapsed_time(end_event)
        if not (self._timing and getattr(end_event, "_timing", False)):
            raise RuntimeError("neuron emulator: Event.elapsed_time needs both events created with enable_timing=True")
        if self._q is None or getattr(end_event, "_q", None) is None:
            raise RuntimeError("neuron emulator: Event.elapsed_time needs both events to be recorded first")
        self.synchronize()
        end_event.synchronize()
        if self._time is None or end_event._time is None:
            raise RuntimeError("neuron emulator: Event.elapsed_time: an event has not completed")
        return (end_event._time - self._time) * 1000.0

    @property
    def device(self):
        if self._neuron:
            return torch.device(_state.BACKEND_NAME, 0)
        return super().device


def current_stream(device=None) -> "Stream":
    """``torch.accelerator.current_stream`` / ``torch.neuron.current_stream`` for the neuron device."""
    return stream_for(streams.current())


def set_stream(stream) -> None:
    """Make ``stream`` the calling thread's current stream."""
    streams.set_current(queue_of(stream))


@contextlib.contextmanager
def stream_context(stream):
    """``torch.neuron.stream(s)``: ``s`` is current inside the block (None: no change)."""
    if stream is None:
        yield
        return
    previous = streams.current()
    streams.set_current(queue_of(stream))
    try:
        yield
    finally:
        streams.set_current(previous)


def _accelerator_wrapper(name: str, original):
    def wrapper(*args, **kwargs):
        target = args[0] if args else kwargs.get("device", kwargs.get("stream"))
        if name == "set_stream":
            if getattr(target, "device", None) is not None and torch.device(target.device).type == _state.BACKEND_NAME:
                return set_stream(target)
            return original(*args, **kwargs)
        if _is_neuron_device(target):
            return current_stream(target)
        return original(*args, **kwargs)

    wrapper.__name__ = name
    wrapper.__doc__ = original.__doc__
    return wrapper


def patch() -> None:
    """Install the classes and functions of the module docstring (idempotent)."""
    if _saved:
        return
    mod = getattr(torch, _state.BACKEND_NAME)
    _saved["torch.Stream"] = torch.Stream
    _saved["torch.Event"] = torch.Event
    torch.Stream = Stream
    torch.Event = Event
    for name in ("current_stream", "set_stream"):
        original = getattr(torch.accelerator, name)
        _saved["accelerator." + name] = original
        setattr(torch.accelerator, name, _accelerator_wrapper(name, original))
    for name, value in (
        ("Stream", Stream),
        ("Event", Event),
        ("current_stream", current_stream),
        ("default_stream", lambda device=None: stream_for(streams.DEFAULT)),
        ("stream", stream_context),
        ("set_stream", set_stream),
    ):
        _saved["neuron." + name] = getattr(mod, name)
        setattr(mod, name, value)


def repatch_event() -> None:
    """Put :class:`Event` back as ``torch.Event`` after the shim re-installed its own (``shim.disabled()``,
    used while probing API support); the shim's class is what :func:`unpatch` restores."""
    if _saved and torch.Event is not Event:
        _saved["torch.Event"] = torch.Event
        torch.Event = Event


def unpatch() -> None:
    """Restore what :func:`patch` replaced."""
    mod = getattr(torch, _state.BACKEND_NAME, None)
    for key, value in _saved.items():
        if key == "torch.Stream":
            torch.Stream = value
        elif key == "torch.Event":
            torch.Event = value
        elif key.startswith("accelerator."):
            setattr(torch.accelerator, key[len("accelerator.") :], value)
        elif mod is not None:
            setattr(mod, key[len("neuron.") :], value)
    _saved.clear()
    streams.set_current(streams.DEFAULT)
