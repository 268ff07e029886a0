"""--conformance-update-manifest (neuron_conformance.conformance.results.manifest_update): proposed manifest from records."""

from __future__ import annotations

from neuron_conformance.conformance.results.manifest import Entry, Manifest, load_manifest
from neuron_conformance.conformance.results.manifest_update import (
    PROPOSED_FILE,
    propose,
    propose_groups,
    write_proposed,
)
from neuron_conformance.conformance.results.records import RecordWriter


def _records(source="m.toml"):
    return [
        {
            "nodeid": "a",
            "op": "add",
            "dtype": "float32",
            "variant": "out",
            "suite": "variants",
            "outcome": "failed",
            "failure_class": "wrong-error",
            "message": "out on the CPU did not raise",
        },
        {"nodeid": "b", "op": "mm", "dtype": "float32", "suite": "layouts", "outcome": "passed"},
        {
            "nodeid": "c",
            "op": "cat",
            "suite": "errors",
            "outcome": "failed",
            "failure_class": "stale",
            "manifest_entry": f"{source}:1",
        },
        {
            "nodeid": "d",
            "op": "sort",
            "suite": "layouts",
            "outcome": "failed",
            "failure_class": "error",
            "message": "boom",
        },
        {
            "nodeid": "e",
            "op": "exp",
            "suite": "layouts",
            "outcome": "xfailed",
            "failure_class": "numeric",
            "expected_failure": "numeric",
            "manifest_entry": "m.toml:5",
        },
    ]


def test_propose_adds_new_failures_and_removes_stale_entries():
    manifest = Manifest(
        [Entry(op="cat", reason="wrong-error", source="m.toml:1"), Entry(op="exp", reason="numeric", source="m.toml:5")]
    )
    entries, added, removed = propose(manifest, _records())
    assert [e.op for e in removed] == ["cat"]
    assert {(e.op, e.reason) for e in added} == {("add", "wrong-error"), ("sort", "error")}
    add = next(e for e in added if e.op == "add")
    assert add.dtypes == ("float32",) and add.variant == "out" and add.suite == "variants"
    assert [e.op for e in entries] == ["exp", "sort", "add"]  # kept, then causes (ties by class)


def test_write_proposed_never_touches_the_manifest(tmp_path):
    src = tmp_path / "m.toml"
    src.write_text('[[xfail]]\nop = "cat"\nreason = "wrong-error"\n')
    before = src.read_text()
    writer = RecordWriter(tmp_path / "report", worker="gw0")
    for r in _records(str(src)):
        writer.write(r)
    writer.close()
    manifest = load_manifest(src)
    path, added, removed = write_proposed(tmp_path / "report", manifest)
    assert src.read_text() == before
    assert path == tmp_path / "report" / PROPOSED_FILE
    proposed = load_manifest(path)  # parses: valid reasons only
    assert {e.op for e in proposed.entries} == {"add", "sort"}


DISPATCH = (
    "Could not run 'aten::{op}' with arguments from the 'PrivateUse1' backend. This could be because "
    "the operator doesn't exist for this backend. 'aten::{op}' is only available for these backends: "
    "[CPU, Meta, " + "Other, " * 100 + "]."
)


def _rec(op, dtype, outcome="failed", suite="compare_cpu", **fields):
    rec = {
        "nodeid": f"t.py::test[{suite}-{op}-{dtype}]",
        "op": op,
        "dtype": dtype,
        "variant": None,
        "suite": suite,
        "outcome": outcome,
    }
    rec.update(fields)
    return rec


def test_a_cause_over_many_ops_becomes_one_entry():
    """Should collapse one cause over many (op, dtype) pairs into one entry: a family glob when it covers
    every tested op of the family, an op list otherwise, dtypes left out when every tested dtype failed."""
    miss = DISPATCH.format(op="add.Tensor")
    recs = [
        _rec(f"nn.functional.{n}", d, failure_class="unsupported", message=miss)
        for n in ("gelu", "silu", "relu")
        for d in ("float32", "float16")
    ]
    recs += [_rec(op, "float32", failure_class="unsupported", message=miss) for op in ("sub", "addr")]
    recs += [_rec(op, "float16", "passed") for op in ("sub", "addr")] + [_rec("mm", "float32", "passed")]
    recs += [
        _rec(
            "mm",
            "float16",
            failure_class="numeric",
            message="mm float16 sample 3: max_abs 0.25 > atol 1e-05 " + "word " * 80,
        )
    ]
    kept, groups, added, removed = propose_groups(Manifest(), recs)
    assert not kept and not removed
    (c1, e1), (c2, e2) = groups
    assert "no PrivateUse1 kernel for aten::add.Tensor" in c1 and "8 test(s), 2 entries" in c1
    assert [(e.op, e.dtypes) for e in e1] == [(("addr", "sub"), ("float32",)), ("nn.functional.*", None)]
    assert [(e.op, e.dtypes, e.reason) for e in e2] == [("mm", ("float16",), "numeric")]
    note = e2[0].note
    assert len(note) <= 160 and note.endswith("...") and note[:-3].endswith("word")


def test_proposed_file_is_grouped_sorted_and_parses(tmp_path):
    writer = RecordWriter(tmp_path / "report", worker="gw0")
    recs = [
        _rec(op, "float32", failure_class="unsupported", message=DISPATCH.format(op="mul.Tensor"))
        for op in ("zeta", "mul", "atan2")
    ] + [_rec("exp", "float32", failure_class="numeric", message="x")]
    for r in recs:
        writer.write(r)
    writer.close()
    path, added, _ = write_proposed(tmp_path / "report", Manifest())
    text = path.read_text()
    assert text.index(
        "# cause: unsupported · no PrivateUse1 kernel for aten::mul.Tensor · 3 test(s), 1 entry"
    ) < text.index("# cause: numeric")
    assert 'op = ["atan2", "mul", "zeta"]' in text
    assert [e.op for e in load_manifest(path).entries] == [("atan2", "mul", "zeta"), "exp"]


def test_partly_stale_entry_is_narrowed_not_removed():
    """Should keep a broad entry for the tests that still fail and drop it only when none does."""
    broad = Entry(op=("add", "sub"), reason="numeric", source="m.toml:1")
    gone = Entry(op="mm", reason="numeric", source="m.toml:9")
    recs = [
        _rec(
            "add", "float32", "xfailed", failure_class="numeric", manifest_entry="m.toml:1", expected_failure="numeric"
        ),
        _rec("sub", "float32", failure_class="stale", manifest_entry="m.toml:1"),
        _rec("mm", "float32", failure_class="stale", manifest_entry="m.toml:9"),
    ]
    kept, groups, added, removed = propose_groups(Manifest([broad, gone]), recs)
    assert removed == [broad, gone] and not groups
    assert [(e.op, e.dtypes, e.reason) for e in kept] == [("add", ("float32",), "numeric")]
    assert kept[0].note.startswith("(narrowed from m.toml:1)")
