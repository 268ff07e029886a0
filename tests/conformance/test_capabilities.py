"""Capabilities: the declaration's parser and validation, the resolution order, what tests need, and how
``not-claimed`` records are counted (:mod:`neuron_conformance.conformance.backend.capabilities`; docs/harness.md, "Capabilities")."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from neuron_conformance.conformance.backend import capabilities as caps
from neuron_conformance.conformance.results.aten_audit import generated_from_records
from neuron_conformance.conformance.results.manifest import ManifestError, parse_manifest
from neuron_conformance.reports.bug_classes import bug_class_table
from neuron_conformance.reports.summary import make_summary, sorted_outcomes
from neuron_conformance.reports.to_markdown import headline


def test_table_parses_bools_and_rejects_unknown_names_listing_the_accepted():
    assert caps.parse_table({"streams": False, "float64": True}, "m.toml") == {"streams": False, "float64": True}
    with pytest.raises(caps.CapabilityError) as err:
        caps.parse_table({"stream": False}, "m.toml")
    msg = str(err.value)
    assert "'stream'" in msg and "m.toml" in msg and "\n" not in msg
    assert msg.endswith("(accepted: " + ", ".join(caps.CAPABILITIES) + ")")
    with pytest.raises(caps.CapabilityError, match="streams must be true or false, got 0"):
        caps.parse_table({"streams": 0}, "m.toml")
    with pytest.raises(caps.CapabilityError, match="must be a table"):
        caps.parse_table(["streams"], "m.toml")


def test_module_declaration_dict_keeps_the_rest_claimed_and_a_set_claims_exactly_its_names():
    assert caps.parse_declaration({"sparse": False}, "b:X") == {"sparse": False}
    exact = caps.parse_declaration({"streams", "events"}, "b:X")
    assert {n for n, v in exact.items() if v} == {"streams", "events"} and set(exact) == set(caps.CAPABILITIES)
    with pytest.raises(caps.CapabilityError, match=r"b:X: unknown capability 'cuda_graphs'"):
        caps.parse_declaration(["streams", "cuda_graphs"], "b:X")
    with pytest.raises(caps.CapabilityError, match="got str"):
        caps.parse_declaration("streams", "b:X")


def test_manifest_capabilities_table_parses_merges_later_wins_and_errors_name_the_file():
    first = parse_manifest("[capabilities]\nstreams = false\nfloat64 = false\n", "a.toml")
    second = parse_manifest('[capabilities]\nfloat64 = true\n\n[[xfail]]\nop = "add"\nreason = "numeric"\n', "b.toml")
    first.extend(second)
    assert first.capabilities == {"streams": False, "float64": True} and len(first) == 1
    assert first.capability_sources["streams"] == "a.toml [capabilities]"
    with pytest.raises(ManifestError, match=r"^c.toml: \[capabilities\]: unknown capability 'sparse_csr'"):
        parse_manifest("[capabilities]\nsparse_csr = false\n", "c.toml")
    with pytest.raises(ManifestError, match="unknown top-level key"):
        parse_manifest("[capability]\nstreams = false\n", "d.toml")


def _profile(backend="vendor_backend", emulated=False):
    return SimpleNamespace(backend=backend, emulated=emulated)


def test_resolve_defaults_module_then_manifest(monkeypatch):
    import sys

    nothing = caps.resolve(_profile(), "vendor_backend", parse_manifest("", "m"))
    assert nothing.claimed == frozenset(caps.CAPABILITIES)  # declares nothing: claims everything
    monkeypatch.setitem(
        sys.modules,
        "vendor_backend",
        SimpleNamespace(__name__="vendor_backend", CONFORMANCE_CAPABILITIES={"streams": False, "sparse": False}),
    )
    claims = caps.resolve(
        _profile(), "vendor_backend", parse_manifest("[capabilities]\nsparse = true\nfloat64 = false\n", "mine.toml")
    )
    assert claims.not_claimed() == ["float64", "streams"]
    assert claims.sources == {
        "float64": "mine.toml [capabilities]",
        "streams": "vendor_backend:CONFORMANCE_CAPABILITIES",
    }
    assert caps.header_line(claims) == [
        "conformance: capabilities not claimed (their tests are recorded as "
        "not-claimed): float64 (mine.toml [capabilities]); streams "
        "(vendor_backend:CONFORMANCE_CAPABILITIES)"
    ]
    assert caps.header_line(nothing) == []
    builtin = caps.resolve(_profile(backend="torch"), None, parse_manifest("", "m"))
    assert builtin.claimed == frozenset(caps.CAPABILITIES)


def test_emulated_device_declares_what_it_cannot_do():
    """The emulated device declares its capabilities in its backend module, read like any vendor's."""
    from neuron_conformance.emulator import CAPABILITIES, backend  # installs the emulated device

    claims = caps.resolve(_profile(backend=backend.__name__, emulated=True), None, parse_manifest("", "m"))
    assert claims.not_claimed() == ["sparse", "pinned_memory", "generators", "inductor"]
    assert set(claims.sources.values()) == {"neuron_conformance.emulator.backend:CONFORMANCE_CAPABILITIES"}
    assert backend.CONFORMANCE_CAPABILITIES is CAPABILITIES


