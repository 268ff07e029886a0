"""The substitutions of PyTorch's 2026 device-generic test migration and of
transformers' device-agnostic testing guide, each in a snippet of our own
(:mod:`tests.migrate.public_migrations`): the measured outcome of every case is the one
``docs/migrate.md`` records, no case is a tool error, and the fixed text is a fixed point."""

import ast
from pathlib import Path

import pytest

from neuron_conformance.migrate.engine import Settings, check_source
from tests.migrate.public_migrations import ALL, CASES, FIXED, MISSED, REPORTED, outcome, table

DOC = Path(__file__).resolve().parents[2] / "docs" / "migrate.md"


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_outcome_is_the_recorded_one(case):
    got, after = outcome(case)
    assert got == case.expected, f"{case.key}: {got}, recorded {case.expected}\n{after}"
    ast.parse(after)
    again = check_source(after, Settings(ALL, fix=True, unsafe_fixes=True))
    assert again.new_source is None
    if got != FIXED:
        assert case.note, f"{case.key}: a case that is not fixed says why"


def test_docs_carry_the_measured_table():
    """The table in docs/migrate.md is the one the corpus gives (regenerate it with
    `python -m tests.migrate.public_migrations` when a rule changes an outcome)."""
    assert table() in DOC.read_text(encoding="utf-8")


def test_the_corpus_covers_both_sources_and_every_outcome_is_possible():
    assert {c.group for c in CASES} == {"PyTorch", "transformers"}
    assert {c.expected for c in CASES} <= {FIXED, REPORTED, MISSED}
    for c in CASES:
        assert any(line.rstrip().endswith("# idiom") for line in c.before.splitlines()), c.key
        assert c.cuda, c.key
