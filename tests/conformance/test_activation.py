"""Opt-in activation (neuron_conformance.conformance.pytest_plugin.activation): the installed plugin acts only in a conformance session.

The subprocess runs load the plugin the way a user's environment does, through its ``pytest11`` entry point
(no ``-p conformance``), with this checkout first on ``PYTHONPATH`` and every ``CONFORMANCE_*`` variable
removed (tests/conftest.py opts the other project tests in with ``CONFORMANCE_ACTIVATE``):

* (a) an unrelated folder: passes; no header, no summary line, no report folder, no ``--dist loadgroup``,
  no emulated device, torch's thread count as in a fresh process, also in xdist workers;
* (b) a run of an op suite: active (header line, records, report);
* (c) the explicit opt-in by flag, environment variable or ``[tool.conformance] activate``, and the opt-out;
* (d) bad input: unknown ``[tool.conformance]`` keys, a bad ``--conformance`` value, an opt-out that names
  the suites: one line, exit code 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_conformance.conformance.pytest_plugin import activation
from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.results.records import read_records

ROOT = Path(__file__).resolve().parents[2]

UNRELATED_TEST = """
import json, sys
from pathlib import Path
import torch

def test_a():
    assert torch.ones(2).sum() == 2
    plugin = sys.modules.get("neuron_conformance.conformance.pytest_plugin.plugin")
    assert plugin is not None, "the conformance plugin was not loaded through its entry point"
    Path(__file__).with_name("seen.json").write_text(json.dumps({
        "backend": torch._C._get_privateuse1_backend_name(),
        "threads": torch.get_num_threads(),
        "emulator_loaded": "neuron_conformance.emulator.backend" in sys.modules,
        "plugin_file": plugin.__file__,
    }))
"""


def _env(**extra: str) -> dict:
    """This checkout first on the path, no CONFORMANCE_* variable (the project tests' opt-in included)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONFORMANCE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**env, **extra}


def _pytest(cwd: Path, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _unrelated_project(tmp_path: Path, pyproject: str | None = None) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "test_x.py").write_text(UNRELATED_TEST)
    if pyproject is not None:
        (proj / "pyproject.toml").write_text(pyproject)
    return proj


def _seen(proj: Path) -> dict:
    return json.loads((proj / "seen.json").read_text())


# --- the rule's parts, in process ---------------------------------------------------------------------


def test_suite_roots_are_this_checkouts_suite_packages():
    assert activation.suite_roots() == (ROOT / "opsuites", ROOT / "model_zoo")


def test_paths_and_node_ids_inside_the_suites_count():
    args = [
        "opsuites/test_compare_cpu.py::test_compare_cpu[add-float32]",
        "model_zoo",
        str(ROOT / "opsuites" / "test_variants.py"),
        "tests/conformance",
        ".",
        "conformance",
    ]
    assert activation.suite_args(args, ROOT, pyargs=False) == args[:3]


def _layout(site: Path, suite: str = "opsuites", harness: bool = True) -> Path:
    """A folder with the distribution's layout: ``site/<suite>/__init__.py`` and, when ``harness``,
    ``site/conformance/pytest_plugin/activation.py``."""
    (site / suite).mkdir(parents=True)
    (site / suite / "__init__.py").write_text("")
    (site / suite / "test_s.py").write_text("def test_s():\n    pass\n")
    if harness:
        (site / "conformance" / "pytest_plugin").mkdir(parents=True)
        (site / "conformance" / "pytest_plugin" / "activation.py").write_text("")
    return site / suite


def test_any_copy_of_the_layout_counts_but_not_a_same_named_user_package(tmp_path):
    installed = _layout(tmp_path / "venv" / "site-packages")
    own = _layout(tmp_path / "user", "model_zoo", harness=False)
    assert activation.suite_args([str(installed / "test_s.py"), str(own)], tmp_path, pyargs=False) == [
        str(installed / "test_s.py")
    ]


def test_a_folder_that_only_contains_the_suites_does_not_count(tmp_path):
    _layout(tmp_path / "proj" / ".venv" / "site-packages")
    assert activation.suite_args(["proj"], tmp_path, pyargs=False) == []
    assert activation.suite_args(["proj/.venv/site-packages/opsuites"], tmp_path, pyargs=False) != []
    assert activation.suite_args([str(ROOT)], ROOT, pyargs=False) == []  # the clone's root


def test_pyargs_module_names_count_when_their_package_holds_suites():
    assert activation.suite_args(["neuron_conformance.opsuites.test_compare_cpu", "model_zoo"], ROOT, pyargs=True) == [
        "neuron_conformance.opsuites.test_compare_cpu",
        "model_zoo",
    ]
    assert activation.suite_args(["neuron_conformance.opsuites.test_compare_cpu"], ROOT, pyargs=False) == []
    assert activation.suite_args(["json", "tests.conformance"], ROOT, pyargs=True) == []


def test_session_args_follow_pytests_testpaths_rule(tmp_path):
    (tmp_path / "suite_a").mkdir()
    (tmp_path / "suite_b").mkdir()
    sub = tmp_path / "sub"
    sub.mkdir()
    assert activation.session_args(["x.py"], False, ["suite_*"], tmp_path, tmp_path) == ["x.py"]
    assert activation.session_args([], False, ["suite_*"], tmp_path, tmp_path) == [
        str(tmp_path / "suite_a"),
        str(tmp_path / "suite_b"),
    ]
    assert activation.session_args([], True, ["pkg.mod"], tmp_path, tmp_path) == ["pkg.mod"]
    assert activation.session_args([], False, ["suite_*"], sub, tmp_path) == [str(sub)]  # not in the rootdir
    assert activation.session_args([], False, ["nothing_*"], tmp_path, tmp_path) == [str(tmp_path)]


@pytest.mark.parametrize(
    "value, when",
    [("on", "on"), ("OFF", "off"), ("auto", "auto"), ("1", "on"), ("false", "off"), ("True", "on"), ("no", "off")],
)
def test_activate_values(value, when):
    assert opts._parse_activate(value) == when


def test_bad_activate_value_names_the_accepted_ones():
    with pytest.raises(opts.OptionError, match="'sometimes' is not one of: auto, on, off"):
        opts._parse_activate("sometimes")


# --- (a) an unrelated folder is left alone ------------------------------------------------------------


def test_unrelated_folder_is_untouched(tmp_path):
    """Not a conformance session, under xdist too (-n 2: the workers would share the cores if active)."""
    proj = _unrelated_project(tmp_path)
    fresh = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    for args in (["-n", "0"], ["-n", "2", "-v"]):
        proc = _pytest(proj, *args)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-3000:]
        seen = _seen(proj)
        assert seen["backend"] == "privateuseone" and not seen["emulator_loaded"], seen
        assert seen["threads"] == int(fresh.stdout), (seen, fresh.stdout)
        assert Path(seen["plugin_file"]).resolve().parent == ROOT / "conformance" / "pytest_plugin", seen
        assert "Conformance:" not in out and "conformance:" not in out and "conformance report" not in out, out
        assert not (proj / "reports").exists(), sorted(p.name for p in proj.iterdir())
        if "-v" in args:
            assert "LoadScheduling" in out and "LoadGroupScheduling" not in out, out[-3000:]


