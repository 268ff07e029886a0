"""Backends nobody here wrote: the harness tells the truth about them (docs/opsuites.md).

Each case runs a few op-suite tests in a pytest subprocess against ``truth_backend`` (the emulated device
as a third-party backend with the faults of ``$HOSTILE_FAULTS``, :mod:`faults_truth`) and reads the
records.
"""

from __future__ import annotations

import json
from pathlib import Path

from neuron_conformance.conformance.results.records import read_records

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _run(pytester, monkeypatch, faults, *args, backend="truth_backend"):
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("HOSTILE_FAULTS", faults)
    report = pytester.path / "report"
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
        "--conformance-dtypes",
        "float32",
        "--conformance-report-dir",
        str(report),
        "-q",
        timeout=600,
    )
    return result, {r["nodeid"].split("::")[-1]: r for r in read_records(report)}, report


def test_random_ops_are_not_charged_for_a_missing_rng_state(pytester, monkeypatch):
    """A: the CPU reference does not touch the device RNG, and neither does the harness's sample wrapper: a
    device without get_rng_state runs dropout and normal correctly, so they pass (the gap is charged once, to
    the device-API check ``rng.state``: tests/hostile/test_third_party_points.py)."""
    result, recs, _ = _run(
        pytester,
        monkeypatch,
        "no-rng-state",
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        "--conformance-ops",
        "nn.functional.dropout,normal,add",
    )
    out = result.stdout.str()[-3000:]
    assert recs["test_compare_cpu[add-float32]"]["outcome"] == "passed", out
    for op in ("nn.functional.dropout", "normal"):
        rec = recs[f"test_compare_cpu[{op}-float32]"]
        assert rec["outcome"] == "passed", (rec, out)


def test_no_cpu_reference_is_its_own_outcome(pytester, monkeypatch):
    """A: every CPU sample raising is ``no-reference`` (not passed, not red), counted by the report."""
    pytester.makepyfile(
        test_noref="""
        from neuron_conformance.conformance.verdict.failures import NoReference

        def test_noref(conformance_record):
            conformance_record.update(suite="compare_cpu", op="noref", kind="op")
            raise NoReference("noref float32: no CPU reference: the CPU raised for all 3 sample(s)")
    """
    )
    result, recs, report = _run(pytester, monkeypatch, "", str(pytester.path / "test_noref.py"))
    assert result.ret == 0, result.stdout.str()
    rec = recs["test_noref"]
    assert rec["outcome"] == "no-reference" and "no CPU reference" in rec["message"]
    summary = json.loads((report / "summary.json").read_text())
    assert summary["totals"]["no-reference"] == 1 and summary["totals"]["passed"] == 0
    md = (report / "summary.md").read_text()
    assert "1 without a CPU reference" in md and "no-reference" in md
    assert "no-reference" in (report / "index.html").read_text()


def test_coverage_off_by_default_without_backend_counter(pytester, monkeypatch):
    """B: no dispatch mode without a backend counter (``auto``); the report says why; ``mode`` forces it."""
    suite = str(ROOT / "opsuites" / "test_compare_cpu.py")
    result, recs, report = _run(pytester, monkeypatch, "", suite, "--conformance-ops", "add")
    assert not (report / "coverage.json").exists()
    run = json.loads((report / "run.json").read_text())
    assert run["aten_coverage"]["traced_by"] is None and "op counter" in run["aten_coverage"]["reason"]
    assert "aten coverage: not traced" in (report / "summary.md").read_text()
    result, recs, report = _run(
        pytester, monkeypatch, "", suite, "--conformance-ops", "add", "--conformance-aten-coverage", "mode"
    )
    cov = json.loads((report / "coverage.json").read_text())
    assert "aten::add.Tensor" in cov["executed"], result.stdout.str()[-2000:]


def test_transfer_falls_back_without_set_offset(pytester, monkeypatch):
    """C: without ``set_.source_Storage_storage_offset`` samples move by empty_strided + copy_, said once."""
    result, recs, report = _run(
        pytester,
        monkeypatch,
        "no-set-offset",
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        str(ROOT / "opsuites" / "test_layouts.py"),
        "--conformance-ops",
        "add,mul",
        "-v",
    )
    out = result.stdout.str()
    assert out.count("samples move to the device by empty_strided+copy_") == 1, out[-3000:]  # the header
    assert json.loads((report / "run.json").read_text())["device"]["transfer"] == "empty_strided+copy_"
    bad = {k: (r["outcome"], r.get("failure_class")) for k, r in recs.items() if r["outcome"] != "passed"}
    assert not bad and len(recs) == 4, (bad, out[-3000:])


def test_unknown_compile_backend_is_one_line(pytester, monkeypatch):
    """D6: ``--conformance-compile-backend`` with an unknown name: exit 2, one line listing the registered backends."""
    result, _, _ = _run(
        pytester,
        monkeypatch,
        "",
        str(ROOT / "opsuites" / "test_device_api.py"),
        "--conformance-compile-backend",
        "nope",
    )
    err = result.stderr.str() + result.stdout.str()
    assert result.ret == 2 and "--conformance-compile-backend 'nope' is not a registered" in err and "inductor" in err


def test_compile_backend_option_is_used(pytester, monkeypatch):
    """D6, D4: ``--conformance-compile-backend aot_eager`` runs the device-backend compile check with it; autocast
    and compile run on a device without RNG state (inputs are drawn on the CPU)."""
    result, recs, _ = _run(
        pytester,
        monkeypatch,
        "no-rng-state",
        str(ROOT / "opsuites" / "test_device_api.py"),
        "-k",
        "compile_device_backend or autocast",
        "--conformance-compile-backend",
        "aot_eager",
    )
    out = result.stdout.str()[-3000:]
    assert recs["test_compile_device_backend"]["outcome"] == "passed", out
    assert recs["test_autocast_policy"]["outcome"] == "passed", out
