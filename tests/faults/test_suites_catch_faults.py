"""The op suites have teeth: each injected wrong kernel is flagged with the right failure class.

Every case runs one suite on one op in a pytest subprocess (``pytester.runpytest_subprocess``) against
the emulated device with one fault installed by ``fault_backend`` (``--conformance-backend-module``), then reads the
result records and asserts that a test of that suite failed with the expected failure class.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_conformance.conformance.results.records import read_records

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

CASES = [
    # fault, suite module, op, dtypes, expected failure classes
    ("relative-1e-3", "test_layouts.py", "mul", "float32", {"numeric"}),
    ("noncontiguous-only", "test_layouts.py", "add", "float32", {"numeric"}),
    ("inplace-copy", "test_variants.py", "add", "float32", {"metadata", "numeric"}),
    ("view-copies", "test_variants.py", "transpose", "float32", {"metadata"}),
    ("gradient", "test_autograd.py", "tanh", "float32", {"numeric"}),
    ("error-no-raise", "test_errors.py", "trace", "float32", {"wrong-error"}),
    ("nan-dropped", "test_properties.py", "sqrt", "float32", {"numeric", "nonfinite"}),
]


DEVICE_MANIFEST = ROOT / "emulator" / "manifest-device.toml"
"""The emulated device's device-mode expected failures (``fault_backend`` is not the emulated device by
name, so the harness does not load the emulator's manifests for it: they are given with --conformance-manifest)."""


PAST_THE_OLD_CAP = [
    # fault, suite module, op, the old cap (first samples taken before every sample was), failure classes:
    # faults only samples past that cap show (sum's first samples are 0-dim; softmax's 3-D one is index 4);
    # a stride-blind read of noncontiguous_like's buffer meets its NaN padding: nonfinite, else numeric
    ("sum-ignores-strides", "test_layouts.py", "sum", 3, {"numeric", "nonfinite"}),
    ("softmax-backward-3d", "test_autograd.py", "softmax", 3, {"numeric"}),
]


def _run(pytester, monkeypatch, fault, module, op, dtypes, mode="mirror", extra=()):
    """Run suite ``module`` on ``op`` with ``fault`` installed in emulator ``mode``; (result, records)."""
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("CONFORMANCE_EMULATOR_MODE", mode)
    monkeypatch.setenv("CONFORMANCE_TEST_FAULT", fault)
    monkeypatch.setenv("CONFORMANCE_EMULATOR_MODE", mode)
    report = pytester.path / "report"
    modules = [module] if isinstance(module, str) else list(module)
    result = pytester.runpytest_subprocess(
        *[str(ROOT / "opsuites" / m) for m in modules],
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "--conformance-backend-module",
        "fault_backend",
        "--conformance-device",
        "neuron",
        "--conformance-ops",
        op,
        "--conformance-dtypes",
        dtypes,
        "--conformance-report-dir",
        str(report),
        "--conformance-no-report",
        "-q",
        *extra,
        timeout=600,
    )
    return result, read_records(report)


@pytest.mark.parametrize(("fault", "module", "op", "dtypes", "classes"), CASES, ids=[c[0] for c in CASES])
def test_suite_flags_fault(pytester, monkeypatch, fault, module, op, dtypes, classes):
    result, records = _run(pytester, monkeypatch, fault, module, op, dtypes)
    suite = module[len("test_") : -len(".py")]
    mine = [r for r in records if r.get("suite") == suite and r.get("op") == op]
    assert mine, f"no records of suite {suite} for {op}:\n{result.stdout.str()[-3000:]}"
    failed = {r.get("failure_class") for r in mine if r.get("outcome") in ("failed", "error")}
    assert failed & classes, (
        f"fault {fault!r} was not flagged as {classes} by {module}; failure classes "
        f"seen: {failed}\n{result.stdout.str()[-3000:]}"
    )


def test_clean_emulator_passes_same_checks(pytester, monkeypatch):
    """Control: without a fault the same suite/op pairs pass (so the failures above come from the fault)."""
    result, records = _run(pytester, monkeypatch, "", "test_layouts.py", "mul", "float32")
    mine = [r for r in records if r.get("suite") == "layouts" and r.get("op") == "mul"]
    assert mine and all(r.get("outcome") == "passed" for r in mine), result.stdout.str()[-3000:]


ATTENTION = "nn.functional.scaled_dot_product_attention,nn.functional.multi_head_attention_forward"

RANDOM_ONLY = {("autograd", "nn.functional.multi_head_attention_forward", "device")}
"""(suite, op, mode) whose compared samples all draw from the generator (``dropout_p > 0`` while training):
on a backend that does not mirror the CPU their values are not compared (samples.random_sample_reason)."""


@pytest.mark.parametrize("mode", ["mirror", "device"])
def test_values_judged_where_cpu_is_not_an_exact_reference(pytester, monkeypatch, mode):
    """A ``bmm`` that computes only the first batch is flagged for SDPA and MHA forward (ops whose OpInfo
    skips PyTorch's own CPU comparison) in compare_cpu and autograd, in both emulator modes."""
    result, records = _run(
        pytester,
        monkeypatch,
        "bmm-first-batch",
        ("test_compare_cpu.py", "test_autograd.py"),
        ATTENTION,
        "float32",
        mode=mode,
    )
    out = result.stdout.str()[-3000:]
    for suite in ("compare_cpu", "autograd"):
        for op in ATTENTION.split(","):
            if (suite, op, mode) in RANDOM_ONLY:
                continue
            mine = [r for r in records if r.get("suite") == suite and r.get("op") == op]
            assert mine and all(r["outcome"] == "failed" and r.get("failure_class") == "numeric" for r in mine), (
                f"{mode} mode: bmm-first-batch not flagged by {suite} for {op}: {mine}\n{out}"
            )
            assert all(r.get("rule") for r in mine)


