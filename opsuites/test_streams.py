"""Streams and events: work ordered across streams gives the values of the same program run synchronously.

Each test runs a small program on the device with streams and events (device-generic API:
``torch.Stream``, ``torch.Event``, ``torch.accelerator.current_stream`` / ``set_stream`` /
``synchronize``), reads the results back after the synchronisation the program documents, and judges them
(:func:`neuron_conformance.conformance.verdict.oracle.check`, float64 CPU reference for the fp64 rule) against the same program run on
the CPU, where every op is synchronous. A program first runs a slow chain of kernels (:func:`_slow_chain`) so
that, on an asynchronous device, a missing wait shows: the later reader overtakes the writer and sees
unwritten memory (NaN on the emulated device, which poisons fresh blocks) or the wrong block.

Semantics checked, each from PyTorch's documentation:

* kernels of one stream run in order; ``Stream.wait_event(e)`` / ``Event.wait(s)`` make later work of a
  stream wait for the work recorded before ``e``, ``Stream.wait_stream(s)`` for all work queued on ``s``
  (``torch.Stream`` / ``torch.Event`` API docs; CUDA semantics note, "CUDA streams");
* ``Tensor.record_stream(s)``: memory used on ``s`` is not reused before the work queued on ``s`` at the
  time of the free has run (``torch.Tensor.record_stream`` docs);
* ``Event.query()`` is True once the recorded work is complete, ``Event.synchronize()`` waits for it, and
  ``elapsed_time`` (with ``enable_timing=True``) is a non-negative number of milliseconds, monotonic along a
  stream (``torch.Event`` docs);
* a ``non_blocking=True`` copy may return early and is complete after ``torch.accelerator.synchronize()``,
  ``Stream.synchronize()`` or ``Event.synchronize()`` of an event recorded after it (``Tensor.to`` docs,
  CUDA semantics note "Use pinned memory buffers"); the copy-and-``torch.accelerator.synchronize`` case at
  many sizes and in pinned memory is the ``nonblocking-copies`` bug class (``opsuites/bugclasses``), not
  repeated here;
* ``with stream:`` and ``torch.accelerator.set_stream`` set ``torch.accelerator.current_stream()``, and
  leaving the block restores the previous one (``torch.Stream`` context manager docs).

A backend whose ``torch.Stream`` or timed events raise has the check recorded as ``unsupported``
(``NotImplementedError``, :func:`neuron_conformance.conformance.verdict.failures.classify_exception`); the CPU is not an accelerator
and the suite is skipped there.
"""

from __future__ import annotations

import gc
import math

import pytest
import torch

from neuron_conformance.conformance.verdict.failures import MetadataFailure, NumericFailure
from neuron_conformance.conformance.verdict.oracle import check

SUITE = "streams"
N = 640
"""Matrix size of the slow chain (float32): each product is ~5 * 10^8 flops, far slower to run than to issue."""
STEPS = 8
"""Matrix products in the slow chain: hundreds of milliseconds of work on a CPU core, issued in a few."""


REUSE_TRIES = 8
"""Same-size allocations made right after the free in the record_stream check (a caching allocator hands
out one of its most recently freed blocks among the first few)."""


def _api(name, needs=("streams",)):
    """The test's identity and the capabilities it needs (``streams``; ``events`` too where it records one)."""

    def mark(fn):
        return pytest.mark.capability(*needs)(
            pytest.mark.conformance(op=name, suite=SUITE, kind="api", variant="api")(fn)
        )

    return mark


def _need_accelerator(device):
    if device.type == "cpu":
        pytest.skip("the CPU is not an accelerator: stream checks need a device")


def _new_stream(device) -> torch.Stream:
    """A new stream of ``device``.

    Raises:
        NotImplementedError: the backend cannot create streams (its error is quoted).
    """
    try:
        return torch.Stream(device=device.type)
    except (RuntimeError, TypeError) as exc:
        raise NotImplementedError(f"{device.type}: torch.Stream is not supported: {exc}") from exc


def _event(device, timing: bool = False) -> torch.Event:
    try:
        return torch.Event(device=device.type, enable_timing=timing)
    except (RuntimeError, TypeError) as exc:
        raise NotImplementedError(
            f"{device.type}: torch.Event(enable_timing={timing}) is not supported: {exc}"
        ) from exc


