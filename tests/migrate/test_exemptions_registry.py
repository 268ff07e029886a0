"""The registry of exemptions (``migrate/exemptions/``): every registered exemption's ``quiet`` example produces
no finding of its code and its ``near_miss`` does; without the exemption the quiet example is reported; the
order names every exemption once; the concept modules import no private name of another module."""

import ast
from pathlib import Path

import pytest

from neuron_conformance.migrate import exemptions
from neuron_conformance.migrate.exemptions import registry
from tests.migrate.snippets import pairs

PACKAGE = Path(exemptions.__file__).parent
MIGRATE = PACKAGE.parent

#: Exemptions whose quiet example is also left alone by another exemption (the finding is on a node no
#: current rule reports alone): the example still shows the shape, the near miss still shows its limit.
COVERED_TWICE = {
    # A finding anchored on a whole conditional over a closed vendor chain: the device strings of its branches
    # are reported one by one, and the branch of the chain's default is left alone by the step exemption.
    "closed vendor chain expression": "closed vendor chain default"
}


def _codes(src):
    return [code for _, code in pairs(src)]


@pytest.mark.parametrize("exemption", exemptions.EXEMPTIONS, ids=lambda e: e.name)
def test_quiet_example_is_not_reported(exemption):
    """Should report no finding of the exemption's code on its quiet example."""
    assert exemption.code not in _codes(exemption.quiet)


@pytest.mark.parametrize("exemption", exemptions.EXEMPTIONS, ids=lambda e: e.name)
def test_near_miss_is_reported(exemption):
    """Should still report the exemption's code on its near miss."""
    assert exemption.code in _codes(exemption.near_miss)


@pytest.mark.parametrize("exemption", exemptions.EXEMPTIONS, ids=lambda e: e.name)
def test_quiet_example_is_reported_without_its_exemption(exemption, monkeypatch):
    """Should report the quiet example once its exemption is taken out of the walk (the example is quiet
    because of that exemption), except where another exemption covers the same code."""
    others = [e for e in exemptions.EXEMPTIONS if e is not exemption]
    if exemption.name in COVERED_TWICE:
        others = [e for e in others if e.name != COVERED_TWICE[exemption.name]]
    monkeypatch.setattr(exemptions, "_WALK", registry.stages(others))
    assert exemption.code in _codes(exemption.quiet)


@pytest.mark.parametrize("exemption", exemptions.EXEMPTIONS, ids=lambda e: e.name)
def test_exemption_is_documented(exemption):
    """Should say what it leaves alone and why (its test's docstring), and belong to a concept module."""
    assert len(exemption.doc) > 40
    assert exemption.scope in registry.SCOPES
    assert (PACKAGE / f"{exemption.concept}.py").is_file()
    assert exemption.code.startswith("NM")


def test_order_names_every_registered_exemption_once():
    """Should walk every registered exemption, each once, in :data:`ORDER`."""
    assert [e.name for e in exemptions.EXEMPTIONS] == list(exemptions.ORDER)
    assert set(registry.REGISTERED) == set(exemptions.ORDER)
    assert len(set(exemptions.ORDER)) == len(exemptions.ORDER)


def test_steps_of_one_group_are_consecutive():
    """Should list the steps of one group together (one walk of the path per group)."""
    groups = [e.group for e in exemptions.EXEMPTIONS if e.scope == registry.STEP]
    runs = [g for i, g in enumerate(groups) if i == 0 or groups[i - 1] != g]
    assert len(runs) == len(set(runs))


def test_registering_a_name_twice_or_a_step_without_group_fails():
    """Should refuse a second exemption of one name, and a step without a group."""
    name = exemptions.ORDER[0]
    with pytest.raises(ValueError):
        registry.exemption(name, scope=registry.FINDING, code="NM101", quiet="", near_miss="")(lambda view: False)
    with pytest.raises(ValueError):
        registry.exemption("x", scope=registry.STEP, code="NM101", quiet="", near_miss="")


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_no_private_name_is_imported_across_modules(path):
    """Should import only public names of other modules (a name several concepts use lives, public, in a
    shared helper module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    private = [
        f"{node.module}.{a.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("neuron_conformance.migrate")
        for a in node.names
        if a.name.startswith("_")
    ]
    assert private == []


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")) + sorted(MIGRATE.glob("*.py")), ids=lambda p: p.name)
def test_modules_stay_small(path):
    """Should keep every module of the exemptions package and of migrate at most 600 lines."""
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 600
