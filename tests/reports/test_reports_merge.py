"""Shard merge: one report from all shards; refusals naming both files and the field."""

from __future__ import annotations

import json

import pytest

import neuron_conformance.reports
from neuron_conformance.reports.cli import main
from neuron_conformance.reports.errors import ShardMismatchError
from neuron_conformance.reports.merge import merge_summaries

from .conftest import DEFAULT_DEVICE


def _shard(report, record, run_meta, i, count=2, recs=None, **run):
    recs = (
        recs if recs is not None else [record(f"op{i}_{j}", outcome="failed" if j == 0 else "passed") for j in range(3)]
    )
    cov = {
        "executed": {"aten::add.Tensor": 2, f"aten::only{i}": 1},
        "registered_total": 100,
        "core_total": 3,
        "core_executed": ["aten::add.Tensor"] + (["aten::mm"] if i == 1 else []),
        "core_missing": ["aten::sub.Tensor"] + (["aten::mm"] if i == 0 else []),
    }
    meta = run_meta(
        shard={"id": i, "count": count}, started=f"2026-11-29T20:0{i}:00Z", finished=f"2026-11-29T20:1{i}:00Z", **run
    )
    d = report({"gw0": recs}, name=f"shard{i}", run=meta, coverage=cov, repro={f"r{i}.py": ""})
    return neuron_conformance.reports.build(d, step_summary=False).summary_json


def test_merge_shards(report, record, run_meta, tmp_path):
    paths = [_shard(report, record, run_meta, i) for i in range(2)]
    out = tmp_path / "merged"
    assert main(["merge", *map(str, paths), "-o", str(out), "-q"]) == 0
    s = neuron_conformance.reports.load_summary(out / "summary.json")
    assert s["totals"]["total"] == 6 and s["totals"]["failed"] == 2
    assert s["complete"] is True and s["run"]["shard"] is None and len(s["run"]["shards"]) == 2
    assert (s["run"]["started"], s["run"]["finished"]) == ("2026-11-29T20:00:00Z", "2026-11-29T20:11:00Z")
    cov = s["coverage"]
    assert cov["executed"] == {"aten::add.Tensor": 4, "aten::only0": 1, "aten::only1": 1}
    assert cov["core_executed"] == ["aten::add.Tensor", "aten::mm"] and cov["core_missing"] == ["aten::sub.Tensor"]
    assert sorted(s["repro_files"]) == ["../shard0/repro/r0.py", "../shard1/repro/r1.py"]
    assert (out / "index.html").exists() and (out / "summary.md").exists()


def test_merge_accepts_shard_dirs_and_raw_report_dirs(report, record, run_meta):
    built = _shard(report, record, run_meta, 0).parent
    raw = report({"gw0": [record("raw_op")]}, name="raw", run=run_meta(shard={"id": 1, "count": 2}))
    s = merge_summaries([built, raw])
    assert s["totals"]["total"] == 4 and "raw_op" in s["counts"]["by_op"]


def test_missing_shard_makes_the_merge_incomplete(report, record, run_meta):
    s = merge_summaries([_shard(report, record, run_meta, 0, count=3), _shard(report, record, run_meta, 1, count=3)])
    assert s["complete"] is False
    assert any("shard id(s) [2] of 3 missing" in w for w in s["warnings"])


def test_duplicate_nodeid_across_shards_keeps_the_last(report, record, run_meta):
    a = _shard(report, record, run_meta, 0, recs=[record("add", outcome="failed")])
    b = _shard(report, record, run_meta, 1, recs=[record("add", outcome="passed")])
    s = merge_summaries([a, b])
    assert [r["outcome"] for r in s["records"]] == ["passed"]


@pytest.mark.parametrize(
    ("field", "run", "left", "right"),
    [
        ("torch_version", {"torch_version": "2.12.0"}, "2.13.0+cpu", "2.12.0"),
        ("harness_version", {"harness_version": "0.2.0"}, "0.1.0", "0.2.0"),
        ("device.type", {"device": {"type": "cuda", "backend": "torch", "backend_version": "12.4"}}, "neuron", "cuda"),
        ("device.emulator_mode", {"device": {**DEFAULT_DEVICE, "emulator_mode": "device"}}, None, "device"),
    ],
)
def test_merge_refuses_different_runs(report, record, run_meta, tmp_path, capsys, field, run, left, right):
    a = _shard(report, record, run_meta, 0)
    b = _shard(report, record, run_meta, 1, **run)
    with pytest.raises(ShardMismatchError) as info:
        merge_summaries([a, b])
    assert info.value.field == field
    out = tmp_path / "merged"
    assert main(["merge", str(a), str(b), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(a) in err and str(b) in err and field in err
    assert f"{left!r} in {a.parent}" in err and f"{right!r} in {b.parent}" in err  # each value with its folder
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()  # nothing written


def test_merge_then_diff_against_unsharded(report, record, run_meta):
    paths = [_shard(report, record, run_meta, i) for i in range(2)]
    merged = merge_summaries(paths)
    assert json.dumps(merged)  # JSON-ready
    assert neuron_conformance.reports.diff_summaries(merged, merged).unchanged == 6


def test_incomplete_shard_makes_the_merge_incomplete(report, record, run_meta):
    a = _shard(report, record, run_meta, 0)
    b = _shard(report, record, run_meta, 1, complete=False)
    s = merge_summaries([a, b])
    assert s["complete"] is False
    assert [m["complete"] for m in s["run"]["shards"]] == [True, False]
