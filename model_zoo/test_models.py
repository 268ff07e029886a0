"""Model zoo on the device under test: every registry entry x dtype x check, against CPU.

One test per ``(model, dtype, check)``; see :mod:`model_zoo.checks` for what each check compares
and :mod:`model_zoo.registry` for the models. A failing check names the first divergent submodule.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from model_zoo.checks import run_check  # noqa: E402


def test_model(model_id, dtype_name, check, device, conformance_record, compile_backend):
    conformance_record.update(suite="model_zoo", kind="model", op=model_id, variant=check, dtype=dtype_name)
    extra = {"backend": compile_backend} if check == "compile" and compile_backend else {}
    result = run_check(check, model_id, dtype_name, device, **extra)
    conformance_record.update(**result.record_fields(), metrics=result.metrics)
    if result.divergence is not None:
        conformance_record.update(divergent_module=result.divergence.module)
    result.raise_if_failed()
