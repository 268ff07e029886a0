"""Baseline diff: regressions, fixes, new, removed, other changes; CLI exit codes."""

from __future__ import annotations

import json

import pytest

import neuron_conformance.reports
from neuron_conformance.reports.cli import main
from neuron_conformance.reports.diff import diff_summaries


@pytest.fixture
def pair(report, record):
    old = [
        record("add"),
        record("sub", outcome="failed"),
        record("mul"),
        record("div", outcome="xfailed"),
        record("gone"),
        record("skip_then_fail", outcome="skipped"),
        record("cls", outcome="failed", failure_class="numeric"),
    ]
    new = [
        record("add", outcome="failed"),
        record("sub"),
        record("mul"),
        record("div", outcome="error"),
        record("fresh", outcome="failed"),
        record("skip_then_fail", outcome="failed"),
        record("cls", outcome="failed", failure_class="crash"),
    ]
    a = neuron_conformance.reports.build(report({"gw0": old}, name="old"), step_summary=False)
    b = neuron_conformance.reports.build(report({"gw0": new}, name="new"), step_summary=False)
    return a.summary_json, b.summary_json


def _ops(entries):
    return [e.op for e in entries]


def test_diff_categories(pair):
    d = diff_summaries(*pair)
    assert sorted(_ops(d.regressions)) == ["add", "div"]  # passed->failed, xfailed->error
    assert _ops(d.fixes) == ["sub"]
    assert _ops(d.new) == ["fresh"] and d.new[0].old_outcome is None and d.new[0].new_outcome == "failed"
    assert _ops(d.removed) == ["gone"] and d.removed[0].new_outcome is None
    assert sorted(_ops(d.changed)) == ["cls", "skip_then_fail"]
    assert d.unchanged == 1  # mul
    assert d.has_regressions


def test_diff_accepts_dicts(pair):
    old, new = (json.loads(p.read_text()) for p in pair)
    assert _ops(diff_summaries(old, new).fixes) == ["sub"]


def test_no_regression_against_itself(pair):
    d = diff_summaries(pair[1], pair[1])
    assert not d.has_regressions and not d.fixes and not d.new and not d.removed and not d.changed
    assert d.unchanged == 7


def test_diff_notes_different_runs(report, record, run_meta):
    a = neuron_conformance.reports.build(report({"gw0": [record("add")]}, name="a"), step_summary=False).summary
    b = neuron_conformance.reports.build(
        report({"gw0": [record("add")]}, name="b", run=run_meta(torch_version="2.14.0")), step_summary=False
    ).summary
    assert any("torch version differs" in n for n in diff_summaries(a, b).notes)


def test_cli_diff_fail_on_regression(pair, capsys):
    assert main(["diff", str(pair[0]), str(pair[1]), "--conformance-fail-on-regression"]) == 1
    out = capsys.readouterr().out
    assert "2 regression(s), 1 fix(es), 1 new, 1 removed" in out
    assert "### Regressions (2)" in out and "passed → failed" in out


def test_cli_diff_without_flag_exits_zero(pair, capsys):
    assert main(["diff", str(pair[0]), str(pair[1])]) == 0


def test_cli_diff_fail_on_regression_passes_without_regression(pair, capsys):
    assert main(["diff", str(pair[1]), str(pair[1]), "--conformance-fail-on-regression"]) == 0


def test_cli_diff_json(pair, capsys):
    assert main(["diff", str(pair[0]), str(pair[1]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(e["op"] for e in data["regressions"]) == ["add", "div"]
    assert data["unchanged"] == 1
