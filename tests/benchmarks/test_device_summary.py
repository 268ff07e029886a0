"""benchmarks.device_summary: counts per suite and failure class, and each true positive caught or not."""

from __future__ import annotations

from benchmarks.device_summary import TRUE_POSITIVES, summarize


def _rec(op, outcome="failed", suite="compare_cpu", dtype="float32", failure_class="numeric"):
    return {"op": op, "outcome": outcome, "suite": suite, "dtype": dtype, "failure_class": failure_class, "nodeid": op}


def test_a_true_positive_is_caught_only_by_a_matching_failure():
    records = [
        _rec("cumsum", dtype="bfloat16"),
        _rec("cumsum", dtype="float32"),  # not the storage-dtype accumulation: float32
        _rec("clamp", dtype="uint8", outcome="passed"),
        _rec("add", outcome="passed"),
    ]
    lines = summarize(records)
    text = "\n".join(lines)
    assert "failing: 2 of 4" in text
    assert "compare_cpu      failed 2, passed 2" in text
    cumsum = next(line for line in lines if line.strip().startswith("cumsum in bfloat16"))
    assert "caught (1: compare_cpu/bfloat16)" in cumsum
    clamp = next(line for line in lines if line.strip().startswith("clamp_ on uint8"))
    assert clamp.endswith("NOT CAUGHT")
    assert sum(1 for line in lines if "NOT CAUGHT" in line) == len(TRUE_POSITIVES) - 1
