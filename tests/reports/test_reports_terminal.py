"""End-of-run terminal summary: rich table on a terminal, plain text otherwise."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

import neuron_conformance.reports
from neuron_conformance.reports.terminal import print_summary


@pytest.fixture
def summary(report, record, run_meta):
    recs = [
        record("add"),
        record("sub", outcome="failed"),
        record("mul", outcome="error", failure_class="crash"),
        record("[bold]x", outcome="failed", suite="model_zoo", kind="model", variant="forward", nodeid="m::x"),
        record(
            "[bold]x", "float16", outcome="failed", suite="model_zoo", kind="model", variant="forward", nodeid="m::x16"
        ),
    ]
    return neuron_conformance.reports.build(report({"gw0": recs}, run=run_meta(complete=False)), step_summary=False)


def test_plain_output_when_not_a_terminal(summary):
    buf = io.StringIO()
    print_summary(summary.summary, Console(file=buf, force_terminal=False))
    out = buf.getvalue()
    assert "\x1b[" not in out and "┃" not in out
    lines = out.splitlines()
    assert lines[0].startswith("Conformance: 4 failing of 5 tests on neuron")
    assert lines[1].startswith("INCOMPLETE RUN")
    row = next(line for line in lines if line.startswith("compare_cpu")).split()
    assert row == ["compare_cpu", "1", "1", "1", "0", "0", "0", "3"]
    assert "failure kinds: numeric 3, crash 1" in out
    assert "[bold]x (2/2, 1 cause(s))" in out
    assert "causes (2; largest 2):" in out
    assert "<op> <dtype>: max_abs <n> > atol <n> [2 op(s)]" in out


def test_rich_table_on_a_terminal(summary):
    buf = io.StringIO()
    print_summary(summary, Console(file=buf, force_terminal=True, width=120, color_system=None))
    out = buf.getvalue()
    assert "Results by suite" in out and "┃" in out
    assert "Top failure kinds" in out and "crash" in out
    assert "[bold]x" in out  # op names are not read as rich markup
    assert "Top causes (2 of 2)" in out
    assert "INCOMPLETE RUN" in out


def test_quiet_prints_only_the_headline(summary):
    buf = io.StringIO()
    print_summary(summary.summary, quiet=True, file=buf)
    assert buf.getvalue().splitlines() == [
        "Conformance: 4 failing of 5 tests on neuron (neuron_conformance.emulator 0.1.0, emulated) (incomplete run)",
        "INCOMPLETE RUN: interrupted before it finished; only the tests that ran are counted",
    ]


def test_terminal_is_reachable_after_import_reports():
    """Should expose neuron_conformance.reports.terminal after a bare ``import neuron_conformance.reports`` (the
    plugin relies on it)."""
    import subprocess
    import sys
    from pathlib import Path

    code = "import neuron_conformance.reports; print(neuron_conformance.reports.terminal.print_summary.__name__)"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "print_summary"


def test_many_failures_of_few_causes_print_one_line_a_cause(report, record):
    """Should list 600 failures of 2 causes as 2 cause lines and say that all failing ops are tied."""
    recs = [
        record(
            f"op{i}",
            "float32",
            "failed",
            message=f"Could not run 'aten::add.Tensor' with arguments from the 'PrivateUse1' backend. {'x' * 500}",
        )
        for i in range(300)
    ]
    recs += [record(f"op{i}", "float16", "failed") for i in range(300)]
    summary = neuron_conformance.reports.build(report({"gw0": recs}), step_summary=False).summary
    buf = io.StringIO()
    print_summary(summary, Console(file=buf, force_terminal=False))
    out = buf.getvalue()
    assert len(out) < 2000 and "xxxx" not in out
    assert "no PrivateUse1 kernel for aten::add.Tensor [300 op(s)]" in out
    assert "all 300 failing ops are tied: 2 failing test(s) and 2 cause(s) each" in out
