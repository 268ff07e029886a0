"""Tests of conformance.records: per-worker files, flushing, merge, truncated lines."""

import json

from conformance.records import RecordWriter, clear_records, count_outcomes, read_records, write_json_atomic


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
    assert len(warnings) == 1 and "gw0.jsonl:2" in warnings[0]


def test_last_record_of_a_nodeid_wins(tmp_path):
    w = RecordWriter(tmp_path, "gw0")
    w.write({"nodeid": "t1", "outcome": "failed"})
    w.write({"nodeid": "t1", "outcome": "passed"})
    assert [r["outcome"] for r in read_records(tmp_path)] == ["passed"]


def test_non_json_values_and_clear(tmp_path):
    w = RecordWriter(tmp_path, "main")
    w.write({"nodeid": "t", "value": object(), "nan": float("nan")})
    assert read_records(tmp_path)[0]["value"].startswith("<object")
    clear_records(tmp_path)
    assert read_records(tmp_path) == []


def test_atomic_json(tmp_path):
    p = tmp_path / "sub" / "run.json"
    write_json_atomic(p, {"complete": True})
    assert json.loads(p.read_text()) == {"complete": True}
    assert [x.name for x in p.parent.iterdir()] == ["run.json"]
