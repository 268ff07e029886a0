"""The text pre-filter (``migrate/prefilter.py``): it drops a file only when every trigger word is in a
comment or in a plain string that is a statement of its own, and keeps every file that has a finding."""

from pathlib import Path

import pytest

from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.prefilter import lexemes, may_have_findings
from neuron_conformance.migrate.registry import selection

FIXTURES = Path(__file__).parent / "fixtures"
INPUTS = sorted(p for p in FIXTURES.rglob("NM*.py") if p.name.count(".") == 1)
ALL = selection(None, None)


@pytest.mark.parametrize(
    "src",
    [
        "import torch\n# move it with x.cuda() later\nx = 1\n",
        'import torch\n"""Run on "cuda" with torch.cuda.synchronize()."""\n',
        "def f():\n    '''Moves to .cuda() first.'''\n    return 1\n",
        'class A:\n    r"""nccl backend"""  # a comment: .cuda()\n',
        "x = 1\n'a string statement naming torch.cuda'\n",
        "y = maybe_autocast(device_type=t, enabled=False)\n",
    ],
)
def test_trigger_words_only_in_comments_or_statement_strings_drop_the_file(src):
    assert not may_have_findings(src)
    assert check_source(src, Settings(ALL)).violations == []


@pytest.mark.parametrize(
    "src",
    [
        'x = torch.zeros(2, device="cuda")\n',
        'devices = (\n"cuda")\n',  # a string at the start of its line, inside brackets
        '"cuda".join(parts)\n',  # a statement that is more than the string
        '"doc"; y = x.cuda()\n',
        'x = \\\n"cuda"\n',  # after a backslash continuation
        'f"{x.cuda()}"\n',  # an f-string's fields are code
        'if"cuda"==d: pass\n',  # `if` then a string: not an f-string prefix
        "y = x.to(0)\n",
        "with torch.autocast('cuda'):\n    pass\n",
        "s = '''a\n# not a comment: torch.cuda.synchronize()\n'''\n",
    ],
)
def test_trigger_words_in_code_or_values_keep_the_file(src):
    assert may_have_findings(src)


def test_lexemes_mark_comments_and_statement_strings_only():
    src = "a = 'v'  # c\n'doc'\n(\n'in brackets')\nb = f'x'\n"
    got = [(src[s:e], ok) for s, e, ok in lexemes(src)]
    assert got == [("'v'", False), ("# c", True), ("'doc'", True), ("'in brackets'", False), ("f'x'", False)]


@pytest.mark.parametrize("path", INPUTS, ids=[p.stem for p in INPUTS])
def test_every_fixture_is_kept_and_its_commented_out_copy_is_dropped(path):
    """Every fixture has findings, so the pre-filter keeps it; commented out line by line, none are
    left, and the pre-filter drops it without changing the (empty) result."""
    source = path.read_text()
    assert may_have_findings(source)
    commented = "".join("# " + line for line in source.splitlines(True))
    assert not may_have_findings(commented)
    assert check_source(commented, Settings(ALL)).violations == []
