"""Meta-tests of the rule registry: codes, names, documentation sections, selection."""

import re

import pytest

from neuron_conformance.migrate import registry
from neuron_conformance.migrate.rule import APPLICABILITIES, DOC_SECTIONS, FAMILIES

RULES = registry.load()


def test_codes_are_unique_and_well_formed():
    """Should give every rule a distinct `NM` + family digit + two digits code and a distinct name."""
    assert len(RULES) >= 60
    for code, rule in RULES.items():
        assert re.fullmatch(r"NM\d{3}", code) and rule.code == code
        assert code[2] in FAMILIES
    names = [r.name for r in RULES.values()]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", n) for n in names)


@pytest.mark.parametrize("code", sorted(RULES))
def test_every_rule_has_every_doc_section(code):
    """Should document What/Why/Example/Use instead/Fix safety/References, and a fix title when fixable."""
    rule = RULES[code]
    for section in DOC_SECTIONS:
        assert rule.doc.get(section, "").strip(), f"{code} lacks {section}"
    assert rule.applicability in APPLICABILITIES
    if rule.applicability != "report":
        assert rule.fix_title
    text = rule.render_doc()
    for title in ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety", "References"):
        assert f"## {title}" in text


def test_declaring_a_duplicate_code_is_an_error():
    """Should refuse a second rule with an existing code, naming it."""
    doc = {s: "x" for s in DOC_SECTIONS}
    with pytest.raises(ValueError, match="duplicate rule code 'NM101'"):
        registry.rule("NM101", "x", "m", "", "report", **doc)


def test_declaring_a_rule_without_a_section_is_an_error():
    doc = {s: "x" for s in DOC_SECTIONS if s != "fix_safety"}
    with pytest.raises(ValueError, match="fix_safety"):
        registry.rule("NM199", "x", "m", "", "report", **doc)
    assert "NM199" not in registry.RULES


def test_prefix_selection_and_ignore():
    """Should expand prefixes, subtract --ignore, and reject unknown codes."""
    assert registry.expand(["NM10"]) == {c for c in RULES if c.startswith("NM10")}
    sel = registry.selection(["NM1"], ["NM101"])
    assert "NM101" not in sel and "NM102" in sel and not any(c.startswith("NM2") for c in sel)
    with pytest.raises(ValueError, match="NM999"):
        registry.expand(["NM999"])


def test_target_torch_skips_rules_needing_newer_torch():
    """Should drop rules whose replacement needs a newer torch than --target-torch."""
    old = registry.selection(None, None, (2, 6))
    assert "NM301" not in old and "NM104" not in old
    assert "NM201" in old
    assert registry.selection(None, None, (2, 13)) == frozenset(RULES)
