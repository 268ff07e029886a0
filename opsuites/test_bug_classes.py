"""Bug-class inputs on the device under test against the CPU reference.

Each case of :mod:`neuron_conformance.opsuites.bugclasses` (duplicate indices with accumulation, all ``-inf`` rows, ties,
strided reductions, tile-edge sizes, special values, ...) is one test: its CPU inputs are built, moved to
the device keeping layout and aliasing (:func:`neuron_conformance.conformance.backend.transfer.to_device_exact`), the case's
callable runs on both, and every output is judged with :func:`neuron_conformance.conformance.verdict.compare.compare_outputs`
(device, dtype, shape, strides when the backend mirrors the CPU, values by the oracle's rules). Inputs
that a case mutates are compared too, so an in-place kernel that writes the wrong elements is caught.
Records carry ``bug_class``, ``case`` and ``bug_class_description``; the report counts cases and passes
per class (:mod:`neuron_conformance.reports.bug_classes`). A case whose ``fn`` raises
:class:`neuron_conformance.opsuites.bugclasses.case.Unsupported` (the device lacks pinned memory, ...) is skipped with that
reason; a case with ``host_outputs`` has its outputs judged as CPU tensors.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._pytree import tree_map

from neuron_conformance.conformance.backend.transfer import to_device_exact, to_float64
from neuron_conformance.conformance.pytest_plugin.options import selected_dtypes
from neuron_conformance.conformance.verdict.compare import (
    ErrorTally,
    check_same_error,
    compare_outputs,
    raise_if_suspect,
)
from neuron_conformance.conformance.verdict.failures import NoReference
from neuron_conformance.conformance.verdict.tolerances import tolerance_for
from neuron_conformance.opsuites.bugclasses import all_cases, descriptions
from neuron_conformance.opsuites.bugclasses.case import Unsupported
from neuron_conformance.opsuites.suite_helpers import annotate, call, tensor_leaves

SUITE = "bug_classes"


def pytest_generate_tests(metafunc):
    if "bug_case" not in metafunc.fixturenames:
        return
    selected = set(selected_dtypes(metafunc.config))
    params = []
    for case in all_cases():
        if case.dtype not in selected:
            continue
        marks = [
            pytest.mark.conformance(op=case.op, dtype=case.dtype, variant=case.bug_class, suite=SUITE),
            pytest.mark.xdist_group(f"bug:{case.bug_class}"),
        ]
        if case.capabilities:
            marks.append(pytest.mark.capability(*case.capabilities))
        params.append(pytest.param(case, id=f"{case.case_id}-{case.dtype}", marks=marks))
    metafunc.parametrize("bug_case", params)


def _to_device(value, device, memo):
    return tree_map(lambda x: to_device_exact(x, device, memo) if isinstance(x, torch.Tensor) else x, value)


def test_bug_class(bug_case, device, device_profile, conformance_record):
    case = bug_case
    fn, args, kwargs = case.build()
    dtype = getattr(torch, case.dtype)
    tol = tolerance_for(dtype, mirrors_cpu=device_profile.mirrors_cpu, exact=case.exact, device_type=device.type)
    conformance_record.update(
        bug_class=case.bug_class,
        case=case.name,
        samples=1,
        atol=tol.atol,
        rtol=tol.rtol,
        bug_class_description=descriptions().get(case.bug_class),
    )
    where = f"{case.op} {case.dtype} [{case.case_id}]"
    memo: dict = {}
    dev_args, dev_kwargs = _to_device(args, device, memo), _to_device(kwargs, device, memo)
    cpu_kwargs = dict(kwargs, device=torch.device("cpu")) if case.needs_device else kwargs
    dev_kwargs = dict(dev_kwargs, device=device) if case.needs_device else dev_kwargs
    f64 = None
    if case.fp64 and (dtype.is_floating_point or dtype.is_complex):
        # float64 copies taken before the CPU run mutates the inputs; run only if fp64 arbitration is needed
        f64_args = to_float64(args, dtype, clone_others=True)
        f64_kwargs = to_float64(cpu_kwargs, dtype, clone_others=True)

        def f64():
            out = fn(*f64_args, **f64_kwargs)
            return (out, *tensor_leaves((f64_args, f64_kwargs)))

    expected, cpu_exc = call(fn, *args, **cpu_kwargs)
    actual, dev_exc = call(fn, *dev_args, **dev_kwargs)
    for exc in (cpu_exc, dev_exc):
        if isinstance(exc, Unsupported):
            pytest.skip(f"{where}: {exc}")
    if cpu_exc is not None:
        if not case.expects_error:
            raise NoReference(
                f"{where}: no CPU reference: the CPU raised {type(cpu_exc).__name__}: "
                f"{str(cpu_exc).splitlines()[0] if str(cpu_exc) else ''}; the device was not judged"
            )
        check_same_error(dev_exc, cpu_exc, where)
        return
    if case.expects_error:
        raise AssertionError(f"{where}: the case expects the CPU to raise, but it returned (the case is wrong)")
    if dev_exc is not None:
        raise annotate(dev_exc, where, 0)
    tally = ErrorTally()
    # the outputs, then every input tensor (a mutated input is an output of the case); outputs that the
    # case copies back to the host (host_outputs) are judged as CPU tensors, without fp64 arbitration
    got, want = tensor_leaves((dev_args, dev_kwargs)), tensor_leaves((args, cpu_kwargs))
    if case.host_outputs:
        pairs = [(actual, expected, "cpu", None), (got, want, device.type, None)]
    else:
        pairs = [((actual, *got), (expected, *want), device.type, f64)]
    try:
        for a, e, where_type, ref64 in pairs:
            for v in compare_outputs(
                a,
                e,
                device_type=where_type,
                tolerance=tol,
                check_strides=device_profile.mirrors_cpu,
                reference64=ref64,
                where=where,
            ):
                tally.add(v, 0)
    finally:
        conformance_record.update(**tally.record_fields())
    raise_if_suspect(tally)  # the CPU reference, not the device, was off the float64 computation
