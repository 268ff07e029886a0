"""Tests of neuron_conformance.conformance.results.manifest: good and malformed files, matching, dump round trip."""

import pytest

from neuron_conformance.conformance.results.manifest import ManifestError, dump_manifest, load_manifest, parse_manifest

GOOD = """
# expected failures of a backend
[[xfail]]
op = "to_sparse"
reason = "unsupported"
note = "no sparse kernels"

[[xfail]]
op = "add"
dtype = ["bfloat16", "float16"]
variant = "inplace"
suite = "variants"
reason = "numeric"
"""


def test_parse_and_match():
    m = parse_manifest(GOOD, "m.toml")
    assert len(m) == 2
    e = m.match(op="to_sparse", dtype="float32", variant="function", suite="compare_cpu")
    assert e is not None and e.reason == "unsupported" and e.source == "m.toml:3"
    assert m.match(op="add", dtype="bfloat16", variant="inplace", suite="variants").reason == "numeric"
    assert m.match(op="add", dtype="float32", variant="inplace", suite="variants") is None
    assert m.match(op="add", dtype="float16", variant="function", suite="variants") is None
    assert m.match(op="add", dtype="float16", variant="inplace", suite="compare_cpu") is None
    assert [x.op for x in m.unmatched()] == []


def test_unmatched_entries_are_reported():
    m = parse_manifest(GOOD, "m.toml")
    m.match(op="to_sparse")
    assert [e.op for e in m.unmatched()] == ["add"]


@pytest.mark.parametrize(
    "text, needle",
    [
        ('[[xfail]]\nop = "add"\n', "missing the required key 'reason'"),
        ('[[xfail]]\nreason = "numeric"\n', "missing the required key 'op'"),
        ('[[xfail]]\nop = "add"\nreason = "flaky"\n', "not a failure class"),
        ('[[xfail]]\nop = "add"\nreason = "numeric"\ndtype = "float33"\n', "unknown dtype 'float33'"),
        ('[[xfail]]\nop = "add"\nreason = "numeric"\ncolour = "red"\n', "unknown key"),
        ('[[xfail]]\nop = 3\nreason = "numeric"\n', "'op' must be a name, a glob or a non-empty list"),
        ('[[xfail]\nop = "add"\n', "invalid TOML"),
        ('[skips]\nop = "add"\n', "unknown top-level key"),
    ],
)
def test_malformed_manifests_name_file_and_line(text, needle):
    with pytest.raises(ManifestError) as info:
        parse_manifest("\n\n" + text, "bad.toml")
    msg = str(info.value)
    assert msg.startswith("bad.toml") and needle in msg
    if "TOML" not in needle and "top-level" not in needle:
        assert "bad.toml:3" in msg  # the entry's header line


def test_load_missing_file(tmp_path):
    with pytest.raises(ManifestError, match="not found"):
        load_manifest(tmp_path / "nope.toml")
    p = tmp_path / "latin1.toml"
    p.write_bytes(b'[[xfail]]\nop = "caf\xe9"\n')
    with pytest.raises(ManifestError, match="latin1.toml"):
        load_manifest(p)


def test_dump_round_trip():
    m = parse_manifest(GOOD, "m.toml")
    again = parse_manifest(dump_manifest(m.entries), "d.toml")
    assert [(e.op, e.dtypes, e.variant, e.suite, e.reason, e.note) for e in again.entries] == [
        (e.op, e.dtypes, e.variant, e.suite, e.reason, e.note) for e in m.entries
    ]


def test_emulator_manifest_is_valid():
    from neuron_conformance.emulator import backend  # its CONFORMANCE_MANIFESTS: the common one, then the mode's

    paths = {p for mode in ("mirror", "device", "alternate") for p in backend.CONFORMANCE_MANIFESTS(mode)}
    assert len(paths) == 5 and all(p.is_file() for p in paths), paths
    for path in sorted(paths):
        manifest = load_manifest(path)  # raises ManifestError naming file and line when malformed
        assert all(e.note for e in manifest.entries), path
        # the alternate mode's own kernels are correct: its manifest holds no expected failure
        assert (len(manifest) == 0) == (path.name == "manifest-alternate.toml"), path


def test_op_lists_and_globs_match_and_round_trip():
    """Should match an op list and shell-style globs, and write them back as parse_manifest reads them."""
    m = parse_manifest(
        '[[xfail]]\nop = ["add", "nn.functional.*"]\nreason = "unsupported"\n'
        '[[xfail]]\nop = "linalg.?vd"\ndtype = "float32"\nreason = "numeric"\n'
    )
    first, second = m.entries
    assert first.op == ("add", "nn.functional.*")
    assert first.matches(op="add") and first.matches(op="nn.functional.gelu") and not first.matches(op="addr")
    assert not first.matches(op="nn.gelu")
    assert second.matches(op="linalg.svd", dtype="float32") and not second.matches(op="linalg.svd", dtype="float64")
    again = parse_manifest(dump_manifest(m.entries))
    assert [(e.op, e.dtypes) for e in again.entries] == [(e.op, e.dtypes) for e in m.entries]


@pytest.mark.parametrize("op", ["[]", '[""]', '["add", 3]', '""'])
def test_bad_op_lists_are_refused(op):
    with pytest.raises(ManifestError, match="'op' must be a name, a glob or a non-empty list"):
        parse_manifest(f'[[xfail]]\nop = {op}\nreason = "numeric"\n', "m.toml")