@pytest.mark.parametrize("mode", ["mirror", "device"])
def test_clean_attention_values_are_judged_and_pass(pytester, monkeypatch, mode):
    """Control: without a fault the same tests pass, and each record names the rule that decided."""
    result, records = _run(
        pytester, monkeypatch, "", ("test_compare_cpu.py", "test_autograd.py"), ATTENTION, "float32", mode=mode
    )
    assert len(records) == 4 and all(r["outcome"] == "passed" for r in records), result.stdout.str()[-3000:]
    rules = {"exact"} if mode == "mirror" else {"tolerance", "fp64"}
    judged = [r for r in records if (r["suite"], r["op"], mode) not in RANDOM_ONLY]
    assert all(r.get("rule") in rules for r in judged), [(r["op"], r.get("rule")) for r in records]
    assert all(r.get("rule") == "metadata-only" for r in records if r not in judged)


@pytest.mark.parametrize(
    ("mode", "extra", "outcome", "failure_class"),
    [
        ("device", ("--conformance-manifest=" + str(DEVICE_MANIFEST),), "failed", "unexpected"),
        ("mirror", (), "failed", "numeric"),
    ],
)
def test_expected_failure_of_another_size_is_flagged(pytester, monkeypatch, mode, extra, outcome, failure_class):
    """A ``native_layer_norm`` 1e-3 off fails the run despite the device manifest's bounded xfail of that
    test (as ``unexpected``); in mirror mode, where nothing is expected, as ``numeric``."""
    result, records = _run(
        pytester,
        monkeypatch,
        "layer-norm-1e-3",
        "test_compare_cpu.py",
        "native_layer_norm",
        "float32",
        mode=mode,
        extra=extra,
    )
    mine = [r for r in records if r.get("suite") == "compare_cpu" and r.get("op") == "native_layer_norm"]
    assert len(mine) == 1 and mine[0]["outcome"] == outcome and mine[0].get("failure_class") == failure_class, (
        f"{mine}\n{result.stdout.str()[-3000:]}"
    )
    if failure_class == "unexpected":
        assert "expects a numeric failure of the recorded size in float32" in mine[0]["message"]
        assert result.ret == 1


def test_clean_device_mode_xfails_stay_within_their_bounds(pytester, monkeypatch):
    """Control: the clean emulator in device mode still fails its layer_norm entries (float32, float16) as
    expected, and bfloat16, whose only difference is statistics in float32 (output_dtypes rule 1), passes."""
    result, records = _run(
        pytester,
        monkeypatch,
        "",
        "test_compare_cpu.py",
        "native_layer_norm",
        "float32,bfloat16,float16",
        mode="device",
        extra=("--conformance-manifest=" + str(DEVICE_MANIFEST),),
    )
    outcomes = {r["dtype"]: r["outcome"] for r in records}
    assert outcomes == {"float32": "xfailed", "float16": "xfailed", "bfloat16": "passed"}, [
        (r["dtype"], r["outcome"], r.get("message", "")[:300]) for r in records
    ]


@pytest.mark.parametrize("mode", ["mirror", "device"])
@pytest.mark.parametrize(
    ("fault", "module", "op", "old_cap", "classes"), PAST_THE_OLD_CAP, ids=[c[0] for c in PAST_THE_OLD_CAP]
)
def test_fault_past_the_old_cap_is_flagged(pytester, monkeypatch, fault, module, op, old_cap, classes, mode):
    """A wrong kernel that only a sample past the old first-N cap exercises fails the suite, in both
    emulator modes, and the record names that sample; without the fault the same test passes."""
    suite = module[len("test_") : -len(".py")]
    result, records = _run(pytester, monkeypatch, fault, module, op, "float32", mode)
    mine = [r for r in records if r.get("suite") == suite and r.get("op") == op]
    failed = [r for r in mine if r.get("outcome") == "failed"]
    assert failed and all(r.get("failure_class") in classes for r in failed), (
        f"{fault!r} not flagged in {mode} mode: {mine}\n{result.stdout.str()[-3000:]}"
    )
    assert all(r["sample"] >= old_cap for r in failed), [r["sample"] for r in failed]
    assert all(r["samples"] + sum(r["samples_left_out"].values()) == r["samples_total"] for r in failed)

    result, clean = _run(pytester, monkeypatch, "", module, op, "float32", mode)
    mine = [r for r in clean if r.get("suite") == suite and r.get("op") == op]
    assert mine and all(r.get("outcome") == "passed" for r in mine), result.stdout.str()[-3000:]
    assert all(r["samples"] > old_cap for r in mine), [r["samples"] for r in mine]


@pytest.mark.parametrize("mode", ["mirror", "device"])
def test_growing_resize_that_loses_data_is_flagged(pytester, monkeypatch, mode):
    """device_api's resize_ check: a growing resize_ that zero-fills fails as numeric in both emulator
    modes; the clean emulator passes it."""
    result, records = _run(
        pytester, monkeypatch, "resize-zero-fills", "test_device_api.py", "tensor.resize_", "float32", mode
    )
    (rec,) = [r for r in records if r.get("op") == "tensor.resize_"] or [None]
    assert rec is not None, result.stdout.str()[-3000:]
    assert (rec["outcome"], rec["failure_class"]) == ("failed", "numeric"), result.stdout.str()[-3000:]
    assert "lost the existing elements" in rec["message"]
    _result, clean = _run(pytester, monkeypatch, "", "test_device_api.py", "tensor.resize_", "float32", mode)
    assert [r["outcome"] for r in clean if r.get("op") == "tensor.resize_"] == ["passed"]
