"""Engine behaviour: name resolution, generated code, noqa, safety of the output."""

import ast

import pytest

from neuron_conformance.migrate import registry
from neuron_conformance.migrate.engine import Settings, check_source, noqa_lines

ALL = registry.selection(None, None)
FIX = Settings(ALL, fix=True, unsafe_fixes=True)


def fix(src):
    result = check_source(src, FIX)
    assert result.error is None, result.error
    return result.new_source or src


def codes(src):
    return [v.code for v in check_source(src, Settings(ALL)).violations]


@pytest.mark.parametrize(
    "src",
    [
        "import torch\ntorch.cuda.synchronize()\n",
        "import torch as t\nt.cuda.synchronize()\n",
        "import torch.cuda as tc\ntc.synchronize()\n",
        "from torch.cuda import synchronize\nsynchronize()\n",
        "from torch import cuda\ncuda.synchronize()\n",
        "from torch.cuda import synchronize as sync\nsync()\n",
    ],
)
def test_qualified_names_resolve_every_import_form(src):
    """Should resolve module aliases, submodule imports and from-imports to torch.cuda.synchronize."""
    assert codes(src) == ["NM201"]
    out = fix(src)
    assert "accelerator.synchronize()" in out and "cuda" not in out


def test_unrelated_names_are_not_flagged():
    """Should not flag a local object that happens to have the same attribute names."""
    src = "import mylib as torch_like\ncuda = object()\ncuda.synchronize()\ntorch_like.cuda.synchronize()\n"
    assert codes(src) == []


def test_generated_code_uses_the_files_torch_alias():
    """Should emit `t.accelerator...` when torch is imported as `t`, and add no import."""
    out = fix("import torch as t\nx = t.zeros(2).cuda()\nt.cuda.synchronize()\n")
    assert out.count("import torch") == 1
    assert "t.accelerator.synchronize()" in out
    assert 'DEVICE_TYPE = (t.accelerator.current_accelerator(check_available=True) or t.device("cpu")).type' in out


def test_one_device_constant_per_module_and_no_module_level_is_available():
    """Should define the device-type constant once, with current_accelerator() (does not poison
    fork), never a module-level is_available() call."""
    src = (
        "import torch\n\n\ndef a(x):\n    return x.cuda()\n\n\ndef b(y):\n    return y.cuda()\n\n"
        "z = torch.ones(1, device='cuda')\n"
    )
    out = fix(src)
    assert out.count("DEVICE_TYPE =") == 1
    tree = ast.parse(out)
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.Expr)):
            assert "is_available" not in ast.unparse(node)
    assert out.count("DEVICE_TYPE") == 4


def test_existing_constant_is_reused_and_name_clashes_avoided():
    """Should reuse a constant from an earlier run and pick another name if DEVICE_TYPE is taken."""
    once = fix("import torch\nx = torch.ones(1).cuda()\n")
    assert fix(once + "y = torch.ones(1).cuda()\n").count("DEVICE_TYPE =") == 1
    clash = fix("import torch\nDEVICE_TYPE = 'gpu'\nx = torch.ones(1).cuda()\n")
    assert "ACCELERATOR_TYPE = (" in clash and "DEVICE_TYPE = 'gpu'" in clash


def test_import_added_once_and_only_when_needed():
    """Should add `import torch` only when a fix needs it and keep other imports."""
    out = fix("from torch.cuda import synchronize\nimport os\n\nsynchronize()\nsynchronize()\n")
    assert out.count("import torch\n") == 1 and "from torch.cuda" not in out and "import os" in out
    untouched = "from torch.cuda import synchronize, utilization\nsynchronize()\nutilization()\n"
    out = fix(untouched)
    assert "from torch.cuda import utilization" in out


def test_comments_and_formatting_are_preserved():
    """Should keep comments, blank lines and the surrounding layout."""
    src = (
        "import torch\n\n# leading comment\nx = torch.ones(3)  # keep me\n"
        "torch.cuda.synchronize(  # sync\n    device=0,\n)\n"
    )
    out = fix(src)
    assert "# leading comment\n" in out and "# keep me" in out and "# sync" in out


def test_noqa_blanket_and_coded():
    """Should honour `# noqa` and `# noqa: NM201` in check and fix modes, and not `# noqa: E501`."""
    src = (
        "import torch\ntorch.cuda.synchronize()  # noqa\ntorch.cuda.synchronize()  # noqa: NM201\n"
        "torch.cuda.synchronize()  # noqa: E501\ntorch.cuda.synchronize()  # noqa: NM101, NM201\n"
    )
    assert [v.line for v in check_source(src, Settings(ALL)).violations] == [4]
    out = fix(src).splitlines()
    assert out[1].startswith("torch.cuda.") and out[2].startswith("torch.cuda.") and out[4].startswith("torch.cuda.")
    assert out[3].startswith("torch.accelerator.synchronize()")
    assert noqa_lines("x  # NOQA:NM101,NM102\n") == {1: frozenset({"NM101", "NM102"})}


def test_syntax_error_is_reported_not_raised():
    result = check_source("import torch\ndef f(:\n  torch.cuda.synchronize()\n", FIX)
    assert result.error and "cannot parse" in result.error and result.new_source is None


def test_statement_fix_inside_one_line_suite_falls_back():
    """Should not wrap a statement that shares its line (`if x: f()`) and still produce valid code."""
    out = fix("import torch\nif x: torch.cuda.empty_cache()\na = 1; torch.cuda.empty_cache()\n")
    ast.parse(out)
    assert "torch.accelerator.empty_cache()" in out


def test_redundant_seed_removed_only_with_same_argument():
    out = fix("import torch\ntorch.manual_seed(1)\ntorch.cuda.manual_seed_all(1)\ntorch.cuda.manual_seed_all(2)\n")
    assert out == "import torch\ntorch.manual_seed(1)\ntorch.manual_seed(2)\n"


def test_guarded_block_with_cuda_only_api_is_report_only():
    src = "import torch\nif torch.cuda.is_available():\n    torch.backends.cudnn.benchmark = True\n"
    result = check_source(src, Settings(ALL))
    assert [(v.code, v.fix_applicability) for v in result.violations] == [("NM101", "report"), ("NM801", "report")]
    assert check_source(src, FIX).new_source is None


def test_select_limits_fixes():
    src = "import torch\ntorch.cuda.synchronize()\nx = torch.ones(1).cuda()\n"
    out = check_source(src, Settings(frozenset({"NM201"}), fix=True)).new_source
    assert "torch.accelerator.synchronize()" in out and ".cuda()" in out


def test_crlf_line_endings_survive():
    src = "import torch\r\ntorch.cuda.synchronize()\r\nx = 1\r\n"
    out = fix(src)
    assert out == "import torch\r\ntorch.accelerator.synchronize()\r\nx = 1\r\n"


def test_torch_optional_module_gets_no_module_level_torch_code():
    """Should not add `import torch` or a module-level constant to a module that imports torch
    only conditionally; the device expression is written at the site instead."""
    src = (
        "if is_torch_available():\n    import torch\n\n\ndef f(x, rank):\n"
        '    return x.cuda(), torch.zeros(2, device=f"cuda:{rank}")\n'
    )
    out = fix(src)
    ast.parse(out)
    assert "\nimport torch" not in out.replace("    import torch", "") and "DEVICE_TYPE" not in out
    assert out.count("torch.accelerator.current_accelerator(check_available=True)") == 2
    assert check_source(out, FIX).new_source is None
