"""End-to-end tests of the pytest plugin with pytester (subprocess runs, --conformance-device cpu)."""

import json

import pytest

TEST_FILE = """
import pytest, torch
from neuron_conformance.conformance.verdict.failures import NumericFailure

@pytest.mark.conformance(op="good", dtype="float32", variant="function", suite="demo")
def test_good(device, conformance_record):
    conformance_record.update(max_abs=0.0, rule="exact")
    assert torch.ones(2, device=device).sum().item() == 2

@pytest.mark.conformance(op="bad", dtype="float32", variant="function", suite="demo")
def test_bad(conformance_record):
    raise NumericFailure("values differ", sample=4)

@pytest.mark.conformance(op="missing", dtype="bfloat16", suite="demo")
def test_unsupported():
    raise NotImplementedError("no kernel")

@pytest.mark.conformance(op="fixed", dtype="float32", suite="demo")
def test_fixed():
    pass
"""

MANIFEST = """
[[xfail]]
op = "bad"
reason = "numeric"
note = "known"

[[xfail]]
op = "fixed"
reason = "numeric"
"""


def _records(path):
    out = []
    for f in sorted((path / "records").glob("*.jsonl")):
        out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return {r["op"]: r for r in out}


def test_records_manifest_and_stale_entries(pytester):
    pytester.makepyfile(test_demo=TEST_FILE)
    pytester.makefile(".toml", manifest=MANIFEST)
    result = pytester.runpytest_subprocess(
        "--conformance-device",
        "cpu",
        "--conformance-manifest",
        "manifest.toml",
        "--conformance-report-dir",
        "out",
        "--conformance-no-report",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=1, failed=2, xfailed=1)
    result.stdout.fnmatch_lines(["*conformance: device 'cpu'*", "*XPASS(strict)*"])
    recs = _records(pytester.path / "out")
    assert recs["good"]["outcome"] == "passed" and recs["good"]["rule"] == "exact"
    assert recs["bad"]["outcome"] == "xfailed" and recs["bad"]["failure_class"] == "numeric"
    assert recs["bad"]["sample"] == 4 and "--conformance-sample 4" in recs["bad"]["repro"]
    assert recs["missing"]["failure_class"] == "unsupported"
    assert recs["fixed"]["outcome"] == "failed" and recs["fixed"]["failure_class"] == "stale"
    run = json.loads((pytester.path / "out" / "run.json").read_text())
    assert run["complete"] is True and run["device"]["type"] == "cpu"


def test_xdist_workers_write_their_own_files(pytester):
    pytester.makepyfile(test_demo=TEST_FILE)
    result = pytester.runpytest_subprocess(
        "--conformance-device", "cpu", "--conformance-report-dir", "out", "--conformance-no-report", "-n", "2"
    )
    result.assert_outcomes(passed=2, failed=2)
    files = sorted(p.name for p in (pytester.path / "out" / "records").glob("*.jsonl"))
    assert set(files) <= {"gw0.jsonl", "gw1.jsonl"} and files
    assert len(_records(pytester.path / "out")) == 4


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--conformance-device", "nosuchdevice"], "--conformance-device 'nosuchdevice'"),
        (["--conformance-device", "cpu", "--conformance-backend-module", "no_such_backend_mod"], "no_such_backend_mod"),
        (["--conformance-device", "cpu", "--conformance-dtypes", "float33"], "unknown dtype 'float33'"),
        (["--conformance-device", "cpu", "--conformance-manifest", "broken.toml"], "broken.toml:2"),
        (
            ["--conformance-device", "cpu", "--conformance-manifest", "absent.toml"],
            "absent.toml: manifest file not found",
        ),
        (
            ["--conformance-device", "cpu", "--conformance-ops=@absent_ops.txt"],
            "cannot read the op list absent_ops.txt",
        ),
        (
            ["--conformance-device", "cpu", "--conformance-progress", "bogus"],
            "--conformance-progress: 'bogus' is not one of",
        ),
    ],
)
def test_bad_input_is_one_clear_error_with_exit_code_2(pytester, args, needle):
    pytester.makepyfile(test_demo=TEST_FILE)
    pytester.makefile(".toml", broken='# a comment line\n[[xfail]]\nop = "x"\nreason = "bogus"\n')
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == 2
    err = result.stderr.str()
    assert needle in err
    assert "Traceback" not in err + result.stdout.str()


