"""Model checks on CPU as the device: results, records, caching, argument errors, generation rules."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from neuron_conformance.conformance.verdict.failures import MetadataFailure, NumericFailure  # noqa: E402
from neuron_conformance.model_zoo import case, checks, generation, results  # noqa: E402
from neuron_conformance.model_zoo.registry import build_model  # noqa: E402


def test_forward_on_cpu_matches_itself_and_fills_record():
    result = checks.check_forward("llama", "float32", "cpu")
    assert result.passed and result.verdict.max_abs == 0.0
    assert result.metrics["top1_agree"] == 1.0 and result.metrics["topk_overlap"] == 1.0
    rec = result.record_fields()
    assert rec["suite"] == "model_zoo" and rec["kind"] == "model"
    assert (rec["op"], rec["variant"], rec["dtype"]) == ("llama", "forward", "float32")
    assert rec["rule"] == "tolerance" and rec["samples"] == 1
    result.raise_if_failed()  # passing results do not raise


def test_backward_and_router_on_cpu(monkeypatch):
    calls = []
    real = checks.measure_backward  # patched where check_backward looks it up
    monkeypatch.setattr(checks, "measure_backward", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    case.clear_cache()
    first = checks.check_backward("mixtral", "bfloat16", "cpu")
    second = checks.check_backward("mixtral", "bfloat16", "cpu")
    assert first.passed and second.passed
    assert first.compared == len(list(build_model("mixtral").parameters())) + 1  # every gradient and the loss
    # CPU and fp64 references are computed once, the device run every time
    assert calls.count(True) == 1 and calls.count(False) == 3
    router = checks.check_router("mixtral", "bfloat16", "cpu")
    assert router.passed and router.metrics["routers"] == 2 and router.metrics["router_agree"] == 1.0


def test_failed_result_raises_its_failure_class_with_divergence():
    res = results.CheckResult("llama", "forward", torch.float32, False, None, "numeric", "logits differ")
    with pytest.raises(NumericFailure, match=r"llama forward \[float32\]: logits differ"):
        res.raise_if_failed()
    res = results.CheckResult("llama", "backward", torch.float32, False, None, "metadata", "grad set")
    with pytest.raises(MetadataFailure):
        res.raise_if_failed()


def test_parameter_set_mismatch_names_untied_parameter():
    gpt2 = case.Case.make("gpt2", "float32")
    expected = {"transformer.wte.weight": torch.zeros(1)}
    actual = {"transformer.wte.weight": torch.zeros(1), "lm_head.weight": torch.zeros(1)}
    res = checks._parameter_set_mismatch(gpt2, "train", actual, expected)
    assert res is not None and not res.passed and res.failure_class == "metadata"
    assert "lm_head.weight" in res.message and "untied" in res.message
    assert checks._parameter_set_mismatch(gpt2, "train", expected, expected) is None


def test_run_check_validates_names():
    with pytest.raises(ValueError, match="unknown model check 'sideways'"):
        checks.run_check("sideways", "llama", "float32", "cpu")
    with pytest.raises(ValueError, match="'router' does not apply to model 'llama'"):
        checks.run_check("router", "llama", "float32", "cpu")
    with pytest.raises(ValueError, match="float64"):
        checks.check_forward("llama", "float64", "cpu")


def test_generation_exact_in_fp32_and_cache_paths_agree_on_cpu():
    prompt = torch.randint(5, 100, (2, 6), generator=torch.Generator().manual_seed(0))
    result = generation.compare_generation(
        "llama", torch.float32, lambda d: build_model("llama").to(d), prompt, "cpu", new_tokens=6
    )
    assert result.passed and result.metrics["agreeing_rows"] == 2 and result.metrics["cache_agreeing_rows"] == 2
    assert result.metrics["rule"] == "greedy-exact"


def test_generation_with_different_weights_fails_and_says_where():
    prompt = torch.randint(5, 100, (2, 6), generator=torch.Generator().manual_seed(0))

    def build(device):  # "cpu" is the reference; "cpu:0" plays a device whose weights differ
        return build_model("llama", seed=0 if device == "cpu" else 1).to(device)

    result = generation.compare_generation("llama", torch.float32, build, prompt, "cpu:0", new_tokens=6)
    assert not result.passed and result.failure_class == "numeric"
    assert "greedy tokens differ from CPU: row" in result.message


def test_default_compile_backend():
    assert checks.default_compile_backend("cpu") == "inductor"
    assert checks.default_compile_backend("some_privateuse1_device") == "aot_eager"


def test_compile_check_fails_when_nothing_was_compiled():
    import torch._dynamo  # deferred: start-up cost (torch imports torch._dynamo lazily)

    # config.patch, not monkeypatch: it restores by assignment, in the same context. Deleting a config entry
    # (monkeypatch's undo of an attribute it recorded no value for, mock.patch's exit) hides it for the rest of
    # the process: "torch._dynamo.config.disable does not exist" in every later torch.compile of the worker
    before = torch._dynamo.config.disable
    with torch._dynamo.config.patch(disable=True):
        result = checks.check_compile("llama", "float32", "cpu", backend="eager")
    assert torch._dynamo.config.disable == before
    assert not result.passed and result.failure_class == "error" and result.fields["graphs"] == 0
    assert "received no graph" in result.message


def test_compile_check_fails_when_the_default_backend_is_not_the_one_used(monkeypatch):
    """A model compiled with another backend than the default one set for it: the default's count stays 0."""
    monkeypatch.setattr(
        "neuron_conformance.model_zoo.compile_checks.compile_module", lambda model: model.compile(backend="eager")
    )
    before = torch.compiler.get_default_backend()
    result = checks.check_compile("bert", "float32", "cpu", backend="aot_eager")
    assert not result.passed and "the default backend 'aot_eager' received no graph" in result.message
    assert torch.compiler.get_default_backend() == before


