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
from conformance.compare import ErrorTally, compare_outputs
from conformance.failures import ConformanceFailure
from conformance.survival import note_sample
from conformance.tolerances import tolerance_for
from conformance.transfer import to_device_exact
from opsuites import generated_inputs
from opsuites.suite_helpers import annotate, tensor_leaves

SUITE = "generated"
VARIANT = "schema"

UNDEFINED_VALUES = ("empty", "new_empty", "_empty_affine", "_empty_per_channel", "resize", "set_", "unfold_backward")
"""Name fragments of overloads whose result values are unspecified (``empty*`` allocates uninitialised
memory, ``torch.empty`` docs): only metadata is compared."""


CPU_NONDETERMINISTIC_OVERLOADS = {"linalg_lstsq"}
"""Base names of overloads whose CPU kernel is not reproducible call to call (``linalg_lstsq``'s gelsy
driver: :data:`conformance.tolerances.CPU_NONDETERMINISTIC`): judged with the dtype's tolerance, never
exactly, even for a backend that mirrors the CPU."""


def pytest_generate_tests(metafunc):
    if "overload" in metafunc.fixturenames:
        names = aten_audit.generated_targets()
        metafunc.parametrize("overload", [
            pytest.param(n, id=n, marks=[pytest.mark.xdist_group(n),
                                         pytest.mark.conformance(op=n, variant=VARIANT, suite=SUITE)])
            for n in names])


def _written(op) -> list[str]:
    """Names of the arguments ``op``'s schema marks as written (``Tensor(a!)``)."""
    return [a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write]


def _to_device(value, device):
    """``value`` with its tensors moved to ``device`` (same strides and offset), each on its own storage:
    the generated tensors share none, and empty ``out=`` tensors (all at data pointer 0) must not be
    merged into one by :func:`conformance.transfer.to_device_exact`'s storage memo."""
    if isinstance(value, torch.Tensor):
        return to_device_exact(value, device, {})
    if isinstance(value, list):
        return [_to_device(v, device) for v in value]
    if isinstance(value, torch.device):
        return torch.device(device)
    return value


def _bound(op, args, kwargs) -> dict:
    """Argument name -> value of one call (positional arguments by schema order)."""
    names = [a.name for a in op._schema.arguments]
    return {**dict(zip(names, args)), **kwargs}


def test_generated(overload, device, device_profile, conformance_record):
    op = aten_audit.overload_of(overload)
    found = generated_inputs.first_accepted(op)
    if found is None:
        pytest.skip(f"{overload}: the CPU kernel accepts none of the schema-derived inputs")
    shape, dtype, args, kwargs, _ = found
    note_sample(0)
    where = f"{overload} {tuple(shape)} {str(dtype).removeprefix('torch.')}"
    dev_args = [_to_device(a, device) for a in args]
    dev_kwargs = {k: _to_device(v, device) for k, v in kwargs.items()}
    if any(a.name == "device" for a in op._schema.arguments) and "device" not in dev_kwargs:
        dev_kwargs["device"] = torch.device(device)  # a factory creates its result on the device under test
    expected = op(*args, **kwargs)
    try:
        actual = op(*dev_args, **dev_kwargs)
    except ConformanceFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - the CPU kernel accepted these inputs: the device must too
        raise annotate(exc, where, 0) from None
    values = not any(part in overload for part in UNDEFINED_VALUES)
    tally = ErrorTally()
    out_dtype = next((t.dtype for t in tensor_leaves(expected)), dtype)
    reproducible = aten_audit.base_name(overload) not in CPU_NONDETERMINISTIC_OVERLOADS
    tol = tolerance_for(out_dtype, mirrors_cpu=device_profile.mirrors_cpu and reproducible)
    conformance_record.update(samples=1, dtype=str(dtype).removeprefix("torch."), atol=tol.atol, rtol=tol.rtol)
    written = _written(op)
    cpu_bound, dev_bound = _bound(op, args, kwargs), _bound(op, dev_args, dev_kwargs)
    try:
        for v in compare_outputs(actual, expected, device_type=device.type, tolerance=tol,
                                 check_strides=device_profile.mirrors_cpu, values=values, where=where):
            tally.add(v, 0)
        for name in written:
            for v in compare_outputs(dev_bound.get(name), cpu_bound.get(name), device_type=device.type,
                                     tolerance=tol, check_strides=device_profile.mirrors_cpu, values=values,
                                     where=f"{where}, written argument {name!r}"):
                tally.add(v, 0)
    except ConformanceFailure as exc:
        exc.sample = 0
        conformance_record.update(sample=0, **tally.record_fields())
        raise
    conformance_record.update(sample=0, **tally.record_fields())
    if conformance_record.get("rule") is None:  # no verdict: say why the values went unjudged
        conformance_record["rule"] = "metadata-only" if values else "values-undefined"
