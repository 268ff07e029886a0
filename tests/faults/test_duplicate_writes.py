"""Writes into duplicate indices judged by the set of values written there, proven both ways.

``scatter`` with repeated indices leaves the order of writes undefined (PyTorch's docs of ``scatter_``); a
GPU lands another write than the CPU (9 false alarms on an H200 in ``scatter``, ``put`` and ``index_copy``).
The generated suite's ``aten::scatter.src`` input repeats indices. A kernel that writes in the reverse
order passes in device mode; one that sums the repeated writes (a value none of them wrote) fails; in
mirror mode the backend declares the CPU's kernels, so the other order still fails.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.verdict.duplicates import reconcile, write_pairs
from neuron_conformance.conformance.verdict.failures import NumericFailure
from tests.faults.test_suites_catch_faults import _run

pytest_plugins = ["pytester"]

OP = "aten::scatter.src"


def _scatter(records):
    return [r for r in records if r.get("op") == OP]


def test_another_order_of_repeated_writes_passes(pytester, monkeypatch):
    result, records = _run(pytester, monkeypatch, "scatter-first-writer", "test_generated.py", OP, "float32", "device")
    got = _scatter(records)
    assert got and got[0]["outcome"] == "passed", (got, result.stdout.str()[-3000:])


@pytest.mark.parametrize("fault, mode", [("scatter-sums-repeats", "device"), ("scatter-first-writer", "mirror")])
def test_a_value_no_write_wrote_or_a_mirror_that_differs_fails(pytester, monkeypatch, fault, mode):
    result, records = _run(pytester, monkeypatch, fault, "test_generated.py", OP, "float32", mode)
    got = _scatter(records)
    assert got and got[0]["outcome"] == "failed", (got, result.stdout.str()[-3000:])


def test_the_generated_input_repeats_indices_and_reconcile_reads_every_write():
    self = torch.zeros(5)
    index = torch.tensor([1, 1, 3])
    src = torch.tensor([10.0, 20.0, 30.0])
    pairs = write_pairs("scatter", {"self": self, "dim": 0, "index": index, "src": src})
    cpu = self.clone().scatter_(0, index, src)
    first = cpu.clone()
    first[1] = 10.0
    assert torch.equal(reconcile(first, cpu, pairs, "w"), cpu)
    wrong = cpu.clone()
    wrong[1] = 30.0
    with pytest.raises(NumericFailure, match="position 1 is written 2 times"):
        reconcile(wrong, cpu, pairs, "w")
    assert write_pairs("put", {"self": self, "index": index, "source": src, "accumulate": True}) is None
    targets, values = write_pairs(
        "index_copy", {"self": torch.zeros(4, 2), "dim": 0, "index": index, "source": torch.ones(3, 2)}
    )
    assert targets.tolist() == [2, 3, 2, 3, 6, 7] and values.numel() == 6
