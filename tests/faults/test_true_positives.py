"""The real deviations a CUDA run showed stay failures in every emulator mode.

A run on an H200 (torch 2.11) found real CUDA deviations among its failures: ``embedding_renorm_`` on a
non-contiguous weight, ``clamp`` of uint8 with an int32 bound, ``channel_shuffle`` on a transposed input, a
crash in ``aten::range.out_``, batch norm over zero channels dying with SIGFPE, integer ``linspace``,
``avg_pool2d`` into a non-contiguous ``out=``, half-precision ``cumsum`` accumulating in the storage dtype,
bfloat16 ``logspace`` 5 ULP off. Each has a wrong kernel here (``true_positive_kernels.py``); all are
installed at once, and in each mode (the alternate mode's kernels compute differently from the CPU
everywhere else) every one must be caught, as ``benchmarks.device_summary`` reads a real device's run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.device_summary import TRUE_POSITIVES, matches
from neuron_conformance.conformance.results.outcomes import FAILING
from neuron_conformance.conformance.results.records import read_records
from tests.faults.true_positive_kernels import TRUE_POSITIVE_FAULTS

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

SUITES = ("test_compare_cpu.py", "test_variants.py", "test_layouts.py", "test_generated.py", "test_stress.py")
OPS = (
    "nn.functional.embedding,clamp,nn.functional.channel_shuffle,aten::range.out_,native_batch_norm,linspace,"
    "nn.functional.avg_pool2d,cumsum,logspace"
)


@pytest.mark.parametrize("mode", ["mirror", "device", "alternate"])
def test_every_true_positive_is_caught(pytester, monkeypatch, mode):
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("CONFORMANCE_EMULATOR_MODE", mode)
    monkeypatch.setenv("CONFORMANCE_TEST_FAULT", ",".join(TRUE_POSITIVE_FAULTS))
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        *[str(ROOT / "opsuites" / s) for s in SUITES], "--rootdir", str(ROOT), "-p", "no:cacheprovider",
        "-n", "2", "--conformance-backend-module", "fault_backend", "--conformance-device", "neuron",
        "--conformance-ops", OPS, "--conformance-dtypes", "float32,bfloat16,uint8,int64",
        "--conformance-report-dir", str(report), "--conformance-no-report", "-q", timeout=900,
    )  # fmt: skip
    failing = [r for r in read_records(report) if r["outcome"] in FAILING]
    missed = [
        name
        for name, ops, dtypes, classes in TRUE_POSITIVES
        if not any(matches(r, ops, dtypes, classes) for r in failing)
    ]
    assert not missed, (mode, missed, result.stdout.str()[-3000:])
