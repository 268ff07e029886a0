"""The asynchronous mode computes exactly what the synchronous mode computes (same kernels, same layouts,
same intra-op thread count): each test here is a cause of a sync/async difference found by comparing the
op suites in both modes (``python -m neuron_conformance.conformance.backend.modes --setting
CONFORMANCE_EMULATOR_ASYNC``), and fails without its fix.
"""

from __future__ import annotations

import pytest
import torch

import neuron_conformance.emulator as emu
from neuron_conformance.emulator import streams


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
    x = torch.rand(2**20 + 7, generator=torch.Generator().manual_seed(904))
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
    """Cholesky of a matrix that is not positive-definite (the layouts suite's expanded layout): queued, the
    error surfaced at the next synchronising call, in the suite's next case. ``torch.linalg.cholesky``
    (``aten::linalg_cholesky_ex``): ``torch.cholesky`` and ``aten::cholesky`` are gone from torch 2.14."""
    a = torch.ones(3, 1, device="neuron").expand(3, 3)
    torch.accelerator.synchronize()
    try:
        torch.linalg.cholesky(a)
    except RuntimeError as exc:
        assert "positive-definite" in str(exc)
    else:
        raise AssertionError("cholesky of a singular matrix did not raise at the call")
    torch.accelerator.synchronize()  # nothing left to report later


def _raises_at_the_call(fn, needle: str, what: str) -> None:
    """``fn()`` raises a RuntimeError or IndexError containing ``needle`` at the call, and nothing is left
    for a later synchronising call to report."""
    torch.accelerator.synchronize()
    try:
        fn()
    except (RuntimeError, IndexError) as exc:
        assert needle in str(exc), str(exc)
    else:
        raise AssertionError(f"{what} did not raise at the call")
    torch.accelerator.synchronize()


@pytest.mark.parametrize("case", ["take", "gather", "index_select", "nll_loss", "embedding_bag_offsets"])
def test_an_index_out_of_range_raises_at_the_call(async_mode, case):
    """The stress suite's cases (``take`` "out of range", ``nn.functional.cross_entropy`` "Target 0 is out
    of bounds" on a zero-size input, ``scatter_reduce``, ``embedding_bag``): CPU kernels bounds-check the
    index values, which no meta kernel sees. Queued, the call returned and the error came at the next
    test's canary."""
    x = torch.arange(6.0, device="neuron").reshape(2, 3)
    bad = torch.tensor([0, 7], device="neuron")
    calls = {
        "take": (lambda: torch.take(x, bad), "out of range"),
        "gather": (lambda: torch.gather(x, 1, bad.reshape(1, 2)), "out of bounds"),
        "index_select": (lambda: torch.index_select(x, 0, bad), "out of range"),
        "nll_loss": (lambda: torch.nn.functional.nll_loss(x, torch.tensor([0, 5], device="neuron")), "out of bounds"),
        "embedding_bag_offsets": (
            lambda: torch.nn.functional.embedding_bag(
                torch.tensor([0, 1], device="neuron"), x, torch.tensor([0, 5], device="neuron")
            ),
            "offsets",
        ),
    }
    fn, needle = calls[case]
    _raises_at_the_call(fn, needle, case)


def test_a_value_checked_float_argument_raises_at_the_call(async_mode):
    """``binary_cross_entropy`` checks that its input lies in [0, 1] on the CPU; its meta kernel cannot."""
    inp = torch.tensor([1.5], device="neuron")
    _raises_at_the_call(
        lambda: torch.nn.functional.binary_cross_entropy(inp, torch.ones(1, device="neuron")),
        "between 0 and 1",
        "binary_cross_entropy of 1.5",
    )


def test_a_float_target_stays_queued(async_mode):
    """A floating ``target`` is not an index tensor: ``mse_loss`` is still queued (its output is poisoned
    until the worker has run it), so the index rule does not switch the asynchronous mode off for losses."""
    from neuron_conformance.emulator import async_rules

    assert not async_rules.reads_integral_index(torch.ops.aten.mse_loss.default, (torch.ones(2), torch.ones(2)), {})
    assert async_rules.reads_integral_index(
        torch.ops.aten.take.default, (torch.ones(2), torch.zeros(1, dtype=torch.long)), {}
    )


