"""The asynchronous mode ($CONFORMANCE_EMULATOR_ASYNC=1): queued kernels, waits, events, record_stream.

Each ordering test holds a stream's worker on a gate job (:func:`_held`), so what has and has not run yet
is certain, not a race: while held, queued outputs still hold the poison pattern.
"""

from __future__ import annotations

import contextlib
import threading

import pytest
import torch

import neuron_conformance.emulator as emu
from neuron_conformance.emulator import _state, caching, faults, storage, stream_api, streams


@contextlib.contextmanager
def _held(stream=None):
    """Block the worker of ``stream`` (None: the current stream) until the block exits."""
    gate = threading.Event()
    stream_api.queue_of(stream).submit(gate.wait)
    try:
        yield
    finally:
        gate.set()


def _raw(t: torch.Tensor) -> torch.Tensor:
    """The bytes of neuron tensor ``t`` now, without waiting for its stream (a copy)."""
    return storage.cpu_alias(t).clone()


def test_env_var_values(monkeypatch):
    monkeypatch.delenv(_state.ENV_ASYNC, raising=False)
    assert _state.default_async() is False
    monkeypatch.setenv(_state.ENV_ASYNC, "1")
    assert _state.default_async() is True
    monkeypatch.setenv(_state.ENV_ASYNC, "0")
    assert _state.default_async() is False
    monkeypatch.setenv(_state.ENV_ASYNC, "yes")
    with pytest.raises(ValueError, match="CONFORMANCE_EMULATOR_ASYNC='yes'"):
        _state.default_async()


def test_kernels_return_before_they_run_and_blocking_copy_waits(async_mode):
    x = torch.arange(6, dtype=torch.float32, device="neuron")
    torch.accelerator.synchronize()
    with _held():
        y = x * 2 + 1
        assert y.shape == (6,) and y.dtype == torch.float32
        assert torch.isnan(_raw(y)).all(), "a queued output is readable before its kernel ran"
    assert torch.equal(y.cpu(), torch.arange(6, dtype=torch.float32) * 2 + 1)


def test_integer_outputs_are_poisoned_with_the_largest_value(async_mode):
    x = torch.arange(4, device="neuron")
    torch.accelerator.synchronize()
    with _held():
        y = x + 1
        assert (_raw(y) == torch.iinfo(torch.int64).max).all()
    assert y.tolist() == [1, 2, 3, 4]


def test_non_blocking_copy_to_host_does_not_wait(async_mode):
    x = torch.ones(5, device="neuron")
    torch.accelerator.synchronize()
    with _held():
        h = (x * 3).to("cpu", non_blocking=True)
        assert torch.isnan(h).all(), "the non-blocking copy waited for the stream"
    torch.accelerator.synchronize()
    assert torch.equal(h, torch.full((5,), 3.0))


def test_wait_event_orders_two_streams(async_mode):
    a, b = torch.Stream(device="neuron"), torch.Stream(device="neuron")
    src = torch.ones(4, device="neuron")
    torch.accelerator.synchronize()
    e = torch.Event(device="neuron")
    with _held(a):
        with a:
            x = src * 2
        e.record(a)
        b.wait_event(e)
        with b:
            y = x + 1
        assert not e.query()
        b_done = torch.Event(device="neuron")
        b_done.record(b)
        assert not b_done.query(), "stream b ran past wait_event before the event completed"
    b.synchronize()
    assert e.query() and torch.equal(y.cpu(), torch.full((4,), 3.0))


def test_wait_event_fault_lets_the_reader_overtake(async_mode):
    a, b = torch.Stream(device="neuron"), torch.Stream(device="neuron")
    src = torch.ones(4, device="neuron")
    torch.accelerator.synchronize()
    with faults.events_do_not_order(), _held(a):
        with a:
            x = src * 2
        b.wait_stream(a)
        with b:
            y = x + 1
        b.synchronize()
        assert torch.isnan(y.cpu()).all(), "with wait_event a no-op the reader saw unwritten (poisoned) memory"
    torch.accelerator.synchronize()


def _freed_while_side_reads(fault: bool):
    """x (current stream) is read by a held side stream, record_stream'd and freed; then the current
    stream allocates and writes the same size. Returns (reused x's block, the side stream's result)."""
    side, main = torch.Stream(device="neuron"), torch.accelerator.current_stream()
    a = torch.ones(256, device="neuron")
    x = a * 3
    torch.accelerator.synchronize()
    ptr = x.data_ptr()
    with contextlib.ExitStack() as stack:
        if fault:
            stack.enter_context(faults.reuse_ignores_record_stream())
        with _held(side):
            side.wait_stream(main)
            with side:
                y = x * 2
            x.record_stream(side)
            del x
            z = torch.mul(a, 0)
            reused = z.data_ptr() == ptr
            main.synchronize()  # the zeros have landed before the side stream may read x
        torch.accelerator.synchronize()
    return reused, y.cpu()


def test_record_stream_holds_the_block_until_the_stream_passed(async_mode):
    reused, y = _freed_while_side_reads(fault=False)
    assert not reused, "a block recorded on a busy stream was reused"
    assert torch.equal(y, torch.full((256,), 6.0))


