"""The stress suite's helpers: degenerate variants of samples, the large-tensor checks, the record of reads."""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from neuron_conformance.conformance.verdict.failures import MetadataFailure, NumericFailure
from neuron_conformance.opsuites import degenerate, large_tensors


def _shapes(sample):
    return [tuple(sample.input.shape)] + [tuple(a.shape) for a in sample.args if isinstance(a, torch.Tensor)]


def test_bmm_gets_an_empty_batch_and_an_empty_contraction():
    s = SampleInput(torch.ones(3, 4, 5), args=(torch.ones(3, 5, 6),))
    variants = dict(degenerate.variants_of(s, "zero-size"))
    assert _shapes(variants["zero-size dim 0"]) == [(0, 4, 5), (0, 5, 6)]  # batch of zero matrices
    assert _shapes(variants["zero-size dim -1"]) == [(3, 4, 0), (3, 0, 6)]  # contraction of length 0


def test_broadcast_partner_is_narrowed_by_alignment():
    s = SampleInput(torch.ones(2, 7), args=(torch.ones(7),))
    variants = dict(degenerate.variants_of(s, "zero-size"))
    assert _shapes(variants["zero-size dim -1"]) == [(2, 0), (0,)]
    assert _shapes(variants["zero-size dim 0"]) == [(0, 7), (7,)]  # no dim of size 2: left alone


def test_zero_dim_replaces_tensors_of_the_input_shape_by_their_first_element():
    x = torch.arange(6.0).reshape(2, 3) + 1
    s = SampleInput(x, args=(x * 2, torch.ones(3)), kwargs={"alpha": 2})
    [(label, v)] = degenerate.variants_of(s, "zero-dim")
    assert label == "zero-dim" and v.input.shape == () and float(v.input) == 1.0
    assert v.args[0].shape == () and float(v.args[0]) == 2.0 and v.args[1].shape == (3,)
    assert v.kwargs == {"alpha": 2}


def test_list_inputs_use_their_first_tensor():
    s = SampleInput([torch.ones(2, 3), torch.ones(2, 3)], args=(1,))
    variants = dict(degenerate.variants_of(s, "zero-size"))
    assert [tuple(t.shape) for t in variants["zero-size dim 0"].input] == [(0, 3), (0, 3)]


def test_no_variants_without_a_tensor_with_elements():
    assert degenerate.variants_of(SampleInput(torch.tensor(3.0)), "zero-size") == []
    assert degenerate.variants_of(SampleInput(5), "zero-dim") == []
    with pytest.raises(ValueError, match="not one of"):
        degenerate.variants_of(SampleInput(torch.ones(2)), "half-size")


def test_cases_are_deduplicated_and_capped():
    samples = [(i, SampleInput(torch.ones(4, 4) * i)) for i in range(20)]
    cases = degenerate.degenerate_cases(samples, "zero-size", limit=6)
    assert [(i, label) for i, label, _ in cases] == [(0, "zero-size dim 0"), (0, "zero-size dim -1")]
    many = [(i, SampleInput(torch.ones(i + 1, 3))) for i in range(10)]
    assert len(degenerate.degenerate_cases(many, "zero-size", limit=5)) == 5


def test_same_cpu_result():
    a = torch.tensor([1.0, float("nan")])
    assert degenerate.same_cpu_result((a, 3), (a.clone(), 3))
    assert not degenerate.same_cpu_result(a, torch.tensor([2.0, float("nan")]))
    assert not degenerate.same_cpu_result([a], [a, a])


def test_checks_record_reads_and_raise_with_the_element():
    c = large_tensors.Checks(where="case")
    c.equal("first", torch.tensor(7, dtype=torch.uint8), 7)
    assert c.checked == ["first"]
    with pytest.raises(NumericFailure, match="got 3, expected 4"):
        c.equal("second", torch.tensor([4, 3]), torch.tensor([4, 4]))
    with pytest.raises(MetadataFailure, match="shape"):
        c.equal("third", torch.ones(2), torch.ones(3))


def test_probes_hit_the_32_bit_boundaries():
    probes = large_tensors._probes(large_tensors.N_BYTE)
    assert {0, large_tensors.N_BYTE - 1, 2**31 - 1, 2**31, 2**31 + 1} <= set(probes)
    assert max(probes) < large_tensors.N_BYTE
    assert all(p < large_tensors.N_WORD for p in large_tensors._probes(large_tensors.N_WORD))


def test_cases_declare_what_they_need():
    by_name = {c.name: c for c in large_tensors.CASES}
    assert by_name["copy-uint8"].needs == 2 * large_tensors.N_BYTE + large_tensors.SLACK
    assert by_name["sum-float32"].variant == "large-numel" and by_name["arange-int32"].variant == "large-bytes"
    assert all(c.numel * getattr(torch, c.dtype).itemsize > 2**31 for c in large_tensors.CASES)


def test_filled_rerun_exposes_uninitialised_results():
    empty_batch = torch.ones(0, 5)
    loss = lambda: torch.nn.functional.multi_margin_loss(empty_batch, torch.zeros(0, dtype=torch.long))  # noqa: E731
    filled = degenerate.filled_rerun(loss)
    assert torch.isnan(filled)  # the kernel never writes its output for an empty batch
    assert not degenerate.same_cpu_result(torch.tensor(0.0), filled)
    assert not torch.are_deterministic_algorithms_enabled()  # settings restored
    assert degenerate.filled_rerun(lambda: torch.ones(2) + 1).tolist() == [2.0, 2.0]
    assert degenerate.filled_rerun(lambda: torch.ones(2) @ torch.ones(3)) is None
