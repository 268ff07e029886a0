"""aten coverage (conformance.coverage): counting on the device, merging worker files."""

from __future__ import annotations

import json

import torch

from conformance import coverage


def test_mode_counts_only_ops_on_the_device_type():
    counts = {}
    with coverage.CoverageMode("meta", counts):
        a = torch.ones(3, device="meta")
        (a + a).relu()
        torch.ones(2) + 1  # CPU only: not counted
    assert counts.get("aten::add.Tensor") == 1
    assert counts.get("aten::relu") == 1
    assert "aten::ones" in counts or "aten::full" in counts or "aten::empty.memory_format" in counts
    assert not any(k == "aten::add.Scalar" for k in counts)


def test_merge_sums_workers_and_lists_core_gaps(tmp_path):
    coverage.write_worker(tmp_path, "gw0", {"aten::add.Tensor": 2, "aten::relu": 1})
    coverage.write_worker(tmp_path, "gw1", {"aten::add.Tensor": 3})
    data = coverage.write_merged(tmp_path)
    assert data["executed"] == {"aten::add.Tensor": 5, "aten::relu": 1}
    assert data["registered_total"] == len(coverage.registered_overloads()) > 1000
    assert data["core_total"] == len(coverage.core_overloads()) > 100
    assert "aten::add.Tensor" in data["core_executed"]
    assert "aten::mm" in data["core_missing"]
    assert set(data["core_executed"]) | set(data["core_missing"]) == set(coverage.core_overloads())
    assert json.loads((tmp_path / "coverage.json").read_text()) == data


def test_clear_removes_old_worker_files(tmp_path):
    coverage.write_worker(tmp_path, "gw0", {"aten::relu": 1})
    coverage.clear(tmp_path)
    assert coverage.merge(tmp_path)["executed"] == {}
