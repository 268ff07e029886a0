"""random_ops on a backend whose device module raises for its RNG state (torch-opencl's case): the
overload's record fails as ``unsupported`` naming the API, not as a harness error; a backend without a
device ``torch.Generator`` passes with ``generator`` recorded ``not-claimed`` when it does not claim
``generators`` (the emulator), ``missing`` when it claims it (by declaring nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_conformance.conformance.results.records import read_records

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def test_random_ops_on_a_device_without_rng_state(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("HOSTILE_FAULTS", "no-rng-state")
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / "test_random_ops.py"),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "--conformance-backend-module",
        "truth_backend",
        "--conformance-device",
        "neuron",
        "--conformance-ops",
        "aten::uniform_",
        "--conformance-dtypes",
        "float32",
        f"--conformance-report-dir={report}",
        "--conformance-no-report",
        "-q",
        timeout=600,
    )
    recs = [r for r in read_records(report) if r.get("suite") == "random_ops"]
    out = result.stdout.str()[-3000:]
    assert [r.get("op") for r in recs] == ["aten::uniform_"], out
    rec = recs[0]
    assert rec["outcome"] == "failed" and rec["failure_class"] == "unsupported", (rec, out)
    assert "get_rng_state" in rec["message"], rec["message"]


@pytest.mark.parametrize(
    ("backend", "generator"),
    [(None, "not-claimed"), ("truth_backend", "missing")],
    ids=["emulated-not-claimed", "claims-by-default-missing"],
)
def test_random_ops_without_a_device_generator(pytester, monkeypatch, backend, generator):
    """The emulated device does not claim ``generators`` (neuron_conformance.emulator.CAPABILITIES): ``not-claimed``;
    the same device as a backend module that declares nothing claims it and records ``missing``."""
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("HOSTILE_FAULTS", "")
    report = pytester.path / "report"
    extra = ["--conformance-backend-module", backend] if backend else []
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / "test_random_ops.py"),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "--conformance-device",
        "neuron",
        *extra,
        "--conformance-ops",
        "aten::randn.generator",
        "--conformance-dtypes",
        "float32",
        f"--conformance-report-dir={report}",
        "--conformance-no-report",
        "-q",
        timeout=600,
    )
    recs = [r for r in read_records(report) if r.get("suite") == "random_ops"]
    assert [(r["outcome"], r.get("generator"), r.get("rng_state")) for r in recs] == [
        ("passed", generator, "checked")
    ], result.stdout.str()[-3000:]
