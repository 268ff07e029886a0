"""The FlexAttention suite and the profiler checks have teeth: each fault of :mod:`tests.faults.flex_kernels`
is flagged in mirror and in device mode, and the clean emulator is green.

Each case runs one suite file in a pytest subprocess against ``fault_backend`` with one fault (float32,
the FlexAttention cases named), then asserts the outcome and failure class of every test it names: the
wrong one flagged (``numeric``, with the tensor that differs as ``stage``), the ones the fault cannot
touch passing (a forward-only fault leaves a symmetric score mod right; a backward fault leaves the
forward right), and a refusal recorded as ``unsupported``. The controls run the same selections with no
fault: every FlexAttention test passes, the profiler checks pass, and the device-activity check is
skipped (the emulator registers no ``ProfilerActivity.PrivateUse1``: its device API row is ``missing``).
"""

from __future__ import annotations

import pytest

from tests.faults.suite_run import run_suite

pytest_plugins = ["pytester"]

MODES = ("mirror", "device")
FLEX = "test_flex_attention.py"

FLEX_CASES = [
    # (fault, --conformance-ops, -k, {(case, test): (outcome, failure class, stage)})
    (
        "flex-partial-blocks-as-full",
        "flex_attention.causal,flex_attention.cross",
        "forward",
        {("causal", "test_forward"): ("failed", "numeric", "out"), ("cross", "test_forward"): ("passed", None, None)},
    ),
    (
        "flex-score-mod-swapped-indices",
        "flex_attention.alibi,flex_attention.softcap",
        "forward",
        {("alibi", "test_forward"): ("failed", "numeric", "out"), ("softcap", "test_forward"): ("passed", None, None)},
    ),
    (
        "flex-backward-ignores-score-mod",
        "flex_attention.softcap,flex_attention.causal",
        "",
        {
            ("softcap", "test_forward"): ("passed", None, None),
            ("softcap", "test_backward"): ("failed", "numeric", "dq"),
            ("causal", "test_backward"): ("passed", None, None),
        },
    ),
    (
        "flex-refused",
        "flex_attention.causal",
        "",
        {
            ("causal", "test_forward"): ("failed", "unsupported", None),
            ("causal", "test_backward"): ("failed", "unsupported", None),
        },
    ),
]
CONTROL_OPS = "flex_attention.causal,flex_attention.alibi,flex_attention.softcap,flex_attention.padded"


def _by_case(records) -> dict:
    out = {}
    for rec in records:
        if rec.get("suite") == "flex_attention":
            out[(str(rec["op"]).removeprefix("flex_attention."), rec["nodeid"].split("::")[1].split("[")[0])] = rec
    return out


def _flex(pytester, monkeypatch, fault, ops, mode, k):
    extra = ["--conformance-dtypes=float32"] + (["-k", k] if k else [])
    result, records = run_suite(pytester, monkeypatch, FLEX, fault, ops, mode, *extra)
    got = _by_case(records)
    assert got, f"no flex_attention records\n{result.stdout.str()[-3000:]}"
    return got


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fault", "ops", "k", "want"), FLEX_CASES, ids=[c[0] for c in FLEX_CASES])
def test_flex_fault_is_flagged(pytester, monkeypatch, fault, ops, k, want, mode):
    got = _flex(pytester, monkeypatch, fault, ops, mode, k)
    for key, (outcome, failure_class, stage) in want.items():
        rec = got.get(key)
        assert rec is not None, f"no record for {key}: {sorted(got)}"
        assert (rec["outcome"], rec.get("failure_class")) == (outcome, failure_class), rec.get("message")
        if stage is not None:
            assert rec.get("stage") == stage, rec.get("message")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_flex_clean_control(pytester, monkeypatch, mode):
    got = _flex(pytester, monkeypatch, "", CONTROL_OPS, mode, "")
    assert len(got) == 8, sorted(got)
    assert {key: rec["outcome"] for key, rec in got.items()} == {key: "passed" for key in got}, [
        rec.get("message") for rec in got.values() if rec["outcome"] != "passed"
    ]
    assert got[("padded", "test_forward")].get("masked_rows") == 4 * 25


PROFILER_OPS = "torch.profiler,torch.profiler (ProfilerActivity.PrivateUse1)"
PROFILER_TESTS = ("test_profiler_records_device_ops", "test_profiler_chrome_trace", "test_profiler_ranges_nest")


def _profiler(pytester, monkeypatch, fault, mode):
    result, records = run_suite(pytester, monkeypatch, "test_device_api.py", fault, PROFILER_OPS, mode)
    got = {rec["nodeid"].split("::")[1]: rec for rec in records if str(rec.get("op")).startswith("torch.profiler")}
    assert got, f"no profiler records\n{result.stdout.str()[-3000:]}"
    return got


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_profiler_without_record_function_is_flagged(pytester, monkeypatch, mode):
    got = _profiler(pytester, monkeypatch, "profiler-record-function-off", mode)
    for name in PROFILER_TESTS:
        assert (got[name]["outcome"], got[name].get("failure_class")) == ("failed", "metadata"), got[name]
    assert "no event" in got["test_profiler_records_device_ops"]["message"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_profiler_clean_control(pytester, monkeypatch, mode):
    got = _profiler(pytester, monkeypatch, "", mode)
    assert {n: got[n]["outcome"] for n in PROFILER_TESTS} == {n: "passed" for n in PROFILER_TESTS}, [
        got[n].get("message") for n in PROFILER_TESTS
    ]
    assert got["test_profiler_device_activity"]["outcome"] == "skipped", got["test_profiler_device_activity"]
