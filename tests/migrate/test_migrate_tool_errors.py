"""A crash inside a rule or a fix is a tool error: the file is named with the
rule code and the exception, left unchanged, counted as not checked, the other files are still
processed, and the run exits 2."""

import io

from neuron_conformance.migrate import hooks
from neuron_conformance.migrate.cli import EXIT_ERROR, main
from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection

ALL = selection(None, None)


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_set_device_with_a_call_argument_is_fixed():
    """The torchrun line: the argument is a call, passed on unchanged (it raised KeyError)."""
    src = 'import os\nimport torch\ntorch.cuda.set_device(int(os.environ["LOCAL_RANK"]))\n'
    result = check_source(src, Settings(ALL, fix=True))
    assert result.error is None
    assert 'torch.accelerator.set_device_index(int(os.environ["LOCAL_RANK"]))' in result.new_source


def _raise_in_handler(monkeypatch):
    def broken(ctx, call, q):
        raise ZeroDivisionError("made to fail")

    broken.__code__ = broken.__code__.replace(co_consts=broken.__code__.co_consts + ("NM201",))
    monkeypatch.setitem(hooks.CALLS, "torch.cuda.synchronize", [broken])


def test_rule_that_raises_is_a_tool_error(monkeypatch, tmp_path):
    _raise_in_handler(monkeypatch)
    bad = tmp_path / "bad.py"
    good = tmp_path / "good.py"
    bad.write_text("import torch\ntorch.cuda.synchronize()\nx = torch.ones(1).cuda()\n")
    good.write_text("import torch\nn = torch.cuda.device_count()\n")
    code, out, err = run("check", bad, good, "--fix", "--no-config", "-j", "1")
    assert code == EXIT_ERROR
    line = next(ln for ln in err.splitlines() if ln.startswith(str(bad)))
    assert "error" in line and "NM201" in line and "ZeroDivisionError: made to fail" in line
    assert bad.read_text().startswith("import torch\ntorch.cuda.synchronize()")  # left unchanged
    assert "torch.accelerator.device_count()" in good.read_text()  # the other file was fixed
    assert "1 file not checked" in out and "tool error" in out


def test_fix_that_raises_is_a_tool_error(monkeypatch, tmp_path):
    from neuron_conformance.migrate.rule import SAFE, Finding

    def broken_fix(node):
        raise KeyError("index")

    def handler(ctx, call, q):
        return Finding("NM201", call, fix=broken_fix, applicability=SAFE)

    monkeypatch.setitem(hooks.CALLS, "torch.cuda.synchronize", [handler])
    path = tmp_path / "t.py"
    path.write_text("import torch\ntorch.cuda.synchronize()\n")
    code, out, err = run("check", path, "--output-format", "json", "--fix", "--no-config")
    assert code == EXIT_ERROR
    assert "NM201 (fix): KeyError" in err and str(path) in err
    assert path.read_text() == "import torch\ntorch.cuda.synchronize()\n"


def test_check_source_marks_internal_errors_only():
    """A syntax error is a property of the input (exit 1), not a tool error."""
    assert check_source("def (:\n", Settings(ALL)).internal is False
