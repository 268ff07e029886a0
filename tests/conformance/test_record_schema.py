"""The record schema is defined once: docs/architecture.md's table == neuron_conformance.conformance.results.records.ResultRecord.

Also: one vocabulary of outcomes / failure classes, and the record reader, the atomic writer and the
vocabulary import without torch (the reports and the codemod use them).
"""

from __future__ import annotations

import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import neuron_conformance.conformance
import neuron_conformance.reports.model as model
from neuron_conformance.conformance.results import manifest, outcomes
from neuron_conformance.conformance.results.records import NON_NULL_FIELDS, SCHEMA, ResultRecord
from neuron_conformance.conformance.verdict import failures
from neuron_conformance.reports import diff, summary, to_html, to_markdown

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Result records (schema 1)"
TYPES = {"int": int, "str": str, "float": float, "bool": bool, "list[str]": list[str], "dict[str, int]": dict[str, int]}


def docs_table() -> dict[str, str]:
    """``{field: type}`` of the table in docs/architecture.md's "Result records (schema 1)" section."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert SECTION in text, f"docs/architecture.md has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header[:2] == ["field", "type"], header
    out: dict[str, str] = {}
    for row in rows[2:]:  # after the header and the --- line
        cells = [c.strip() for c in row.strip("|").split("|")]
        names = re.findall(r"`([a-z_]+)`", cells[0])
        assert names and re.fullmatch(r"(`[a-z_]+`(, )?)+", cells[0]), f"bad field cell: {cells[0]!r}"
        for name in names:
            assert name not in out, f"{name} listed twice"
            out[name] = cells[1]
    return out


def test_docs_table_lists_exactly_the_typed_record_fields():
    assert list(docs_table()) == list(typing.get_type_hints(ResultRecord))


def test_docs_types_match_the_typed_record():
    hints = typing.get_type_hints(ResultRecord)
    for name, doc_type in docs_table().items():
        assert doc_type in TYPES, f"{name}: unknown type {doc_type!r} in docs (use one of {sorted(TYPES)})"
        expected = TYPES[doc_type] if name in NON_NULL_FIELDS else TYPES[doc_type] | None
        assert hints[name] == expected, f"{name}: docs say {doc_type}, ResultRecord says {hints[name]}"


def test_docs_name_the_schema_and_the_vocabulary():
    table_text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split(SECTION, 1)[1]
    table_text = table_text.split("\n## ", 1)[0]
    assert f"| `schema` | int | {SCHEMA} |" in table_text
    outcome_row = next(line for line in table_text.splitlines() if line.startswith("| `outcome`"))
    class_row = next(line for line in table_text.splitlines() if line.startswith("| `failure_class`"))
    assert set(re.findall(r"`([a-z-]+)`", outcome_row.split("|")[3])) >= set(outcomes.OUTCOMES)
    assert set(re.findall(r"`([a-z-]+)`", class_row.split("|")[3])) >= set(outcomes.FAILURE_CLASSES)
    assert ResultRecord.__total__ is False


def test_one_vocabulary():
    assert set(outcomes.FAILURE_SEVERITY) <= set(outcomes.FAILURE_CLASSES)
    assert set(outcomes.OUTCOME_SEVERITY) == set(outcomes.OUTCOMES)
    assert outcomes.FAILING | outcomes.PASSING <= set(outcomes.OUTCOMES)
    assert failures.FAILURE_CLASSES is outcomes.FAILURE_CLASSES is neuron_conformance.conformance.FAILURE_CLASSES
    assert set(manifest.REASONS) <= set(outcomes.FAILURE_CLASSES)
    assert model.OUTCOMES is outcomes.OUTCOMES and model.OUTCOME_SEVERITY is outcomes.OUTCOME_SEVERITY
    for module in (summary, to_html, to_markdown, diff):  # the pages import the one vocabulary
        assert module.FAILING is outcomes.FAILING
    assert set(model.RECORD_FIELDS) <= set(typing.get_type_hints(ResultRecord))


@pytest.mark.parametrize(
    "modules",
    [
        "neuron_conformance.conformance.results.records, neuron_conformance.conformance.results.atomic, neuron_conformance.conformance.results.outcomes, reports",
        "conformance, neuron_conformance.migrate.files, neuron_conformance.reports.collect, neuron_conformance.reports.model",
    ],
)
def test_records_writer_and_vocabulary_import_without_torch(modules):
    code = (
        f"import sys, {modules}; bad = sorted(m for m in sys.modules if m.split('.')[0] == 'torch'); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_package_reexports_stay_importable():
    code = (
        "import sys; from neuron_conformance import conformance; assert 'torch' not in sys.modules; "
        "missing = [n for n in conformance.__all__ if not hasattr(conformance, n)]; assert not missing, missing; "
        "from neuron_conformance.conformance import DeviceProfile, read_records, FAILURE_CLASSES; "
        "from neuron_conformance.conformance.backend.device import DeviceProfile as D; assert D is DeviceProfile; "
        "assert set(conformance.__all__) <= set(dir(conformance))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
