"""--update-manifest (conformance.manifest_update): proposed manifest from records."""

from __future__ import annotations

from conformance.manifest import Entry, Manifest, load_manifest
from conformance.manifest_update import PROPOSED_FILE, propose, write_proposed
from conformance.records import RecordWriter


def _records(source="m.toml"):
    return [
        {"nodeid": "a", "op": "add", "dtype": "float32", "variant": "out", "suite": "variants",
         "outcome": "failed", "failure_class": "wrong-error", "message": "out on the CPU did not raise"},
        {"nodeid": "b", "op": "mm", "dtype": "float32", "suite": "layouts", "outcome": "passed"},
        {"nodeid": "c", "op": "cat", "suite": "errors", "outcome": "failed", "failure_class": "stale",
         "manifest_entry": f"{source}:1"},
        {"nodeid": "d", "op": "sort", "suite": "layouts", "outcome": "failed", "failure_class": "error",
         "message": "boom"},
        {"nodeid": "e", "op": "exp", "suite": "layouts", "outcome": "xfailed", "failure_class": "numeric",
         "expected_failure": "numeric", "manifest_entry": "m.toml:5"},
    ]


def test_propose_adds_new_failures_and_removes_stale_entries():
    manifest = Manifest([Entry(op="cat", reason="wrong-error", source="m.toml:1"),
                         Entry(op="exp", reason="numeric", source="m.toml:5")])
    entries, added, removed = propose(manifest, _records())
    assert [e.op for e in removed] == ["cat"]
    assert {(e.op, e.reason) for e in added} == {("add", "wrong-error"), ("sort", "error")}
    add = next(e for e in added if e.op == "add")
    assert add.dtypes == ("float32",) and add.variant == "out" and add.suite == "variants"
    assert [e.op for e in entries] == ["exp", "add", "sort"]


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
