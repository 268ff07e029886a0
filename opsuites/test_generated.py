"""Aten overloads with schema-derived inputs on the device under test against their CPU kernel.

One test per aten overload that has a CPU kernel (:func:`conformance.aten_audit.cpu_kernel_overloads`)
and no exclusion rule (:func:`conformance.aten_audit.exclusion`). The inputs come from the overload's
schema (:mod:`opsuites.generated_inputs`): the first candidate the CPU kernel accepts is run through
``torch.ops.aten.<op>.<overload>`` on the CPU and, moved to the device with the same strides, on the
device (factory overloads get ``device=`` the device under test). Checked: every output (device, dtype,
shape, strides when the backend mirrors the CPU, values with the tolerance policy) and every argument the
schema marks as written (``Tensor(a!)``: in-place ``self``, ``out=``), after the call. When the CPU kernel
accepts no candidate the test is skipped with that reason: the overload stays without a disposition
(``unknown``) in the aten audit.

Records: suite ``generated``, op = the dispatcher name (``aten::glu_jvp``), variant ``schema``.
"""

from __future__ import annotations

import pytest
import torch

from conformance import aten_audit
from conformance.compare import ErrorTally
from conformance.failures import ConformanceFailure
from conformance.survival import note_sample
from opsuites import generated_inputs
from opsuites.suite_helpers import aten_call_tolerance, aten_values_defined, annotate, fold_aten_call, schema_to_device

SUITE = "generated"
VARIANT = "schema"

def pytest_generate_tests(metafunc):
    if "overload" in metafunc.fixturenames:
        names = aten_audit.generated_targets()
        metafunc.parametrize("overload", [
            pytest.param(n, id=n, marks=[pytest.mark.xdist_group(n),
                                         pytest.mark.conformance(op=n, variant=VARIANT, suite=SUITE)])
            for n in names])


def test_generated(overload, device, device_profile, conformance_record):
    op = aten_audit.overload_of(overload)
    found = generated_inputs.first_accepted(op)
    if found is None:
        pytest.skip(f"{overload}: the CPU kernel accepts none of the schema-derived inputs")
    shape, dtype, args, kwargs, _ = found
    note_sample(0)
    where = f"{overload} {tuple(shape)} {str(dtype).removeprefix('torch.')}"
    dev_args = [schema_to_device(a, device) for a in args]
    dev_kwargs = {k: schema_to_device(v, device) for k, v in kwargs.items()}
    if any(a.name == "device" for a in op._schema.arguments) and "device" not in dev_kwargs:
        dev_kwargs["device"] = torch.device(device)  # a factory creates its result on the device under test
    expected = op(*args, **kwargs)
    try:
        actual = op(*dev_args, **dev_kwargs)
    except ConformanceFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - the CPU kernel accepted these inputs: the device must too
        raise annotate(exc, where, 0) from None
    values = aten_values_defined(overload)
    tally = ErrorTally()
    tol = aten_call_tolerance(overload, expected, dtype, device_profile)
    conformance_record.update(samples=1, dtype=str(dtype).removeprefix("torch."), atol=tol.atol, rtol=tol.rtol)
    try:
        fold_aten_call(tally, 0, op, (args, kwargs), (dev_args, dev_kwargs), expected, actual, device=device,
                       profile=device_profile, tol=tol, values=values, where=where)
    finally:
        conformance_record.update(sample=0, **tally.record_fields())
    if conformance_record.get("rule") is None:  # no verdict: say why the values went unjudged
        conformance_record["rule"] = "metadata-only" if values else "values-undefined"