def test_inductor_as_the_default_is_counted_too():
    """torch.compile builds its own wrapper for the name "inductor", past the registry: still counted."""
    from neuron_conformance.model_zoo.compile_path import default_backend
    from neuron_conformance.opsuites.compile.selection import toolchain_problem

    problem = toolchain_problem("inductor", torch.device("cpu"))
    if problem:
        pytest.skip(problem)
    before = torch.compiler.get_default_backend()
    with default_backend("inductor") as capture:
        out = torch.compile(lambda x: x * 2 + 1)(torch.arange(4.0))
    assert capture.graphs == 1 and torch.equal(out, torch.arange(4.0) * 2 + 1)
    assert torch.compiler.get_default_backend() == before


def test_default_backend_and_registry_entry_are_restored_when_compiling_raises():
    from torch._dynamo.backends.registry import _COMPILER_FNS, lookup_backend  # deferred: ~1 s import

    from neuron_conformance.model_zoo.compile_path import default_backend

    before, entry = torch.compiler.get_default_backend(), lookup_backend("aot_eager")

    def raising(gm, example_inputs):
        raise RuntimeError("no lowering")

    result = checks.check_compile("bert", "float32", "cpu", backend=raising)
    assert not result.passed and result.failure_class == "compile-error", result.message
    assert "default backend 'raising'" in result.message and torch.compiler.get_default_backend() == before
    with pytest.raises(ValueError, match="inside"):
        with default_backend("aot_eager"):
            assert _COMPILER_FNS["aot_eager"] is not entry and torch.compiler.get_default_backend() == "aot_eager"
            raise ValueError("inside")
    assert _COMPILER_FNS["aot_eager"] is entry and torch.compiler.get_default_backend() == before


def test_reference_cache_keeps_only_the_most_recent_models():
    case.clear_cache()
    computed = []

    def compute(c, device, fp64):
        computed.append((c.spec.id, fp64))
        return (c.spec.id, fp64)

    ids = ["llama", "bert", "gpt2"]
    for model_id in ids:
        assert case.reference(case.Case.make(model_id, "float32"), "t", compute) == (
            (model_id, False),
            (model_id, True),
        )
    assert {k[0] for k in case._REFERENCES} == set(ids[-case.KEPT_MODELS :])
    n = len(computed)
    case.reference(case.Case.make("gpt2", "float32"), "t", compute)  # still cached
    assert len(computed) == n
    case.reference(case.Case.make("llama", "float32"), "t", compute)  # dropped: computed again
    assert len(computed) == n + 2
    case.clear_cache()
    assert not case._REFERENCES


def test_cpu_reference_is_computed_once_and_cleared_with_the_cache():
    case.clear_cache()
    computed = []
    key = ("generate", ("llama", "float32", 0), 6)
    assert case.cpu_reference(key, lambda: computed.append(1) or "tokens") == "tokens"
    assert case.cpu_reference(key, lambda: computed.append(1) or "other") == "tokens"
    assert computed == [1]
    case.clear_cache()
    assert case.cpu_reference(key, lambda: "again") == "again"
    case.clear_cache()
