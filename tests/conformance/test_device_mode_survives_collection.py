"""A device-mode session stays in device mode whatever it collects.

The custom-op suite reads the device's declarations at collection by importing the emulator's backend module,
which installs the emulator again. Before the fix that second ``install()`` switched the emulator back to
mirror mode: in ``pytest opsuites --conformance-emulator-mode device`` every test ran CPU kernels against
CPU kernels (bitwise equal), the device-mode manifest's expected failures all read ``stale``, and a wrong
kernel that only device mode reaches could not fail. Control: the layer_norm decomposition difference the
device-mode manifest expects is seen (xfailed, a non-zero error) with the custom-op suite collected first.
"""

from __future__ import annotations

from pathlib import Path

from neuron_conformance.conformance.results.records import read_records

ROOT = Path(__file__).resolve().parents[2]


def test_device_mode_session_with_the_custom_op_suite_collected(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    for name in ("CONFORMANCE_EMULATOR_MODE", "CONFORMANCE_EMULATOR", "CONFORMANCE_BACKEND_MODULE"):
        monkeypatch.delenv(name, raising=False)
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / "test_custom_ops.py"),
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "--conformance-emulator-mode=device",
        "--conformance-ops=nn.functional.layer_norm",
        "--conformance-dtypes=float32",
        "-k",
        "test_compare_cpu",
        f"--conformance-report-dir={report}",
        "--conformance-no-report",
        "-q",
        timeout=600,
    )
    records = [r for r in read_records(report) if r.get("suite") == "compare_cpu"]
    assert len(records) == 1, result.stdout.str()[-3000:]
    rec = records[0]
    assert rec["outcome"] == "xfailed", (rec["outcome"], rec.get("message", "")[:300])
    assert rec["max_abs"] and rec["max_abs"] > 0, rec  # device mode's decomposition, not CPU's kernel
    assert result.ret == 0
