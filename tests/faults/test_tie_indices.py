"""An index among tied values is judged by what it points at (index_semantics.DEVICE_CHOOSES_TIES), proven
both ways with ``topk`` kernels on the emulated device.

``torch.topk`` names no index among equal values, and a correct device may return another one than the
CPU (168 false alarms on an H200 across sort, argsort, topk, kthvalue, median, nanmedian, mode). Now a
``topk`` that returns the last of tied elements passes ``compare_cpu`` in device mode (the ``bug_classes``
ties cases hold ties in every sample), and one whose indices do not point at its values fails in both
modes; in mirror mode, the backend declares the CPU's kernels, so the other tie choice still fails.
"""

from __future__ import annotations

import pytest

from tests.faults.test_suites_catch_faults import _run

pytest_plugins = ["pytester"]


def _topk(records):
    return [r for r in records if r.get("op") == "topk"]


def test_another_valid_index_among_ties_passes(pytester, monkeypatch):
    result, records = _run(
        pytester, monkeypatch, "topk-last-tie", "test_compare_cpu.py", "topk", "float32,int64", "device"
    )
    got = _topk(records)
    assert got and all(r["outcome"] == "passed" for r in got), (
        [(r.get("dtype"), r.get("outcome"), r.get("message")) for r in got],
        result.stdout.str()[-3000:],
    )


def test_mirror_mode_still_demands_the_cpus_indices(pytester, monkeypatch):
    result, records = _run(pytester, monkeypatch, "topk-last-tie", "test_compare_cpu.py", "topk", "int64", "mirror")
    got = _topk(records)
    assert got and got[0]["outcome"] == "failed", result.stdout.str()[-3000:]


@pytest.mark.parametrize("mode", ["mirror", "device"])
def test_indices_that_do_not_point_at_the_values_are_flagged(pytester, monkeypatch, mode):
    result, records = _run(pytester, monkeypatch, "topk-index-shifted", "test_compare_cpu.py", "topk", "float32", mode)
    got = _topk(records)
    assert got and got[0]["outcome"] == "failed", result.stdout.str()[-3000:]
    assert got[0]["failure_class"] == "numeric"


def test_the_gradient_through_another_tie_choice_passes(pytester, monkeypatch):
    """The backward of ``topk`` sends each gradient entry to the index the forward chose: another tied input
    than the CPU's. Judged up to the tie choice (index_semantics.tie_canonical_gradient), it passes."""
    result, records = _run(pytester, monkeypatch, "topk-last-tie", "test_autograd.py", "topk", "float32", "device")
    got = _topk(records)
    assert got and all(r["outcome"] == "passed" for r in got), (
        [(r.get("dtype"), r.get("outcome"), r.get("message")) for r in got],
        result.stdout.str()[-3000:],
    )


def test_a_gradient_sent_to_an_input_of_another_value_is_flagged(pytester, monkeypatch):
    result, records = _run(pytester, monkeypatch, "topk-index-shifted", "test_autograd.py", "topk", "float32", "device")
    got = _topk(records)
    assert got and got[0]["outcome"] == "failed", result.stdout.str()[-3000:]


def test_tie_canonical_gradient_orders_within_equal_inputs_only():
    import torch

    from neuron_conformance.conformance.verdict.index_semantics import tie_canonical_gradient

    x = torch.tensor([2.0, 1.0, 2.0, 3.0])
    first, last = torch.tensor([5.0, 0.0, 0.0, 7.0]), torch.tensor([0.0, 0.0, 5.0, 7.0])
    assert torch.equal(tie_canonical_gradient(first, x), tie_canonical_gradient(last, x))
    elsewhere = torch.tensor([0.0, 5.0, 0.0, 7.0])  # sent to the input 1.0, which is not tied with 2.0
    assert not torch.equal(tie_canonical_gradient(elsewhere, x), tie_canonical_gradient(first, x))
