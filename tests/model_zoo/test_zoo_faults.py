"""A deliberately broken kernel on the emulated device makes the Llama checks fail, and the localizer
names the first module that uses it.

``neuron_conformance.emulator.faults.scale_output("aten::silu", rel=1e-2)`` replaces the PrivateUse1 kernel of
``aten::silu`` with one whose output is off by a relative 1e-2; leaving the ``with`` block restores the
emulator's own kernel (the test checks that the model passes again afterwards).
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
emulator = pytest.importorskip("neuron_conformance.emulator")
faults = pytest.importorskip("neuron_conformance.emulator.faults")

from neuron_conformance.conformance.verdict.failures import NumericFailure  # noqa: E402
from neuron_conformance.model_zoo import checks  # noqa: E402

FIRST_SILU_MODULE = "model.layers.0.mlp.act_fn"


@pytest.fixture(scope="module")
def neuron():
    emulator.install()
    return "neuron"


@pytest.mark.parametrize("check", ["forward", "backward", "train"])
def test_broken_silu_fails_llama_and_is_localized(neuron, check):
    with faults.scale_output("aten::silu", rel=1e-2) as fault:
        result = checks.run_check(check, "llama", "float32", neuron)
    assert fault.calls > 0
    assert not result.passed and result.failure_class == "numeric"
    assert result.divergence is not None
    assert result.divergence.module == FIRST_SILU_MODULE
    assert result.divergence.module_class == "SiLUActivation"
    assert abs(result.divergence.verdict.max_rel - 1e-2) < 2e-3
    with pytest.raises(NumericFailure, match=FIRST_SILU_MODULE):
        result.raise_if_failed()


def test_fault_is_restored(neuron):
    with faults.scale_output("aten::silu", rel=1e-2):
        assert not checks.check_forward("llama", "float32", neuron, localize=False).passed
    assert checks.check_forward("llama", "float32", neuron).passed


def test_broken_silu_backward_names_first_gradient_in_backward_order(neuron):
    with faults.scale_output("aten::silu_backward", rel=1e-2) as fault:
        result = checks.run_check("backward", "llama", "float32", neuron)
    assert fault.calls > 0
    assert not result.passed and result.failure_class == "numeric"
    # the forward pass is untouched, so the localizer finds no forward divergence ...
    assert result.divergence is None and result.metrics["localizer"] == "no-divergence"
    # ... and the message names the gradient autograd produces first that is wrong: the last layer's gate
    assert result.message.startswith("grad of model.layers.1.mlp.gate_proj.weight:")
    assert "every submodule's forward output is within tolerance" in result.full_message()
