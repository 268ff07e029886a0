"""Stress: tensors over 2^31 bytes and elements, zero-size and 0-dim inputs of every OpInfo, the allocator.

* ``test_large_tensor[<case>]`` (:mod:`neuron_conformance.opsuites.large_tensors`): first, last and past-2^31 elements through
  fill, sum, add, indexing, copies and views with large offsets, against values known by construction. Each
  case needs several GiB: it runs when it fits the memory budget (``--conformance-memory-budget``, the backend's
  ``CONFORMANCE_MEMORY_BUDGET``: :mod:`neuron_conformance.conformance.backend.budget`), else it is skipped with a reason naming both
  sizes. The cases share one ``xdist_group``, so under ``--dist loadgroup`` (the harness default with ``-n``)
  they run one after another on one worker and the budget holds for the whole run.
* ``test_zero_size[<op>-<dtype>]`` and ``test_zero_dim[<op>-<dtype>]`` (:mod:`neuron_conformance.opsuites.degenerate`): for
  every OpInfo, in the first selected dtype it supports, variants of its samples with a dimension of length
  0 or with 0-dim tensors, compared with the CPU (values, shape, dtype; the exception type when the CPU
  raises).
* ``test_allocation_churn`` and ``test_oom_recovery`` (:mod:`neuron_conformance.opsuites.allocator`): ``memory_allocated``
  back at its start after rapid allocation and free; ``torch.OutOfMemoryError`` past the free memory, then
  a working device. Skipped with the reason when the backend lacks the ``torch.accelerator`` memory APIs.

Records say what was checked: ``checked`` (the reads of a large case, or a count line for the degenerate
variants), ``compared`` and ``same_error`` (variants whose results, or exception types, were compared),
``needs_bytes`` and ``budget_bytes``.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.backend.transfer import sample_to_device, to_float64
from neuron_conformance.conformance.pytest_plugin.options import selected_dtypes
from neuron_conformance.conformance.verdict.compare import ErrorTally, check_same_error, raise_if_suspect
from neuron_conformance.conformance.verdict.failures import NonFiniteFailure, NumericFailure
from neuron_conformance.opsuites import allocator, degenerate
from neuron_conformance.opsuites.large_tensors import CASES, Checks
from neuron_conformance.opsuites.samples import cached_rows, cpu_samples, op_db
from neuron_conformance.opsuites.suite_helpers import (
    annotate,
    call,
    fold,
    op_tolerance,
    opinfo,
    require_reference,
    value_policy,
)

SUITE = "stress"
LARGE_GROUP = "stress-large-tensors"


def _large_params() -> list:
    return [
        pytest.param(
            c,
            id=c.name,
            marks=[
                pytest.mark.xdist_group(LARGE_GROUP),
                pytest.mark.conformance(op=c.op, dtype=c.dtype, variant=c.variant, suite=SUITE, kind="op"),
            ],
        )
        for c in CASES
    ]


def _degenerate_params(config, variant: str) -> list:
    selected = selected_dtypes(config)

    def rows() -> list:
        out = []
        for op in op_db():
            dt = degenerate.first_dtype(op, selected)
            if dt is not None:
                out.append([op.full_name, dt])
        return out

    cached = cached_rows(
        getattr(config, "cache", None),
        f"{SUITE}|first-dtype",
        rows,
        sources=(__file__, degenerate.__file__),
        selected=selected,
    )
    return [
        pytest.param(
            name,
            dt,
            id=f"{name}-{dt}",
            marks=[
                pytest.mark.xdist_group(name),
                pytest.mark.conformance(op=name, dtype=dt, variant=variant, suite=SUITE, kind="op"),
            ],
        )
        for name, dt in cached
    ]


def pytest_generate_tests(metafunc):
    if metafunc.function.__name__ == "test_large_tensor":
        metafunc.parametrize("case", _large_params())
    elif {"op_name", "dtype_name"} <= set(metafunc.fixturenames):
        variant = "zero-size" if metafunc.function.__name__ == "test_zero_size" else "zero-dim"
        metafunc.parametrize(("op_name", "dtype_name"), _degenerate_params(metafunc.config, variant))


def test_large_tensor(case, device, memory_budget, conformance_record):
    conformance_record.update(needs_bytes=case.needs, budget_bytes=memory_budget.nbytes, samples=1)
    reason = memory_budget.shortfall(case.needs)
    if reason:
        pytest.skip(f"{case.name}: {reason}")
    checks = Checks(where=f"{case.name} ({case.numel} elements of {case.dtype})")
    try:
        case.run(device, checks)
    finally:
        conformance_record.update(checked=checks.checked, compared=len(checks.checked), rule="exact")
    if device.type != "cpu":
        torch.accelerator.synchronize()


def _degenerate(kind, op_name, dtype_name, device, profile, record, repro, only) -> None:
    op = opinfo(op_name)
    dtype = getattr(torch, dtype_name)
    tol = op_tolerance(op, dtype, profile, device.type)
    policy = value_policy(op_name, profile)
    crash = degenerate.CPU_CRASHES.get((op_name, kind))
    if crash:
        pytest.skip(f"{op_name}: the CPU reference crashes on {kind} inputs: {crash}")
    cases = degenerate.degenerate_cases(cpu_samples(op, dtype, only=only), kind)
    record.update(samples=len(cases), atol=tol.atol, rtol=tol.rtol)
    if not cases:
        pytest.skip(f"{op_name}: no sample has a tensor input of >= 1 dim with elements to derive {kind} variants from")
    tally, compared, same_error, undefined, first_exc = ErrorTally(), 0, 0, 0, None
    for index, label, variant in cases:
        where = f"{op_name} {dtype_name} sample {index} ({label})"
        dev_inp, dev_args, dev_kwargs = sample_to_device(variant, device, op.name, index=index)
        expected, cpu_exc = call(op, variant.input, *variant.args, **variant.kwargs)
        actual, dev_exc = call(op, dev_inp, *dev_args, **dev_kwargs)
        try:
            if cpu_exc is not None:
                first_exc = first_exc or cpu_exc
                check_same_error(dev_exc, cpu_exc, where)
                same_error += 1
                continue
            if dev_exc is not None:
                raise annotate(dev_exc, where, index)

            def reference64(v=variant):
                return op(to_float64(v.input, dtype), *to_float64(v.args, dtype), **to_float64(v.kwargs, dtype))

            try:
                fold(
                    tally,
                    index,
                    actual,
                    expected,
                    device=device,
                    profile=profile,
                    tol=tol,
                    where=where,
                    values=policy,
                    reference64=reference64 if dtype.is_floating_point else None,
                    op=op.name,
                )
            except (NumericFailure, NonFiniteFailure):  # the CPU may have returned uninitialised memory
                again = degenerate.filled_rerun(op, variant.input, *variant.args, **variant.kwargs)
                if again is None or degenerate.same_cpu_result(expected, again):
                    raise
                # the CPU kernel returned uninitialised memory: only the metadata is a reference
                fold(tally, index, actual, expected, device=device, profile=profile, tol=tol, where=where, values=False)
                undefined += 1
            compared += 1
        except Exception:  # a ConformanceFailure or the device's own exception: recorded, then raised
            record.update(sample=index, compared=compared, same_error=same_error, **tally.record_fields())
            repro(op_name, index, dtype_name, variant)  # repro/repro_<id>.py + .pt of the derived variant
            raise
    record.update(
        sample=tally.worst_sample,
        compared=compared,
        same_error=same_error,
        cpu_undefined=undefined,
        checked=f"{kind}: {len(cases)} variant(s): {compared} compared with the CPU (values, shape, "
        f"dtype; {undefined} by metadata only: the CPU gave uninitialised values), "
        f"{same_error} raised the CPU's exception type",
        **tally.record_fields(),
    )
    record["rule"] = policy.record_rule(tally)  # never null: names why when no value was judged
    require_reference(f"{op_name} {dtype_name} ({kind})", same_error, len(cases), first_exc)
    raise_if_suspect(tally)  # the CPU reference, not the device, was off the float64 computation


def test_zero_size(op_name, dtype_name, device, device_profile, conformance_record, conformance_repro, sample_index):
    _degenerate(
        "zero-size", op_name, dtype_name, device, device_profile, conformance_record, conformance_repro, sample_index
    )


def test_zero_dim(op_name, dtype_name, device, device_profile, conformance_record, conformance_repro, sample_index):
    _degenerate(
        "zero-dim", op_name, dtype_name, device, device_profile, conformance_record, conformance_repro, sample_index
    )


def _api(name):
    return pytest.mark.conformance(op=name, suite=SUITE, kind="api", variant="api")


def _run_allocator_check(fn, device, record) -> None:
    if device.type == "cpu":
        pytest.skip("the CPU is not an accelerator: torch.accelerator memory statistics need a device")
    try:
        record.update(**fn(device))
    except allocator.MissingApi as exc:
        pytest.skip(str(exc))
    finally:
        allocator.give_back()  # whatever the verdict: the other tests get the device's memory back


@_api("allocator.churn")
def test_allocation_churn(device, conformance_record):
    _run_allocator_check(allocator.check_churn, device, conformance_record)
    conformance_record.update(
        checked="memory_allocated back at its start after each of "
        f"{allocator.ITERATIONS} allocate/fill/free rounds; reserved growth bounded"
    )


@_api("allocator.oom-recovery")
@pytest.mark.device_exclusive  # asks for more than the free memory: nothing may run beside it
def test_oom_recovery(device, conformance_record):
    _run_allocator_check(allocator.check_oom_recovery, device, conformance_record)
    conformance_record.update(
        checked="torch.OutOfMemoryError past the free memory; memory_allocated unchanged; "
        "a normal allocation and op after it"
    )
