"""The ``neuron-migrate`` command line: exit codes, output formats, fix modes, configuration,
file handling and write safety."""

import io
import json
import os
import stat
import sys

import pytest

from neuron_conformance.migrate.cli import main

CUDA_SRC = "import torch\n\ntorch.cuda.synchronize()\nx = torch.ones(2).cuda()\ntorch.backends.cudnn.benchmark = True\n"


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def proj(tmp_path):
    (tmp_path / "train.py").write_text(CUDA_SRC)
    (tmp_path / "clean.py").write_text("import torch\nx = torch.ones(2)\n")
    return tmp_path


def test_exit_codes(proj):
    """Should exit 0 on clean input, 1 with findings, 2 on usage errors."""
    assert run("check", proj / "clean.py", "--no-config")[0] == 0
    code, out, _ = run("check", proj, "--no-config", "--output-format", "concise")
    assert code == 1
    assert "train.py:3:1: NM201 [*]" in out and "NM801" in out
    assert run("check", proj / "missing.py", "--no-config")[0] == 2
    assert run("check", proj, "--select", "NM999", "--no-config")[0] == 2
    assert run("check", proj, "--output-format", "xml", "--no-config")[0] == 2
    assert run("check", proj, "--target-torch", "two", "--no-config")[0] == 2


def test_check_is_the_default_command(proj):
    code, out, _ = run(proj / "train.py", "--no-config", "--output-format", "concise")
    assert code == 1 and "NM201" in out


def test_fix_writes_and_is_idempotent(proj):
    """Should apply safe fixes only with --fix, unsafe ones with --unsafe-fixes, and change nothing
    the second time."""
    target = proj / "train.py"
    code, out, _ = run("check", target, "--fix", "--no-config")
    text = target.read_text()
    assert "torch.accelerator.synchronize()" in text and ".to(DEVICE_TYPE)" in text
    assert code == 1 and "NM801" in out  # the report-only finding remains
    run("check", target, "--fix", "--unsafe-fixes", "--no-config")
    before = target.read_text()
    run("check", target, "--fix", "--unsafe-fixes", "--no-config")
    assert target.read_text() == before


def test_diff_writes_nothing(proj):
    target = proj / "train.py"
    code, out, _ = run("check", target, "--diff", "--no-config")
    assert code == 1
    assert "-torch.cuda.synchronize()" in out and "+torch.accelerator.synchronize()" in out
    assert target.read_text() == CUDA_SRC


def test_select_and_ignore(proj):
    _, out, _ = run("check", proj, "--select", "NM2", "--output-format", "concise", "--no-config")
    assert "NM201" in out and "NM108" not in out
    _, out, _ = run("check", proj, "--ignore", "NM201,NM8", "--output-format", "concise", "--no-config")
    assert "NM201" not in out and "NM801" not in out and "NM108" in out