def _inputs(seed: int, dtype=torch.float32):
    """Seeded CPU inputs: a (N, N) start and a (N, N) matrix scaled by 1/sqrt(N) (the chain stays bounded)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(N, N, generator=g).to(dtype)
    b = (torch.randn(N, N, generator=g) / math.sqrt(N)).to(dtype)
    return a, b


def _slow_chain(a: torch.Tensor, b: torch.Tensor, steps: int = STEPS) -> torch.Tensor:
    """``tanh(... tanh(tanh(a @ b) @ b) ...)``: ``steps`` queued kernels whose result needs all of them."""
    z = a
    for _ in range(steps):
        z = torch.tanh(z @ b)
    return z


def _judge(actual: torch.Tensor, program, seed: int, where: str) -> None:
    """Check ``actual`` against ``program(a, b)`` on the CPU (float32, with a float64 reference); ``actual``
    is read (a blocking copy when on the device) before the reference is computed."""
    host = actual.cpu()
    a, b = _inputs(seed)
    expected = program(a, b)
    a64, b64 = _inputs(seed, torch.float64)
    check(host, expected, reference64=program(a64, b64), where=where)


def _on(device, seed: int):
    a, b = _inputs(seed)
    return a.to(device), b.to(device)


def _then_plus_one(a, b):
    return _slow_chain(a, b) + 1


@_api("streams.wait_event", needs=("streams", "events"))
def test_wait_event_orders_streams(device):
    """The side stream reads the slow chain's result only after an event recorded behind it."""
    _need_accelerator(device)
    side, main = _new_stream(device), torch.accelerator.current_stream()
    a, b = _on(device, 1)
    x = _slow_chain(a, b)
    ready = _event(device)
    ready.record(main)
    side.wait_event(ready)
    with side:
        y = x + 1
    done = _event(device)
    done.record(side)
    done.synchronize()
    _judge(y, _then_plus_one, 1, "side-stream x + 1 after wait_event")
    torch.accelerator.synchronize()


@_api("streams.event_wait", needs=("streams", "events"))
def test_event_wait_orders_streams(device):
    """``Event.wait(stream)``, the event-side spelling of ``Stream.wait_event``."""
    _need_accelerator(device)
    side = _new_stream(device)
    a, b = _on(device, 2)
    x = _slow_chain(a, b)
    ready = _event(device)
    ready.record()
    ready.wait(side)
    with side:
        y = x + 1
    side.synchronize()
    _judge(y, _then_plus_one, 2, "side-stream x + 1 after Event.wait")
    torch.accelerator.synchronize()


