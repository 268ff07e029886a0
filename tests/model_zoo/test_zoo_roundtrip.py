"""The round-trip checks (neuron_conformance.model_zoo.roundtrip) find a changed bit, a tensor on the wrong device, a missing
tensor, and a wrong gradient under checkpointing; and pass on the emulated device."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
emulator = pytest.importorskip("neuron_conformance.emulator")
faults = pytest.importorskip("neuron_conformance.emulator.faults")

from neuron_conformance.model_zoo import roundtrip  # noqa: E402
from neuron_conformance.model_zoo.case import Case  # noqa: E402


@pytest.fixture(scope="module")
def neuron():
    emulator.install()
    return "neuron"


def _mismatch(saved, loaded, device_type="cpu"):
    return roundtrip._state_mismatch(Case.make("bert", "float32"), "torch_save", "load", saved, loaded, device_type)


def test_state_mismatch_finds_a_bit_a_device_and_a_name():
    saved = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([0.5])}
    assert _mismatch(saved, {k: v.clone() for k, v in saved.items()}) is None
    flipped = {"w": torch.tensor([1.0, torch.nextafter(torch.tensor(2.0), torch.tensor(3.0)).item()]), "b": saved["b"]}
    result = _mismatch(saved, flipped)
    assert not result.passed and result.failure_class == "metadata" and "w: loaded values differ" in result.message
    assert "loaded on meta" in _mismatch(saved, {k: v.to("meta") for k, v in saved.items()}).message
    assert "only saved ['b']" in _mismatch(saved, {"w": saved["w"]}).message
    assert "float16" in _mismatch(saved, {"w": saved["w"].half(), "b": saved["b"]}).message


@pytest.mark.parametrize("check", roundtrip.CHECKS)
def test_round_trips_pass_on_the_emulated_device(neuron, check):
    result = roundtrip.CHECK_FUNCTIONS[check]("llama", "float32", neuron)
    assert result.passed, result.full_message()
    if check == "checkpointing":
        assert result.metrics["checkpointing"] is True


def test_checkpointing_check_catches_a_wrong_backward_kernel(neuron):
    with faults.scale_output("aten::silu_backward", rel=1e-2) as fault:
        result = roundtrip.check_checkpointing("llama", "float32", neuron)
    assert fault.calls > 0 and not result.passed and result.message.startswith("grad of ")
