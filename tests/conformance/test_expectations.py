"""Bounded expectations: manifest bounds (parse, validate, dump), neuron_conformance.conformance.verdict.expectations, the plugin
end to end (an expected failure of another class or size fails as ``unexpected``), --conformance-update-manifest."""

from __future__ import annotations

import json

import pytest

from neuron_conformance.conformance.results.manifest import (
    DEFAULT_MARGIN,
    Entry,
    Manifest,
    ManifestError,
    dump_manifest,
    parse_manifest,
)
from neuron_conformance.conformance.results.manifest_update import propose
from neuron_conformance.conformance.results.records import read_records
from neuron_conformance.conformance.verdict.expectations import unexpected

BOUNDED = """
[[xfail]]
op = "norm_op"
dtype = ["float32", "bfloat16"]
suite = "compare_cpu"
reason = "numeric"
margin = 4.0
bound.float32 = { max_abs = 1e-4, max_rel = 1e-3, max_ulp = 1000.0 }
"""


def _entry(**bound) -> Entry:
    return (
        parse_manifest(BOUNDED, "m.toml").entries[0]
        if not bound
        else Entry(op="x", reason="numeric", bounds={"float32": bound}, source="m.toml:2")
    )


def test_bound_parses_and_round_trips():
    e = parse_manifest(BOUNDED, "m.toml").entries[0]
    assert e.margin == 4.0 and e.bounds == {"float32": {"max_abs": 1e-4, "max_rel": 1e-3, "max_ulp": 1000.0}}
    again = parse_manifest(dump_manifest([e]), "again.toml").entries[0]
    assert again.margin == 4.0
    for metric, value in e.bounds["float32"].items():  # written rounded up, never below what was recorded
        assert value <= again.bounds["float32"][metric] <= value * 1.001


@pytest.mark.parametrize(
    "extra, needle",
    [
        ("bound.float16 = { max_abs = 1.0 }", "bound.float16: the entry does not cover dtype 'float16'"),
        ("bound.float32 = { max_diff = 1.0 }", "bound.float32.max_diff: unknown error size"),
        ("bound.float32 = { max_abs = -1.0 }", "bound.float32.max_abs must be a finite number >= 0"),
        ("bound.float32 = { max_abs = inf }", "bound.float32.max_abs must be a finite number >= 0"),
        ('bound.float32 = { max_abs = "small" }', "bound.float32.max_abs must be a finite number >= 0"),
        ("bound.float33 = { max_abs = 1.0 }", "bound.float33: unknown dtype"),
        ("bound = 3", "'bound' must be a table of dtype names"),
        ("margin = 0.5", "'margin' must be a finite number >= 1"),
    ],
)
def test_malformed_bound_names_file_and_entry(extra, needle):
    text = '# header\n[[xfail]]\nop = "norm_op"\ndtype = ["float32"]\nreason = "numeric"\n' + extra + "\n"
    with pytest.raises(ManifestError) as err:
        parse_manifest(text, "bounds.toml")
    assert str(err.value).startswith("bounds.toml:2: entry 1 (norm_op): ") and needle in str(err.value)


def test_bound_on_a_non_numeric_entry_is_an_error():
    with pytest.raises(ManifestError, match=r"m.toml:1: entry 1 \(x\): 'margin' and 'bound' apply to numeric"):
        parse_manifest('[[xfail]]\nop = "x"\nreason = "unsupported"\nbound.float32 = { max_abs = 1.0 }\n', "m.toml")


def test_expected_class_and_size_within_margin():
    e = _entry(max_abs=1e-4, max_rel=1e-3)
    assert unexpected(e, "numeric", {"max_abs": 3.9e-4, "max_rel": 1e-3, "atol": 1e-5}, "float32") is None
    assert unexpected(e, "numeric", {"max_abs": 1.0}, "bfloat16") is None  # no bound for the dtype: class only
    assert unexpected(e, "numeric", {"max_abs": 1.0}, None) is None


def test_failure_beyond_the_bound_is_unexpected():
    e = _entry(max_abs=1e-4, max_rel=1e-3)
    msg = unexpected(e, "numeric", {"rule": "fp64", "max_abs": 4.1e-4, "max_rel": 1e-4, "atol": 1e-5}, "float32")
    assert msg is not None and "m.toml:2" in msg and "max_abs 0.0001" in msg and "seen: numeric (rule fp64" in msg
    assert f"max_abs 0.00041 > {DEFAULT_MARGIN:g} x 0.0001" in msg


def test_zero_bound_uses_the_tolerance_as_floor():
    e = _entry(max_abs=0.0)
    assert unexpected(e, "numeric", {"max_abs": 3e-5, "atol": 1e-5}, "float32") is None
    assert unexpected(e, "numeric", {"max_abs": 5e-5, "atol": 1e-5}, "float32") is not None


def test_another_class_is_unexpected_with_or_without_bound():
    plain = Entry(op="x", reason="numeric", source="m.toml:9")
    msg = unexpected(plain, "metadata", {}, "float32")
    assert msg == "unexpected failure: manifest entry m.toml:9 expects a numeric failure; seen: metadata"


