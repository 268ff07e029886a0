"""Fallback-aware verdicts and differential mode runs have teeth, in both emulator modes.

* A backend whose cumsum kernel raises ``NotImplementedError`` and silently runs on the CPU
  (``fallback-hides-unsupported``, tests/faults/fallback_kernels.py) passes the CPU comparison: the report
  must list it as a fallback pass, and ``--conformance-require-native`` must fail it with class ``fallback``.
* The emulator with a fallback set of five ops (``$CONFORMANCE_EMULATOR_FALLBACK``) reports exactly those
  five as fallback passes; under ``--conformance-require-native`` exactly those five fail.
* A backend whose mul is wrong only in its declared mode ``CONFORMANCE_TEST_MODE=1``
  (``mode-dependent-mul``) is flagged by ``python -m neuron_conformance.conformance.backend.modes`` as ``mode-difference``, naming
  both modes.
* Clean controls: the same runs without a fault are green (``--conformance-require-native`` included), and a
  differential run over every mode ``fault_backend`` declares (the emulator's and its own) finds 0
  differences.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_conformance.conformance.results.records import read_records

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEVICE_MANIFEST = ROOT / "emulator" / "manifest-device.toml"
"""The emulator's device-mode expected failures, given to ``fault_backend`` (not the emulator by name)."""

FALLBACK_SET = ("cumsum", "mm", "tanh", "abs", "sin")
"""The OpInfos whose aten ops (same names) form the emulator's fallback set in the numbers test."""

MODES = ["mirror", "device"]


