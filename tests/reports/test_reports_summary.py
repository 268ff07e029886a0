"""summary.json: counts, verdict, derived fields, schema and loading."""

from __future__ import annotations

import json

import pytest

import neuron_conformance.reports
from neuron_conformance.reports.errors import ReportInputError
from neuron_conformance.reports.model import headroom, op_family
from neuron_conformance.reports.summary import SCHEMA_VERSION, load_summary


@pytest.fixture
def built(report, record):
    recs = [
        record("add", "float32"),
        record("add", "bfloat16", "failed"),
        record("linalg.svd", "float32", "error", failure_class="crash"),
        record("nn.functional.relu", "float32", "xfailed", failure_class="unsupported"),
        record("fft.fft", "float32", "skipped"),
        record("special.erf", "float32", "xpassed"),
        record("gpt2", "float32", suite="model_zoo", kind="model", variant="forward", nodeid="m::gpt2-f32-forward"),
        record(
            "gpt2",
            "float32",
            "failed",
            suite="model_zoo",
            kind="model",
            variant="generate",
            nodeid="m::gpt2-f32-generate",
            failure_class="metadata",
        ),
    ]
    return neuron_conformance.reports.build(report({"gw0": recs[:5], "gw1": recs[5:]}))


def test_counts_per_outcome(built):
    c = built.summary["counts"]["by_outcome"]
    assert (c["passed"], c["failed"], c["error"], c["xfailed"], c["xpassed"], c["skipped"], c["total"]) == (
        2,
        2,
        1,
        1,
        1,
        1,
        8,
    )
    assert built.summary["totals"]["failing"] == 3


def test_counts_per_suite_op_dtype_class(built):
    counts = built.summary["counts"]
    assert counts["by_suite"]["compare_cpu"]["total"] == 6
    assert counts["by_suite"]["model_zoo"] == {**counts["by_suite"]["model_zoo"], "passed": 1, "failed": 1, "total": 2}
    assert counts["by_op"]["add"]["passed"] == 1 and counts["by_op"]["add"]["failed"] == 1
    assert counts["by_op"]["gpt2"]["kind"] == "model"
    assert counts["by_dtype"]["bfloat16"]["total"] == 1 and counts["by_dtype"]["float32"]["total"] == 7
    # only failing records count per class; xfailed's 'unsupported' is not a failure
    assert counts["by_failure_class"] == {"crash": 1, "metadata": 1, "numeric": 1}
    assert counts["by_family"]["linalg"]["error"] == 1 and counts["by_family"]["model"]["total"] == 2


def test_every_record_is_in_the_summary_with_its_fields(built):
    recs = {r["nodeid"]: r for r in built.summary["records"]}
    assert len(recs) == 8
    gen = recs["m::gpt2-f32-generate"]
    for key in (
        "op",
        "variant",
        "dtype",
        "sample",
        "outcome",
        "failure_class",
        "max_abs",
        "max_rel",
        "max_ulp",
        "rule",
        "duration",
        "repro",
        "kind",
    ):
        assert key in gen
    assert gen["family"] == "model"
    assert gen["headroom"] == pytest.approx(max(1e-5 / 2e-3, 1.3e-6 / 1e-2))


def test_verdict_and_schema_version(built):
    assert built.verdict == "failed"
    data = json.loads(built.summary_json.read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["run"]["device"]["type"] == "neuron"
    assert data["complete"] is True


def test_all_passing_run_verdict(report, record):
    assert (
        neuron_conformance.reports.build(report({"gw0": [record("add"), record("sub", outcome="xfailed")]})).verdict
        == "passed"
    )


def test_empty_run_verdict(tmp_path, run_meta):
    (tmp_path / "run.json").write_text(json.dumps(run_meta(complete=False)))
    result = neuron_conformance.reports.build(tmp_path)
    assert result.verdict == "empty" and result.summary["totals"]["total"] == 0
    assert result.index_html.exists()


def test_load_summary_round_trip(built):
    loaded = load_summary(built.report_dir)
    assert loaded["counts"] == built.summary["counts"]
    assert len(loaded["records"]) == 8


def test_load_summary_wrong_schema_version(tmp_path):
    p = tmp_path / "summary.json"
    p.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "run": {}, "records": []}))
    with pytest.raises(ReportInputError) as info:
        load_summary(p)
    assert info.value.path == p and "schema_version" in str(info.value)


