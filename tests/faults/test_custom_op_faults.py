"""The custom_ops suite has teeth: each wrong piece of a custom op is flagged with its own failure class.

One pytest subprocess runs ``opsuites/test_custom_ops.py`` in float32 on the emulated device (mirror mode)
with ``--conformance-backend-module custom_op_backend`` (this folder), whose ``CONFORMANCE_CUSTOM_OPS`` declares the
emulator's three clean ops (the control: every test passes, no false alarm) and four RMSNorms with one
wrong piece each (:data:`tests.faults.custom_op_backend.FAULTS`). Each case names the suite's test and the
failure class (and for the eager checks the stage) its record must carry; the other checks of a faulty op
are asserted too where they are determined (a wrong fake kernel passes the eager check: eager never calls
it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_conformance.conformance.results.records import read_records

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

CASES = [
    # (op id, suite test, outcome, failure class, stage)
    ("neuron_faults.rms_norm_fake_shape", "test_opcheck", "failed", "opcheck-fake", None),
    ("neuron_faults.rms_norm_fake_shape", "test_eager", "passed", None, None),
    ("neuron_faults.rms_norm_fake_shape", "test_compile", "failed", "compile-error", None),
    ("neuron_faults.rms_norm_fake_dtype", "test_opcheck", "failed", "opcheck-fake", None),
    ("neuron_faults.rms_norm_fake_dtype", "test_eager", "passed", None, None),
    ("neuron_faults.rms_norm_backward", "test_opcheck", "passed", None, None),
    ("neuron_faults.rms_norm_backward", "test_eager", "failed", "numeric", "backward"),
    ("neuron_faults.rms_norm_backward", "test_compile", "failed", "numeric", "backward"),
    ("neuron_faults.rms_norm_forward", "test_opcheck", "passed", None, None),
    ("neuron_faults.rms_norm_forward", "test_eager", "failed", "numeric", "forward"),
    ("neuron_faults.rms_norm_forward", "test_compile", "failed", "numeric", "forward"),
]
CLEAN = ("neuron_ops.rms_norm", "neuron_ops.rotary", "neuron_ops.attention")
TESTS = ("test_opcheck", "test_eager", "test_compile")


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """The records of one run of the suite against ``custom_op_backend``, by ``(op id, test name)``."""
    report = tmp_path_factory.mktemp("custom_ops") / "report"
    env = {
        **os.environ,
        "PYTHONPATH": f"{HERE}{os.pathsep}{ROOT}",
        "CONFORMANCE_EMULATOR_MODE": "mirror",
        "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(ROOT / "opsuites" / "test_custom_ops.py"),
            "--rootdir",
            str(ROOT),
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "--conformance-backend-module",
            "custom_op_backend",
            "--conformance-device",
            "neuron",
            "--conformance-dtypes",
            "float32",
            f"--conformance-report-dir={report}",
            "--conformance-no-report",
            "-q",
            "--tb=no",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = {}
    for rec in read_records(report):
        out[(rec["op"], rec["nodeid"].split("::")[1].split("[")[0])] = rec
    assert out, f"no records; exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return out


@pytest.mark.parametrize(
    ("op_id", "test", "outcome", "failure_class", "stage"), CASES, ids=[f"{c[0].split('.')[1]}-{c[1]}" for c in CASES]
)
def test_fault_is_flagged(records, op_id, test, outcome, failure_class, stage):
    rec = records[(op_id, test)]
    assert (rec["outcome"], rec.get("failure_class")) == (outcome, failure_class), rec.get("message")
    if stage is not None:
        assert rec.get("stage") == stage, rec.get("message")


def test_clean_ops_pass(records):
    """The control: the emulator's own custom ops pass every check in the same run."""
    got = {(op, t): records[(op, t)]["outcome"] for op in CLEAN for t in TESTS}
    assert got == {key: "passed" for key in got}
