"""The asynchronous mode computes exactly what the synchronous mode computes (same kernels, same layouts,
same intra-op thread count): each test here is a cause of a sync/async difference found by comparing the
op suites in both modes (``python -m neuron_conformance.conformance.modes --setting
CONFORMANCE_EMULATOR_ASYNC``), and fails without its fix.
"""

from __future__ import annotations

import pytest
import torch

import neuron_conformance.conformance.emulator as emu
from neuron_conformance.conformance.emulator import streams


def _worker_threads() -> int:
    """``torch.get_num_threads()`` as the current stream's worker sees it when it runs a job."""
    seen = []
    pos = streams.current().submit(lambda: seen.append(torch.get_num_threads()))
    streams.current().wait_for(pos)
    return seen[0]


def test_jobs_run_with_the_issuing_threads_intra_op_thread_count(async_mode):
    """OpenMP's thread count is per thread: the worker kept the count it had at its first parallel region,
    so after the harness set the host's (one thread per xdist worker) reductions were split differently
    (a float32 sum of 2^20 + 7 elements rounded 1 ULP apart; layer_norm's backward keeps a partial sum per
    thread)."""
    before = torch.get_num_threads()
    try:
        for wanted in (1, 3, 2, 1):
            torch.set_num_threads(wanted)
            assert _worker_threads() == wanted
    finally:
        torch.set_num_threads(before)


def test_long_sum_is_bitwise_equal_after_a_thread_count_change(async_mode):
    """The op suites' case: ``torch.sum`` of 2^20 + 7 values of U[0, 1) (tile_edges, seed 904), which one
    and two threads round 1 ULP apart (0.03125)."""
    x = torch.rand(2 ** 20 + 7, generator=torch.Generator().manual_seed(904))
    before = torch.get_num_threads()
    try:
        sums = []
        for n in (1, 2):
            torch.set_num_threads(n)
            sums.append(x.sum())
        if torch.equal(*sums):
            pytest.skip("one and two threads round this sum alike on this machine")
        d = x.to("neuron")
        torch.set_num_threads(2)
        d.sum().cpu()  # the worker's first parallel region at 2 threads
        torch.set_num_threads(1)
        assert torch.equal(d.sum().cpu(), sums[0])
        emu.set_async(False)
        assert torch.equal(d.sum().cpu(), sums[0])
    finally:
        torch.set_num_threads(before)


def test_a_write_into_an_expanded_tensor_raises_at_the_call(async_mode):
    """``embedding_renorm_`` (``F.embedding(..., max_norm=...)``) of an expanded weight: the CPU kernel refuses
    the internally overlapping write, its meta kernel does not. Queued, the error surfaced at the next
    synchronising call, in the op suites' next case (``embedding`` sample 6, noncontiguous layout)."""
    weight = torch.ones(5, 1, device="neuron").expand(5, 5)
    idx = torch.zeros(2, 2, dtype=torch.long, device="neuron")
    torch.accelerator.synchronize()
    try:
        torch.embedding_renorm_(weight, idx, 1.0, 2.0)
    except RuntimeError as exc:
        assert "more than one element of the written-to tensor" in str(exc)
    else:
        raise AssertionError("the overlapping write did not raise at the call")
    torch.accelerator.synchronize()  # nothing left to report later


def test_out_of_a_dtype_the_kernel_refuses_raises_at_the_call(async_mode):
    """The variants suite's case: ``linalg.solve_triangular`` sample 0 with an int64 ``out=`` for float32
    inputs. The CPU kernel refuses it, its meta kernel does not: queued, the call returned."""
    from torch.testing._internal.common_methods_invocations import op_db  # deferred: slow to import

    op = next(o for o in op_db if o.name == "linalg.solve_triangular")
    sample = next(iter(op.sample_inputs("cpu", torch.float32)))
    expected = op(sample.input, *sample.args, **sample.kwargs)
    args = [a.to("neuron") if isinstance(a, torch.Tensor) else a for a in sample.args]
    out = torch.empty(expected.shape, dtype=torch.int64, device="neuron")
    try:
        op(sample.input.to("neuron"), *args, **sample.kwargs, out=out)
    except RuntimeError as exc:
        assert "expected scalar type" in str(exc)
    else:
        raise AssertionError("an int64 out= for float32 inputs did not raise at the call")
    torch.accelerator.synchronize()


def test_a_linalg_error_from_the_values_raises_at_the_call(async_mode):
    """``torch.cholesky`` of a matrix that is not positive-definite (the layouts suite's expanded layout):
    queued, the error surfaced at the next synchronising call, in the suite's next case."""
    a = torch.ones(3, 1, device="neuron").expand(3, 3)
    torch.accelerator.synchronize()
    try:
        torch.cholesky(a)
    except RuntimeError as exc:
        assert "positive-definite" in str(exc)
    else:
        raise AssertionError("cholesky of a singular matrix did not raise at the call")
    torch.accelerator.synchronize()  # nothing left to report later