def _env(mode: str, fault: str = "", **extra: str) -> dict:
    """The environment of a run: this folder and the project on the path, the emulator mode, the fault."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONFORMANCE_")}
    env.update(
        PYTHONPATH=f"{HERE}:{ROOT}",
        CONFORMANCE_EMULATOR_MODE=mode,
        CONFORMANCE_TEST_FAULT=fault,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        **extra,
    )
    return env


def _suite(tmp_path: Path, mode: str, ops: str, *, fault: str | None = None, strict: bool = False, **extra: str):
    """Run compare_cpu on ``ops`` (float32): with ``fault_backend`` when ``fault`` is given, else the plain
    emulator. Returns (stdout, records, summary.json)."""
    report = tmp_path / "report"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "-q",
        f"--conformance-ops={ops}",
        "--conformance-dtypes=float32",
        f"--conformance-report-dir={report}",
        "--conformance-device=neuron",
        f"--conformance-emulator-mode={mode}",
    ]
    if fault is not None:
        cmd.append("--conformance-backend-module=fault_backend")
        if mode == "device":
            cmd.append(f"--conformance-manifest={DEVICE_MANIFEST}")
    if strict:
        cmd.append("--conformance-require-native")
    proc = subprocess.run(
        cmd, cwd=ROOT, env=_env(mode, fault or "", **extra), capture_output=True, text=True, timeout=600
    )
    out = proc.stdout + proc.stderr
    summary = json.loads((report / "summary.json").read_text()) if (report / "summary.json").is_file() else {}
    return out, read_records(report), summary


def _by_op(records):
    return {r["op"]: r for r in records if r.get("suite") == "compare_cpu"}


@pytest.mark.parametrize("mode", MODES)
def test_hidden_fallback_is_listed_as_a_fallback_pass(tmp_path, mode):
    out, records, summary = _suite(tmp_path, mode, "cumsum,add", fault="fallback-hides-unsupported")
    recs = _by_op(records)
    assert recs["cumsum"]["outcome"] == "passed", out[-3000:]
    assert set(recs["cumsum"]["fallback_ops"]) & {"aten::cumsum", "aten::cumsum.out"}, recs["cumsum"]
    assert recs["add"]["outcome"] == "passed" and recs["add"]["fallback_ops"] == [], recs["add"]
    sec = summary["fallback"]
    assert sec["observable"] and sec["fallback_passes"] == 1 and sec["native_passes"] == 1, sec
    assert [r["op"] for r in sec["rows"] if r["fallback"]] == ["cumsum"], sec["rows"]


@pytest.mark.parametrize("mode", MODES)
def test_require_native_fails_the_hidden_fallback(tmp_path, mode):
    out, records, summary = _suite(tmp_path, mode, "cumsum,add", fault="fallback-hides-unsupported", strict=True)
    recs = _by_op(records)
    assert recs["cumsum"]["outcome"] == "failed" and recs["cumsum"]["failure_class"] == "fallback", out[-3000:]
    assert "aten::cumsum" in recs["cumsum"]["message"]
    assert recs["add"]["outcome"] == "passed", recs["add"]
    assert summary["counts"]["by_failure_class"] == {"fallback": 1}


@pytest.mark.parametrize("mode", MODES)
def test_clean_backend_is_native_under_require_native(tmp_path, mode):
    out, records, summary = _suite(tmp_path, mode, "cumsum,add", fault="", strict=True)
    recs = _by_op(records)
    assert set(recs) == {"cumsum", "add"}, out[-3000:]
    assert all(r["outcome"] == "passed" and r["fallback_ops"] == [] for r in recs.values()), out[-3000:]
    assert summary["fallback"]["fallback_passes"] == 0 and summary["fallback"]["native_passes"] == 2


@pytest.mark.parametrize("strict", [False, True], ids=["report", "require-native"])
@pytest.mark.parametrize("mode", MODES)
def test_emulator_fallback_set_shows_exactly_its_ops(tmp_path, mode, strict):
    fallback = ",".join(f"aten::{op}" for op in FALLBACK_SET)
    out, records, summary = _suite(
        tmp_path, mode, ",".join((*FALLBACK_SET, "add")), strict=strict, CONFORMANCE_EMULATOR_FALLBACK=fallback
    )
    recs = _by_op(records)
    assert set(recs) == {*FALLBACK_SET, "add"}, out[-3000:]
    sec = summary["fallback"]
    column = "failed" if strict else "fallback"
    assert sorted(r["op"] for r in sec["rows"] if r[column]) == sorted(FALLBACK_SET), sec["rows"]
    assert sec["native_passes"] == 1 and sec["fallback_passes" if not strict else "fallback_failures"] == 5, sec
    for op in FALLBACK_SET:
        assert {n.split(".")[0] for n in recs[op]["fallback_ops"]} == {f"aten::{op}"}, recs[op]
        assert recs[op]["outcome"] == ("failed" if strict else "passed"), recs[op]
    assert recs["add"]["outcome"] == "passed" and recs["add"]["fallback_ops"] == []


def _modes(tmp_path: Path, mode: str, fault: str, *setting: str):
    report = tmp_path / "modes"
    cmd = [
        sys.executable,
        "-m",
        "neuron_conformance.conformance.backend.modes",
        "--suite",
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        "--conformance-ops",
        "mul,cumsum",
        "--conformance-dtypes",
        "float32",
        "--conformance-device",
        "neuron",
        "--conformance-backend-module",
        "fault_backend",
        f"--conformance-report-dir={report}",
        *[f"--setting={s}" for s in setting],
        "--",
        "-n",
        "0",
        "--rootdir",
        str(ROOT),
    ]
    if mode == "device":
        cmd.append(f"--conformance-manifest={DEVICE_MANIFEST}")
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(mode, fault), capture_output=True, text=True, timeout=900)
    return proc, read_records(report), json.loads((report / "modes.json").read_text())


@pytest.mark.parametrize("mode", MODES)
def test_mode_dependent_kernel_is_a_mode_difference(tmp_path, mode):
    proc, records, runs = _modes(tmp_path, mode, "mode-dependent-mul", "CONFORMANCE_TEST_MODE")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = _by_op(records)
    assert recs["mul"]["failure_class"] == "mode-difference", recs
    assert "baseline" in recs["mul"]["message"] and "CONFORMANCE_TEST_MODE=1" in recs["mul"]["message"]
    assert recs["cumsum"]["outcome"] == "passed" and runs["differences"] == 1


@pytest.mark.parametrize("mode", MODES)
def test_clean_backend_has_no_mode_difference(tmp_path, mode):
    proc, records, runs = _modes(tmp_path, mode, "")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [r["mode"] for r in runs["runs"]] == [
        "baseline",
        "CONFORMANCE_EMULATOR_ASYNC=1",
        "CONFORMANCE_EMULATOR_FALLBACK=aten::cumsum,aten::mm,aten::tanh,aten::abs,aten::sin",
        "CONFORMANCE_TEST_MODE=1",
    ]
    assert runs["differences"] == 0 and len(records) == 2 and all(r["outcome"] == "passed" for r in records)
