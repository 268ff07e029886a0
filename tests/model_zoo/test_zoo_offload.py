"""The device_map checks (neuron_conformance.model_zoo.offload): the offload map they build, a clean pass on the
emulated device in both modes, the refusals of disk offload and "auto" named where they happen, and a wrong
kernel caught through the CPU-offload path."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
emulator = pytest.importorskip("neuron_conformance.emulator")
faults = pytest.importorskip("neuron_conformance.emulator.faults")

from neuron_conformance.model_zoo import offload  # noqa: E402
from neuron_conformance.model_zoo.case import Case  # noqa: E402

MODES = ("mirror", "device")


@pytest.fixture(params=MODES)
def neuron(request):
    emulator.install()
    before = emulator.get_mode()
    emulator.set_mode(request.param)
    yield "neuron"
    emulator.set_mode(before)


def test_split_map_offloads_the_last_layer_and_covers_every_weight():
    model = Case.make("llama", "float32").model("cpu")
    assert offload.layer_list(model) == ("model.layers", 2)
    assert offload.split_map(model, "neuron", "disk") == {
        "model.embed_tokens": "neuron",
        "model.norm": "neuron",
        "model.rotary_emb": "neuron",
        "lm_head": "neuron",
        "model.layers.0": "neuron",
        "model.layers.1": "disk",
    }
    bert = Case.make("bert", "float32").model("cpu")
    assert offload.split_map(bert, "neuron", "cpu")["bert.encoder.layer.1"] == "cpu"


def test_split_map_refuses_a_model_without_layers_or_with_a_loose_weight():
    with pytest.raises(ValueError, match="Linear has no nn.ModuleList"):
        offload.split_map(torch.nn.Linear(2, 2), "neuron", "cpu")
    loose = torch.nn.Module()
    loose.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
    loose.scale = torch.nn.Parameter(torch.ones(1))
    with pytest.raises(ValueError, match=r"leaves \['scale'\] unmapped"):
        offload.split_map(loose, "neuron", "cpu")


def test_unknown_check_is_named():
    with pytest.raises(ValueError, match="got 'sharded'"):
        offload.check_device_map("llama", "float32", "cpu", "sharded")


@pytest.mark.parametrize("check", ("device_map", "cpu_offload"))
def test_clean_device_passes(neuron, check):
    result = offload.check_device_map("llama", "float32", neuron, check)
    assert result.passed, result.full_message()
    expected = ["model.layers.1"] if check == "cpu_offload" else []
    assert result.metrics["offloaded"] == expected


def test_disk_offload_and_auto_are_refused_where_accelerate_refuses():
    emulator.install()
    with pytest.raises(
        offload.Refused,
        match=r"^unsupported: .*OffloadedWeightsLoader.__getitem__ "
        r"\(accelerate/utils/offload.py\).*device neuron is invalid",
    ):
        offload.check_device_map("llama", "float32", "neuron", "disk_offload")
    with pytest.raises(
        offload.Refused,
        match=r"^unsupported: device_map='auto' placed every weight on \['cpu'\]: "
        r"get_max_memory \(accelerate/utils/modeling.py",
    ):
        offload.check_device_map("bert", "float32", "neuron", "device_map_auto")


@pytest.mark.parametrize("check", ("disk_offload", "device_map_auto"))
def test_refused_checks_run_on_cpu(check):
    """Should run (not refuse) where accelerate serves the device: CPU, the harness's self-check device."""
    result = offload.check_device_map("llama", "float32", "cpu", check)
    assert result.passed, result.full_message()


def test_wrong_kernel_is_caught_through_the_cpu_offload_path(neuron):
    with faults.scale_output("aten::silu", rel=1e-2) as fault:
        result = offload.check_device_map("llama", "float32", neuron, "cpu_offload")
    assert fault.calls > 0
    assert not result.passed and result.failure_class == "numeric", result.full_message()
    assert result.message.startswith("logits with cpu_offload")
