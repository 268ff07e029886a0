"""Isolation mode without xdist: a crash costs one test, the child is replaced, the run goes on."""

import json

import pytest


@pytest.mark.timeout(900)  # several worker starts, each importing torch
def test_isolate_process_survives_abort_and_segfault(pytester, faulty_env, fault_tests, read_records):
    pytester.makepyfile(test_faults=fault_tests)
    result = pytester.runpytest_subprocess(
        "--conformance-backend-module",
        faulty_env,
        "--conformance-report-dir",
        "out",
        "-p",
        "no:xdist",
        "--conformance-isolate",
        "process",
        "-k",
        "ok0 or abort or ok1 or segfault or ok2",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        timeout=300,
    )
    out = pytester.path / "out"
    recs = read_records(out)
    assert set(recs) == {"test_ok0", "test_abort", "test_ok1", "test_segfault", "test_ok2"}, result.stdout.str()
    assert [recs[n]["outcome"] for n in ("test_ok0", "test_ok1", "test_ok2")] == ["passed"] * 3
    assert (recs["test_abort"]["failure_class"], recs["test_abort"]["signal"]) == ("crash", "SIGABRT")
    assert (recs["test_segfault"]["failure_class"], recs["test_segfault"]["signal"]) == ("crash", "SIGSEGV")
    # three children: the first died on the abort, the second on the segfault, the third finished
    assert sorted(p.name for p in (out / "isolation").glob("*.log")) == ["iso0.log", "iso1.log", "iso2.log"]
    result.assert_outcomes(passed=3, failed=2)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["totals"]["total"] == 5