@_api("streams.wait_stream")
def test_wait_stream_fork_join(device):
    """Fork two side streams off the current one, join them back with ``wait_stream``, combine."""
    _need_accelerator(device)
    main = torch.accelerator.current_stream()
    left, right = _new_stream(device), _new_stream(device)
    a, b = _on(device, 3)
    start = a * 0.5
    parts = []
    for s in (left, right):
        s.wait_stream(main)
        with s:
            parts.append(_slow_chain(start, b, STEPS // 2))
    main.wait_stream(left)
    main.wait_stream(right)
    out = parts[0] - 2 * parts[1]
    torch.accelerator.synchronize()

    def program(a, b):
        start = a * 0.5
        return _slow_chain(start, b, STEPS // 2) - 2 * _slow_chain(start, b, STEPS // 2)

    _judge(out, program, 3, "fork-join over two streams")


@_api("streams.record_stream")
def test_record_stream_protects_memory(device):
    """A tensor freed on the current stream while a side stream still reads it, with ``record_stream``,
    keeps its values for that reader even when the current stream allocates and writes right after."""
    _need_accelerator(device)
    gc.collect()  # earlier tests' garbage is freed now, not between the free below and the allocations
    side, main = _new_stream(device), torch.accelerator.current_stream()
    a, b = _on(device, 4)
    x = a * 3  # allocated on the current stream
    side.wait_stream(main)
    with side:
        late = _slow_chain(a, b)  # the side stream is busy ...
        y = x * 2 + late * 0  # ... before it reads x
    x.record_stream(side)
    import sys

    print("XPTR", x.data_ptr(), file=sys.stderr)
    del x
    print("DELETED", file=sys.stderr)
    # same size on the current stream: an allocator may hand out x's block here, and these write it
    fresh = [torch.mul(a, 0).add_(7) for _ in range(REUSE_TRIES)]
    side.synchronize()
    torch.accelerator.synchronize()

    def program(a, b):
        return a * 3 * 2 + _slow_chain(a, b) * 0

    _judge(y, program, 4, "side-stream read of a record_stream'd tensor after its free")
    if not all(bool((f.cpu() == 7).all()) for f in fresh):
        raise NumericFailure("a tensor allocated after the free does not hold the 7s written to it")


@_api("streams.event_query", needs=("streams", "events"))
def test_event_query_and_synchronize(device):
    """``query()`` of an event never recorded is True; after ``synchronize()`` it is True and the work
    recorded before it is complete (its values are final)."""
    _need_accelerator(device)
    unrecorded = _event(device)
    if unrecorded.query() is not True:
        raise MetadataFailure(f"query() of an event that was never recorded gave {unrecorded.query()!r}, expected True")
    a, b = _on(device, 5)
    x = _slow_chain(a, b)
    e = _event(device)
    e.record()
    first = e.query()
    if not isinstance(first, bool):
        raise MetadataFailure(f"Event.query() gave {first!r}, expected a bool")
    e.synchronize()
    if e.query() is not True:
        raise MetadataFailure("Event.query() is not True after Event.synchronize()")
    host = x.to("cpu", non_blocking=True)
    done = _event(device)
    done.record()
    done.synchronize()
    _judge(host, _slow_chain, 5, "non_blocking copy read after Event.synchronize of an event recorded behind it")


@_api("streams.elapsed_time", needs=("streams", "events"))
def test_elapsed_time_is_monotonic(device):
    """Along one stream, ``e0.elapsed_time(e2) >= e0.elapsed_time(e1) >= 0`` (ms, finite)."""
    _need_accelerator(device)
    e0, e1, e2 = _event(device, True), _event(device, True), _event(device, True)
    a, b = _on(device, 6)
    e0.record()
    x = _slow_chain(a, b, STEPS // 2)
    e1.record()
    x = _slow_chain(x, b, STEPS // 2)
    e2.record()
    e2.synchronize()
    try:
        t01, t02, t12 = e0.elapsed_time(e1), e0.elapsed_time(e2), e1.elapsed_time(e2)
    except RuntimeError as exc:
        if "support" in str(exc):
            raise NotImplementedError(f"{device.type}: Event.elapsed_time: {exc}") from exc
        raise
    for name, ms in (("e0->e1", t01), ("e0->e2", t02), ("e1->e2", t12)):
        if not (isinstance(ms, float) and math.isfinite(ms) and ms >= 0):
            raise NumericFailure(f"elapsed_time {name} gave {ms!r}, expected a finite non-negative float (ms)")
    slack = 1e-3 * max(t02, 1.0)  # event timers are read at microsecond resolution
    if t02 + slack < t01 or t02 + slack < t12:
        raise NumericFailure(f"elapsed_time is not monotonic: e0->e1 {t01} ms, e1->e2 {t12} ms, e0->e2 {t02} ms")
    _judge(x, lambda a, b: _slow_chain(_slow_chain(a, b, STEPS // 2), b, STEPS // 2), 6, "the timed chain")


@_api("streams.nonblocking_to_host")
def test_nonblocking_to_host_after_stream_synchronize(device):
    """A non-blocking copy to the host queued on a side stream is complete after ``side.synchronize()``."""
    _need_accelerator(device)
    side, main = _new_stream(device), torch.accelerator.current_stream()
    a, b = _on(device, 7)
    x = _slow_chain(a, b)
    side.wait_stream(main)
    with side:
        host = x.to("cpu", non_blocking=True)
    side.synchronize()
    _judge(host, _slow_chain, 7, "non_blocking copy on a side stream after Stream.synchronize")
    torch.accelerator.synchronize()


@_api("streams.nonblocking_to_device")
def test_nonblocking_to_device_on_side_stream(device):
    """Host -> device with ``non_blocking=True`` on a side stream, used on the current stream after
    ``wait_stream``; read back (blocking) equal to the program on the CPU."""
    _need_accelerator(device)
    side, main = _new_stream(device), torch.accelerator.current_stream()
    a_cpu, b_cpu = _inputs(8)
    with side:
        a = a_cpu.to(device, non_blocking=True)
        b = b_cpu.to(device, non_blocking=True)
    main.wait_stream(side)
    y = _slow_chain(a, b)
    _judge(y, _slow_chain, 8, "device work on non_blocking copies after wait_stream")


@_api("streams.current_stream")
def test_current_stream_context(device):
    """``with s:`` and ``torch.accelerator.set_stream(s)`` make ``s`` current; leaving restores the previous
    stream; work issued inside runs on ``s`` (complete after ``s.synchronize()``)."""
    _need_accelerator(device)
    before = torch.accelerator.current_stream()
    if torch.device(before.device).type != device.type:
        raise MetadataFailure(f"current_stream() is on {before.device}, expected {device.type}")
    s = _new_stream(device)
    a, b = _on(device, 9)
    with s:
        inside = torch.accelerator.current_stream()
        y = _slow_chain(a, b)
    if inside != s:
        raise MetadataFailure(f"inside `with s:` current_stream() is {inside}, expected {s}")
    if torch.accelerator.current_stream() != before:
        raise MetadataFailure(
            f"after `with s:` current_stream() is {torch.accelerator.current_stream()}, expected the previous {before}"
        )
    s.synchronize()
    if s.query() is not True:
        raise MetadataFailure("Stream.query() is not True after Stream.synchronize()")
    host = y.to("cpu", non_blocking=True)
    s.synchronize()
    torch.accelerator.synchronize()
    _judge(host, _slow_chain, 9, "work issued inside `with s:`")
    torch.accelerator.set_stream(s)
    try:
        if torch.accelerator.current_stream() != s:
            raise MetadataFailure("torch.accelerator.set_stream(s) did not make s current")
    finally:
        torch.accelerator.set_stream(before)
    if torch.accelerator.current_stream() != before:
        raise MetadataFailure("torch.accelerator.set_stream(previous) did not restore the previous stream")
