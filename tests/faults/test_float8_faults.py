"""Float8 end to end: the cast suite and the float8 OpInfos catch wrong float8 kernels, the clean emulator
passes in both modes, and a backend that does not claim ``float8`` gets ``not-claimed``.

Each case runs suites in a pytest subprocess against ``fault_backend`` (a wrong kernel of
``float8_kernels.py`` on the PrivateUse1 key) or ``capability_backend`` and reads the records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_conformance.conformance.results.records import read_records

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ALL_FLOAT8 = "float8_e4m3fn,float8_e5m2,float8_e4m3fnuz,float8_e5m2fnuz,float8_e8m0fnu"
OPINFOS = "eye,torch._scaled_mm,torch._scaled_mm_v2"
"""The OpInfos of torch 2.13 whose dtypes include float8 (none claims float8_e8m0fnu)."""


def _run(
    pytester,
    monkeypatch,
    mode: str,
    *args,
    fault: str = "",
    backend: str = "fault_backend",
    capabilities: str = "",
    report: bool = False,
):
    """Run ``args`` with ``backend`` in emulator ``mode`` and ``fault``; ``(result, records, report dir)``."""
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("CONFORMANCE_TEST_FAULT", fault)
    monkeypatch.setenv("CONFORMANCE_TEST_CAPABILITIES", capabilities)
    monkeypatch.setenv("CONFORMANCE_EMULATOR_MODE", mode)
    out = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        *args,
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "--conformance-backend-module",
        backend,
        "--conformance-device",
        "neuron",
        f"--conformance-report-dir={out}",
        "-q",
        *([] if report else ["--conformance-no-report"]),
        timeout=600,
    )
    return result, (read_records(out) if (out / "records").is_dir() else []), out


def _casts(pytester, monkeypatch, mode, fault, dtypes):
    result, records, _ = _run(
        pytester,
        monkeypatch,
        mode,
        str(ROOT / "opsuites" / "test_float8_casts.py"),
        f"--conformance-dtypes={dtypes}",
        fault=fault,
    )
    return result, {(r["dtype"], r["variant"]): r for r in records}


@pytest.mark.parametrize("mode", ["mirror", "device"])
def test_clean_emulator_passes_every_float8_test(pytester, monkeypatch, mode):
    """Every cast of the five formats (50) and the float8 OpInfos (3 ops x 4 formats) pass on the clean
    emulator; the casts are judged bit for bit."""
    result, records, _ = _run(
        pytester,
        monkeypatch,
        mode,
        str(ROOT / "opsuites" / "test_float8_casts.py"),
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        f"--conformance-ops=aten::_to_copy,{OPINFOS}",
        f"--conformance-dtypes={ALL_FLOAT8}",
    )
    text = result.stdout.str()[-3000:]
    assert result.ret == 0, text
    casts = [r for r in records if r["suite"] == "float8_casts"]
    ops = [r for r in records if r["suite"] == "compare_cpu"]
    assert len(casts) == 50 and len(ops) == 12, text
    assert all(r["outcome"] == "passed" for r in casts + ops), text
    assert all(r["rule"] == "bit-exact" and r["atol"] == 0.0 and r["samples"] >= 256 for r in casts)
    assert {r["dtype"] for r in ops} == set(ALL_FLOAT8.split(",")) - {"float8_e8m0fnu"}


@pytest.mark.parametrize("mode", ["mirror", "device"])
def test_ties_away_from_zero_is_flagged(pytester, monkeypatch, mode):
    """Rounding ties away from zero fails every cast from a wider format to e4m3fn, at a midpoint; e8m0fnu,
    which torch's CPU rounds half up, is not flagged (the reference is the CPU, not a rule)."""
    result, by = _casts(pytester, monkeypatch, mode, "float8-ties-away", "float8_e4m3fn,float8_e8m0fnu")
    text = result.stdout.str()[-3000:]
    assert result.ret == 1, text
    for wide in ("float32", "bfloat16", "float16"):
        rec = by[("float8_e4m3fn", f"from_{wide}")]
        assert rec["outcome"] == "failed" and rec["failure_class"] == "numeric", (wide, text)
        assert rec["rule"] == "bit-exact" and rec["max_ulp"] == 1.0, rec
    assert (
        "0.0009765625 (0x3a800000) -> device 0.001953125 (0x01), CPU 0.0 (0x00)"
        in by[("float8_e4m3fn", "from_float32")]["message"]
    )  # half the smallest subnormal: a tie to +0
    assert by[("float8_e8m0fnu", "from_float32")]["outcome"] == "passed", text
    assert by[("float8_e4m3fn", "to_float32")]["outcome"] == "passed", text  # widening never rounds