def test_an_unimplemented_integer_kernel_raises_at_the_call_every_time(async_mode):
    """The variants suite's cases: ``special.round`` (``round.decimals``) of int8 ("round_vml_cpu not
    implemented for 'Char'") and ``logit_`` of int16, whose meta kernels accept the dtype. A host probe
    finds that the CPU refuses the signature, which then runs at the call every time."""
    for _ in range(2):
        _raises_at_the_call(
            lambda: torch.special.round(torch.ones(3, dtype=torch.int8, device="neuron")),
            "not implemented",
            "round of int8",
        )
        _raises_at_the_call(
            lambda: torch.ones(3, dtype=torch.int16, device="neuron").logit_(), "can't be cast", "logit_ of int16"
        )


def test_the_dtype_probe_runs_once_per_signature_and_leaves_the_cpu_generator_alone(async_mode, monkeypatch):
    """The host probe behind the dtype rule runs once per signature (two refused ``special.round`` calls of
    int8 probe once; an int32 ``add`` the CPU implements is probed once, then queued), and it does not move
    the CPU generator: a random op probed on the host must not change the CPU reference's random stream."""
    from neuron_conformance.emulator import async_rules

    probes = []
    real = async_rules._probe_runs
    monkeypatch.setattr(async_rules, "_probe_runs", lambda plan, *a: probes.append(plan.overload) or real(plan, *a))
    monkeypatch.setattr(async_rules, "_refused", {})
    for _ in range(2):
        _raises_at_the_call(
            lambda: torch.special.round(torch.ones(3, dtype=torch.int8, device="neuron")),
            "not implemented",
            "round of int8",
        )
    a = torch.arange(4, dtype=torch.int32, device="neuron")
    assert (a + a).tolist() == (a + a).tolist() == [0, 2, 4, 6]
    # device mode decomposes to the out= overloads (round.decimals_out, add.out): name-agnostic counts
    assert len(probes) == len(set(probes)), probes
    assert any(p.startswith("aten::round.") for p in probes) and any(p.startswith("aten::add.") for p in probes)
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    torch.randint(0, 5, (4,), dtype=torch.int64, device="neuron").random_(0, 7).cpu()
    assert torch.equal(torch.rand(3), expected)


def test_eval_batch_norm_statistics_have_the_meta_shapes(async_mode):
    """``native_batch_norm`` in eval mode: the CPU kernel returns 0-element save_mean/save_invstd, the meta
    kernel (and CUDA) one element per channel, which the device returns (emulator/batch_norm.py). Queued,
    the CPU kernel's output failed the copy into the meta-shaped one ("gave shape (0,) on the CPU but its
    meta kernel (2,)"); it runs after a drain (async_rules.META_DIVERGES)."""
    args = [torch.randn(4, 2, 3), torch.ones(2), torch.zeros(2), torch.zeros(2), torch.ones(2)]
    cpu = torch.ops.aten.native_batch_norm(*args, False, 0.1, 1e-5)
    dev = torch.ops.aten.native_batch_norm(*[a.to("neuron") for a in args], False, 0.1, 1e-5)
    assert [tuple(t.shape) for t in cpu] == [(4, 2, 3), (0,), (0,)]
    assert [tuple(t.shape) for t in dev] == [(4, 2, 3), (2,), (2,)]
    assert torch.equal(dev[0].cpu(), cpu[0])
    assert torch.equal(dev[1].cpu(), args[3]) and torch.equal(dev[2].cpu(), torch.rsqrt(args[4] + 1e-5))


def test_a_channels_last_input_keeps_the_cpu_kernels_layout(async_mode):
    """``reflection_pad3d`` of a 4-D channels-last input (the layouts suite's ``nn.functional.pad`` reflect
    sample 9, device mode): the CPU's out= kernel restrides its output to ``(245, 1, 35, 5)``, the meta
    kernel keeps ``(245, 49, 7, 1)``. Queued, the output kept the meta strides over bytes written in the
    CPU's layout: wrong values."""
    x = torch.randn(3, 3, 5, 5, generator=torch.Generator().manual_seed(0)).contiguous(
        memory_format=torch.channels_last
    )
    expected = torch.ops.aten.reflection_pad3d(x, [1] * 6)
    out = torch.ops.aten.reflection_pad3d.out(x.to("neuron"), [1] * 6, out=torch.empty(3, 5, 7, 7, device="neuron"))
    assert out.stride() == expected.stride()
    assert torch.equal(out.cpu(), expected)