def test_reuse_fault_hands_out_the_block_early(async_mode):
    reused, y = _freed_while_side_reads(fault=True)
    assert reused, "the fault reuses the most recently freed block at once"
    assert torch.equal(y, torch.zeros(256)), "the side stream read the zeros written into the reused block"


def test_stream_context_and_set_stream(async_mode):
    s = torch.Stream(device="neuron")
    before = torch.accelerator.current_stream()
    with s:
        assert torch.accelerator.current_stream() == s
    assert torch.accelerator.current_stream() == before
    torch.accelerator.set_stream(s)
    assert torch.neuron.current_stream() == s
    torch.accelerator.set_stream(before)
    assert torch.neuron.current_stream() == before


def test_shape_errors_are_raised_at_the_call(async_mode):
    with pytest.raises(RuntimeError, match="size of tensor a"):
        torch.ones(2, 3, device="neuron") + torch.ones(4, device="neuron")


def test_same_values_as_a_synchronous_run(async_mode):
    def program():
        torch.manual_seed(0)
        a = torch.randn(8, 16, device="neuron")
        w = torch.randn(16, 4, device="neuron")
        h = torch.softmax(a @ w, dim=-1)
        h[1:3].mul_(2)
        idx = torch.tensor([0, 2, 5])
        out = torch.empty(3, 4, device="neuron")
        torch.index_select(h, 0, idx.to("neuron"), out=out)
        return [h.cpu(), out.cpu(), torch.nonzero(h > 0.3).cpu(), torch.tensor(h.sum().item())]

    queued = program()
    emu.set_async(False)
    synchronous = program()
    emu.set_async(True)
    for q, s in zip(queued, synchronous):
        assert torch.equal(q, s)


def test_api_probing_keeps_the_emulated_event(async_mode):
    """``api_support()`` lifts the shim while it probes; the asynchronous mode's Event comes back after."""
    emu.api_support()
    assert torch.Event is stream_api.Event


def test_switching_off_restores_torch_classes(async_mode):
    assert torch.Stream is stream_api.Stream and torch.Event is stream_api.Event
    emu.set_async(False)
    assert torch.Stream is stream_api._OriginalStream and not emu.is_async()
    assert caching.stats()["pooled_bytes"] == 0 and streams.idle()
    emu.set_async(True)


def test_fault_kernel_is_stream_ordered(async_mode):
    """A fault kernel reads its inputs and writes its outputs on the host through ``cpu_alias``: it must see
    the queued producer's values and its write must not be overwritten by a queued kernel."""
    x = torch.arange(1, 7, dtype=torch.float32, device="neuron")
    with faults.scale_output(torch.ops.aten.mul.Tensor, 1e-1):
        y = (x + 1) * torch.full((6,), 2.0, device="neuron")  # the producer (x + 1) is queued
    expected = (torch.arange(1, 7, dtype=torch.float32) + 1) * 2
    assert torch.allclose(y.cpu(), expected * 1.1), (y.cpu(), expected)


def test_collective_waits_for_the_current_stream(async_mode):
    from neuron_conformance.emulator import distributed

    x = torch.ones(4, device="neuron")
    torch.accelerator.synchronize()
    gate = threading.Event()
    stream_api.queue_of(None).submit(gate.wait)
    y = x * 5  # queued behind the gate
    threading.Timer(0.3, gate.set).start()
    alias = distributed.cpu_alias(y)  # must wait until the stream has run the multiply
    assert alias.tolist() == [5.0] * 4


def test_pool_finalizer_inside_the_pool_lock_does_not_deadlock():
    """The garbage collector can free a pooled storage while :func:`caching._take` holds the pool's lock on
    the same thread; its finalizer (:func:`caching._release`) then takes the lock again. With a plain lock
    that thread hung for good (4 variants tests in a whole-suite async run)."""
    block = torch.UntypedStorage(96)
    done = threading.Event()

    def release_under_the_lock():
        with caching._lock:
            caching._release(block, streams.DEFAULT, set())
        done.set()

    worker = threading.Thread(target=release_under_the_lock, daemon=True)
    worker.start()
    assert done.wait(30), "the pool's finalizer deadlocked on the pool's own lock"
    assert caching._take(streams.DEFAULT, 96) is block


def test_optional_outputs_the_meta_kernel_leaves_out_stay_none(async_mode):
    """native_layer_norm_backward with output_mask [True, False, False] returns (grad_input, None, None):
    queueing it must keep the None outputs (it raised AttributeError in the layer_norm autograd tests)."""
    x = torch.randn(2, 3, device="neuron")
    mean = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)
    gi, gw, gb = torch.ops.aten.native_layer_norm_backward(
        torch.ones(2, 3, device="neuron"), x, [3], mean, rstd, None, None, [True, False, False]
    )
    assert gw is None and gb is None
    ref = torch.ops.aten.native_layer_norm_backward(
        torch.ones(2, 3), x.cpu(), [3], mean.cpu(), rstd.cpu(), None, None, [True, False, False]
    )[0]
    assert torch.allclose(gi.cpu(), ref)
