"""Model zoo on the device under test: every registry entry x dtype x check, against CPU.

One test per ``(model, dtype, check, attention implementation)`` (:mod:`neuron_conformance.model_zoo.attention`; eager for
every check, the model's other implementations for ``forward`` and ``backward``); see :mod:`neuron_conformance.model_zoo.checks` for what each check compares
and :mod:`neuron_conformance.model_zoo.registry` for the models. A failing check names the first divergent submodule.
The compile checks set ``torch.compile``'s default backend for their run; each test asserts it is restored, so
no test of the same worker inherits it.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from neuron_conformance.conformance.pytest_plugin import torch_floor  # noqa: E402
from neuron_conformance.model_zoo import attention  # noqa: E402
from neuron_conformance.model_zoo.checks import run_check  # noqa: E402
from neuron_conformance.model_zoo.compile_path import default_compile_backend  # noqa: E402
from neuron_conformance.opsuites.compile.selection import toolchain_problem  # noqa: E402


def _default_backend():
    """``torch.compile``'s default backend, or None on a torch without one (before
    ``torch.compiler.get_default_backend``: :data:`~neuron_conformance.conformance.pytest_plugin.torch_floor.DEFAULT_BACKEND`)."""
    get = getattr(torch.compiler, "get_default_backend", None)
    return get() if get is not None else None


def test_model(model_id, dtype_name, check, attn_implementation, device, conformance_record, compile_backend):
    impl = attn_implementation or attention.DEFAULT
    variant = attention.variant(check, impl)
    conformance_record.update(suite="model_zoo", kind="model", op=model_id, variant=variant, dtype=dtype_name)
    refusal = attention.device_refusal(impl, check, device)
    if refusal is not None:
        conformance_record.update(metrics={"attn_implementation": impl, "refused": refusal})
        pytest.skip(refusal)
    compiles = check in ("compile", "compile_train")
    if compiles:  # inductor on the CPU needs a C++ compiler: without one, a skip with the reason
        problem = toolchain_problem(
            compile_backend or default_compile_backend(torch.device(device).type), torch.device(device)
        )
        if problem:
            pytest.skip(problem)
        too_old = torch_floor.skip_reason(torch_floor.DEFAULT_BACKEND)
        if too_old:  # the compile checks compile the way users do: set_default_backend, then model.compile()
            pytest.skip(f"this compile check {too_old}")
    extra = {"backend": compile_backend} if compiles and compile_backend else {}
    if impl != attention.DEFAULT:
        extra["attn"] = impl
    default_before = _default_backend()
    result = run_check(check, model_id, dtype_name, device, **extra)
    # the compile checks set torch.compile's default backend: it must be back before the next test runs
    assert _default_backend() == default_before, (
        f"{check} left torch.compile's default backend at {_default_backend()!r} (was {default_before!r})"
    )
    metrics = dict(result.metrics, attn_implementation=attn_implementation)
    conformance_record.update(**result.record_fields(), metrics=metrics)
    conformance_record.update(variant=variant)
    if result.divergence is not None:
        conformance_record.update(divergent_module=result.divergence.module)
    if result.left_out is not None:
        pytest.skip(f"{result.left_out}: {result.metrics.get('cpu_fails_too', '')}")
    result.raise_if_failed()
