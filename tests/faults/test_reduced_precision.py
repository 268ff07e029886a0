"""Reduced-precision modes are detected, named, and their ops judged at the TF32 tolerance; proven both ways.

CUDA runs float32 convolutions in TF32 by default (``torch.backends.cudnn.allow_tf32``), and float32 matrix
products too once ``torch.set_float32_matmul_precision("high")`` is set: correct, and about 1e-3 from the
CPU. The emulated device's alternate mode computes TF32-like products under the same switch. Now the mode is
named in the header and ``run.json``, ``mm`` in float32 passes, and a product 1e-2 off still fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from neuron_conformance.conformance.backend import precision
from neuron_conformance.conformance.results.records import read_records
from neuron_conformance.conformance.verdict.oracle import judge

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _run(pytester, monkeypatch, fault: str, matmul_precision: str):
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("CONFORMANCE_EMULATOR_MODE", "alternate")
    monkeypatch.setenv("CONFORMANCE_TEST_FAULT", fault)
    monkeypatch.setenv("CONFORMANCE_TEST_MATMUL_PRECISION", matmul_precision)
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / "test_compare_cpu.py"), "--rootdir", str(ROOT), "-p", "no:cacheprovider", "-n", "0",
        "--conformance-backend-module", "precision_backend", "--conformance-device", "neuron",
        "--conformance-ops", "mm", "--conformance-dtypes", "float32", "--conformance-report-dir", str(report),
        "--conformance-no-report", timeout=600,
    )  # fmt: skip
    return result, read_records(report), json.loads((report / "run.json").read_text())


def test_tf32_products_pass_and_the_mode_is_named(pytester, monkeypatch):
    result, records, run = _run(pytester, monkeypatch, "", "high")
    got = [r for r in records if r.get("op") == "mm"]
    assert got and got[0]["outcome"] == "passed", (got, result.stdout.str()[-3000:])
    assert "reduced-precision modes on" in result.stdout.str() and "tf32-matmul" in result.stdout.str()
    assert [m["name"] for m in run["precision_modes"]] == ["tf32-matmul"]


def test_a_product_one_percent_off_still_fails_under_tf32(pytester, monkeypatch):
    _result, records, _run_json = _run(pytester, monkeypatch, "mm-1e-2", "high")
    got = [r for r in records if r.get("op") == "mm"]
    assert got and got[0]["outcome"] == "failed" and got[0]["failure_class"] == "numeric"


def test_the_tf32_error_fails_the_float32_tolerance_and_fp64_arbitration():
    """The old false alarm, on CPU-computable inputs: a TF32 product is off the float32 tolerance and off
    the CPU's error against float64, and within the TF32 tolerance."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 10, generator=g), torch.randn(10, 16, generator=g)  # OpInfo-sized products

    def tf32(t):
        m, e = torch.frexp(t)
        return torch.ldexp(torch.round(m * 2048) / 2048, e)

    device = (tf32(a).double() @ tf32(b).double()).float()
    assert not judge(device, a @ b, reference64=a.double() @ b.double()).passed
    wide = precision.TF32_TOLERANCE
    assert judge(device, a @ b, atol=wide, rtol=wide).passed


def test_detection_follows_the_switches():
    assert precision.detect("cpu") == []
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert [m.name for m in precision.detect("neuron")] == []
        torch.set_float32_matmul_precision("medium")
        modes = precision.detect("neuron")
        assert [m.name for m in modes] == ["tf32-matmul"]
        assert precision.mode_for(modes, "nn.functional.linear", torch.float32) is modes[0]
        assert precision.mode_for(modes, "nn.functional.linear", torch.bfloat16) is None
        assert precision.mode_for(modes, "add", torch.float32) is None
    finally:
        torch.set_float32_matmul_precision(before)
