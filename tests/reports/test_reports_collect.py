"""Merging worker record files: order, truncated last lines, duplicated nodeids, bad lines."""

from __future__ import annotations

import json

import pytest

from neuron_conformance.reports.collect import collect, read_records
from neuron_conformance.reports.errors import ReportInputError


def test_records_from_all_workers_are_merged(report, record):
    a = [record("add", "float32"), record("sub", "float32")]
    b = [record("mul", "bfloat16", "failed")]
    c = collect(report({"gw0": a, "gw1": b}))
    assert sorted(r["nodeid"] for r in c.records) == sorted(r["nodeid"] for r in a + b)
    assert c.warnings == []
    assert {s["file"]: s["records"] for s in c.sources} == {"records/gw0.jsonl": 2, "records/gw1.jsonl": 1}


def test_truncated_last_line_is_skipped_with_a_warning(report, record):
    recs = [record("add"), record("sub")]
    cut = json.dumps(record("mul"))[:25]
    c = collect(report({"gw0": recs}, truncate={"gw0": cut}))
    assert [r["op"] for r in c.records] == ["add", "sub"]
    assert len(c.warnings) == 1
    assert "gw0.jsonl: line 3 is truncated" in c.warnings[0]
    assert c.sources[0]["truncated_lines"] == 1


def test_malformed_line_before_the_last_is_an_error_naming_file_and_line(report, record):
    d = report({"gw3": [record("add"), '{"schema": 1, "nodeid": ', record("sub")]})
    with pytest.raises(ReportInputError) as info:
        collect(d)
    assert info.value.path.name == "gw3.jsonl"
    assert "line 2: malformed JSON" in str(info.value)


def test_duplicate_nodeid_keeps_the_last_record(report, record):
    first = record("add", outcome="error", failure_class="crash", worker="gw0")
    rerun = record("add", outcome="passed", worker="gw2")
    assert first["nodeid"] == rerun["nodeid"]
    c = collect(report({"gw0": [first, record("sub")], "gw2": [rerun]}))
    kept = [r for r in c.records if r["op"] == "add"]
    assert len(kept) == 1
    assert kept[0]["outcome"] == "passed" and kept[0]["worker"] == "gw2"
    assert any("recorded twice" in w and "kept the last" in w for w in c.warnings)


def test_duplicate_within_one_file_keeps_the_later_line(tmp_path, record):
    rec_dir = tmp_path / "records"
    rec_dir.mkdir()
    lines = [record("add", outcome="failed"), record("add", outcome="passed")]
    (rec_dir / "gw0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    records, warnings, _ = read_records(rec_dir)
    assert [r["outcome"] for r in records] == ["passed"]
    assert len(warnings) == 1


def test_unknown_fields_are_kept(report, record):
    c = collect(report({"gw0": [record("add", backend_trace={"k": [1, 2]}, future_field="x")]}))
    assert c.records[0]["backend_trace"] == {"k": [1, 2]}
    assert c.records[0]["future_field"] == "x"


def test_unsupported_record_schema_is_an_error(report, record):
    with pytest.raises(ReportInputError, match="record schema 7 is not supported"):
        collect(report({"gw0": [record("add", schema=7), record("sub")]}))


def test_record_without_outcome_is_an_error(report, record):
    bad = record("add")
    del bad["outcome"]
    with pytest.raises(ReportInputError, match="line 1: record has no 'outcome'"):
        collect(report({"gw0": [bad, record("sub")]}))


def test_missing_records_dir_gives_no_records_and_a_warning(tmp_path, run_meta):
    (tmp_path / "run.json").write_text(json.dumps(run_meta(complete=False)))
    c = collect(tmp_path)
    assert c.records == []
    assert "no records directory" in c.warnings[0]


def test_missing_run_json_is_an_error(tmp_path, record, report):
    d = report({"gw0": [record("add")]})
    (d / "run.json").unlink()
    with pytest.raises(ReportInputError) as info:
        collect(d)
    assert info.value.path == d / "run.json"
    assert "file not found" in str(info.value)


def test_run_json_field_of_wrong_type_is_an_error(report, record, run_meta):
    with pytest.raises(ReportInputError, match="'complete' must be bool"):
        collect(report({"gw0": [record("add")]}, run=run_meta(complete="yes")))


def test_bad_coverage_json_is_an_error(report, record):
    with pytest.raises(ReportInputError, match="coverage.json: field 'executed'"):
        collect(report({"gw0": [record("add")]}, coverage={"executed": {"aten::add": "many"}}))


def test_repro_files_are_listed(report, record):
    c = collect(report({"gw0": [record("add")]}, repro={"add_float32.py": "print(1)", "sub/x.py": ""}))
    assert c.repro_files == ["repro/add_float32.py", "repro/sub/x.py"]


def test_duplicate_with_write_time_keeps_the_latest_written(report, record):
    late = record("add", outcome="failed", failure_class="crash", worker="controller", time=2000.0)
    early = record("add", outcome="passed", worker="gw1", time=1000.0)
    # the controller's file is read first here, yet its record was written later
    c = collect(report({"controller": [late], "gw1": [early]}))
    assert [(r["outcome"], r["worker"]) for r in c.records] == [("failed", "controller")]
