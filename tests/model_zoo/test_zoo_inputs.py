"""Sample inputs of the model zoo: seeded, in range, and cast without changing integer tensors."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from neuron_conformance.model_zoo import inputs as zoo_inputs  # noqa: E402
from neuron_conformance.model_zoo.registry import get_spec  # noqa: E402


def test_text_inputs_are_seeded_and_avoid_special_ids():
    spec = get_spec("llama")
    cfg = spec.make_config()
    a = zoo_inputs.make_inputs(spec, cfg, seed=1)
    b = zoo_inputs.make_inputs(spec, cfg, seed=1)
    c = zoo_inputs.make_inputs(spec, cfg, seed=2)
    assert torch.equal(a["input_ids"], b["input_ids"]) and not torch.equal(a["input_ids"], c["input_ids"])
    assert a["input_ids"].shape == (zoo_inputs.BATCH, zoo_inputs.SEQ)
    assert int(a["input_ids"].min()) >= 5 and int(a["input_ids"].max()) < cfg.vocab_size - 5


def test_qwen2_vl_inputs_carry_grid_and_token_types():
    spec = get_spec("qwen2_vl")
    cfg = spec.make_config()
    inp = zoo_inputs.make_inputs(spec, cfg)
    n_img = int((inp["input_ids"] == cfg.image_token_id).sum(dim=1)[0])
    assert torch.equal(inp["mm_token_type_ids"].sum(dim=1), torch.full((zoo_inputs.BATCH,), n_img, dtype=torch.int64))
    assert inp["image_grid_thw"].tolist() == [[1, 4, 4]] * zoo_inputs.BATCH


def test_cast_inputs_rounds_through_dtype():
    raw = {"x": torch.tensor([1.0 + 2**-10]), "ids": torch.tensor([3])}
    out = zoo_inputs.cast_inputs(raw, dtype=torch.float64, via=torch.bfloat16)
    assert out["x"].dtype == torch.float64 and out["x"].item() == 1.0  # rounded by bfloat16 first
    assert out["ids"].dtype == torch.int64 and out["ids"].item() == 3


def test_unknown_input_kind_is_named():
    spec = get_spec("llama")
    bad = type(spec)("x", "decoder", "LlamaConfig", "LlamaForCausalLM", {}, inputs="smell")
    with pytest.raises(ValueError, match="inputs='smell'"):
        zoo_inputs.make_inputs(bad, spec.make_config())
    with pytest.raises(ValueError, match="batch and seq"):
        zoo_inputs.make_inputs(spec, spec.make_config(), batch=0)