@pytest.mark.parametrize("case", ["max", "min", "mode"])
def test_an_empty_input_check_raises_at_the_call(async_mode, case):
    """The stress suite's ``zero_size`` cases: the CPU refuses ``max()``/``min()`` of an empty tensor and
    ``mode`` over a zero-size dimension; their meta kernels accept both. Queued, the call returned."""
    calls = {
        "max": (lambda: torch.empty(0, 3, device="neuron").max(), "numel() == 0"),
        "min": (lambda: torch.empty(0, device="neuron").min(), "numel() == 0"),
        "mode": (lambda: torch.empty(2, 3, 0, device="neuron").mode(), "non-zero size"),
    }
    fn, needle = calls[case]
    _raises_at_the_call(fn, needle, f"{case} of an empty tensor")


@pytest.mark.parametrize(
    "case", ["fill_overflow", "floor_divide_zero", "remainder_zero", "bitwise_float", "cholesky_inverse"]
)
def test_a_refused_scalar_or_dtype_raises_at_the_call(async_mode, case):
    """The properties suite's scalar-overload cases and the layouts suite's ``cholesky_inverse`` case: the
    CPU refuses a value or a dtype that the meta kernels accept. Queued, the call returned a result."""
    u8 = torch.tensor([0, 1, 2], dtype=torch.uint8, device="neuron")
    i8 = torch.tensor([0, 1, -1], dtype=torch.int8, device="neuron")
    f32 = torch.ones(3, device="neuron")
    singular = torch.tensor([[1.0, 0.0], [0.0, 0.0]], device="neuron")
    calls = {
        "fill_overflow": (lambda: torch.ops.aten.fill.Scalar(u8, -1.5), "without overflow"),
        "floor_divide_zero": (lambda: torch.floor_divide(i8, 0), "ZeroDivisionError"),
        "remainder_zero": (lambda: torch.remainder(i8, 0), "ZeroDivisionError"),
        "bitwise_float": (lambda: torch.ops.aten.bitwise_and.Scalar(f32, 2), "not implemented"),
        "cholesky_inverse": (lambda: torch.cholesky_inverse(singular), "singular"),
    }
    fn, needle = calls[case]
    torch.accelerator.synchronize()
    with pytest.raises((RuntimeError, NotImplementedError), match=needle):
        fn()
    torch.accelerator.synchronize()  # nothing left to report later


def test_a_random_op_without_a_generator_leaves_the_cpu_stream_alone(async_mode):
    """``native_dropout`` has no ``Generator?`` argument, so its CPU kernel draws from the CPU's default
    generator; queued, the worker drew from it without the emulator's stand-in and moved the CPU stream (the
    random-ops suite's rule: a device draw must not advance the CPU's generator)."""
    x = torch.ones(64, device="neuron")
    before = torch.random.get_rng_state()
    torch.ops.aten.native_dropout(x, 0.5, True)[0].cpu()
    assert torch.equal(torch.random.get_rng_state(), before)


def test_grid_sampler_cpu_fallback_backward_runs_the_cpu_kernel(async_mode):
    """The shape-contracts suite's case in device mode: the composite kernel wrote grad_input through host
    pointers before the queued zeros under it had run, so grad_input came back all zeros."""
    g = torch.Generator().manual_seed(0)
    args = (
        torch.randn(2, 2, 3, 4, generator=g),
        torch.randn(2, 2, 4, 5, generator=g),
        torch.randn(2, 3, 4, 2, generator=g),
    )
    expected = torch.ops.aten._grid_sampler_2d_cpu_fallback_backward(*args, 0, 0, False)
    before = emu.get_mode()
    emu.set_mode("device")
    try:
        got = torch.ops.aten._grid_sampler_2d_cpu_fallback_backward(*[a.to("neuron") for a in args], 0, 0, False)
        assert all(torch.equal(x.cpu(), y) for x, y in zip(got, expected))
    finally:
        emu.set_mode(before)
