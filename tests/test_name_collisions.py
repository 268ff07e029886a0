"""No collisions with a user's project: its own top-level ``reports``, ``migrate``, ``opsuites``, ``model_zoo``
and ``conformance`` packages, and another plugin's ``--device`` (issue: install it anywhere, part 3).

The distribution's packages are imported as ``neuron_conformance.<name>`` only (``neuron_conformance/__init__.py``),
and every option of the plugin is ``--conformance-<key>`` with its value in ``config.option.conformance_<dest>``
(:data:`neuron_conformance.conformance.pytest_plugin.options.PREFIX`). Each run below is a pytest subprocess started from a
user project folder, so the current folder (with the user's packages) is first on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import neuron_conformance.reports
from neuron_conformance.conformance.pytest_plugin import options

USER_PACKAGES = ("reports", "migrate", "opsuites", "model_zoo", "conformance")

USER_TEST = """
import importlib
from pathlib import Path

import neuron_conformance.reports
import neuron_conformance.migrate


def test_user_packages_are_the_users():
    for name in {names!r}:
        module = importlib.import_module(name)
        assert module.WHO == "user", (name, module.__file__)
        assert Path(module.__file__).resolve().parent == Path(__file__).resolve().parent / name


def test_the_harness_packages_are_the_distributions():
    for module in (neuron_conformance.reports, neuron_conformance.migrate):
        assert not hasattr(module, "WHO"), module.__file__
        assert Path(module.__file__).resolve().parent.parent != Path(__file__).resolve().parent
"""

OTHER_PLUGIN = """
def pytest_addoption(parser):
    parser.addoption("--device", default="unset", help="another plugin's --device (as TorchCTS registers)")
"""

OTHER_TEST = """
def test_other_plugin_keeps_its_device(request):
    assert request.config.getoption("device") == "other-value"
"""


def _user_project(root: Path) -> Path:
    for name in USER_PACKAGES:
        (root / name).mkdir()
        (root / name / "__init__.py").write_text('WHO = "user"\n', encoding="utf-8")
    (root / "test_user.py").write_text(USER_TEST.format(names=USER_PACKAGES), encoding="utf-8")
    return root


def _snapshot(root: Path) -> dict:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for name in USER_PACKAGES
        for p in sorted((root / name).rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _pytest(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("PYTHONPATH", None)  # only what the interpreter and the current folder give
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_user_packages_and_the_harness_import_side_by_side(tmp_path, monkeypatch):
    monkeypatch.delenv("CONFORMANCE_ACTIVATE")  # a plain session of the user's own tests
    project = _user_project(tmp_path)
    out = _pytest(project, "test_user.py", "-p", "no:xdist")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "2 passed" in out.stdout and "Conformance:" not in out.stdout


def test_default_report_folder_never_lands_inside_a_user_package(tmp_path, monkeypatch):
    """The user's ``reports`` package would receive ``reports/latest/``: refused, one line, exit code 2; with
    a report folder given, the suites run from that folder, report there, and the user's packages are
    untouched."""
    monkeypatch.delenv("CONFORMANCE_ACTIVATE")
    project = _user_project(tmp_path)
    before = _snapshot(project)
    suite = (
        "--pyargs",
        "neuron_conformance.opsuites.test_compare_cpu",
        "--conformance-ops=add",
        "--conformance-dtypes=float32",
        "-p",
        "no:xdist",
    )
    refused = _pytest(project, *suite)
    assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-2000:]
    lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "inside the Python package" in lines[0] and str(project / "reports") in lines[0]
    assert "--conformance-report-dir" in lines[0]
    assert not (project / "reports" / "latest").exists()

    ran = _pytest(project, *suite, "--conformance-report-dir=conformance-out")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    totals = json.loads((project / "conformance-out" / "summary.json").read_text())["totals"]
    assert totals["total"] == 1 and totals["passed"] == 1
    assert _snapshot(project) == before


def test_another_plugins_device_option_does_not_clash(tmp_path):
    """A plugin registering ``--device`` loads next to this one: no argparse clash at start-up, each plugin
    reads its own value (``--device`` the other's, ``--conformance-device`` the harness's)."""
    (tmp_path / "other_device_plugin.py").write_text(OTHER_PLUGIN, encoding="utf-8")
    (tmp_path / "test_other.py").write_text(OTHER_TEST, encoding="utf-8")
    out = _pytest(
        tmp_path,
        "-p",
        "other_device_plugin",
        "test_other.py",
        "-p",
        "no:xdist",
        "--device=other-value",
        "--conformance-device=cpu",
        "--conformance-report-dir=out",
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 passed" in out.stdout and "on cpu (" in out.stdout  # the harness ran on the device its option named


def test_a_flag_before_the_prefix_gets_a_one_line_hint(tmp_path):
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n", encoding="utf-8")
    out = _pytest(tmp_path, "test_a.py", "--ops=add", "-p", "no:xdist")
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--ops is no option" in lines[0] and "--conformance-ops" in lines[0], lines


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--device", "cpu"], "--conformance-device"),
        (["--report-dir=x"], "--conformance-report-dir"),
        (["-k", "x", "--no-report"], "--conformance-no-report"),
        (["--emulator-mode=device"], "--conformance-emulator-mode"),
    ],
)
def test_renamed_flag_error_names_the_prefixed_flag(args, flag):
    message = options.renamed_flag_error(args)
    old = flag.replace("--conformance-", "--")
    assert message is not None and message.startswith(f"{old} is no option") and flag in message


def test_unrelated_unknown_arguments_get_no_hint():
    assert options.renamed_flag_error(["--devices", "x", "--conformance-ops=add", "--timeout=3"]) is None
    assert all(new == "--conformance-" + old[2:] for old, new in options.RENAMED.items())
    assert len(options.RENAMED) == len(options.OPTIONS) - 1  # all but --conformance itself


def test_the_distribution_has_one_top_level_name():
    """pyproject's package list is every package folder of the repository, under ``neuron_conformance``."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    root = Path(neuron_conformance.reports.__file__).resolve().parent.parent
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {"neuron_conformance"} | {
        "neuron_conformance." + ".".join(p.parent.relative_to(root).parts)
        for pkg in ("conformance", "emulator", "opsuites", "model_zoo", "reports", "migrate")
        for p in (root / pkg).rglob("__init__.py")
        if "fixtures" not in p.parts
    }
    assert listed == folders
    assert {name.split(".")[0] for name in listed} == {"neuron_conformance"}
    assert set(config["package-dir"]) == {
        "neuron_conformance",
        *(
            f"neuron_conformance.{p}"
            for p in ("conformance", "emulator", "opsuites", "model_zoo", "reports", "migrate")
        ),
    }