TEST_FILE = """
import pytest
from neuron_conformance.conformance.verdict.failures import NumericFailure, MetadataFailure

def _fail(max_abs):
    raise NumericFailure("values differ", fields={"rule": "tolerance", "max_abs": max_abs, "atol": 1e-5,
                                                  "rtol": 1e-6})

@pytest.mark.conformance(op="within", dtype="float32", suite="demo")
def test_within():
    _fail(2e-4)

@pytest.mark.conformance(op="beyond", dtype="float32", suite="demo")
def test_beyond():
    _fail(1e-2)

@pytest.mark.conformance(op="other_class", dtype="float32", suite="demo")
def test_other_class():
    raise MetadataFailure("shape (2,) differs")

@pytest.mark.conformance(op="unbounded", dtype="float32", suite="demo")
def test_unbounded():
    _fail(5.0)
"""

MANIFEST = """
[[xfail]]
op = ["within", "beyond", "other_class"]
reason = "numeric"
bound.float32 = { max_abs = 1e-4 }

[[xfail]]
op = "unbounded"
reason = "numeric"
"""


def test_plugin_fails_unexpected_failures_and_reports_them(pytester):
    pytester.makepyfile(test_demo=TEST_FILE)
    pytester.makefile(".toml", manifest=MANIFEST)
    result = pytester.runpytest_subprocess(
        "--conformance-device",
        "cpu",
        "--conformance-manifest=manifest.toml",
        "--conformance-report-dir=out",
        "-p",
        "no:randomly",
        "--conformance-update-manifest",
    )
    result.assert_outcomes(failed=2, xfailed=2)
    assert result.ret == 1
    recs = {r["op"]: r for r in read_records(pytester.path / "out")}
    assert recs["within"]["outcome"] == "xfailed" and recs["unbounded"]["outcome"] == "xfailed"
    for op in ("beyond", "other_class"):
        assert recs[op]["outcome"] == "failed" and recs[op]["failure_class"] == "unexpected", recs[op]
    assert "max_abs 0.01 > 4 x 0.0001" in recs["beyond"]["message"]
    assert "values differ" in recs["beyond"]["message"]  # the failure itself follows
    assert "expects a numeric failure; seen: metadata" in recs["other_class"]["message"]
    summary = json.loads((pytester.path / "out" / "summary.json").read_text())
    assert summary["counts"]["by_failure_class"].get("unexpected") == 2
    assert "unexpected" in (pytester.path / "out" / "summary.md").read_text()
    assert "unexpected" in (pytester.path / "out" / "index.html").read_text()
    proposed = parse_manifest((pytester.path / "out" / "manifest.proposed.toml").read_text(), "proposed")
    by_op = {e.ops[0]: e for e in proposed.entries}
    assert by_op["unbounded"].bounds == {"float32": {"max_abs": pytest.approx(5.0, rel=1e-3)}}
    assert by_op["unbounded"].margin == DEFAULT_MARGIN


def test_update_manifest_writes_bounds_for_kept_and_new_numeric_entries():
    manifest = Manifest([Entry(op="ln", reason="numeric", source="m.toml:1", bounds={"float16": {"max_abs": 0.5}})])
    recs = [
        {
            "nodeid": "a",
            "op": "ln",
            "dtype": "float32",
            "suite": "s",
            "outcome": "xfailed",
            "failure_class": "numeric",
            "manifest_entry": "m.toml:1",
            "max_abs": 2e-4,
            "max_ulp": 9.0,
        },
        {
            "nodeid": "b",
            "op": "ln",
            "dtype": "float32",
            "suite": "t",
            "outcome": "xfailed",
            "failure_class": "numeric",
            "manifest_entry": "m.toml:1",
            "max_abs": 1e-4,
            "max_ulp": 30.0,
        },
        {
            "nodeid": "c",
            "op": "mm",
            "dtype": "bfloat16",
            "suite": "s",
            "outcome": "failed",
            "failure_class": "numeric",
            "message": "off",
            "max_abs": 0.25,
            "max_rel": 0.01,
        },
        {
            "nodeid": "d",
            "op": "cat",
            "dtype": "bfloat16",
            "suite": "s",
            "outcome": "failed",
            "failure_class": "metadata",
            "message": "strides",
        },
    ]
    entries, _added, _removed = propose(manifest, recs)
    by_op = {e.ops[0]: e for e in entries}
    assert by_op["ln"].bounds == {"float16": {"max_abs": 0.5}, "float32": {"max_abs": 2e-4, "max_ulp": 30.0}}
    assert by_op["mm"].bounds == {"bfloat16": {"max_abs": 0.25, "max_rel": 0.01}} and by_op["mm"].margin == 4.0
    assert by_op["cat"].bounds is None and by_op["cat"].margin is None
    parse_manifest(dump_manifest(entries), "proposed.toml")  # what it writes parses
