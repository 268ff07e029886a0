"""summary.md: headline, counts table, top failures with repro, incomplete banner, step summary."""

from __future__ import annotations

import neuron_conformance.reports
from neuron_conformance.reports.to_markdown import code_span, to_markdown


def _md(report, record, run=None, recs=None):
    recs = recs or [
        record("add"),
        record("sub"),
        record("linalg.svd", "float32", "failed"),
        record("mul", "bfloat16", "error", failure_class="crash"),
    ]
    kw = {"run": run} if run else {}
    return neuron_conformance.reports.build(report({"gw0": recs}, **kw)).summary_md.read_text()


def test_headline_counts_table_and_top_failures(report, record):
    md = _md(report, record)
    first = md.splitlines()[0]
    assert first.startswith("## ❌") and "2 failing of 4 tests on neuron" in first
    assert "| compare_cpu | 2 | 1 | 1 | 0 | 0 | 0 | 4 |" in md
    assert "| **all** | **2** | **1** | **1** |" in md
    assert "### Top failures" in md
    # the error (crash) ranks before the numeric failure; each has its repro command
    assert md.index("`mul`") < md.index("`linalg.svd`")
    assert (
        "python -m neuron_conformance.conformance.results.repro linalg.svd --dtype float32 --conformance-sample 2" in md
    )
    assert "python -m neuron_conformance.conformance.results.repro mul --dtype bfloat16 --conformance-sample 2" in md
    assert "Incomplete run" not in md


def test_incomplete_banner(report, record, run_meta):
    md = _md(report, record, run=run_meta(complete=False, finished=None))
    assert "> **Incomplete run**" in md
    assert "(incomplete run)" in md.splitlines()[0]


def test_passing_run_has_no_failure_sections(report, record):
    md = _md(report, record, recs=[record("add"), record("sub")])
    assert md.startswith("## ✅") and "Top failures" not in md and "Failures by class" not in md


def test_top_failures_are_capped(report, record):
    recs = [record(f"op{i}", "float32", "failed") for i in range(30)]
    summary = neuron_conformance.reports.build(report({"gw0": recs})).summary
    md = to_markdown(summary, top=5)
    assert "### Top failures (first 5 of 30)" in md
    assert md.split("### Top failures")[1].count("python -m neuron_conformance.conformance.results.repro") == 5


def test_test_strings_are_escaped(report, record):
    md = _md(
        report, record, recs=[record("a|b", "float32", "failed", suite="s<x>", message="<script>alert(1)</script>")]
    )
    assert "| s&lt;x&gt; |" in md  # table cell: HTML escaped
    assert "`<script>alert(1)</script>`" in md  # message: inside a code span, shown as text
    assert "<script>alert(1)</script>" not in md.replace("`<script>alert(1)</script>`", "")


def test_code_span_fences_backticks():
    assert code_span("a`b") == "``a`b``"
    assert code_span("`x`") == "`` `x` ``"
    assert code_span("multi\nline") == "`multi line`"


def test_step_summary_is_appended(report, record, tmp_path, monkeypatch):
    target = tmp_path / "step_summary.md"
    target.write_text("previous step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    result = neuron_conformance.reports.build(report({"gw0": [record("add")]}))
    text = target.read_text()
    assert text.startswith("previous step\n")
    assert text[len("previous step\n") :] == result.summary_md.read_text()
    assert result.step_summary == target


def test_step_summary_can_be_disabled(report, record, tmp_path, monkeypatch):
    target = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    result = neuron_conformance.reports.build(report({"gw0": [record("add")]}), step_summary=False)
    assert not target.exists() and result.step_summary is None


def test_aten_coverage_line(report, record):
    summary = neuron_conformance.reports.build(report({"gw0": [record("add")]})).summary
    summary["coverage"] = {
        "executed": {"aten::add.out": 2, "aten::relu": 1},
        "registered_total": 3110,
        "core_total": 193,
        "core_executed": ["aten::add.Tensor", "aten::relu"],
        "core_composite": ["aten::expand"],
        "core_missing": ["aten::mm"],
    }
    md = to_markdown(summary)
    assert "aten coverage: 2 of 3110 registered overloads and 2 of 193 core ops executed" in md
    assert "1 more are PyTorch composites above this backend" in md
    assert "never executed: `aten::mm`" in md
    summary["coverage"] = None
    assert "aten coverage" not in to_markdown(summary)


def test_samples_compared_per_suite_with_left_out_reasons(report, record):
    recs = [
        record(
            "sum", suite="layouts", variant="layouts", samples=16, samples_total=20, samples_left_out={"0-dim input": 4}
        ),
        record(
            "mean",
            suite="layouts",
            variant="layouts",
            samples=10,
            samples_total=20,
            samples_left_out={"0-dim input": 4, "time budget": 6},
        ),
        record(
            "softmax",
            suite="autograd",
            variant="backward",
            samples=6,
            samples_total=7,
            samples_left_out={"no differentiable output": 1},
        ),
        record("add"),
    ]  # compare_cpu records carry no samples_total: not in the table
    built = neuron_conformance.reports.build(report({"gw0": recs}))
    md = built.summary_md.read_text()
    assert "### Samples compared" in md
    assert "| autograd | 1 | 6 | 7 | 1 no differentiable output |" in md
    assert "| layouts | 2 | 26 | 40 | 8 0-dim input, 6 time budget |" in md
    assert "| compare_cpu | 1 |" not in md.split("### Samples compared", 1)[1]
    html = built.index_html.read_text()
    assert 'id="sample-counts"' in html and "8 0-dim input, 6 time budget" in html