def test_options_from_env_and_pyproject(pytester, monkeypatch):
    pytester.makepyfile(test_demo="def test_x(device_profile):\n    assert device_profile.type == 'cpu'\n")
    pytester.makefile(".toml", pyproject='[tool.conformance]\ndevice = "cpu"\nreport-dir = "fromtoml"\n')
    result = pytester.runpytest_subprocess("--conformance-no-report")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "fromtoml" / "run.json").exists()
    monkeypatch.setenv("CONFORMANCE_REPORT_DIR", "fromenv")
    result = pytester.runpytest_subprocess("--conformance-no-report")
    assert (pytester.path / "fromenv" / "run.json").exists()
    result.stdout.fnmatch_lines(["*CONFORMANCE_REPORT_DIR=fromenv*"])


def test_unknown_pyproject_key_is_an_error(pytester):
    pytester.makepyfile(test_demo="def test_x():\n    pass\n")
    pytester.makefile(".toml", pyproject='[tool.conformance]\ndevcie = "cpu"\n')
    result = pytester.runpytest_subprocess()
    assert result.ret == 2 and "devcie" in result.stderr.str()


def test_heap_alive_after_collection_is_frozen(pytester):
    """Objects alive after collection (torch, the OpInfo database) go to the permanent GC generation."""
    pytester.makepyfile(
        test_gc="""
import gc

def test_frozen():
    assert gc.get_freeze_count() > 10_000
"""
    )
    result = pytester.runpytest_subprocess(
        "--conformance-device", "cpu", "--conformance-report-dir", "out", "--conformance-no-report"
    )
    result.assert_outcomes(passed=1)


def test_ops_that_match_nothing_are_an_error_and_unknown_names_are_named(pytester):
    pytester.makepyfile(test_demo=TEST_FILE)
    none = pytester.runpytest_subprocess(
        "--conformance-device", "cpu", "--conformance-no-report", "--conformance-ops", "goood"
    )
    assert (
        none.ret == 4 and "no collected test checks goood (did you mean good?)" in none.stderr.str() + none.stdout.str()
    )
    some = pytester.runpytest_subprocess(
        "--conformance-device", "cpu", "--conformance-no-report", "--conformance-ops", "good,nosuch,gooda"
    )
    some.assert_outcomes(passed=1)
    some.stdout.fnmatch_lines(["*--conformance-ops: no collected test checks gooda (did you mean good?), nosuch*"])


def test_path_option_written_with_a_space_outside_the_folder(pytester, tmp_path_factory):
    """pytest picks its root folder before plugin options exist, so an existing path after a space is
    read as a test path: the plugin stops with the '=' spelling instead of running the wrong tests."""
    pytester.makepyfile(test_demo=TEST_FILE)
    pytester.makefile(".toml", pyproject="[tool.pytest.ini_options]\n")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    manifest = elsewhere / "m.toml"
    manifest.write_text('[[xfail]]\nop = "bad"\nreason = "numeric"\n')
    bad = pytester.runpytest_subprocess(
        "--conformance-device", "cpu", "--conformance-no-report", "--conformance-manifest", str(manifest)
    )
    assert bad.ret == 2 and f"write --conformance-manifest={manifest}" in bad.stderr.str()
    good = pytester.runpytest_subprocess(
        "--conformance-device", "cpu", "--conformance-no-report", f"--conformance-manifest={manifest}"
    )
    good.assert_outcomes(passed=2, failed=1, xfailed=1)


def test_a_reports_folder_in_the_working_dir_does_not_shadow_the_report_package(pytester):
    """The default report dir creates ./reports/latest; with ``python -m pytest`` the working dir is on
    sys.path and an editable install's package would lose to that namespace folder."""
    pytester.makepyfile(test_demo=TEST_FILE)
    (pytester.path / "reports" / "latest").mkdir(parents=True)
    result = pytester.runpytest_subprocess("--conformance-device", "cpu", "--conformance-ops", "good")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "reports" / "latest" / "index.html").is_file()
