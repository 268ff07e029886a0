"""Command line: build, show, bad input errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_conformance.reports.cli import main
from neuron_conformance.reports.summary import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]


def test_build_writes_all_files(report, record, capsys):
    d = report({"gw0": [record("add"), record("sub", outcome="failed")]})
    assert main(["build", str(d)]) == 0
    for name in ("summary.json", "summary.md", "index.html"):
        assert (d / name).stat().st_size > 0
    out = capsys.readouterr().out
    assert "1 failing of 2 tests" in out and "compare_cpu" in out


def test_build_fail_on_failure(report, record, capsys):
    d = report({"gw0": [record("sub", outcome="failed")]})
    assert main(["build", str(d), "--fail-on-failure", "-q"]) == 1
    assert capsys.readouterr().out == ""


def test_show(report, record, capsys):
    d = report({"gw0": [record("add")]})
    main(["build", str(d), "-q"])
    assert main(["show", str(d / "summary.json")]) == 0
    assert "all 1 tests passed" in capsys.readouterr().out


def _bad_inputs(tmp_path: Path, report, record) -> dict[str, tuple[list[str], Path, str]]:
    malformed = tmp_path / "malformed.json"
    malformed.write_text('{"schema_version": 1, "run": ')
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "run": {}, "records": []}))
    good = report({"gw0": [record("add")]})
    main(["build", str(good), "-q"])
    broken = report({"gw0": [record("add"), "not json", record("sub")]}, name="broken")
    missing = tmp_path / "nope" / "summary.json"
    return {
        "diff-missing": (["diff", str(missing), str(good / "summary.json")], missing, "file not found"),
        "diff-malformed": (["diff", str(good / "summary.json"), str(malformed)], malformed, "malformed JSON"),
        "diff-schema": (["diff", str(wrong), str(good / "summary.json")], wrong, "schema_version"),
        "merge-schema": (["merge", str(good), str(wrong), "-o", str(tmp_path / "m")], wrong, "schema_version"),
        "build-missing-dir": (["build", str(tmp_path / "none")], tmp_path / "none", "report directory not found"),
        "build-bad-record": (["build", str(broken)], broken / "records" / "gw0.jsonl", "line 2: malformed JSON"),
        "show-malformed": (["show", str(malformed)], malformed, "malformed JSON"),
    }


CASES = [
    "diff-missing",
    "diff-malformed",
    "diff-schema",
    "merge-schema",
    "build-missing-dir",
    "build-bad-record",
    "show-malformed",
]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_clear_error(case, tmp_path, report, record, capsys):
    argv, path, what = _bad_inputs(tmp_path, report, record)[case]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and what in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_python_m_reports_bad_input_subprocess(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "neuron_conformance.reports",
            "diff",
            str(tmp_path / "a.json"),
            str(tmp_path / "b.json"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == f"error: {tmp_path / 'a.json'}: file not found (expected the report summary (summary.json))"
    )


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["merge", "x.json"])  # -o is required
    assert info.value.code == 2
