"""The model zoo registry: every entry builds from its config and runs forward and backward on CPU."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from neuron_conformance.model_zoo import inputs as zoo_inputs  # noqa: E402
from neuron_conformance.model_zoo.measure import primary_output  # noqa: E402
from neuron_conformance.model_zoo.registry import (
    CHECKS,
    FAMILIES,
    NO_COMPILE,
    REGISTRY,
    ModelSpec,
    build_model,
    get_spec,
    model_ids,
)  # noqa: E402

#: Architectures the issue requires, by transformers model type.
REQUIRED = {
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3_text",
    "gpt2",
    "phi",
    "phi3",
    "gpt_neox",
    "falcon",
    "bloom",
    "starcoder2",
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "olmoe",
    "deepseek_v3",
    "gpt_oss",
    "mamba",
    "mamba2",
    "falcon_mamba",
    "jamba",
    "recurrent_gemma",
    "qwen3_next",
    "bert",
    "roberta",
    "deberta_v2",
    "modernbert",
    "distilbert",
    "t5",
    "umt5",
    "bart",
    "whisper",
    "vit",
    "convnext",
    "dinov2",
    "swin",
    "resnet",
    "clip",
    "siglip",
    "siglip2_vision",
    "llava",
    "qwen2_vl",
    "paligemma",
    "idefics3",
    "wav2vec2",
}


def test_registry_covers_required_architectures():
    assert len(REGISTRY) >= 40
    missing = REQUIRED - set(REGISTRY)
    assert not missing, f"registry lacks {sorted(missing)}"
    assert {spec.family for spec in REGISTRY.values()} == set(FAMILIES)


def test_model_ids_filters():
    assert model_ids() == list(REGISTRY)
    moe = model_ids(family="moe")
    assert "mixtral" in moe and "llama" not in moe
    ci = model_ids(ci_only=True)
    assert 2 <= len(ci) < len(REGISTRY) and all(REGISTRY[i].ci for i in ci)
    with pytest.raises(ValueError, match="family='nope'"):
        model_ids(family="nope")


def test_get_spec_unknown_id_lists_known_ids():
    with pytest.raises(KeyError, match="not in the model zoo.*llama"):
        get_spec("no-such-model")


def test_bad_family_is_rejected():
    with pytest.raises(ValueError, match="family='cnn'"):
        ModelSpec("x", "cnn", "ViTConfig", "ViTModel", {})


def test_checks_follow_flags():
    assert get_spec("bert").checks() == ("forward", "backward", "train", "compile", "compile_train")
    assert "router" in get_spec("mixtral").checks() and "generate" in get_spec("mixtral").checks()
    assert {"compile", "compile_train"} <= set(get_spec("llama").checks())
    for model_id, why in NO_COMPILE.items():
        assert "compile" not in get_spec(model_id).checks() and why, model_id
    assert set(get_spec("jamba").checks()) <= set(CHECKS)


def test_build_model_rejects_integer_dtype():
    with pytest.raises(TypeError, match="floating"):
        build_model("llama", dtype=torch.int32)


def test_build_is_deterministic():
    a = build_model("llama", seed=3)
    b = build_model("llama", seed=3)
    c = build_model("llama", seed=4)
    wa, wb, wc = (m.model.layers[0].mlp.down_proj.weight for m in (a, b, c))
    assert torch.equal(wa, wb)
    assert not torch.equal(wa, wc)


@pytest.mark.parametrize("model_id", list(REGISTRY))
def test_entry_builds_and_runs_forward_backward(model_id):
    spec = get_spec(model_id)
    model = build_model(spec)
    assert not model.training
    if spec.attn_implementation is not None:
        assert model.config._attn_implementation == spec.attn_implementation
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params < 400_000, f"{model_id} is not tiny: {n_params} parameters"
    inputs = zoo_inputs.cast_inputs(zoo_inputs.make_inputs(spec, model.config), dtype=torch.float32)
    out = primary_output(spec, model(**inputs))
    assert out.dtype == torch.float32 and out.numel() > 0
    assert torch.isfinite(out).all()
    out.square().mean().backward()
    with_grad = [n for n, p in model.named_parameters() if p.grad is not None]
    assert len(with_grad) >= 0.8 * len(list(model.parameters()))
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
