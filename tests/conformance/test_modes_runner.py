"""``python -m neuron_conformance.conformance.backend.modes`` on a run that cannot run its tests: exit 2, one line, then the log's tail.

Before, the runner printed only the child's exit status and the log's path, so a CI log showed "pytest
exited with status 4" and nothing of why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from neuron_conformance.conformance.backend.modes import _log_tail

ROOT = Path(__file__).resolve().parents[2]


def test_failed_child_run_prints_its_log_tail(tmp_path):
    missing = tmp_path / "no_such_suite.py"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "neuron_conformance.conformance.backend.modes",
            "--suite",
            str(missing),
            "--setting",
            "CONFORMANCE_EMULATOR_ASYNC",
            "--conformance-report-dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    first, *rest = proc.stderr.splitlines()
    assert "pytest exited with status 4" in first and "pytest.log" in first, first
    assert rest and "last lines of its log" in rest[0], proc.stderr
    assert any("no_such_suite.py" in ln for ln in rest[1:]), proc.stderr


def test_log_tail_keeps_the_last_non_empty_lines(tmp_path):
    log = tmp_path / "pytest.log"
    log.write_text("".join(f"line {i}\n\n" for i in range(30)), encoding="utf-8")
    tail = _log_tail(log, lines=3).splitlines()
    assert tail == ["    line 27", "    line 28", "    line 29"]
    assert _log_tail(tmp_path / "absent.log") == ""


def test_log_tail_leaves_out_native_exit_noise(tmp_path):
    """nanobind's leak report, printed after pytest's summary by every process that imported triton (torch's
    CUDA builds), does not push the summary out of the tail."""
    log = tmp_path / "pytest.log"
    noise = [
        "nanobind: leaked 4 instances!",
        ' - leaked instance 0x55d0c3a0 of type "triton._C.libtriton.ir.context"',
        " - ... skipped remainder",
        "nanobind: leaked 31 types!",
        ' - leaked type "triton._C.libtriton.ir.builder"',
        "nanobind: leaked 212 functions!",
        ' - leaked function "get_int1"',
        "nanobind: this is likely caused by a reference counting issue in the binding code.",
        "See https://nanobind.readthedocs.io/en/latest/refleaks.html",
    ]
    log.write_text("\n".join(["E   RuntimeError: boom", "1 failed in 2.00s", *noise * 3]) + "\n", encoding="utf-8")
    assert _log_tail(log, lines=2).splitlines() == ["    E   RuntimeError: boom", "    1 failed in 2.00s"]


def test_every_mode_judges_every_sample_unless_a_budget_is_given(tmp_path):
    """A time budget picks samples by the clock, so each run gets ``--conformance-sample-budget=0`` unless the
    pytest arguments after ``--`` set their own."""
    from neuron_conformance.conformance.backend import modes as modes_module

    parser = modes_module.make_parser()
    plain = modes_module._pytest_args(parser.parse_args(["--suite=opsuites/test_compare_cpu.py"]), tmp_path)
    assert "--conformance-sample-budget=0" in plain
    given = modes_module._pytest_args(
        parser.parse_args(["--suite=opsuites/test_compare_cpu.py", "--", "--conformance-sample-budget=5"]), tmp_path
    )
    assert "--conformance-sample-budget=0" not in given and given[-1] == "--conformance-sample-budget=5"


def test_distances_to_an_uninitialised_reference_are_not_compared():
    """A record whose CPU reference held uninitialised values (``cpu_undefined``) has a meaningless
    ``max_abs``; two such runs do not differ by it, while two judged runs still do."""
    from neuron_conformance.conformance.backend.modes import differences

    def rec(max_abs, undefined):
        return {
            "nodeid": "t",
            "outcome": "passed",
            "max_abs": max_abs,
            "atol": 1e-5,
            "rule": "tolerance",
            "cpu_undefined": undefined,
        }

    assert differences([rec(7e-33, 0)], [rec(1.2e36, 1)], "a", "b") == {}
    assert "max_abs" in differences([rec(0.0, 0)], [rec(1.0, 0)], "a", "b")["t"]
