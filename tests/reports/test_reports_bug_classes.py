"""Bug classes in the report: summary.json ``bug_classes`` counts and pass rate, summary.md and index.html tables."""

from __future__ import annotations

import json

import neuron_conformance.reports
from neuron_conformance.reports.bug_classes import bug_class_table, pass_rate_text


def _bug(record, bug_class, outcome, n, description="what it aims at"):
    return record(
        f"op{n}",
        "float32",
        outcome,
        suite="bug_classes",
        variant=bug_class,
        bug_class=bug_class,
        case=f"case{n}",
        bug_class_description=description,
        nodeid=f"opsuites/test_bug_classes.py::test_bug_class[{bug_class}::case{n}-float32]",
    )


def _records(record):
    return [
        _bug(record, "ties", "passed", 1, "tied values"),
        _bug(record, "ties", "failed", 2, "tied values"),
        _bug(record, "ties", "passed", 3, "tied values"),
        _bug(record, "ties", "skipped", 4, "tied values"),
        _bug(record, "masked-rows", "passed", 5, "all -inf rows"),
        record("add"),
    ]


def test_table_counts_each_class_and_rates_only_judged_cases(record):
    table = bug_class_table(_records(record))
    assert list(table) == ["ties", "masked-rows"]  # first-seen order; the plain record is ignored
    ties = table["ties"]
    assert (ties["cases"], ties["passed"], ties["failed"], ties["skipped"], ties["failing"], ties["judged"]) == (
        4,
        2,
        1,
        1,
        1,
        3,
    )
    assert ties["pass_rate"] == round(2 / 3, 4) and pass_rate_text(ties) == "66.7 %"
    assert ties["description"] == "tied values"
    assert table["masked-rows"]["pass_rate"] == 1.0


def test_all_skipped_class_has_no_rate_and_no_records_give_an_empty_table(record):
    table = bug_class_table([_bug(record, "nonblocking-copies", "skipped", 1)])
    assert table["nonblocking-copies"]["judged"] == 0 and table["nonblocking-copies"]["pass_rate"] is None
    assert pass_rate_text(table["nonblocking-copies"]) == "-"
    assert bug_class_table([record("add"), record("mul")]) == {}


def test_summary_markdown_and_html_show_each_class(report, record):
    built = neuron_conformance.reports.build(report({"gw0": _records(record)}))
    summary = json.loads(built.summary_json.read_text())
    assert summary["bug_classes"]["ties"]["cases"] == 4 and summary["bug_classes"]["masked-rows"]["passed"] == 1
    md = built.summary_md.read_text()
    assert "### Bug classes" in md
    assert "| ties | 4 | 2 | 1 | 1 | 66.7 % | tied values |" in md
    assert "| masked-rows | 1 | 1 | 0 | 0 | 100.0 % | all -inf rows |" in md
    page = built.index_html.read_text()
    assert 'id="bug-classes"' in page and "<td>ties</td><td>4</td><td>2</td><td>1</td><td>1</td><td>66.7 %</td>" in page


def test_run_without_bug_classes_has_no_section(report, record):
    built = neuron_conformance.reports.build(report({"gw0": [record("add"), record("mul", "float32", "failed")]}))
    assert json.loads(built.summary_json.read_text())["bug_classes"] == {}
    assert "Bug classes" not in built.summary_md.read_text()
    assert 'id="bug-classes"' not in built.index_html.read_text()
