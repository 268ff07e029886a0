"""Triage at scale, end to end: many failures of three causes give three causes and short output."""

from __future__ import annotations

import json
from pathlib import Path

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def test_injected_faults_group_into_causes_and_the_terminal_stays_small(pytester, monkeypatch):
    """Should group the failures of dispatch_fault_backend by cause in summary.json and summary.md and keep
    each failure's terminal text short (the dispatcher dump stays in the record)."""
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    report = pytester.path / "report"
    ops = "mul,div.no_rounding_mode,true_divide,sub"
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        str(ROOT / "opsuites" / "test_layouts.py"),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "--conformance-backend-module",
        "dispatch_fault_backend",
        "--conformance-device",
        "neuron",
        "--conformance-ops",
        ops,
        "--conformance-dtypes",
        "float32,float64",
        "--conformance-report-dir",
        str(report),
        timeout=600,
    )
    out = result.stdout.str() + result.stderr.str()
    summary = json.loads((report / "summary.json").read_text())
    causes = {(c["failure_class"], c["message"]): c["count"] for c in summary["causes"] if not c["expected"]}
    failing = summary["totals"]["failing"]
    assert failing >= 12, out[-3000:]
    assert causes[("unsupported", "no PrivateUse1 kernel for aten::div.Tensor")] == 8
    assert causes[("unsupported", "no PrivateUse1 kernel for aten::mul.Tensor")] == 4
    assert sum(causes.values()) == failing and len(causes) <= 4
    assert "no PrivateUse1 kernel for aten::div.Tensor" in (report / "summary.md").read_text()
    assert "registered at /pytorch/build" in json.dumps(summary["records"])  # the record keeps it all
    assert out.count("registered at /pytorch/build") <= 3 * len(causes)
    assert len(out.encode()) < 1000 * failing + 8000, len(out.encode())
