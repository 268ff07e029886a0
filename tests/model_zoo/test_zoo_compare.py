"""Comparison rules of the model zoo: RMS-scaled tolerance, top-k, router and greedy-token agreement."""

from __future__ import annotations

import torch

from neuron_conformance.model_zoo.compare import (
    judge_model_tensor,
    model_tolerance,
    router_agreement,
    tie_margin,
    token_agreement,
    topk_agreement,
)


def test_model_tolerance_scales_atol_with_rms():
    e = torch.full((100,), 2.0, dtype=torch.bfloat16)
    atol, rtol = model_tolerance(e)
    assert rtol == 1.6e-2 and abs(atol - 1.6e-2 * 2.0) < 1e-9
    tiny = torch.zeros(4)
    assert model_tolerance(tiny) == (1e-5, 1.3e-6)  # floor: torch.testing's float32 atol


def test_judge_model_tensor_accepts_cpu_like_error_near_zero_and_rejects_large_error():
    torch.manual_seed(0)
    r64 = torch.randn(1000, dtype=torch.float64)
    r64[:10] = 1e-4  # elements near zero
    expected = r64.to(torch.bfloat16)
    noise = torch.randn(1000, dtype=torch.float64) * 4e-3
    actual = (r64 + noise.clamp(-8e-3, 8e-3)).to(torch.bfloat16)
    assert judge_model_tensor(actual, expected, r64).passed
    broken = (r64 * 1.2).to(torch.bfloat16)
    v = judge_model_tensor(broken, expected, r64)
    assert not v.passed and v.failure_class == "numeric"


def test_judge_model_tensor_flags_new_nan_as_nonfinite():
    e = torch.ones(8)
    a = e.clone()
    a[3] = float("nan")
    v = judge_model_tensor(a, e, e.double())
    assert not v.passed and v.failure_class == "nonfinite"


def test_topk_agreement_explains_only_near_ties():
    expected = torch.tensor([[5.0, 4.999, 0.0, -1.0, -2.0, -3.0], [5.0, 1.0, 0.0, -1.0, -2.0, -3.0]])
    actual = torch.tensor(
        [
            [4.999, 5.0, 0.0, -1.0, -2.0, -3.0],  # swap within 1e-3: explained
            [1.0, 5.0, 0.0, -1.0, -2.0, -3.0],
        ]
    )  # swap across a gap of 4: not
    stats = topk_agreement(actual, expected, k=5, margin=0.01)
    assert stats["positions"] == 2 and stats["top1_agree"] == 0.0
    assert stats["top1_unexplained"] == 1
    assert stats["topk_overlap"] == 1.0
    same = topk_agreement(expected, expected, margin=0.0)
    assert same["top1_agree"] == 1.0 and same["top1_unexplained"] == 0


def test_topk_agreement_skips_nonfinite_reference_rows():
    expected = torch.tensor([[float("nan"), 1.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
    stats = topk_agreement(expected.flip(0), expected, margin=0.0)
    assert stats["positions"] == 1


def test_router_agreement_accepts_boundary_ties_only():
    tied = torch.tensor([[3.0, 2.0, 1.999, 0.0]])
    # expert 2 instead of 1: both within 0.01 of the 2nd-largest logit, a tie at the boundary
    stats = router_agreement(torch.tensor([[0, 2]]), torch.tensor([[0, 1]]), tied, margin=0.01)
    assert stats["unexplained"] == 0 and stats["agree"] == 0.0
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.999], [3.0, 2.0, 1.0, -5.0]])
    expected = torch.tensor([[0, 1], [0, 1]])
    # token 0: expert 2 (logit 1.0) instead of 1 (2.0): gap 1.0 > margin -> unexplained
    wrong = torch.tensor([[0, 2], [1, 0]])
    stats = router_agreement(wrong, expected, logits, margin=0.01)
    assert stats["unexplained"] == 1 and stats["agree"] == 0.5  # token 1 is the same set in another order
    assert router_agreement(wrong, expected, logits, margin=5.0)["unexplained"] == 0  # a wide margin explains it


def test_token_agreement_margin_rule_and_exact_mode():
    expected = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 4]])
    actual = torch.tensor([[1, 2, 9, 9], [1, 7, 3, 4]])
    logits = torch.zeros(2, 4, 10)
    logits[0, 2, 3], logits[0, 2, 9] = 1.0, 0.995  # a near tie at row 0 step 2
    logits[1, 1, 2], logits[1, 1, 7] = 1.0, 0.0  # a clear choice at row 1 step 1
    stats = token_agreement(actual, expected, logits, margin=0.01)
    assert stats["accepted"] == 1 and stats["unexplained"] == 1 and stats["agreeing_rows"] == 0
    assert stats["first"][1][:4] == (1, 1, 2, 7)
    exact = token_agreement(actual, expected, logits, margin=None)
    assert exact["unexplained"] == 2
    assert token_agreement(expected, expected, None, margin=None)["agreeing_rows"] == 2


def test_tie_margin_scales_with_dtype_and_logit_size():
    assert tie_margin(torch.bfloat16, 0.5) == 4 * 2**-7
    assert tie_margin(torch.float16, 10.0) == 4 * 2**-10 * 10.0
    assert tie_margin(torch.float32, 1.0) < tie_margin(torch.float16, 1.0)
