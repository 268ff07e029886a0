"""Every OpInfo sample on the device under test against the CPU reference.

For each OpInfo of PyTorch's database and each selected dtype it supports, every sample input runs on the
device and on the CPU. Checked per output: device (outputs belong on the device under test), dtype, shape,
strides (backends that mirror the CPU kernels), values (tolerance policy and fp64 oracle); for the
in-place variant, that the returned tensor is the input. When the CPU raises, the device must raise the
same exception type. Random ops are compared by metadata and by seeded reproducibility on the device.
"""

from __future__ import annotations

import torch

from neuron_conformance.conformance.backend.transfer import sample_to_device, to_float64, triple_to_device
from neuron_conformance.conformance.survival.crash_files import note_sample
from neuron_conformance.conformance.verdict.compare import ErrorTally, check_same_error, compare_outputs, flatten
from neuron_conformance.conformance.verdict.failures import ConformanceFailure, MetadataFailure, NumericFailure
from neuron_conformance.opsuites.samples import cpu_samples, is_random, opinfo_by_name
from neuron_conformance.opsuites.suite_helpers import (
    annotate,
    for_sample,
    index_checker,
    op_tolerance,
    parametrize_opinfos,
    reference64_of,
    require_reference,
    reseed,
    up_to_gauge,
    value_policy,
)

SUITE = "compare_cpu"


def pytest_generate_tests(metafunc):
    parametrize_opinfos(metafunc)