class _Item:
    """The parts of a pytest item :func:`neuron_conformance.conformance.backend.capabilities.mark_unclaimed` uses."""

    def __init__(self, nodeid, marks=()):
        self.nodeid, self._marks, self.stash, self.added = nodeid, list(marks), pytest.Stash(), []

    def iter_markers(self, name):
        return iter([m for m in self._marks if m.name == name])

    def add_marker(self, mark):
        self.added.append(mark.mark)


def test_required_from_markers_dtype_and_op_rules():
    item = _Item("t::a", [SimpleNamespace(name="capability", args=("streams", "events"))])
    assert caps.required(item, {"op": "x", "dtype": "float32"}) == ["streams", "events"]
    assert caps.required(_Item("t::b"), {"op": "add", "dtype": "float64"}) == ["float64"]
    assert caps.required(_Item("t::c"), {"op": "mul", "dtype": "complex64"}) == ["complex"]
    assert caps.required(_Item("t::d"), {"op": "to", "dtype": "float8_e5m2"}) == ["float8"]
    assert caps.required(_Item("t::e"), {"op": "sparse.sampled_addmm", "dtype": "float32"}) == ["sparse"]
    assert caps.required(_Item("t::f"), {"op": "to_sparse", "dtype": None}) == ["sparse"]
    assert caps.required(_Item("t::g"), {"op": "sparsify", "dtype": "bfloat16"}) == []
    with pytest.raises(caps.CapabilityError, match="t::h: @pytest.mark.capability: unknown capability 'stream'"):
        caps.required(_Item("t::h", [SimpleNamespace(name="capability", args=("stream",))]), {})


def test_mark_unclaimed_skips_only_tests_of_unclaimed_capabilities():
    claims = caps.Claims(frozenset(caps.CAPABILITIES) - {"float64"}, {"float64": "vendor:CONFORMANCE_CAPABILITIES"})
    a, b = _Item("t::add[float64]"), _Item("t::add[float32]")
    idents = {
        "t::add[float64]": {"op": "add", "dtype": "float64"},
        "t::add[float32]": {"op": "add", "dtype": "float32"},
    }
    assert caps.mark_unclaimed(claims, [a, b], lambda i: idents[i.nodeid]) == 1
    assert [m.name for m in a.added] == ["skip"] and not b.added
    assert a.added[0].kwargs["reason"] == "not claimed: float64 (vendor:CONFORMANCE_CAPABILITIES)"
    assert caps.outcome_of(a, "skipped") == ["float64"]
    assert caps.outcome_of(a, "failed") is None and caps.outcome_of(b, "skipped") is None
    bad = _Item("t::typo", [SimpleNamespace(name="capability", args=("stream",))])
    with pytest.raises(pytest.UsageError, match=r"^conformance: t::typo: @pytest.mark.capability: unknown capability"):
        caps.mark_unclaimed(claims, [bad], lambda i: {})


def _rec(nodeid, outcome, **kw):
    return {
        "schema": 1,
        "nodeid": nodeid,
        "outcome": outcome,
        "suite": kw.pop("suite", "compare_cpu"),
        "op": kw.pop("op", nodeid),
        **kw,
    }


def test_not_claimed_is_counted_apart_and_not_covered():
    recs = [
        _rec("a", "passed"),
        _rec("b", "not-claimed", not_claimed=["float64"]),
        _rec("c", "xfailed"),
        _rec("d", "skipped"),
    ]
    summary = make_summary({"device": {"type": "neuron"}, "complete": True}, recs)
    totals = summary["totals"]
    assert (totals["not-claimed"], totals["failing"], totals["xfailed"], totals["skipped"]) == (1, 0, 1, 1)
    assert summary["verdict"] == "passed"
    assert "1 of capabilities the backend does not claim (not-claimed, not run)" in headline(summary)
    assert "not-claimed" in sorted_outcomes(totals)
    assert "not-claimed" not in sorted_outcomes(make_summary({"complete": True}, recs[:1])["totals"])
    gen = [
        _rec("g1", "passed", suite="generated", op="aten::add.Tensor"),
        _rec("g2", "not-claimed", suite="generated", op="aten::mul.Tensor"),
    ]
    assert generated_from_records(gen) == {"aten::add.Tensor"}
    table = bug_class_table(
        [_rec("x", "passed", bug_class="nonblocking-copies"), _rec("y", "not-claimed", bug_class="nonblocking-copies")]
    )
    assert table["nonblocking-copies"]["judged"] == 1 and table["nonblocking-copies"]["not-claimed"] == 1
