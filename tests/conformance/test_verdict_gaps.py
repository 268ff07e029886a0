"""Verdicts a manifest entry must not blur: an expected failure the sample budget did not reach is
``expected-unreached`` (not ``stale``); a listed test that times out in process or crashes its worker
with another class than its entry's is ``unexpected``."""

from __future__ import annotations

import json

from neuron_conformance.conformance.results.manifest import parse_manifest
from neuron_conformance.conformance.results.outcomes import EXPECTED_UNREACHED, PASSING, UNEXPECTED
from neuron_conformance.conformance.results.records import read_records
from neuron_conformance.conformance.survival.crash_files import apply_expectation
from neuron_conformance.conformance.verdict.expectations import TIME_BUDGET, unreached_message
from neuron_conformance.opsuites.sample_selection import SampleSelection


def _selection_cut_by_budget() -> SampleSelection:
    """Nine samples, a 2 s budget and a clock that moves 1 s a reading: 2 compared, 7 left out."""
    ticks = iter(range(100))
    sel = SampleSelection(range(9), budget=2.0, clock=lambda: float(next(ticks)))
    assert [i for i, _ in sel] == [0, 1]
    return sel


def test_budget_left_out_samples_is_not_stale():
    rec = {"expected_failure": "numeric", "manifest_entry": "m.toml:2", **_selection_cut_by_budget().record_fields()}
    msg = unreached_message(rec)
    assert msg is not None and "left 7 of 9 samples out (time budget)" in msg and "m.toml:2" in msg
    assert "the 2 compared passed" in msg and EXPECTED_UNREACHED in PASSING


def test_every_sample_compared_is_stale():
    sel = SampleSelection(range(4), reject=lambda s: "0-dim input" if s == 0 else None)
    list(sel)
    assert unreached_message({"expected_failure": "numeric", **sel.record_fields()}) is None
    assert unreached_message({"samples_left_out": {TIME_BUDGET: 0}}) is None


MANIFEST = parse_manifest(
    """
[[xfail]]
op = "neg"
reason = "numeric"

[[xfail]]
op = "conj"
reason = "timeout"
""",
    "m.toml",
)


def _crash(op: str, cls: str) -> dict:
    return {
        "op": op,
        "dtype": "float32",
        "variant": None,
        "suite": "s",
        "outcome": "failed",
        "failure_class": cls,
        "message": "worker died: SIGSEGV",
        "signal": "SIGSEGV",
    }


def test_worker_crash_of_a_numeric_entry_is_unexpected():
    rec = _crash("neg", "crash")
    assert apply_expectation(rec, MANIFEST) is False
    assert (rec["outcome"], rec["failure_class"], rec["signal"]) == ("failed", UNEXPECTED, "SIGSEGV")
    assert rec["message"].startswith("unexpected failure: manifest entry m.toml:")
    assert "expects a numeric failure; seen: crash\nworker died: SIGSEGV" in rec["message"]


def test_hard_timeout_record_is_expected_only_by_a_timeout_entry():
    rec = _crash("conj", "timeout")
    assert apply_expectation(rec, MANIFEST) is True and rec["outcome"] == "xfailed"
    rec = _crash("conj", "crash")
    assert apply_expectation(rec, MANIFEST) is False and rec["failure_class"] == UNEXPECTED
    unlisted = _crash("mul", "crash")
    assert apply_expectation(unlisted, MANIFEST) is False and unlisted["failure_class"] == "crash"


TEST_FILE = """
import time
import pytest
from neuron_conformance.opsuites.sample_selection import SampleSelection

def _case(op):
    return pytest.mark.conformance(op=op, dtype="float32", suite="demo")

def _compare(record, budget):
    ticks = iter(range(100))
    sel = SampleSelection(range(9), budget=budget, clock=lambda: float(next(ticks)))
    for _ in sel:
        pass  # every compared sample passes
    record.update(**sel.record_fields())

@_case("budget_cut")
def test_budget_cut(conformance_record):
    _compare(conformance_record, 2.0)

@_case("all_compared")
def test_all_compared(conformance_record):
    _compare(conformance_record, None)

@_case("hangs")
def test_hangs():
    time.sleep(60)

@_case("hangs_expected")
def test_hangs_expected():
    time.sleep(60)
"""

PLUGIN_MANIFEST = """
[[xfail]]
op = ["budget_cut", "all_compared", "hangs"]
reason = "numeric"

[[xfail]]
op = "hangs_expected"
reason = "timeout"
"""


def test_plugin_outcomes_of_unreached_stale_and_timed_out_entries(pytester):
    pytester.makepyfile(test_demo=TEST_FILE)
    pytester.makefile(".toml", manifest=PLUGIN_MANIFEST)
    result = pytester.runpytest_subprocess(
        "--conformance-device",
        "cpu",
        "--conformance-manifest=manifest.toml",
        "--conformance-report-dir=out",
        "-p",
        "no:randomly",
        "-p",
        "no:xdist",
        "--conformance-test-timeout",
        "2",
        timeout=300,
    )
    result.assert_outcomes(failed=2, skipped=1, xfailed=1)
    recs = {r["op"]: r for r in read_records(pytester.path / "out")}
    cut = recs["budget_cut"]
    assert cut["outcome"] == EXPECTED_UNREACHED and cut["samples_left_out"] == {TIME_BUDGET: 7}, cut
    assert "left 7 of 9 samples out" in cut["message"]
    assert (recs["all_compared"]["outcome"], recs["all_compared"]["failure_class"]) == ("failed", "stale")
    hangs = recs["hangs"]
    assert (hangs["outcome"], hangs["failure_class"]) == ("failed", UNEXPECTED), hangs
    assert "expects a numeric failure; seen: timeout" in hangs["message"]
    assert recs["hangs_expected"]["outcome"] == "xfailed"
    summary = json.loads((pytester.path / "out" / "summary.json").read_text())
    assert summary["counts"]["by_outcome"][EXPECTED_UNREACHED] == 1
    assert summary["counts"]["by_failure_class"] == {"stale": 1, UNEXPECTED: 1}
    assert (
        "1 expected failures not reached within the sample budget" in (pytester.path / "out" / "summary.md").read_text()
    )
