"""FlexAttention conformance: score mods and block masks of real models, forward and backward, through the
device's compile backend, against SDPA on the CPU.

Every case of :data:`neuron_conformance.opsuites.flex.cases.CASES` (causal, sliding window, ALiBi, tanh
soft-capping, packed documents, prefix LM, GQA, padding with fully masked rows, unmasked cross attention)
x each dtype of float32 / bfloat16 / float16 the run selects (``--conformance-dtypes``) gets two tests:

* ``test_forward``: ``torch.compile(flex_attention, backend=B, fullgraph=True)`` on the device, inputs
  without grad; the output against SDPA's (:mod:`neuron_conformance.opsuites.flex.checks`), and fully
  masked rows exactly 0.
* ``test_backward``: the same with inputs that require grad; ``dq``, ``dk``, ``dv`` for a fixed cotangent
  against SDPA's gradients (CPU FlexAttention has no backward in torch 2.13).

``B`` is ``--conformance-compile-backend``, else the backend registered under the device type (the
emulator's ``neuron``), else ``inductor`` (:func:`neuron_conformance.opsuites.custom_op_checks.compile_backend_for`).
This is how a PrivateUse1 backend runs FlexAttention: torch 2.13's eager FlexAttention refuses any device
outside ``cuda``/``cpu``/``xpu``/``hpu``/``mps``. A refusal (that check, a backend that cannot lower the op)
is class ``unsupported``, not an error and not a pass. The tests need the capability ``compile``.

Records: ``op`` ``flex_attention.<case>`` (``--conformance-ops=flex_attention.causal`` selects one),
``variant`` ``forward`` / ``backward``, ``compile_backend``, and the largest error of the compared tensors
(``rule``, ``max_abs``, ...); ``stage`` names the tensor that failed (``out``, ``dq``, ``dk``, ``dv``).
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.pytest_plugin.options import selected_dtypes
from neuron_conformance.opsuites.custom_op_checks import compile_backend_for
from neuron_conformance.opsuites.flex.cases import CASES
from neuron_conformance.opsuites.flex.checks import (
    DTYPES,
    check_masked_rows,
    compare,
    inputs,
    run_device,
    sdpa_reference,
)

SUITE = "flex_attention"


def pytest_generate_tests(metafunc):
    if "flex_case" not in metafunc.fixturenames:
        return
    variant = metafunc.function.__name__.removeprefix("test_")
    selected = selected_dtypes(metafunc.config)
    params = [
        pytest.param(
            case,
            dt,
            id=f"{case.name}-{dt}",
            marks=pytest.mark.conformance(op=f"flex_attention.{case.name}", dtype=dt, suite=SUITE, variant=variant),
        )
        for case in CASES
        for dt in DTYPES
        if dt in selected
    ]
    metafunc.parametrize(("flex_case", "dtype_name"), params)


def _judge(pairs, conformance_record, where: str) -> None:
    """Compare ``(stage, actual, expected, reference64)`` in order; the record keeps the largest error."""
    worst = None
    for stage, actual, expected, ref64 in pairs:
        conformance_record.update(stage=stage)
        verdict = compare(actual, expected, ref64, f"{where}, {stage}")
        if worst is None or (verdict.max_abs or 0.0) > (worst.max_abs or 0.0):
            worst = verdict
    assert worst is not None, f"{where}: nothing was compared"
    conformance_record.update(stage=None, **worst.record_fields())


def _run(flex_case, dtype_name, device, compile_backend, conformance_record, backward: bool):
    dtype = getattr(torch, dtype_name)
    backend = compile_backend_for(device, compile_backend)
    conformance_record.update(compile_backend=backend)
    q, k, v, grad_out = inputs(flex_case, dtype)
    cot = grad_out if backward else None
    out, grads = run_device(flex_case, device, backend, q, k, v, cot)
    expected, egrads = sdpa_reference(flex_case, q, k, v, cot)
    ref64, rgrads = sdpa_reference(flex_case, *(t.double() for t in (q, k, v)), cot.double() if backward else None)
    where = (
        f"flex_attention {flex_case.name} {dtype_name} ({'backward' if backward else 'forward'}, "
        f"torch.compile backend {backend})"
    )
    if not backward:
        conformance_record.update(stage="out")
        rows = check_masked_rows(flex_case, out, f"{where}, out")
        conformance_record.update(masked_rows=rows)
        _judge([("out", out, expected, ref64)], conformance_record, where)
        return
    _judge(list(zip(("dq", "dk", "dv"), grads, egrads, rgrads)), conformance_record, where)


@pytest.mark.capability("compile")
def test_forward(flex_case, dtype_name, device, compile_backend, conformance_record):
    _run(flex_case, dtype_name, device, compile_backend, conformance_record, backward=False)


@pytest.mark.capability("compile")
def test_backward(flex_case, dtype_name, device, compile_backend, conformance_record):
    if device.type == "cpu":
        pytest.skip("torch 2.13's CPU FlexAttention has no backward (its _validate_device refuses it)")
    _run(flex_case, dtype_name, device, compile_backend, conformance_record, backward=True)
