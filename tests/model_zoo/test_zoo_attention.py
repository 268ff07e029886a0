"""The attention-implementation axis of the zoo: which implementations each entry runs, the test ids and CI
subset, the sdpa-vs-eager bound, FlexAttention refused as unsupported, and a causal-only SDPA fault caught."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
emulator = pytest.importorskip("neuron_conformance.emulator")
faults = pytest.importorskip("neuron_conformance.emulator.faults")

from neuron_conformance.model_zoo import attention, checks  # noqa: E402
from neuron_conformance.model_zoo.conftest import model_params  # noqa: E402
from neuron_conformance.model_zoo.registry import REGISTRY, get_spec  # noqa: E402
from tests.faults.zoo_modes import emulator_mode  # noqa: E402

FLASH = "aten::_scaled_dot_product_flash_attention_for_cpu"


@pytest.fixture(scope="module")
def neuron():
    """The emulated device in mirror mode, whatever mode the worker is in: the SDPA fault below sits on the CPU
    flash kernel, which only mirror mode calls (device mode decomposes SDPA)."""
    with emulator_mode("mirror"):
        yield "neuron"


def test_supported_implementations_match_the_transformers_class_flags():
    import transformers  # deferred: optional dependency, imported by importorskip above

    for spec in REGISTRY.values():
        impls = spec.attention_implementations()
        if spec.attn_implementation is None:
            assert impls == (), spec.id
            continue
        cls = getattr(transformers, spec.model_class)
        assert impls[0] == "eager", spec.id
        assert ("sdpa" in impls) == bool(cls._supports_sdpa), spec.id
        assert ("flex_attention" in impls) == bool(cls._supports_flex_attn), spec.id


def test_with_implementation_refuses_what_the_model_lacks():
    assert attention.with_implementation(get_spec("llama"), "sdpa").attn_implementation == "sdpa"
    assert attention.with_implementation(get_spec("llama"), None) is get_spec("llama")
    with pytest.raises(ValueError, match="'gemma2' does not support attn_implementation='sdpa'"):
        attention.with_implementation(get_spec("gemma2"), "sdpa")
    with pytest.raises(ValueError, match="'mamba'.*none \\(no attention\\)"):
        attention.with_implementation(get_spec("mamba"), "sdpa")


def test_test_ids_variants_and_ci_subset():
    params = {p.id: p for p in model_params(object())}  # no --conformance-dtypes: every zoo dtype
    assert params["llama-float32-forward"].values == ("llama", "float32", "forward", "eager")
    assert params["llama-bfloat16-backward-sdpa"].values == ("llama", "bfloat16", "backward", "sdpa")
    assert params["mamba-float16-forward"].values[3] is None
    assert "gemma2-float32-forward-sdpa" not in params and "gemma2-float32-forward-flex_attention" in params
    assert not [i for i in params if i.endswith("backward-flex_attention")]  # no CPU reference exists
    variants = {p.id: m.kwargs["variant"] for p in params.values() for m in p.marks if m.name == "conformance"}
    assert variants["llama-float16-forward-sdpa"] == "forward-sdpa"
    assert variants["llama-float16-forward"] == "forward"
    ci = {i for i, p in params.items() if any(m.name == "model_zoo_ci" for m in p.marks)}
    non_eager = {i for i in ci if i.endswith(("-sdpa", "-flex_attention"))}
    assert non_eager == {
        f"llama-{d}-{c}-sdpa" for d in ("float32", "bfloat16", "float16") for c in ("forward", "backward")
    }


def test_flex_attention_is_refused_as_unsupported_not_run():
    assert attention.device_refusal("flex_attention", "forward", "neuron").startswith("unsupported: ")
    assert attention.device_refusal("flex_attention", "backward", "cpu").startswith("no CPU reference: ")
    assert attention.device_refusal("flex_attention", "forward", "cpu") is None
    assert attention.device_refusal("sdpa", "backward", "neuron") is None


def test_flex_refusal_is_what_torch_raises_on_the_device(neuron):
    from torch.nn.attention.flex_attention import flex_attention  # deferred: this test only

    q = torch.randn(1, 1, 4, 8, device=neuron)
    with pytest.raises(ValueError, match="FlexAttention is only supported on"):
        flex_attention(q, q, q)


def test_versus_eager_bound_is_the_triangle_inequality_through_float64():
    ref = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    cpu_sdpa = (ref + torch.tensor([1e-3, 0.0, 0.0], dtype=torch.float64)).float()
    cpu_eager = (ref - torch.tensor([0.0, 2e-3, 0.0], dtype=torch.float64)).float()
    bound = attention.versus_eager_atol(cpu_sdpa, ref, cpu_eager, ref, torch.float32)
    # k = 2 for float32 (the fp64 rule's factor): 2 * 1e-3 + 2e-3
    assert bound == pytest.approx(2 * 1e-3 + 2e-3, rel=1e-4)
    assert attention.versus_eager_atol(cpu_sdpa, ref, cpu_eager, ref, torch.bfloat16) == pytest.approx(5e-3, rel=1e-4)


def _ignores_causality(query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    """CPU's flash kernel run with neither the causal mask nor ``attn_mask``: right only when both are off."""
    return faults.correct(FLASH, query, key, value, dropout_p, False, attn_mask=None, scale=scale)


def test_sdpa_check_catches_a_kernel_wrong_only_when_causal(neuron):
    with faults.override(FLASH, _ignores_causality, receives="args") as fault:
        eager = checks.check_forward("llama", "float32", neuron, localize=False)
        assert eager.passed and fault.calls == 0  # eager attention never reaches the SDPA kernel
        sdpa = checks.check_forward("llama", "float32", neuron, localize=False, attn="sdpa")
        causal_calls = fault.calls
        unmasked = checks.check_forward("bert", "float32", neuron, localize=False, attn="sdpa")
    assert causal_calls > 0 and not sdpa.passed and sdpa.failure_class == "numeric"
    assert sdpa.message.startswith("logits:")
    assert fault.calls > causal_calls and unmasked.passed  # BERT without padding: no mask, not causal
    assert checks.check_forward("llama", "float32", neuron, localize=False, attn="sdpa").passed  # restored


@pytest.mark.parametrize("check", ["forward", "backward"])
def test_sdpa_checks_pass_and_judge_against_eager(neuron, check):
    result = checks.run_check(check, "llama", "float32", neuron, attn="sdpa")
    assert result.passed, result.full_message()
    eager = checks.run_check(check, "llama", "float32", neuron)
    # every tensor judged twice: against CPU sdpa and against CPU eager (the loss only once)
    assert result.compared == 2 * eager.compared - (check == "backward")
