"""The compile suite has teeth: faults that exist only in compiled code are caught, each in its class, and
missed by the eager suite.

One pytest subprocess per emulator mode (mirror, device) runs ``opsuites/test_compile.py`` and
``opsuites/test_compare_cpu.py`` in float32 on :data:`OPS` with ``--conformance-backend-module
compile_fault_backend`` (this folder) and ``--conformance-compile-backend=neuron_faulty``, whose faults touch
only the graphs calling ``torch.add`` (swapped for ``torch.sub``), ``torch.mul`` (the compiler raises),
``torch.sin`` (the backward raises) and, through a Python override, ``nn.functional.softsign`` (a
data-dependent branch on the device). Asserted: each faulty op's compile records carry their class and
stage, its ``compare_cpu`` record passes (eager mode is right), and the other ops of the same run pass
(``nonzero``'s legitimate break included: the CPU breaks the same way). A second run per mode with the
emulator's own ``neuron`` backend and no override is the clean control: every test passes.
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

FAULTY = {
    # op: (static test's failure class, stage; the dynamic test's class or None where it checks no backward)
    "add": ("numeric", "forward", "numeric"),
    "mul": ("compile-error", "compile", "compile-error"),
    "sin": ("compiled-run-error", "backward", None),
    "nn.functional.softsign": ("graph-break", None, "graph-break"),
}
CONTROL = ("cos", "sub", "nonzero")
OPS = (*FAULTY, *CONTROL)
MODES = ("mirror", "device")

pytestmark = pytest.mark.slow  # four pytest subprocesses compiling 7 ops each: minutes on 2 cores


def _run(tmp_path_factory, mode: str, backend: str, py_fault: bool) -> dict:
    """Records of one run, by ``(op, suite, variant)``."""
    report = tmp_path_factory.mktemp(f"compile-{mode}-{backend}") / "report"
    env = {
        **os.environ,
        "PYTHONPATH": f"{HERE}{os.pathsep}{ROOT}",
        "CONFORMANCE_EMULATOR_MODE": mode,
        "CONFORMANCE_COMPILE_PY_FAULT": "1" if py_fault else "0",
        "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(ROOT / "opsuites" / "test_compile.py"),
            str(ROOT / "opsuites" / "test_compare_cpu.py"),
            "--rootdir",
            str(ROOT),
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "--conformance-backend-module",
            "compile_fault_backend",
            "--conformance-device",
            "neuron",
            f"--conformance-compile-backend={backend}",
            "--conformance-dtypes",
            "float32",
            f"--conformance-ops={','.join(OPS)}",
            f"--conformance-report-dir={report}",
            "--conformance-no-report",
            "-q",
            "--tb=line",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = {(r["op"], r["suite"], r.get("variant")): r for r in read_records(report)}
    assert out, f"no records; exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module", params=MODES)
def faulty(request, tmp_path_factory):
    return request.param, _run(tmp_path_factory, request.param, "neuron_faulty", py_fault=True)


@pytest.fixture(scope="module", params=MODES)
def clean(request, tmp_path_factory):
    return request.param, _run(tmp_path_factory, request.param, "neuron", py_fault=False)


def _outcome(rec) -> tuple:
    return rec["outcome"], rec.get("failure_class")


def test_compiled_only_faults_are_caught_in_their_class(faulty):
    mode, records = faulty
    for op, (cls, stage, dynamic_cls) in FAULTY.items():
        rec = records[(op, "compile", "compiled")]
        assert _outcome(rec) == ("failed", cls), (mode, op, rec.get("message"))
        if stage is not None:
            assert rec.get("stage") == stage, (mode, op, rec.get("message"))
        dyn = records[(op, "compile", "dynamic")]
        assert _outcome(dyn) == (("failed", dynamic_cls) if dynamic_cls else ("passed", None)), (
            mode,
            op,
            dyn.get("message"),
        )


def test_the_eager_suite_misses_them(faulty):
    """The same ops pass compare_cpu in the same run: the faults are in compiled code only."""
    mode, records = faulty
    got = {op: _outcome(records[(op, "compare_cpu", "function")]) for op in FAULTY}
    assert got == {op: ("passed", None) for op in FAULTY}, mode


def test_the_graph_break_record_names_both_counts(faulty):
    mode, records = faulty
    rec = records[("nn.functional.softsign", "compile", "compiled")]
    assert rec["one_graph"] is False and "on the CPU 1 graph(s), 0 break(s)" in rec["message"], (mode, rec)


def test_untouched_ops_pass_beside_the_faults(faulty):
    mode, records = faulty
    got = {(op, v): _outcome(records[(op, "compile", v)]) for op in CONTROL for v in ("compiled", "dynamic")}
    assert got == {key: ("passed", None) for key in got}, (
        mode,
        {k: records[(k[0], "compile", k[1])].get("message") for k, v in got.items() if v[0] != "passed"},
    )


def test_clean_control_is_green(clean):
    mode, records = clean
    bad = {
        k: (r["outcome"], r.get("failure_class"), r.get("message"))
        for k, r in records.items()
        if r["outcome"] != "passed"
    }
    assert not bad, (mode, bad)
    assert len(records) == 3 * len(OPS)  # compiled, dynamic and compare_cpu for every op


def test_a_data_dependent_break_is_recorded_not_failed(clean):
    """``nonzero`` breaks the graph on every device (capture_dynamic_output_shape_ops is off): recorded with
    the CPU's count beside the device's, and passed."""
    mode, records = clean
    rec = records[("nonzero", "compile", "compiled")]
    assert rec["outcome"] == "passed" and rec["one_graph"] is False, (mode, rec)
    assert rec["graph_breaks"] and rec["graph_breaks"] == rec["cpu_graph_breaks"], (mode, rec)
    one = records[("cos", "compile", "compiled")]
    assert one["one_graph"] is True and set(one["graphs"]) == {1}, (mode, one)