def _call(fn, inp, args, kwargs, device=None):
    """Call ``fn``; return ``(result, None)`` or ``(None, exception)``.

    With ``device`` given and no tensor or device among the arguments (a factory sample such as
    ``arange(5)``), the call runs under ``torch.device(device)`` so it creates its result on the device
    under test, as the CPU call creates it on the CPU.
    """
    try:
        if device is not None and not _targets_a_device(inp, args, kwargs):
            with torch.device(device):
                return fn(inp, *args, **kwargs), None
        return fn(inp, *args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - the exception is part of what is compared
        return None, exc


def _targets_a_device(*values) -> bool:
    from torch.utils._pytree import tree_flatten

    leaves, _ = tree_flatten(values)
    return any(isinstance(x, (torch.Tensor, torch.device)) for x in leaves) or "device" in values[-1]


def test_compare_cpu(op_name, dtype_name, device, device_profile, conformance_record, sample_index, conformance_repro):
    op = opinfo_by_name()[op_name]
    dtype = getattr(torch, dtype_name)
    random_op = is_random(op_name)
    policy = value_policy(op_name, device_profile)
    tol = op_tolerance(op, dtype, device_profile, device.type)
    tally = ErrorTally()
    samples = cpu_samples(op, dtype, only=sample_index)
    conformance_record.update(samples=len(samples), atol=tol.atol, rtol=tol.rtol)
    cpu_raised, first_cpu_exc = 0, None
    for index, sample in samples:
        note_sample(index)  # a crash record names the sample in flight
        where = f"{op_name} {dtype_name} sample {index}"
        dev_inp, dev_args, dev_kwargs = sample_to_device(sample, device, op.name, index=index)
        # untouched copies for the in-place variant: the CPU reference may mutate the sample
        pristine = sample_to_device(sample, "cpu", op.name) if op.inplace_variant is not None else None
        sample_policy = for_sample(policy, op, sample, device_profile)  # dropout_p > 0: the values are random
        semantics = index_checker(op_name, sample_policy, (sample.input, sample.args, sample.kwargs))
        seed = torch.initial_seed()
        expected, cpu_exc = _call(op, sample.input, sample.args, sample.kwargs)
        dev_exc = reseed(seed) if random_op else None  # a device RNG failure is the device call's
        if dev_exc is None:
            actual, dev_exc = _call(op, dev_inp, dev_args, dev_kwargs, device)
        try:
            if cpu_exc is not None:
                cpu_raised += 1
                first_cpu_exc = first_cpu_exc or cpu_exc
                check_same_error(dev_exc, cpu_exc, where)
                continue
            if dev_exc is not None:
                if not isinstance(dev_exc, ConformanceFailure):
                    conformance_repro(op_name, index, dtype_name, sample)  # repro/repro_<id>.py + .pt
                raise annotate(dev_exc, where, index)

            def reference64(sample=sample):
                return up_to_gauge(
                    op,
                    sample,
                    device_profile,
                    op(
                        to_float64(sample.input, dtype),
                        *to_float64(sample.args, dtype),
                        **to_float64(sample.kwargs, dtype),
                    ),
                )

            # outputs defined up to a sign or phase (SVD, eigenvectors) compared as PyTorch compares them
            actual = up_to_gauge(op, sample, device_profile, actual)
            expected = up_to_gauge(op, sample, device_profile, expected)

            for v in compare_outputs(
                actual,
                expected,
                device_type=device.type,
                tolerance=tol,
                check_strides=device_profile.mirrors_cpu,
                values=sample_policy.compare,
                integer_values=sample_policy.integers,
                reference64=reference64 if dtype.is_floating_point else None,
                where=where,
                op=op_name,
            ):
                tally.add(v, index)
            for v in semantics(actual, expected, tol, where) if semantics is not None else ():
                tally.add(
                    v, index
                )  # integer outputs the CPU does not fix (neuron_conformance.conformance.verdict.index_semantics)
            if random_op:
                _check_reproducible(op, sample, device, seed, actual, where)
            _check_inplace(op, pristine, device, device_profile, tol, tally, index, where, sample_policy, dtype)
        except ConformanceFailure as exc:
            exc.sample = index
            conformance_record.update(sample=index, **tally.record_fields())
            conformance_repro(op_name, index, dtype_name, sample)  # repro/repro_<id>.py + .pt
            raise
    conformance_record.update(sample=tally.worst_sample, **tally.record_fields())
    # a record always names what decided: the oracle's strongest rule, else why no value was judged
    conformance_record["rule"] = (
        "seeded-reproducible" if random_op and tally.rule is None else policy.record_rule(tally)
    )
    # every sample raised on the CPU: the device raising the same types is no evidence it works
    require_reference(f"{op_name} {dtype_name}", cpu_raised, len(samples), first_cpu_exc)


def _check_reproducible(op, sample, device, seed, first, where):
    """A seeded random op must give the same result twice on the device."""
    inp, args, kwargs = sample_to_device(sample, device, op.name)
    exc = reseed(seed)
    again, exc = (None, exc) if exc is not None else _call(op, inp, args, kwargs, device)
    if exc is not None:
        raise MetadataFailure(f"{where}: second seeded call raised {type(exc).__name__}: {exc}")
    for i, (a, b) in enumerate(zip(flatten(first), flatten(again))):
        if isinstance(a, torch.Tensor) and a.layout == torch.strided and not torch.equal(a.cpu(), b.cpu()):
            if a.is_floating_point() and torch.isnan(a).any():
                continue
            diff = (a.cpu().double() - b.cpu().double()).abs().nan_to_num(0.0).max() if a.numel() else 0.0
            raise NumericFailure(
                f"{where}, output {i}: the same seed gave different values on the device",
                fields={"rule": "seeded-reproducible", "max_abs": float(diff), "atol": 0.0, "rtol": 0.0},
            )


def _check_inplace(op, pristine, device, profile, tol, tally, index, where, policy, dtype):
    """The in-place variant returns its input tensor and agrees with the CPU in-place result (values as
    ``policy``, a :class:`neuron_conformance.opsuites.suite_helpers.ValuePolicy`, says).

    ``pristine`` is ``(input, args, kwargs)``: exact CPU copies of the sample made before any run.
    """
    fn = op.inplace_variant
    if fn is None or pristine is None or not isinstance(pristine[0], torch.Tensor):
        return
    cpu_inp, cpu_args, cpu_kwargs = pristine
    dev_inp, dev_args, dev_kwargs = triple_to_device(pristine, device, op.name, index=index)
    reference64 = reference64_of(fn, pristine, dtype) if policy.arbitrate else None  # before the CPU mutates it
    expected, cpu_exc = _call(fn, cpu_inp, cpu_args, cpu_kwargs)
    if cpu_exc is not None:
        return  # e.g. the result dtype cannot be cast to the input's: nothing to compare
    actual, dev_exc = _call(fn, dev_inp, dev_args, dev_kwargs)
    w = f"{where} (in-place variant)"
    if dev_exc is not None:
        raise annotate(dev_exc, w, index)
    if actual is not dev_inp:
        raise MetadataFailure(f"{w}: the in-place variant returned a new tensor, not its input")
    if not policy:
        return
    for v in compare_outputs(
        actual,
        expected,
        device_type=device.type,
        tolerance=tol,
        check_strides=profile.mirrors_cpu,
        values=policy.compare,
        integer_values=policy.integers,
        reference64=reference64,
        where=w,
        op=op.name,
    ):
        tally.add(v, index)
