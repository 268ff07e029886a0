"""--conformance-baseline / --conformance-fail-on-regression across two real runs, and a bad baseline file."""

import json

import pytest

TESTS = """
import pytest, torch

@pytest.mark.conformance(op="add", dtype="float32", suite="demo")
def test_add(device):
    assert torch.ones(2, device=device).add(1).cpu().tolist() == [2.0, 2.0]

@pytest.mark.conformance(op="cos", dtype="float32", suite="demo")
def test_cos(device):
    torch.cos(torch.zeros(2, device=device))
"""


def test_baseline_diff_finds_the_injected_regression(pytester, faulty_env, monkeypatch):
    pytester.makepyfile(test_demo=TESTS)
    common = ["--conformance-backend-module", faulty_env, "-n", "0", "-p", "no:randomly", "-p", "no:cacheprovider"]
    monkeypatch.setenv("FAULTY_BACKEND_OFF", "1")
    first = pytester.runpytest_subprocess(*common, "--conformance-report-dir", "base", timeout=200)
    first.assert_outcomes(passed=2)
    monkeypatch.setenv("FAULTY_BACKEND_OFF", "0")  # aten::cos now raises
    args = [*common, "--conformance-report-dir", "new", "--conformance-baseline", "base/summary.json"]
    second = pytester.runpytest_subprocess(
        *args, "--conformance-fail-on-regression", "--conformance-no-canary", timeout=200
    )
    assert second.ret == 1
    second.stdout.fnmatch_lines(
        ["*Baseline diff: 1 regression(s), 0 fix(es)*", "*test_cos*passed*failed*", "*1 regression(s) against*"]
    )
    assert "test_cos" in (pytester.path / "new" / "baseline-diff.md").read_text()
    new = json.loads((pytester.path / "new" / "summary.json").read_text())
    assert {r["op"]: r["outcome"] for r in new["records"]} == {"add": "passed", "cos": "failed"}
    # the same diff from the command line
    from neuron_conformance.reports.cli import main

    assert (
        main(["diff", str(pytester.path / "base"), str(pytester.path / "new"), "--conformance-fail-on-regression"]) == 1
    )


@pytest.mark.parametrize("content, needle", [(None, "not found"), ("{not json", "malformed")])
def test_bad_baseline_is_one_clear_error_with_exit_code_2(pytester, content, needle):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    if content is not None:
        (pytester.path / "base.json").write_text(content)
    result = pytester.runpytest_subprocess(
        "--conformance-device", "cpu", "--conformance-baseline", "base.json", "--conformance-report-dir", "out"
    )
    assert result.ret == 2
    err = result.stderr.str()
    assert "--conformance-baseline" in err and "base.json" in err and needle in err.lower(), err
    assert "Traceback" not in err + result.stdout.str()
