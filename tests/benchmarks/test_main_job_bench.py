"""benchmarks/main_job.py: pytest summary parsing and the side-by-side lines (no timing assertions; the
timed runs themselves are pytest subprocesses, exercised by ``python -m benchmarks.main_job``)."""

from __future__ import annotations

from benchmarks import main_job


def test_tests_run_reads_the_last_summary_line():
    out = "....\n== 1 failed, 3 passed, 2 skipped, 1 xfailed in 4.01s ==\n"
    assert main_job.tests_run(out) == 7
    assert main_job.tests_run("no summary here") == 0


def test_report_puts_both_side_by_side_with_ratios():
    main = {"seconds": 120.0, "tests": 400, "cpu_s": 200.0}
    ci = {"seconds": 60.0, "tests": 100, "cpu_s": 90.0}
    lines = main_job.report(main, ci, projected_tests=8000, whole_main=False)
    assert lines[1].startswith("main job (slice)") and lines[2].startswith("CI subset")
    assert "wall 2.00x, per test 0.50x" in lines[3]
    assert "8000 tests x 0.300 s = 40.0 min vs target 20 min (2.00x)" in lines[4]
    assert "8000 tests x 0.500 CPU s / 2 cores = 33.3 min (1.67x)" in lines[5]
    assert "CI subset steps 1.0 min vs target 10 min (0.10x" in lines[6]
    whole = main_job.report(main, ci, None, whole_main=True)
    assert "main job 2.0 min vs target 20 min: 0.10x of the budget" in whole[4]