# --- (b) a run of the suites is active ----------------------------------------------------------------


def test_a_suite_run_is_active(tmp_path):
    out_dir = tmp_path / "out"
    proc = _pytest(
        ROOT,
        "opsuites/test_compare_cpu.py",
        "--conformance-ops=add",
        "--conformance-dtypes=float32",
        "-n",
        "0",
        f"--conformance-report-dir={out_dir}",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "conformance: active (collects opsuites/test_compare_cpu.py)" in out, out[:3000]
    records = read_records(out_dir)
    assert records and {r["op"] for r in records} == {"add"}, records
    assert (out_dir / "summary.json").is_file() and "Conformance:" in out


# --- (c) the explicit opt-in and opt-out --------------------------------------------------------------


@pytest.mark.parametrize("how", ["flag", "env", "pyproject"])
def test_explicit_opt_in_activates_an_unrelated_folder(tmp_path, how):
    pyproject = '[tool.conformance]\nactivate = true\nreport-dir = "out"\n' if how == "pyproject" else None
    proj = _unrelated_project(tmp_path, pyproject)
    (proj / "test_y.py").write_text("def test_f():\n    assert 1 == 2\n")
    args = ["-n", "0", "--conformance-report-dir=out"] if how != "pyproject" else ["-n", "0"]
    if how == "flag":
        args.append("--conformance=on")
    proc = _pytest(proj, *args, **({"CONFORMANCE_ACTIVATE": "on"} if how == "env" else {}))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]  # test_f fails
    assert _seen(proj)["backend"] == "neuron"  # the emulated device of a conformance session
    assert "conformance: active (" in out and (proj / "out" / "summary.json").is_file(), out[-3000:]
    records = {r["op"]: r for r in read_records(proj / "out")}
    assert sorted(records) == ["test_a", "test_f"], records
    assert records["test_f"]["repro"].endswith("--conformance=on"), records["test_f"]  # replays opted in


def test_explicit_opt_out_wins_over_the_pyproject_opt_in(tmp_path):
    proj = _unrelated_project(tmp_path, "[tool.conformance]\nactivate = true\n")
    proc = _pytest(proj, "-n", "0", "--conformance=off")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert _seen(proj)["backend"] == "privateuseone" and not (proj / "reports").exists()


# --- (d) bad input -----------------------------------------------------------------------------------


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "conformance:" in ln]
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return lines[0]


def test_unknown_pyproject_keys_are_an_error_even_without_an_opt_in(tmp_path):
    proj = _unrelated_project(tmp_path, '[tool.conformance]\nactivte = true\ncolour = "red"\n')
    line = _one_line_error(_pytest(proj, "-n", "0"))
    assert "unknown key(s) in [tool.conformance]: activte, colour; accepted: activate, device," in line, line
    assert not (proj / "seen.json").exists() and not (proj / "reports").exists()


def test_bad_activate_value_is_an_error(tmp_path):
    proj = _unrelated_project(tmp_path)
    line = _one_line_error(_pytest(proj, "-n", "0", CONFORMANCE_ACTIVATE="maybe"))
    assert "environment variable CONFORMANCE_ACTIVATE: 'maybe' is not one of: auto, on, off" in line, line


def test_opt_out_that_names_the_suites_is_an_error(tmp_path):
    line = _one_line_error(
        _pytest(
            ROOT,
            "opsuites/test_compare_cpu.py",
            "--conformance=off",
            "-n",
            "0",
            f"--conformance-report-dir={tmp_path / 'out'}",
        )
    )
    assert "--conformance is off" in line and "opsuites/test_compare_cpu.py" in line, line
    assert not (tmp_path / "out").exists()
