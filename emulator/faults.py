"""Fault injection for tests: replace one aten overload's PrivateUse1 kernel, then restore it cleanly.

A fault is a Python kernel registered with ``torch.library.Library("aten", "IMPL").impl(op, kernel,
"PrivateUse1")``. The dispatcher keeps earlier kernels for the same key in a list, so removing the fault's
library (``Library._destroy``) brings back exactly what was there before (the emulator's mirror kernel or
nothing, i.e. the boxed fallback). Faults nest and can be used as context managers::

    from neuron_conformance.emulator import faults

    with faults.scale_output("aten::mm", rel=1e-3):          # wrong numbers
        ...
    with faults.override("aten::add.Tensor", lambda result, *a, **k: result * 2):
        ...
    with faults.override("aten::relu", fn, receives="args"):  # fn(*args, **kwargs) -> result
        ...
    faults.make_raise("aten::mm").install(); ...; faults.restore_all()

Kinds provided:

* :func:`override` - any kernel; ``fn`` receives the CPU-computed correct result (``receives="result"``,
  called as ``fn(result, *args, **kwargs)``) or only the arguments (``receives="args"``).
* :func:`scale_output` - every floating/complex output multiplied by ``1 + rel`` (in place on the result,
  so for in-place ops the mutated tensor is wrong too).
* :func:`make_raise` - raises ``RuntimeError`` (or the exception class given).
* :func:`make_copy_instead_of_inplace` - an in-place op (``add_``) computes into a copy and leaves ``self``
  unchanged: catches code that relies on mutation.
* :func:`make_ignore_strides` - reads its first argument as a dense row-major buffer from its storage
  offset, ignoring its strides (a kernel that trusts ``data_ptr()``).
* crash kinds, for subprocess tests only: :func:`make_abort` (``os.abort()``, SIGABRT),
  :func:`make_segfault` (``ctypes.string_at(0)``, SIGSEGV), :func:`make_hang` (sleeps forever).

Ops must be ones that reach the PrivateUse1 key (ops with backend kernels, e.g. ``aten::mm``,
``aten::add.Tensor``, ``aten::relu``; see ``torch.ops.aten.<op>.<overload>``). Overriding a
CompositeImplicitAutograd op (``aten::linear``) also replaces its decomposition and its autograd formula.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
import warnings
from typing import Callable

import torch

from . import _state, async_ops, fallback, optracking, storage

_active: list["Fault"] = []


def resolve(op: object) -> torch._ops.OpOverload:
    """Return the ``OpOverload`` for ``"aten::add.Tensor"``, ``"add.Tensor"``, ``"aten::relu"`` or an OpOverload.

    Raises:
        ValueError: when the name does not name an existing aten overload.
    """
    if isinstance(op, torch._ops.OpOverload):
        return op
    if not isinstance(op, str):
        raise ValueError(
            f"neuron emulator faults: op must be a str like 'aten::add.Tensor' or an OpOverload, got {op!r}"
        )
    name = op[len("aten::") :] if op.startswith("aten::") else op
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    overload_op = getattr(packet, overload or "default", None) if packet is not None else None
    if not isinstance(overload_op, torch._ops.OpOverload):
        raise ValueError(
            f"neuron emulator faults: {op!r} is not an aten overload (e.g. 'aten::add.Tensor', 'aten::relu')"
        )
    return overload_op


def _registration_name(op: torch._ops.OpOverload) -> str:
    name = op._schema.name.split("::", 1)[1]
    return f"{name}.{op._overloadname}" if op._overloadname != "default" else name


class Fault:
    """One injected kernel for one aten overload on PrivateUse1.

    Use as a context manager, or call :meth:`install` / :meth:`remove`. ``calls`` counts how often the fault
    kernel ran (int). Like every emulator PrivateUse1 kernel, the fault counts its overload in the
    emulator's op counter before it runs (:mod:`.opcount`; so a crash record can name it,
    :mod:`neuron_conformance.conformance.survival.breadcrumb`).
    """

    def __init__(self, op: object, kernel: Callable, description: str) -> None:
        self.op = resolve(op)
        self.description = description
        self.calls = 0
        self._kernel = kernel
        self._lib: torch.library.Library | None = None
        base = self.op._schema.name
        self._name = base if self.op._overloadname == "default" else f"{base}.{self.op._overloadname}"

    def _run(self, *args, **kwargs):
        self.calls += 1
        counts = fallback.OP_COUNTS
        if counts is not None:
            counts[self._name] = counts.get(self._name, 0) + 1
        optracking.note(self.op._schema.name, self._name)
        if _state.async_mode:  # the kernel reads and writes device bytes on the host: order it on the stream
            with async_ops.host_ordered():
                return self._kernel(*args, **kwargs)
        return self._kernel(*args, **kwargs)

    def install(self) -> "Fault":
        """Register the kernel (it shadows any earlier PrivateUse1 kernel of the op)."""
        if self._lib is None:
            lib = torch.library.Library("aten", "IMPL")
            with warnings.catch_warnings():
                # shadowing a mirror-mode kernel is the point; silence "Overriding a previously registered kernel"
                warnings.simplefilter("ignore", UserWarning)
                lib.impl(_registration_name(self.op), self._run, "PrivateUse1", allow_override=True)
            self._lib = lib
            _active.append(self)
        return self

    def remove(self) -> None:
        """Deregister the kernel; the previous kernel (or the fallback) is used again."""
        if self._lib is not None:
            self._lib._destroy()
            self._lib = None
            if self in _active:
                _active.remove(self)

    @property
    def active(self) -> bool:
        return self._lib is not None

    def __enter__(self) -> "Fault":
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"<Fault {self.description} on {self.op} active={self.active} calls={self.calls}>"


def correct(op: object, *args, **kwargs):
    """Run ``op`` on the emulator's normal path (CPU kernel) and return the correct neuron result (not
    counted again in the op counter: the fault that calls it counted the call)."""
    counts, fallback.OP_COUNTS = fallback.OP_COUNTS, None
    try:
        return fallback.run(resolve(op), args, kwargs)
    finally:
        fallback.OP_COUNTS = counts


def override(op: object, fn: Callable, *, receives: str = "result") -> Fault:
    """A fault whose kernel is ``fn``.

    Args:
        op: aten overload (``"aten::add.Tensor"``).
        fn: with ``receives="result"``: ``fn(result, *args, **kwargs)`` gets the correct result first
            and returns what the op returns; with ``receives="args"``: ``fn(*args, **kwargs)``.
        receives: ``"result"`` or ``"args"``.

    Raises:
        ValueError: unknown ``receives`` or op.
    """
    resolved = resolve(op)
    if receives == "result":

        def kernel(*args, **kwargs):
            return fn(correct(resolved, *args, **kwargs), *args, **kwargs)

    elif receives == "args":
        kernel = fn
    else:
        raise ValueError(f"neuron emulator faults: receives must be 'result' or 'args', got {receives!r}")
    return Fault(resolved, kernel, f"override({getattr(fn, '__name__', 'fn')}, receives={receives})")


def _scale_inplace(value, factor: float):
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            if value.device.type == storage.CPU.type:
                value.mul_(factor)
            else:
                storage.cpu_alias(value).mul_(factor)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _scale_inplace(v, factor)
    return value


def scale_output(op: object, rel: float) -> Fault:
    """Multiply every floating/complex output of ``op`` by ``1 + rel`` (``rel`` is a relative error, e.g. 1e-3)."""
    factor = 1.0 + float(rel)
    return override(op, lambda result, *a, **k: _scale_inplace(result, factor), receives="result")


def make_raise(op: object, exc: type[BaseException] = RuntimeError, message: str | None = None) -> Fault:
    """Make ``op`` raise ``exc`` (default ``RuntimeError``) with a message naming the op and the injection."""
    resolved = resolve(op)
    text = message or f"neuron emulator: injected fault: {resolved} raised"

    def kernel(*args, **kwargs):
        raise exc(text)

    return Fault(resolved, kernel, f"raise {exc.__name__}")


def make_copy_instead_of_inplace(op: object) -> Fault:
    """For an in-place op (``aten::add_.Tensor``): compute into a clone of ``self`` and return the clone.

    Raises:
        ValueError: when ``op`` does not mutate its first argument.
    """
    resolved = resolve(op)
    args = resolved._schema.arguments
    if not args or args[0].alias_info is None or not args[0].alias_info.is_write:
        raise ValueError(f"neuron emulator faults: {resolved} is not an in-place op (first argument not mutated)")

    def kernel(self, *rest, **kwargs):
        copy = fallback.run(torch.ops.aten.clone.default, (self,), {})
        return correct(resolved, copy, *rest, **kwargs)

    return Fault(resolved, kernel, "copy instead of in-place")


def _contiguous_strides(shape) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(int(size), 1)
    return strides[::-1]


def make_ignore_strides(op: object) -> Fault:
    """A kernel that reads its first argument as if it were contiguous: the ``numel`` elements from its
    storage offset in memory order, whatever its strides (the bug of a kernel that takes ``data_ptr()``
    and assumes a dense row-major buffer). Right for contiguous inputs (and permuted ones where the op does
    not care about order, e.g. a full ``sum``); wrong for sliced, stepped or otherwise gapped inputs.
    When the storage is too small for that read (an expanded input with stride 0) the correct result is
    returned: the emulated device must not read past a buffer.

    Raises:
        ValueError: unknown op, or its first argument is not a tensor in the schema.
    """
    resolved = resolve(op)
    args = resolved._schema.arguments
    if not args or not str(args[0].type).startswith("Tensor"):
        raise ValueError(f"neuron emulator faults: {resolved} does not take a tensor first argument")

    def kernel(self, *rest, **kwargs):
        if isinstance(self, torch.Tensor) and self.layout == torch.strided and not self.is_contiguous():
            extent = self.storage_offset() + self.numel()
            if self.untyped_storage().nbytes() >= extent * self.element_size():
                self = fallback.run(
                    torch.ops.aten.as_strided.default,
                    (self, list(self.shape), _contiguous_strides(self.shape), self.storage_offset()),
                    {},
                )
        return fallback.run(resolved, (self, *rest), kwargs)

    return Fault(resolved, kernel, "ignores strides")


def make_abort(op: object) -> Fault:
    """Kernel that calls ``os.abort()`` (the process dies with SIGABRT). Use only in a subprocess."""

    def kernel(*args, **kwargs):
        os.abort()

    return Fault(op, kernel, "abort")


def make_segfault(op: object) -> Fault:
    """Kernel that reads address 0 via ``ctypes.string_at(0)`` (SIGSEGV). Use only in a subprocess."""

    def kernel(*args, **kwargs):
        ctypes.string_at(0)

    return Fault(op, kernel, "segfault")


def make_hang(op: object, seconds: float | None = None) -> Fault:
    """Kernel that sleeps forever (or ``seconds``, then returns the correct result). Use with a timeout."""
    resolved = resolve(op)

    def kernel(*args, **kwargs):
        if seconds is None:
            while True:
                time.sleep(3600)
        time.sleep(seconds)
        return correct(resolved, *args, **kwargs)

    return Fault(resolved, kernel, "hang")


class SwitchFault:
    """A misbehaviour of the asynchronous mode switched on in :data:`neuron_conformance.emulator.streams.FAULTS`
    (not a kernel): same ``install`` / ``remove`` / context-manager use as :class:`Fault`.

    Raises:
        ValueError: from the constructor, for a name :data:`~neuron_conformance.emulator.streams.FAULTS` lacks.
    """

    def __init__(self, name: str, description: str) -> None:
        from . import streams  # deferred: only the asynchronous mode's faults need the queues

        if name not in streams.FAULTS:
            raise ValueError(f"neuron emulator faults: {name!r} is not one of {sorted(streams.FAULTS)}")
        self._flags = streams.FAULTS
        self.name = name
        self.description = description

    def install(self) -> "SwitchFault":
        self._flags[self.name] = True
        return self

    def remove(self) -> None:
        self._flags[self.name] = False

    @property
    def active(self) -> bool:
        return self._flags[self.name]

    def __enter__(self) -> "SwitchFault":
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"<SwitchFault {self.name}: {self.description} active={self.active}>"


def skip_waits() -> SwitchFault:
    """Asynchronous mode: every host wait returns at once (``synchronize``, ``Event.synchronize``, a
    blocking copy to the host), so the host reads memory the stream workers have not written yet."""
    return SwitchFault("skip_waits", "host waits return early")


def events_do_not_order() -> SwitchFault:
    """Asynchronous mode: ``Stream.wait_event`` / ``Event.wait`` / ``wait_stream`` queue nothing that waits."""
    return SwitchFault("events_do_not_order", "wait_event is a no-op")


def reuse_ignores_record_stream() -> SwitchFault:
    """Asynchronous mode: a freed block is reused at once, whatever ``record_stream`` recorded."""
    return SwitchFault("reuse_ignores_record_stream", "the allocator ignores record_stream")


def active() -> list[Fault]:
    """Faults currently installed, oldest first."""
    return list(_active)


def restore_all() -> None:
    """Remove every installed fault (newest first)."""
    for fault in reversed(list(_active)):
        fault.remove()


@contextlib.contextmanager
def injected(*faults_: Fault):
    """Install several faults for the duration of a ``with`` block."""
    try:
        for f in faults_:
            f.install()
        yield faults_
    finally:
        for f in reversed(faults_):
            f.remove()