def test_json_sarif_github_formats(proj):
    _, out, _ = run("check", proj, "--output-format", "json", "--no-config")
    items = json.loads(out)
    assert {i["code"] for i in items} == {"NM201", "NM108", "NM801"}
    sync = next(i for i in items if i["code"] == "NM201")
    assert sync["location"] == {"row": 3, "column": 1} and sync["fix"]["applicability"] == "safe"
    _, out, _ = run("check", proj, "--output-format", "sarif", "--no-config")
    sarif = json.loads(out)
    assert sarif["version"] == "2.1.0"
    results = sarif["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"NM201", "NM108", "NM801"}
    assert all(r["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1 for r in results)
    _, out, _ = run("check", proj, "--output-format", "github", "--no-config")
    assert out.startswith("::warning title=neuron-migrate (") and "line=3,col=1" in out


def test_full_format_plain_when_not_a_terminal(proj):
    _, out, _ = run("check", proj / "train.py", "--no-config")
    assert "\x1b[" not in out
    assert "  3 | torch.cuda.synchronize()" in out and "help: Replace with `torch.accelerator.synchronize()`" in out
    assert "Found 3 findings." in out


def test_rule_command_shows_documentation():
    code, out, _ = run("rule", "NM001")
    assert code == 0 and out.startswith("# NM001 device-index-not-entered")
    assert "## Fix safety" in out
    assert run("rule", "NM000")[0] == 2
    code, out, _ = run("rules")
    assert code == 0 and len(out.splitlines()) >= 60


def test_pyproject_configuration(proj):
    """Should read [tool.neuron-migrate], let flags override it, and reject unknown keys."""
    (proj / "pyproject.toml").write_text('[tool.neuron-migrate]\nselect = ["NM8"]\nexclude = ["clean.py"]\n')
    code, out, _ = run("check", proj, "--output-format", "concise")
    assert code == 1 and "NM801" in out and "NM201" not in out
    _, out, _ = run("check", proj, "--output-format", "concise", "--select", "NM2")
    assert "NM201" in out and "NM801" not in out
    (proj / "pyproject.toml").write_text('[tool.neuron-migrate]\nselekt = ["NM8"]\n')
    code, _, err = run("check", proj)
    assert code == 2 and "selekt" in err


def test_default_excludes_and_exclude_globs(proj):
    venv = proj / ".venv" / "lib"
    venv.mkdir(parents=True)
    (venv / "dep.py").write_text(CUDA_SRC)
    (proj / "build").mkdir()
    (proj / "build" / "gen.py").write_text(CUDA_SRC)
    _, out, _ = run("check", proj, "--output-format", "concise", "--no-config")
    assert ".venv" not in out and "build" not in out and "train.py" in out
    _, out, _ = run("check", proj, "--output-format", "concise", "--no-config", "--extend-exclude", "train.py")
    assert "train.py" not in out


def test_bad_files_are_reported_and_skipped(proj):
    """Should report a syntax error, non-UTF-8 text, a binary file and a symlink out of the tree by
    path, keep going, and exit 1."""
    (proj / "broken.py").write_text("def f(:\n    torch.cuda.synchronize()\n")
    (proj / "latin.py").write_bytes("x = 'caf\xe9'  # cuda\n".encode("latin-1"))
    (proj / "blob.py").write_bytes(b"\x00\x01cuda\x00")
    outside = proj.parent / f"outside_{proj.name}.py"
    outside.write_text(CUDA_SRC)
    os.symlink(outside, proj / "link.py")
    code, out, err = run("check", proj, "--output-format", "concise", "--no-config")
    assert code == 1
    assert "broken.py: skipped: cannot parse" in err
    assert "latin.py: skipped: not valid utf-8" in err
    assert "blob.py: skipped: binary file" in err
    assert "link.py: skipped: symlink out of the tree" in err
    assert "train.py:3:1: NM201" in out
    code, out, err = run("check", proj / "clean.py", proj / "broken.py", "--no-config", "--output-format", "json")
    assert code == 1 and any(i["name"] == "skipped-file" for i in json.loads(out))


def test_write_keeps_encoding_line_endings_and_permissions(tmp_path):
    """Should replace the file atomically, keeping its coding cookie, CRLF endings and mode."""
    target = tmp_path / "legacy.py"
    src = "# -*- coding: latin-1 -*-\r\nimport torch\r\nname = 'caf\xe9'\r\ntorch.cuda.synchronize()\r\n"
    target.write_bytes(src.encode("latin-1"))
    os.chmod(target, 0o750)
    code, _, _ = run("check", target, "--fix", "--no-config")
    assert code == 0
    data = target.read_bytes()
    assert data == src.replace("torch.cuda.synchronize", "torch.accelerator.synchronize").encode("latin-1")
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert [p.name for p in tmp_path.iterdir()] == ["legacy.py"]  # no temp file left


def test_parallel_run_matches_serial(tmp_path):
    for i in range(40):
        (tmp_path / f"m{i}.py").write_text(CUDA_SRC if i % 3 else "import os\n")
    _, serial, _ = run("check", tmp_path, "-j", "1", "--output-format", "json", "--no-config")
    _, parallel, _ = run("check", tmp_path, "-j", "2", "--output-format", "json", "--no-config")
    assert json.loads(serial) == json.loads(parallel)
    assert len(json.loads(serial)) == 26 * 3  # 26 of the 40 files have 3 findings each


def test_console_entry_point_subprocess(cli, proj):
    """Should run as `python -m neuron_conformance.migrate` with the documented exit code."""
    proc = cli("check", proj / "train.py", "--no-config", "--output-format", "concise")
    assert proc.returncode == 1 and "NM201" in proc.stdout
    proc = cli("--version")
    assert proc.returncode == 0 and "neuron-migrate" in proc.stdout


def test_the_tool_never_imports_the_code_it_reads(tmp_path):
    """Should not execute the checked file: a module that would write a marker on import stays inert."""
    marker = tmp_path / "imported"
    (tmp_path / "evil.py").write_text(
        f"import torch\nopen({str(marker)!r}, 'w').write('x')\ntorch.cuda.synchronize()\n"
    )
    run("check", tmp_path, "--fix", "--no-config")
    assert not marker.exists()
    assert "evil" not in " ".join(sys.modules)
