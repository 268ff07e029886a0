"""An expected-failure entry limited to a range of torch releases (the manifest's ``torch`` key)."""

import pytest

from neuron_conformance.conformance.results import manifest as manifest_module
from neuron_conformance.conformance.results.manifest import ManifestError, dump_manifest, parse_manifest
from neuron_conformance.conformance.results.manifest_update import propose_groups

RANGES = """
[[xfail]]
op = "nn.functional.linear_cross_entropy.chunked"
dtype = "bfloat16"
suite = "compare_cpu"
reason = "numeric"
torch = "<2.14"
bound.bfloat16 = { max_rel = 0.07 }

[[xfail]]
op = "nn.functional.linear_cross_entropy.chunked"
dtype = "bfloat16"
suite = "compare_cpu"
reason = "numeric"
torch = ">=2.14"
bound.bfloat16 = { max_rel = 1.0 }
"""


@pytest.fixture
def running(monkeypatch):
    """Set the torch version the manifest sees as running."""

    def set_version(version):
        monkeypatch.setattr(manifest_module, "running_torch", lambda: version)

    return set_version


@pytest.mark.parametrize(
    "version, line",
    [
        ("2.13.0+cpu", 2),
        ("2.13.1", 2),
        ("2.14.1+cu130", 10),
        ("2.15.0+cu132", 10),
        ("2.14.0rc3", 10),  # a release candidate counts as its release
        ("2.16.0.dev20261201+cpu", 10),  # so does a nightly
    ],
)
def test_the_entry_for_the_running_release_matches(running, version, line):
    running(version)
    m = parse_manifest(RANGES, "m.toml")
    entry = m.match(op="nn.functional.linear_cross_entropy.chunked", dtype="bfloat16", suite="compare_cpu")
    assert entry is not None and entry.source == f"m.toml:{line}"


def test_an_entry_for_other_releases_matches_nothing_and_is_not_unmatched(running):
    running("2.15.0+cu132")
    m = parse_manifest(RANGES, "m.toml")
    assert [e.source for e in m.unmatched()] == ["m.toml:10"]  # the one for 2.15 has not matched yet
    m.match(op="nn.functional.linear_cross_entropy.chunked", dtype="bfloat16", suite="compare_cpu")
    assert m.unmatched() == []  # the one for <2.14 does not count as unmatched on 2.15
    old = m.entries[0]
    assert not old.matches(op="nn.functional.linear_cross_entropy.chunked", dtype="bfloat16", suite="compare_cpu")
    assert old.applies("2.13.0+cpu") and not old.applies("2.14.0")


def test_the_range_survives_a_dump_and_an_update(running):
    running("2.15.0+cu132")
    m = parse_manifest(RANGES, "m.toml")
    again = parse_manifest(dump_manifest(m.entries), "d.toml")
    assert [e.torch for e in again.entries] == ["<2.14", ">=2.14"]
    # a failure on 2.15 that only the <2.14 entry would cover is a new cause, and the <2.14 entry is kept as it is
    rec = {
        "nodeid": "t",
        "op": "nn.functional.linear_cross_entropy.chunked",
        "dtype": "bfloat16",
        "suite": "layouts",
        "outcome": "failed",
        "failure_class": "numeric",
        "message": "values differ",
        "max_rel": 0.5,
    }
    old = parse_manifest(
        RANGES.replace(
            'suite = "compare_cpu"\nreason = "numeric"\ntorch = "<2.14"', 'reason = "numeric"\ntorch = "<2.14"'
        ),
        "o.toml",
    )
    kept, groups, added, _removed = propose_groups(old, [rec])
    assert [(e.torch, e.bounds) for e in kept] == [
        ("<2.14", {"bfloat16": {"max_rel": 0.07}}),
        (">=2.14", {"bfloat16": {"max_rel": 1.0}}),
    ]
    assert [e.suite for e in added] == ["layouts"] and added[0].torch is None


@pytest.mark.parametrize(
    "value, needle",
    [
        ("2.14", "'torch' must be a version specifier set"),
        ('"2.14"', "is not a version specifier set"),
        ('">=two"', "is not a version specifier set"),
        ('""', "'torch' must be a version specifier set"),
        ('"===nightly"', "'nightly' is not a release number"),
    ],
)
def test_a_malformed_range_names_file_line_and_entry(value, needle):
    text = f'\n[[xfail]]\nop = "add"\nreason = "numeric"\ntorch = {value}\n'
    with pytest.raises(ManifestError) as info:
        parse_manifest(text, "bad.toml")
    assert str(info.value).startswith("bad.toml:2: entry 1 (add)") and needle in str(info.value)
