"""neuron-conformance (conformance/pytest_plugin/cli.py): argument handling, bad input, package data, a bounded run.

The bounded run goes through this checkout (``PYTHONPATH``) from an empty temporary folder; the same run
from a wheel in a fresh virtual environment is CI's step ``.ci/installed_package.sh``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_conformance.conformance.pytest_plugin import cli
from neuron_conformance.conformance.pytest_plugin.siblings import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


def test_suites_come_first_and_options_pass_through_unchanged():
    argv = ["compare_cpu", "layouts", "--conformance-ops", "add", "-k", "float32", "extra"]
    assert cli.split_run_args(argv) == (
        ["compare_cpu", "layouts"],
        ["--conformance-ops", "add", "-k", "float32", "extra"],
    )
    assert cli.split_run_args([]) == ([], [])
    assert cli.split_run_args(["zoo"]) == (["zoo"], [])


def test_suite_names_resolve_to_the_installed_files(tmp_path):
    suites = cli.op_suites()
    assert {"compare_cpu", "layouts", "variants", "autograd"} <= set(suites)
    assert cli.resolve_suite("compare_cpu", tmp_path) == str(ROOT / "opsuites" / "test_compare_cpu.py")
    assert cli.resolve_suite("zoo", tmp_path) == str(ROOT / "model_zoo")
    assert cli.resolve_suite("opsuites", tmp_path) == str(ROOT / "opsuites")
    node = "compare_cpu::test_compare_cpu[add-float32]"
    assert (
        cli.resolve_suite(node, tmp_path)
        == f"{ROOT / 'opsuites' / 'test_compare_cpu.py'}::test_compare_cpu[add-float32]"
    )
    (tmp_path / "my_tests").mkdir()
    assert cli.resolve_suite("my_tests", tmp_path) == "my_tests"  # a user's own folder, as given


def test_unknown_suite_is_a_usage_error_naming_it_and_the_accepted_names(tmp_path):
    with pytest.raises(cli.UsageError, match=r"unknown suite 'compare_gpu'; accepted: .*compare_cpu.*zoo"):
        cli.resolve_suite("compare_gpu", tmp_path)
    with pytest.raises(cli.UsageError, match="unknown suite 'nope::test_x'"):
        cli.resolve_suite("nope::test_x", tmp_path)


@pytest.mark.parametrize(
    "options, adds_workers",
    [
        ([], True),
        (["-n", "0"], False),
        (["-n4"], False),
        (["--numprocesses=2"], False),
        (["-p", "no:xdist"], False),
        (["--conformance-isolate", "process"], False),
        (["--pdb"], False),
        (["--conformance-ops", "add", "-k", "n"], True),
    ],
)
def test_n_auto_is_added_unless_the_worker_count_is_chosen(tmp_path, options, adds_workers):
    args = cli.pytest_args(["compare_cpu"], options, tmp_path)
    assert (args[1:3] == ["-n", "auto"]) is adds_workers
    assert args.count("-n") == (1 if adds_workers else options.count("-n"))


def test_rootdir_cache_and_path_options(tmp_path):
    args = cli.pytest_args([], ["--conformance-manifest", "my.toml", "--conformance-report-dir", "out", "-q"], tmp_path)
    assert args[0] == str(ROOT / "opsuites")  # the default: every op suite
    assert f"--rootdir={ROOT}" in args
    assert args[args.index("-o") + 1] == f"cache_dir={tmp_path / '.pytest_cache'}"
    assert args[-3:] == ["--conformance-manifest=my.toml", "--conformance-report-dir=out", "-q"]
    own = cli.pytest_args([], ["--rootdir=/elsewhere", "-o", "cache_dir=/c"], tmp_path)
    assert [a for a in own if a.startswith("--rootdir")] == ["--rootdir=/elsewhere"]
    assert [a for a in own if a.startswith("cache_dir=")] == ["cache_dir=/c"]


def _main(argv, capsys, monkeypatch, cwd):
    monkeypatch.chdir(cwd)
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["frobnicate"], "unknown command 'frobnicate'; accepted: run, list, hf-spec, --help"),
        (["run", "compare_gpu", "--conformance-ops", "add"], "unknown suite 'compare_gpu'; accepted: aten_replay"),
        (
            ["run", "compare_cpu", "--conformance-backend-module", "no_such_backend_xyz"],
            "--conformance-backend-module 'no_such_backend_xyz': no such module on",
        ),
        (
            ["run", "--conformance-backend-module=no_such_pkg_xyz.sub"],
            "--conformance-backend-module 'no_such_pkg_xyz.sub': no such module",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, expected, capsys, monkeypatch, tmp_path):
    code, out, err = _main(argv, capsys, monkeypatch, tmp_path)
    assert code == 2 and out == ""
    assert err.startswith(f"neuron-conformance: {expected}") and err.count("\n") == 1
    assert not (tmp_path / "reports").exists()


def test_backend_module_from_the_environment_is_checked(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("CONFORMANCE_BACKEND_MODULE", "no_such_env_backend_xyz")
    code, _, err = _main(["run", "compare_cpu"], capsys, monkeypatch, tmp_path)
    assert code == 2 and "'no_such_env_backend_xyz': no such module" in err
    cli.check_backend_module(
        ["--conformance-backend-module", "neuron_conformance.emulator.backend"]
    )  # importable: no error


def test_help_and_list(capsys, monkeypatch, tmp_path):
    code, out, _ = _main(["--help"], capsys, monkeypatch, tmp_path)
    assert code == 0 and out.startswith("usage: neuron-conformance run [SUITE ...] [OPTION ...]")
    code, out, _ = _main(["run", "compare_cpu", "--help"], capsys, monkeypatch, tmp_path)
    assert code == 0 and "NAME::TEST" in out
    assert _main([], capsys, monkeypatch, tmp_path)[0] == 2
    code, out, _ = _main(["list"], capsys, monkeypatch, tmp_path)
    names = [line.split()[0] for line in out.splitlines()[:-1]]
    assert code == 0 and names == [*cli.op_suites(), "opsuites", "zoo"]
    assert "Every OpInfo sample" in out and out.splitlines()[-1] == f"(installed in {ROOT})"


def test_pyproject_of_the_current_folder_becomes_environment_below_flags(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.conformance]\nreport-dir = "out"\ndtypes = "float32"\nno-canary = true\nseed = 7\n'
    )
    env = {"CONFORMANCE_DTYPES": "int32"}
    exported = cli.export_pyproject(tmp_path, env)
    assert sorted(exported) == ["CONFORMANCE_NO_CANARY", "CONFORMANCE_REPORT_DIR", "CONFORMANCE_SEED"]
    assert env == {
        "CONFORMANCE_DTYPES": "int32",
        "CONFORMANCE_REPORT_DIR": "out",
        "CONFORMANCE_NO_CANARY": "1",
        "CONFORMANCE_SEED": "7",
    }
    assert cli.export_pyproject(ROOT, {}) == []  # a clone's own pyproject: the harness reads it itself


def test_opt_in_uses_the_plugins_activate_option_when_it_has_one(monkeypatch):
    from neuron_conformance.conformance.pytest_plugin import options as opts

    monkeypatch.delitem(opts.BY_DEST, "activate", raising=False)
    assert cli.opt_in({}) is None  # no such switch: collecting the suites is the signal
    switch = opts.Option("activate", "--conformance", "CONFORMANCE_ACTIVATE", "activate", "auto", "activation")
    monkeypatch.setitem(opts.BY_DEST, "activate", switch)
    env = {}
    assert cli.opt_in(env) == "CONFORMANCE_ACTIVATE" and env == {"CONFORMANCE_ACTIVATE": "on"}
    env = {"CONFORMANCE_ACTIVATE": "off"}
    assert cli.opt_in(env) is None and env == {"CONFORMANCE_ACTIVATE": "off"}  # the user's choice wins


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            '[tool.conformance]\ndevice = "neuron"\nbackend = "x"\n',
            r"unknown key\(s\) in \[tool.conformance\]: backend; accepted: activate, device",
        ),
        ("[tool.conformance\n", "invalid TOML"),
    ],
)
def test_bad_pyproject_table_is_a_usage_error(tmp_path, text, expected):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(cli.UsageError, match=expected):
        cli.export_pyproject(tmp_path, {})


def _in_report_folder(path: Path, root: Path = ROOT) -> bool:
    """True when a folder above ``path`` (below ``root``) holds a run's ``run.json``: a report folder a user
    named (``--conformance-report-dir=reports/device``) is a run's output, not the package's data."""
    return any((folder / "run.json").is_file() for folder in path.parents if root in folder.parents)


def test_a_report_folder_the_user_named_is_output(tmp_path):
    report = tmp_path / "reports" / "device"
    (report / "records").mkdir(parents=True)
    (report / "run.json").write_text("{}")
    (report / "manifest.proposed.toml").write_text("")
    (report / "records" / "gw0.jsonl").write_text("")
    (tmp_path / "reports" / "templates").mkdir()
    (tmp_path / "reports" / "templates" / "report.css").write_text("")
    assert _in_report_folder(report / "manifest.proposed.toml", tmp_path)
    assert _in_report_folder(report / "records" / "gw0.jsonl", tmp_path)
    assert not _in_report_folder(tmp_path / "reports" / "templates" / "report.css", tmp_path)


def test_every_data_file_of_the_runtime_packages_is_package_data():
    """Files the suites, the zoo, the report and the emulator read at run time must be in the wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    files = [
        p.relative_to(ROOT).as_posix()
        for package in ("conformance", "emulator", "opsuites", "model_zoo", "reports")
        for p in (ROOT / package).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not _in_report_folder(p)
    ]
    run_output = ("reports/latest/", "reports/ci-", "reports/modes/")  # the default report dirs, even half-written
    data = [p for p in files if not p.endswith((".py", ".pyc", ".md", ".gitignore")) and not p.startswith(run_output)]
    assert "opsuites/aten_replay_index.json" in data and "emulator/manifest.toml" in data
    for path in data:
        parts = path.split("/")
        # the data file may be declared by its package or by any package folder above it (model_zoo/distributed)
        keys = [(f"neuron_conformance.{'.'.join(parts[:i])}", "/".join(parts[i:])) for i in range(1, len(parts))]
        assert any(fnmatch.fnmatch(rest, g) for key, rest in keys for g in config.get(key, [])), (
            f"{path} is not matched by [tool.setuptools.package-data] of {', '.join(k for k, _ in keys)}"
        )


def _clean_env() -> dict:
    """This process's environment without conformance/pytest settings, with this checkout first on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONFORMANCE_", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


@pytest.mark.slow  # about 35 s alone, over 60 s on a loaded 2-core machine
def test_bounded_run_from_an_empty_folder_reports_there(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "neuron_conformance.conformance.pytest_plugin.cli",
            "run",
            "compare_cpu",
            "--conformance-ops",
            "add,mul",
            "--conformance-dtypes",
            "float32",
            "-n",
            "0",
            "-q",
        ],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "warning" not in proc.stdout.strip().splitlines()[-1]  # e.g. pytest's assert-rewrite warning
    summary = json.loads((tmp_path / "reports" / "latest" / "summary.json").read_text())
    assert summary["totals"]["total"] == 2 and summary["totals"]["failing"] == 0
    ids = sorted(r["nodeid"] for r in summary["records"])
    assert ids == [
        "opsuites/test_compare_cpu.py::test_compare_cpu[add-float32]",
        "opsuites/test_compare_cpu.py::test_compare_cpu[mul-float32]",
    ]
    assert (tmp_path / ".pytest_cache").is_dir()  # -o cache_dir: not in the rootdir (the installed suites)