def test_load_summary_not_a_summary(tmp_path):
    p = tmp_path / "summary.json"
    p.write_text(json.dumps({"records": []}))
    with pytest.raises(ReportInputError, match="not a summary.json"):
        load_summary(p)


def test_nonfinite_errors_are_written_as_null(report, record):
    res = neuron_conformance.reports.build(
        report({"gw0": [record("add", "float32", "failed", max_abs=float("nan"), max_ulp=float("inf"))]})
    )
    text = res.summary_json.read_text()
    assert "NaN" not in text and "Infinity" not in text
    rec = json.loads(text)["records"][0]
    assert rec["max_abs"] is None and rec["max_ulp"] is None


@pytest.mark.parametrize(
    ("name", "kind", "family"),
    [
        ("nn.functional.conv2d", "op", "nn"),
        ("linalg.svd", "op", "linalg"),
        ("special.erfcx", "op", "special"),
        ("fft.rfft", "op", "fft"),
        ("add", "op", "core"),
        ("max.reduction_with_dim", "op", "core"),
        ("gpt2", "model", "model"),
        ("ddp", "scenario", "scenario"),
        (None, "op", "core"),
    ],
)
def test_op_family(name, kind, family):
    assert op_family(name, kind) == family


def test_headroom():
    assert headroom({"atol": 1e-5, "max_abs": 1e-6, "rtol": 1e-3, "max_rel": 1e-2}) == pytest.approx(10.0)
    assert headroom({"atol": 1e-5, "max_abs": 0.0}) is None  # exact match: unbounded headroom
    assert headroom({"atol": None, "max_abs": 1.0}) is None
    assert headroom({"rtol": 1e-2, "max_rel": 4e-2}) == pytest.approx(0.25)


def test_epoch_times_and_missing_device_in_run_json(report, record, run_meta):
    run = run_meta(started=1_764_446_400.0, finished=1_764_446_460.5, device=None, python="3.11.7")
    s = neuron_conformance.reports.build(report({"gw0": [record("add")]}, run=run)).summary
    assert s["run"]["started"] == "2025-11-29T20:00:00Z" and s["run"]["finished"] == "2025-11-29T20:01:00Z"
    assert s["run"]["duration"] == pytest.approx(60.5)
    assert s["run"]["device"]["type"] is None and s["run"]["device"]["api_support"] == {}
    assert s["run"]["python"] == "3.11.7"  # unknown run fields are kept


def test_minimal_records_build_every_output(report):
    """Should accept records with only nodeid and outcome (and the controller's crash record shape)."""
    crash = {
        "nodeid": "opsuites/test_compare_cpu.py::test_compare_cpu[svd-float32]",
        "suite": "compare_cpu",
        "kind": "op",
        "op": "opsuites/test_compare_cpu.py::test_compare_cpu[svd-float32]",
        "outcome": "failed",
        "failure_class": "crash",
        "message": "worker 'gw1' crashed",
        "duration": 0.0,
        "time": 5.0,
    }
    res = neuron_conformance.reports.build(report({"controller": [crash, {"nodeid": "t::bare", "outcome": "passed"}]}))
    recs = {r["nodeid"]: r for r in res.summary["records"]}
    assert recs["t::bare"]["dtype"] is None and recs["t::bare"]["family"] == "core"
    assert res.summary["counts"]["by_failure_class"] == {"crash": 1}
    assert "`worker 'gw1' crashed`" in res.summary_md.read_text()
    assert res.index_html.stat().st_size > 0
