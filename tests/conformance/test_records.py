"""Tests of neuron_conformance.conformance.results.records: per-worker files, flushing, merge, truncated lines, the one merger."""

import json
import os

import pytest

from neuron_conformance.conformance.results.manifest import Entry, Manifest
from neuron_conformance.conformance.results.manifest_update import PROPOSED_FILE, propose, write_proposed
from neuron_conformance.conformance.results.records import (
    RecordsError,
    RecordWriter,
    clear_records,
    count_outcomes,
    merge_record_files,
    read_records,
    write_json_atomic,
)
from neuron_conformance.reports.collect import collect
from neuron_conformance.reports.errors import ReportInputError


def test_workers_write_separate_files_and_merge(tmp_path):
    a, b = RecordWriter(tmp_path, "gw0"), RecordWriter(tmp_path, "gw1")
    a.write({"nodeid": "t1", "outcome": "passed"})
    b.write({"nodeid": "t2", "outcome": "failed", "message": "x" * 5000})
    # flushed at once: readable before close
    recs = read_records(tmp_path)
    assert {r["nodeid"] for r in recs} == {"t1", "t2"}
    long = [r for r in recs if r["nodeid"] == "t2"][0]
    assert len(long["message"]) < 2100 and long["worker"] == "gw1" and long["schema"] == 1
    assert count_outcomes(recs) == {"passed": 1, "failed": 1}


def test_truncated_last_line_is_skipped_with_warning(tmp_path):
    w = RecordWriter(tmp_path, "gw0")
    w.write({"nodeid": "t1", "outcome": "passed"})
    w.close()
    with open(w.path, "a") as fh:
        fh.write('{"nodeid": "t2", "outc')
    warnings = []
    recs = read_records(tmp_path, warnings)
    assert [r["nodeid"] for r in recs] == ["t1"]
    assert len(warnings) == 1 and "gw0.jsonl: line 2 is truncated" in warnings[0]


def test_malformed_line_before_the_last_is_an_error_naming_the_file(tmp_path):
    w = RecordWriter(tmp_path, "gw3")
    w.write({"nodeid": "t1", "outcome": "passed"})
    w.close()
    with open(w.path, "a") as fh:
        fh.write('{"nodeid": "t2", "outc\n' + json.dumps({"nodeid": "t3", "outcome": "passed"}) + "\n")
    with pytest.raises(RecordsError) as info:
        read_records(tmp_path)
    assert info.value.path == w.path and info.value.problem.startswith("line 2: malformed JSON")


@pytest.mark.parametrize(
    "bad",
    [{"outcome": "passed"}, {"nodeid": "t", "outcome": ""}, [1, 2], {"nodeid": "t", "outcome": "passed", "schema": 2}],
)
def test_invalid_records_are_errors(tmp_path, bad):
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "gw0.jsonl").write_text(
        json.dumps(bad) + "\n" + json.dumps({"nodeid": "u", "outcome": "passed"})
    )
    with pytest.raises(RecordsError, match="gw0.jsonl: line 1: "):
        read_records(tmp_path)


def test_last_record_of_a_nodeid_wins(tmp_path):
    w = RecordWriter(tmp_path, "gw0")
    w.write({"nodeid": "t1", "outcome": "failed"})
    w.write({"nodeid": "t1", "outcome": "passed"})
    warnings = []
    assert [r["outcome"] for r in read_records(tmp_path, warnings)] == ["passed"]
    assert len(warnings) == 1 and "recorded twice" in warnings[0]


def test_missing_records_dir(tmp_path):
    warnings = []
    assert read_records(tmp_path, warnings) == []
    assert "no records directory" in warnings[0]
    assert merge_record_files(tmp_path / "records").sources == []


def test_non_json_values_and_clear(tmp_path):
    w = RecordWriter(tmp_path, "main")
    w.write({"nodeid": "t", "outcome": "passed", "value": object(), "nan": float("nan")})
    assert read_records(tmp_path)[0]["value"].startswith("<object")
    clear_records(tmp_path)
    assert read_records(tmp_path) == []


