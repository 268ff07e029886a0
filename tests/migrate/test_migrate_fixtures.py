"""Cases generated from the fixture files: ``fixtures/<family>/<CODE>.py`` (input; lines ending in
``# expect`` must be reported with that code, no other line may be) and ``<CODE>.out.py`` (the text
after ``--fix --unsafe-fixes``)."""

import ast
from pathlib import Path

import pytest

from neuron_conformance.migrate import registry
from neuron_conformance.migrate.engine import Settings, check_source

FIXTURES = Path(__file__).parent / "fixtures"
INPUTS = sorted(p for p in FIXTURES.rglob("NM*.py") if p.name.count(".") == 1)
ALL = registry.selection(None, None)


def _ids(paths):
    return [p.stem for p in paths]


@pytest.mark.parametrize("path", INPUTS, ids=_ids(INPUTS))
def test_reports_exactly_the_marked_lines(path):
    """Should report the fixture's code on every `# expect` line and nowhere else, and no code twice
    at one place."""
    source = path.read_text()
    expected = {i for i, line in enumerate(source.splitlines(), 1) if line.rstrip().endswith("# expect")}
    assert expected, f"{path.name} marks no line"
    result = check_source(source, Settings(ALL), str(path))
    assert result.error is None
    assert {v.line for v in result.violations if v.code == path.stem} == expected
    places = [(v.code, v.line, v.column) for v in result.violations]
    assert len(places) == len(set(places)), f"a finding is reported twice: {sorted(places)}"


@pytest.mark.parametrize("path", INPUTS, ids=_ids(INPUTS))
def test_fix_matches_expected_output(path):
    """Should rewrite the input to the `.out.py` text under --fix --unsafe-fixes, and the
    output should parse and be a fixed point (a second run changes nothing)."""
    source = path.read_text()
    expected = path.with_suffix(".out.py").read_text()
    settings = Settings(ALL, fix=True, unsafe_fixes=True)
    result = check_source(source, settings, str(path))
    assert result.error is None
    assert (result.new_source or source) == expected
    ast.parse(expected)
    again = check_source(expected, settings, str(path))
    assert again.new_source is None and again.fixed == 0


@pytest.mark.parametrize("path", INPUTS, ids=_ids(INPUTS))
def test_applicability_tiers(path):
    """Should apply only safe fixes under --fix; each fixed code's remaining findings are exactly the
    unsafe and report-only ones; report-only rules never change the text."""
    source = path.read_text()
    code = path.stem
    rule = registry.RULES[code]
    only = frozenset({code})
    check = check_source(source, Settings(only))
    safe = check_source(source, Settings(only, fix=True))
    assert safe.error is None
    n_safe = sum(v.fix_applicability == "safe" for v in check.violations)
    assert safe.fixed >= n_safe
    assert all(v.fix_applicability != "safe" for v in safe.violations)
    if rule.applicability == "report":
        assert all(v.fix_applicability == "report" for v in check.violations)
        full = check_source(source, Settings(only, fix=True, unsafe_fixes=True))
        assert full.new_source is None
    if rule.applicability == "unsafe":
        assert all(v.fix_applicability != "safe" for v in check.violations)


def test_every_rule_has_a_fixture():
    """Should have one fixture per rule code (and no fixture for an unknown code)."""
    assert {p.stem for p in INPUTS} == set(registry.load())
    for p in INPUTS:
        assert p.with_suffix(".out.py").exists(), p
        assert p.parent.name == registry.RULES[p.stem].family.replace("-", "_"), p
