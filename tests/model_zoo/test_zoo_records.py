"""End to end: a zoo test run under the conformance plugin writes a model record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]


def test_zoo_test_writes_model_record(tmp_path):
    report = tmp_path / "report"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "model_zoo/test_models.py::test_model[bert-float32-forward]",
        "-q",
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        "--conformance-device",
        "neuron",
        "--conformance-report-dir",
        str(report),
        "--conformance-no-report",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = [json.loads(line) for f in (report / "records").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert len(records) == 1
    rec = records[0]
    assert (rec["suite"], rec["kind"], rec["op"], rec["variant"], rec["dtype"]) == (
        "model_zoo",
        "model",
        "bert",
        "forward",
        "float32",
    )
    assert rec["outcome"] == "passed" and rec["rule"] in ("tolerance", "fp64")
    assert rec["metrics"]["top1_agree"] == 1.0