def test_atomic_json(tmp_path):
    p = tmp_path / "sub" / "run.json"
    write_json_atomic(p, {"complete": True})
    assert json.loads(p.read_text()) == {"complete": True}
    assert [x.name for x in p.parent.iterdir()] == ["run.json"]


# --- the report, the proposed manifest and the zoo matrix read records with the same rules -----------------


def _twice_recorded(tmp_path):
    """A test recorded twice: the file read first by name and mtime holds the record written LAST (``time``).

    ``controller.jsonl`` (older file, first by name) has the crash record written at t=2000; ``gw1.jsonl``
    (newer file) has a stale ``passed`` record written at t=1000. File order says ``passed``, ``time``
    says ``failed``.
    """
    report = tmp_path / "report"
    (report / "records").mkdir(parents=True)
    (report / "run.json").write_text(json.dumps({"complete": True}))
    ident = {"suite": "model_zoo", "kind": "model", "op": "bert", "dtype": "float32", "variant": "forward"}
    nodeid = "model_zoo/test_models.py::test_model[bert-float32-forward]"
    late = dict(
        ident,
        nodeid=nodeid,
        outcome="failed",
        failure_class="crash",
        worker="controller",
        time=2000.0,
        message="worker gw1 killed by SIGSEGV",
    )
    early = dict(ident, nodeid=nodeid, outcome="passed", worker="gw1", time=1000.0)
    other = dict(ident, nodeid=nodeid.replace("forward", "backward"), variant="backward", outcome="passed", time=1500.0)
    ctl, gw1 = report / "records" / "controller.jsonl", report / "records" / "gw1.jsonl"
    ctl.write_text(json.dumps(late) + "\n")
    gw1.write_text(json.dumps(early) + "\n" + json.dumps(other) + "\n")
    os.utime(ctl, ns=(1_000_000_000, 1_000_000_000))
    os.utime(gw1, ns=(2_000_000_000, 2_000_000_000))
    return report, nodeid


def test_report_and_proposed_manifest_agree_on_a_test_recorded_twice(tmp_path):
    report, nodeid = _twice_recorded(tmp_path)
    in_report = {r["nodeid"]: r for r in collect(report).records}
    in_harness = {r["nodeid"]: r for r in read_records(report)}
    assert in_report == in_harness
    assert in_report[nodeid]["outcome"] == "failed" and in_report[nodeid]["worker"] == "controller"

    _, added, _ = propose(Manifest([]), read_records(report))
    assert [(e.op, e.reason, e.variant) for e in added] == [("bert", "crash", "forward")]
    path, added_written, _ = write_proposed(report, Manifest([Entry(op="mm", reason="numeric")]))
    assert path == report / PROPOSED_FILE and [e.op for e in added_written] == ["bert"]
    assert 'op = "bert"' in path.read_text()


def test_zoo_matrix_agrees_with_the_report(tmp_path, capsys):
    from neuron_conformance.model_zoo import matrix  # here, not at the top: model_zoo imports torch (and its registry)

    report, _ = _twice_recorded(tmp_path)
    assert matrix.main([str(report)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("bert"))
    assert row.split()[1].startswith("xB")  # forward failed (the later record), backward passed


def test_manifest_update_refuses_the_records_the_report_refuses(tmp_path):
    report, _ = _twice_recorded(tmp_path)
    gw1 = report / "records" / "gw1.jsonl"
    gw1.write_text('{"nodeid": "x", \n' + gw1.read_text())
    with pytest.raises(ReportInputError) as in_report:
        collect(report)
    with pytest.raises(RecordsError) as in_harness:
        write_proposed(report, Manifest([]))
    assert in_report.value.path == in_harness.value.path == gw1
    assert in_report.value.problem == in_harness.value.problem
    assert not (report / PROPOSED_FILE).exists()
