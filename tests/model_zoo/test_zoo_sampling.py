"""The sampled-generation rules (:mod:`neuron_conformance.model_zoo.sampling`) on synthetic draws, and the generation
modes' own plumbing (:mod:`neuron_conformance.model_zoo.generation_modes`, :mod:`neuron_conformance.model_zoo.decode`) on CPU."""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.model_zoo import sampling


def _spread(rows: int, vocab: int = 20, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(rows, vocab, generator=g, dtype=torch.float64) * 0.5, dim=1)


def test_midpoint_pit_has_mean_one_half_exactly():
    probs = _spread(5)
    # E[u] = sum_t p_t u_t over every token t the sampler could draw, whatever the distribution
    u_all = torch.stack([sampling.midpoint_pit(probs, torch.full((5,), t))[0] for t in range(20)], dim=1)
    mean = (probs * u_all).sum(dim=1)
    assert torch.allclose(mean, torch.full_like(mean, 0.5), atol=1e-12)


def test_sampler_statistic_accepts_true_draws_and_rejects_argmax_and_uniform():
    probs = _spread(32)
    g = torch.Generator().manual_seed(1)
    true = torch.multinomial(probs, 1, generator=g).squeeze(1)
    assert sampling.sampler_statistic(probs, true)["p_bound"] >= sampling.LEVEL
    argmax = sampling.sampler_statistic(probs, probs.argmax(dim=1))
    assert argmax["p_bound"] < sampling.LEVEL and argmax["deviation"] < 0
    peaked_top = torch.softmax(torch.randn(32, 20, generator=g, dtype=torch.float64) * 4, dim=1)
    least = sampling.sampler_statistic(peaked_top, peaked_top.argmin(dim=1))
    assert least["p_bound"] < sampling.LEVEL and least["deviation"] > 0


def test_sampler_statistic_cannot_tell_argmax_on_peaked_distributions_and_does_not_pretend_to():
    peaked = torch.full((32, 20), 1e-4, dtype=torch.float64)
    peaked[:, 3] = 1.0
    peaked = peaked / peaked.sum(dim=1, keepdim=True)
    assert sampling.sampler_statistic(peaked, torch.full((32,), 3))["p_bound"] >= sampling.LEVEL


def test_midpoint_pit_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="probs must be"):
        sampling.midpoint_pit(torch.ones(3, 4), torch.zeros(2))


def test_support_violations_name_filtered_draws():
    scores = torch.zeros(2, 3, 5)
    scores[1, 2, 4] = -float("inf")
    tokens = torch.zeros(2, 3, dtype=torch.long)
    assert sampling.support_violations(scores, tokens) == []
    tokens[1, 2] = 4
    assert sampling.support_violations(scores, tokens) == [(1, 2, 4)]


def test_kept_set_agreement_accepts_boundary_ties_only():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.999, 0.0]])
    cpu = torch.where(logits >= 2.0, logits, torch.tensor(-float("inf")))
    near = torch.where(logits >= 1.999, logits, torch.tensor(-float("inf")))  # keeps the tied 4th token too
    ok = sampling.kept_set_agreement(near, cpu, logits, margin=torch.tensor([1e-2]))
    assert ok["differing_positions"] == 1 and ok["unexplained"] == 0
    one = torch.where(logits >= 4.0, logits, torch.tensor(-float("inf")))  # a top-k that kept one token
    bad = sampling.kept_set_agreement(one, cpu, logits, margin=torch.tensor([1e-2]))
    assert bad["unexplained"] == 1 and bad["first"][:2] == (0, 1)  # token 2 sits on the threshold: a tie


def test_same_stream_agreement_binds_only_while_inputs_are_bitwise_equal():
    scores = torch.zeros(2, 4, 3)
    tokens = torch.tensor([[0, 1, 2, 0], [1, 1, 1, 1]])
    assert sampling.same_stream_agreement(tokens, tokens.clone(), scores, scores.clone()) == {
        "bound_steps": 4,
        "first_mismatch": None,
    }
    drawn = tokens.clone()
    drawn[1, 2] = 0
    assert sampling.same_stream_agreement(drawn, tokens, scores, scores)["first_mismatch"] == (1, 2, 1, 0)
    other = scores.clone()
    other[0, 1, 0] = 1e-7  # scores part at step 1: nothing is required from there on
    assert sampling.same_stream_agreement(drawn, tokens, scores, other) == {"bound_steps": 1, "first_mismatch": None}


def test_variant_and_modes_of():
    gm = pytest.importorskip("neuron_conformance.model_zoo.generation_modes")
    assert gm.variant("beam") == "generate-beam"
    with pytest.raises(ValueError, match="not one of"):
        gm.variant("greedy-ish")
    assert "static" not in gm.modes_of("mamba") and gm.modes_of("llama") == gm.MODES
    assert all(m in gm.MODELS and mode in gm.MODES for m, _, mode in gm.CI) and len(gm.CI) <= 4


def test_explicit_generator_reaches_multinomial():
    decode = pytest.importorskip("neuron_conformance.model_zoo.decode")
    probs = _spread(4)
    gen = torch.Generator().manual_seed(5)
    with decode.ExplicitGenerator(gen):
        torch.manual_seed(0)
        a = torch.multinomial(probs, 1)
    gen.manual_seed(5)
    with decode.ExplicitGenerator(gen):
        torch.manual_seed(1)  # the default generator's state must not matter
        b = torch.multinomial(probs, 1)
    assert torch.equal(a, b)


@pytest.mark.parametrize("mode", ["sample-generator", "beam", "beam_sample"])
def test_modes_pass_on_cpu_against_cpu(mode):
    """On CPU against CPU every mode must pass (and the explicit-generator mode runs: CPU has generators)."""
    pytest.importorskip("transformers")
    from neuron_conformance.model_zoo import generation_modes as gm
    from neuron_conformance.model_zoo.case import Case

    case = Case.make("llama", "float32")
    prompt = case.raw_inputs()["input_ids"][:, :8]
    result = gm.compare_mode(
        mode,
        "llama",
        case.dtype,
        lambda d: case.model(d),
        prompt,
        "cpu",
        cache_key=("llama", "float32", 0, "cpu-test"),
        mirrors_cpu=True,
    )
    assert result.passed, result.message
