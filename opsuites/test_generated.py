"""Aten overloads with schema-derived inputs on the device under test against their CPU kernel.

One test per aten overload that has a CPU kernel (:func:`neuron_conformance.conformance.results.aten_audit.cpu_kernel_overloads`),
no exclusion rule (:func:`neuron_conformance.conformance.results.aten_audit.exclusion`) and is not random
(:func:`neuron_conformance.conformance.results.aten_audit.is_random`: ``opsuites/test_random_ops.py`` judges those by distribution
and reproducibility, since their values equal the CPU kernel's only on a backend sharing its generator). The inputs come from the overload's
schema (:mod:`neuron_conformance.opsuites.generated_inputs`): the first candidate the CPU kernel accepts is run through
``torch.ops.aten.<op>.<overload>`` on the CPU and, moved to the device with the same strides, on the
device (factory overloads get ``device=`` the device under test). Checked: every output (device, dtype,
shape, strides when the backend mirrors the CPU, values with the tolerance policy) and every argument the
schema marks as written (``Tensor(a!)``: in-place ``self``, ``out=``), after the call. When the CPU kernel
accepts no candidate the test is skipped with that reason: the overload stays without a disposition
(``unknown``) in the aten audit. A private overload (``aten::_...``) whose device kernel refuses the
schema-built inputs with an argument error where the CPU kernel accepted them is ``no-reference``
(:func:`is_private`): a crash, a wrong value or a missing kernel is still a failure.

Records: suite ``generated``, op = the dispatcher name (``aten::glu_jvp``), variant ``schema``.
"""

from __future__ import annotations

import pytest

from neuron_conformance.conformance.results import aten_audit
from neuron_conformance.conformance.survival.crash_files import note_sample
from neuron_conformance.conformance.verdict.compare import raise_if_suspect
from neuron_conformance.conformance.verdict.failures import ConformanceFailure, NoReference
from neuron_conformance.opsuites import generated_inputs
from neuron_conformance.opsuites.aten_calls import aten_values_defined, check_aten_call

SUITE = "generated"
VARIANT = "schema"

ARGUMENT_ERRORS = (RuntimeError, ValueError, IndexError, TypeError)
"""What a kernel raises when it validates its arguments (``NotImplementedError``, a missing kernel, is not one)."""


def is_private(overload: str) -> bool:
    """True for an internal aten overload (``aten::_softmax_backward_data``): its name starts with ``_``. Its
    schema says which types it takes, not which values it accepts: the inputs built from the schema may be
    illegal (a mask of the wrong type, a 4-D tensor where a 1-D one is expected), and a device that refuses
    them where the CPU kernel did not check is not wrong."""
    return overload.removeprefix("aten::").startswith("_")


def pytest_generate_tests(metafunc):
    if "overload" in metafunc.fixturenames:
        names = aten_audit.generated_targets()
        metafunc.parametrize(
            "overload",
            [
                pytest.param(
                    n,
                    id=n,
                    marks=[pytest.mark.xdist_group(n), pytest.mark.conformance(op=n, variant=VARIANT, suite=SUITE)],
                )
                for n in names
            ],
        )


def test_generated(overload, device, device_profile, conformance_record):
    op = aten_audit.overload_of(overload)
    found = generated_inputs.first_accepted(op)
    if found is None:
        pytest.skip(f"{overload}: the CPU kernel accepts none of the schema-derived inputs")
    shape, dtype, args, kwargs, _ = found
    note_sample(0)
    where = f"{overload} {tuple(shape)} {str(dtype).removeprefix('torch.')}"
    values = aten_values_defined(overload)
    conformance_record.update(samples=1, dtype=str(dtype).removeprefix("torch."))
    try:
        tally = check_aten_call(
            op,
            args,
            kwargs,
            device=device,
            profile=device_profile,
            record=conformance_record,
            where=where,
            dtype=dtype,
            values=values,
        )
    except ARGUMENT_ERRORS as exc:
        if not is_private(overload) or isinstance(exc, ConformanceFailure):
            raise
        raise NoReference(
            f"{where}: the device refused inputs built from the schema of a private overload ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); the CPU kernel's acceptance is no contract for "
            "an internal op, so it is no reference"
        ) from None
    conformance_record.update(sample=0, **tally.record_fields())
    if conformance_record.get("rule") is None:  # no verdict: say why the values went unjudged
        conformance_record["rule"] = "metadata-only" if values else "values-undefined"
    raise_if_suspect(tally)  # the CPU reference, not the device, was off the float64 computation
