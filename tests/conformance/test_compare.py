"""neuron_conformance.conformance.verdict.compare.compare_outputs: metadata before values, significant strides only."""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.verdict.compare import compare_outputs, significant_strides
from neuron_conformance.conformance.verdict.failures import MetadataFailure, NumericFailure
from neuron_conformance.conformance.verdict.tolerances import EXACT


def test_significant_strides_skip_size_one_dimensions():
    a = torch.empty(2, 1, 3)
    b = torch.empty(2, 3, 1).transpose(1, 2)  # same shape, another stride on the size-1 dimension
    assert a.shape == b.shape and a.stride() != b.stride()
    assert significant_strides(a) == significant_strides(b) == (3, 1)
    assert significant_strides(torch.empty(3, 2).t()) == (1, 2)


def test_strides_compared_only_where_they_matter():
    e = torch.arange(6.0).reshape(2, 1, 3)
    same_bytes_other_stride = torch.arange(6.0).reshape(2, 3, 1).transpose(1, 2)
    compare_outputs(same_bytes_other_stride, e, device_type="cpu", tolerance=EXACT, check_strides=True)
    e2 = torch.arange(6.0).reshape(3, 2)
    other = e2.t().contiguous().t()  # same values, column-major
    with pytest.raises(MetadataFailure, match="strides"):
        compare_outputs(other, e2, device_type="cpu", tolerance=EXACT, check_strides=True)
    compare_outputs(other, e2, device_type="cpu", tolerance=EXACT, check_strides=False)


def test_metadata_is_checked_before_values():
    e = torch.ones(3)
    with pytest.raises(MetadataFailure, match="dtype"):
        compare_outputs(torch.ones(3, dtype=torch.float64), e, device_type="cpu", tolerance=EXACT)
    with pytest.raises(MetadataFailure, match="shape"):
        compare_outputs(torch.ones(4), e, device_type="cpu", tolerance=EXACT)
    with pytest.raises(MetadataFailure, match="output"):
        compare_outputs((e, e), (e,), device_type="cpu", tolerance=EXACT)
    with pytest.raises(NumericFailure):
        compare_outputs(torch.tensor([1.0, 1.0, 1.5]), e, device_type="cpu", tolerance=EXACT)


def test_integer_outputs_left_unjudged_say_so():
    """integer_values=False: float outputs are judged, integer ones give an ``implementation-defined``
    verdict (never silently nothing), which any judged output outranks in the tally."""
    from neuron_conformance.conformance.verdict.compare import IMPLEMENTATION_DEFINED, ErrorTally
    from neuron_conformance.conformance.verdict.failures import NumericFailure
    from neuron_conformance.conformance.verdict.tolerances import Tolerance

    tol = Tolerance(atol=1e-5, rtol=1e-6, source="default")
    wrong_ints = (torch.ones(3), torch.tensor([7, 8]))
    right_ints = (torch.ones(3), torch.tensor([1, 2]))
    verdicts = compare_outputs(wrong_ints, right_ints, device_type="cpu", tolerance=tol, integer_values=False)
    assert [v.rule for v in verdicts] == ["tolerance", IMPLEMENTATION_DEFINED]
    tally = ErrorTally()
    for v in verdicts:
        tally.add(v)
    assert tally.rule == "tolerance"
    only_ints = compare_outputs(
        torch.tensor([7]), torch.tensor([1]), device_type="cpu", tolerance=tol, integer_values=False
    )
    assert [v.rule for v in only_ints] == [IMPLEMENTATION_DEFINED]
    with pytest.raises(NumericFailure):
        compare_outputs(
            (torch.ones(3) * 2, torch.tensor([7, 8])),
            right_ints,
            device_type="cpu",
            tolerance=tol,
            integer_values=False,
        )  # the float output is still judged