def test_truncation_is_flagged(pytester, monkeypatch):
    """Rounding toward zero fails the casts to e8m0fnu (missed by ties-away) and e4m3fn."""
    result, by = _casts(pytester, monkeypatch, "mirror", "float8-truncates", "float8_e4m3fn,float8_e8m0fnu")
    assert result.ret == 1
    for f8 in ("float8_e4m3fn", "float8_e8m0fnu"):
        assert by[(f8, "from_float32")]["outcome"] == "failed", by[(f8, "from_float32")]
    assert by[("float8_e8m0fnu", "to_float32")]["outcome"] == "passed"


@pytest.mark.parametrize("mode", ["mirror", "device"])
def test_saturation_where_cpu_gives_nan_or_inf_is_flagged(pytester, monkeypatch, mode):
    """Clamping overflow to the largest value fails e4m3fnuz (CPU: NaN) and e5m2 (CPU: inf), and passes
    e4m3fn, which the CPU saturates too."""
    result, by = _casts(pytester, monkeypatch, mode, "float8-saturates", "float8_e4m3fn,float8_e5m2,float8_e4m3fnuz")
    text = result.stdout.str()[-3000:]
    assert result.ret == 1, text
    for f8 in ("float8_e5m2", "float8_e4m3fnuz"):
        rec = by[(f8, "from_float32")]
        assert rec["outcome"] == "failed" and "non-finite on either side" in rec["message"], rec
    assert by[("float8_e4m3fn", "from_float32")]["outcome"] == "passed", text
    assert by[("float8_e4m3fnuz", "to_float8_e4m3fn")]["outcome"] == "passed", text
    assert by[("float8_e4m3fn", "to_float8_e4m3fnuz")]["outcome"] == "failed", text  # 448 > 240: CPU NaN


@pytest.mark.parametrize(
    ("fault", "device_outcome"), [("float8-mm-one-ulp", "passed"), ("float8-mm-two-ulps", "failed")]
)
def test_float8_tolerance_admits_one_ulp_not_two(pytester, monkeypatch, fault, device_outcome):
    """A float8 ``_scaled_mm`` output one ULP off passes in device mode (tolerance: eps of e4m3fn) and two
    ULPs off fails; mirror mode demands the CPU's bits and fails both."""
    for mode, want in (("device", device_outcome), ("mirror", "failed")):
        result, records, _ = _run(
            pytester,
            monkeypatch,
            mode,
            str(ROOT / "opsuites" / "test_shape_contracts.py"),
            "--conformance-ops=aten::_scaled_mm",
            fault=fault,
        )
        (rec,) = records
        assert rec["outcome"] == want, (mode, rec, result.stdout.str()[-2000:])
        if mode == "device" and want == "failed":
            assert rec["rtol"] == 0.125 and rec["max_ulp"] == 2.0, rec


def test_backend_without_float8_gets_not_claimed(pytester, monkeypatch):
    """``float8 = false``: every float8 cast and float8 OpInfo test is ``not-claimed`` (records and
    summary), the float32 test still passes, and the run is green."""
    result, records, out = _run(
        pytester,
        monkeypatch,
        "mirror",
        str(ROOT / "opsuites" / "test_float8_casts.py"),
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        "--conformance-ops=aten::_to_copy,eye",
        "--conformance-dtypes=float32,float8_e4m3fn,float8_e5m2",
        backend="capability_backend",
        capabilities="float8=0",
        report=True,
    )
    text = result.stdout.str()[-3000:]
    assert result.ret == 0, text
    unclaimed = [r for r in records if r["outcome"] == "not-claimed"]
    assert len(unclaimed) == 2 * 6 + 2 + 2, text  # 6 casts per format, 1 between them each way, eye x 2
    assert all(r["not_claimed"] == ["float8"] for r in unclaimed)
    assert [r["outcome"] for r in records if r.get("dtype") == "float32"] == ["passed"], text
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["totals"]["not-claimed"] == len(unclaimed) and summary["totals"]["failing"] == 0
    assert summary["verdict"] == "passed"
