"""A hostile backend that autoloads (torch's ``[torch.backends]`` entry points): plain ``pytest -n 2
opsuites/...`` with no ``--conformance-backend-module`` must treat it as a third-party backend (child-process preflight,
not the emulator's in-process probe), report each problem in one line and finish with a complete report.

The backend is installed as a dist-info folder on PYTHONPATH (:func:`tests.hostile.backend.write_autoload_dist`),
so every process of the run (controller, preflight child, xdist workers) loads it at ``import torch``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile.backend import write_autoload_dist
from tests.hostile.conftest import REPO, records, run_json

OTHER_BACKEND = '''
"""Takes PrivateUse1 under another name at import torch, as torch-opencl does (no kernels needed)."""
import torch

def autoload():
    torch.utils.rename_privateuse1_backend("hostileother")
'''


def _run(tmp_path: Path, faults: str, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    """``python -m pytest ARGS`` in the repository with the hostile dist on PYTHONPATH; (process, report dir)."""
    site = tmp_path / "site"
    write_autoload_dist(site)
    out = tmp_path / "out"
    full_env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    full_env.update({"PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "HOSTILE_FAULTS": faults, **(env or {})})
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *args,
            f"--conformance-report-dir={out}",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=500,
        check=False,
    )
    return proc, out


def _lines(proc: subprocess.CompletedProcess, prefix: str) -> list[str]:
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith(prefix)]


@pytest.mark.timeout(600)
def test_autoloaded_probe_segfault_costs_a_line(tmp_path, hostile):
    """pin_memory() segfaults in an autoloaded emulator-based backend: the probe runs in the preflight
    child (before the fix, the emulator's in-process probe killed the run with no report)."""
    hostile("")
    proc, out = _run(
        tmp_path,
        "probe-segv",
        "-n",
        "2",
        "opsuites/test_compare_cpu.py",
        "--conformance-ops=add",
        "--conformance-dtypes=float32",
    )
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    line = _lines(proc, "conformance: device APIs missing")
    assert len(line) == 1 and "torch.Tensor.pin_memory (crashed (SIGSEGV))" in line[0], tail
    meta = run_json(out)
    assert meta["complete"] is True and meta["stop_reason"] is None
    device = meta["device"]
    assert (device["registered_by"], device["emulated"], device["backend"]) == (
        "autoload:hostile",
        False,
        "tests.hostile.backend",
    )
    assert device["api_support"]["torch.Tensor.pin_memory"] == "missing"
    recs = records(out)
    assert recs and all(r["outcome"] == "passed" for r in recs.values()), tail
    assert json.loads((out / "summary.json").read_text())["totals"]["passed"] == len(recs)
    assert proc.returncode == 0, tail


@pytest.mark.timeout(600)
def test_autoloaded_backend_without_int_scalar_add(tmp_path, hostile):
    """The canary's integer-scalar add is missing: one line says so and which canary is used; the integer
    add tests fail as unsupported, the float ones pass, and no worker is restarted for it."""
    hostile("")
    proc, out = _run(
        tmp_path,
        "no-int-scalar-add",
        "-n",
        "2",
        "opsuites/test_compare_cpu.py",
        "--conformance-ops=add",
        "--conformance-dtypes=float32,int64",
    )
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    line = _lines(proc, "conformance: the harness needs")
    assert len(line) == 1 and "canary" in line[0] and "used instead" in line[0], tail
    recs = records(out)
    ints = [r for r in recs.values() if r["dtype"] == "int64"]
    floats = [r for r in recs.values() if r["dtype"] == "float32"]
    assert ints and floats, tail
    assert all((r["outcome"], r["failure_class"]) == ("failed", "unsupported") for r in ints), tail
    assert all(r["outcome"] == "passed" for r in floats), tail
    assert not any(r.get("device_poisoned") or r.get("failure_class") == "crash" for r in recs.values())
    meta = run_json(out)
    assert meta["complete"] is True and meta["stop_reason"] is None
    assert meta["device"]["registered_by"] == "autoload:hostile"
    totals = json.loads((out / "summary.json").read_text())["totals"]
    assert (totals["failed"], totals["passed"]) == (len(ints), len(floats))
    assert proc.returncode == 1


@pytest.mark.timeout(600)
def test_device_neuron_with_an_autoloaded_neuron_backend_tests_that_backend(tmp_path, hostile):
    """--conformance-device neuron names the autoloaded backend's own device type: it is tested as a third-party
    backend (README, "Set-up"); with TORCH_DEVICE_BACKEND_AUTOLOAD=0 the harness's emulator is tested."""
    hostile("")
    args = (
        "opsuites/test_compare_cpu.py",
        "--conformance-ops=mul",
        "--conformance-dtypes=float32",
        "--conformance-device",
        "neuron",
        "-p",
        "no:xdist",
    )
    proc, out = _run(tmp_path, "", *args)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert run_json(out)["device"]["registered_by"] == "autoload:hostile"
    proc, out = _run(tmp_path, "", *args, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert proc.returncode == 0, proc.stdout[-3000:]
    device = run_json(out)["device"]
    assert (device["registered_by"], device["emulated"]) == ("harness", True)


def test_device_neuron_with_another_autoloaded_backend_is_one_line(tmp_path, hostile):
    """An autoloaded backend that renamed PrivateUse1 to another type: --conformance-device neuron stops at start with
    one line naming it and TORCH_DEVICE_BACKEND_AUTOLOAD=0 (exit 2, no INTERNALERROR)."""
    hostile("")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "other_backend.py").write_text(OTHER_BACKEND)
    write_autoload_dist(tmp_path / "site", name="other", target="other_backend:autoload")
    proc, _ = _run(
        tmp_path / "x",
        "",
        "opsuites/test_compare_cpu.py",
        "--conformance-ops=mul",
        "--conformance-device",
        "neuron",
        "-p",
        "no:xdist",
        env={"PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO)])},
    )
    text = proc.stdout + proc.stderr
    line = [
        ln for ln in text.splitlines() if "conformance: --conformance-device neuron" in ln
    ]  # pytest.exit: "Exit: ..."
    assert proc.returncode == 2 and len(line) == 1, text[-3000:]
    assert "'hostileother'" in line[0] and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in line[0]
    assert "INTERNALERROR" not in text
