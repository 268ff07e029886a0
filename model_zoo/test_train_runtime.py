"""The training runtime on the device under test, against CPU: optimizers (loop, foreach, fused), the raw
fused-optimizer and AMP kernels, GradScaler, gradient clipping and accumulation, LR schedulers, module
hooks, a checkpoint round trip and a pinned-memory DataLoader (:mod:`neuron_conformance.model_zoo.runtime_checks`).

One test per ``(check, dtype)``, id ``train_runtime-<check>-<dtype>``; records carry ``op="train_runtime"``
and ``variant=<check>``. ``*-fused`` optimizers are skipped where torch has no fused kernels for the
device type (and ``dataloader-pin`` on CPU); ``dataloader-pin`` needs the ``pinned_memory`` capability (``not-claimed`` otherwise).
"""

from __future__ import annotations

import pytest

from neuron_conformance.model_zoo.conftest import zoo_dtypes
from neuron_conformance.model_zoo.runtime_case import MODEL_ID
from neuron_conformance.model_zoo.runtime_checks import catalogue, run_runtime_check


def _params():
    params = []
    for check in catalogue():
        for dtype in check.dtypes:
            marks = [
                pytest.mark.xdist_group(MODEL_ID),
                pytest.mark.conformance(op=MODEL_ID, dtype=dtype, variant=check.name, suite="model_zoo", kind="model"),
            ]
            if check.ci:
                marks.append(pytest.mark.model_zoo_ci)
            if check.capability:
                marks.append(pytest.mark.capability(check.capability))
            params.append(pytest.param(check.name, dtype, marks=marks, id=f"{MODEL_ID}-{check.name}-{dtype}"))
    return params


@pytest.mark.parametrize(("runtime_check", "dtype_name"), _params())
def test_train_runtime(runtime_check, dtype_name, device, conformance_record, request):
    if dtype_name not in zoo_dtypes(request.config):
        pytest.skip(f"{dtype_name} not selected with --conformance-dtypes")
    conformance_record.update(suite="model_zoo", kind="model", op=MODEL_ID, variant=runtime_check, dtype=dtype_name)
    result = run_runtime_check(runtime_check, dtype_name, device)
    if result is None:
        pytest.skip(
            f"unsupported on device type {device.type!r}: fused optimizers need torch's fused-kernel "
            f"device list, pinned memory an accelerator"
        )
    conformance_record.update(**result.record_fields(), metrics=result.metrics)
    result.raise_if_failed()
