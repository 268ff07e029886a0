"""Failures grouped by cause (neuron_conformance.conformance.results.causes): message normalisation, grouping, op ranking."""

from __future__ import annotations

from neuron_conformance.conformance.results.causes import (
    first_aten_op,
    group_causes,
    most_failing,
    normalize_message,
    shorten,
)


def test_dispatcher_message_becomes_missing_kernel():
    msg = (
        "Could not run 'aten::add.Tensor' with arguments from the 'PrivateUse1' backend. This could be ... "
        "[CPU, Meta, QuantizedCPU].\n\nCPU: registered at /pytorch/aten/src/ATen/RegisterCPU.cpp:31357 [kernel]"
    )
    assert normalize_message(msg) == "no PrivateUse1 kernel for aten::add.Tensor"


def test_varying_parts_become_placeholders():
    a = (
        "nn.functional.conv2d float32 sample 3 (method variant): max_abs 0.0123 > atol 1e-05 at index (2, 3), "
        "shape torch.Size([2, 3]) value tensor([1., 2.]) at 0x7ffd1234 in /a/b/c.py:12 line 40"
    )
    b = (
        "linalg.svd float64 sample 0 (out variant): max_abs 7 > atol 2e-07 at index (0, 1), "
        "shape torch.Size([9]) value tensor([[3.]]) at 0xdeadbeef in /x/y.py:1 line 2"
    )
    na = normalize_message(a, op="nn.functional.conv2d")
    assert na == normalize_message(b, op="linalg.svd")
    assert na == (
        "<op> <dtype> sample <n> (<variant> variant): max_abs <n> > atol <n> at index <shape>, shape "
        "<shape> value <tensor> at <hex> in <path> line <n>"
    )


def test_aten_names_survive_and_are_the_first_aten_op():
    rec = {"message": "aten::conv2d then aten::mm.default failed with 3 values"}
    assert normalize_message(rec["message"]) == "aten::conv2d then aten::mm.default failed with <n> values"
    assert first_aten_op(rec) == "aten::conv2d"
    assert first_aten_op({"message": "aten::mm", "aten_op": "add.Tensor"}) == "aten::add.Tensor"


def test_first_meaningful_line_and_word_boundary_cut():
    assert normalize_message("\n\nTraceback (most recent call last):\nboom here\nmore") == "boom here"
    assert shorten("alpha beta gamma delta", 14) == "alpha beta..."
    assert shorten("x" * 30, 10) == "xxxxxxx..."


def test_group_causes_counts_failing_and_expected_apart():
    recs = [
        {
            "nodeid": f"t[{i}]",
            "op": f"op{i}",
            "dtype": "float32",
            "outcome": "failed",
            "failure_class": "unsupported",
            "message": "Could not run 'aten::mm' with arguments from the 'PrivateUse1' backend.",
        }
        for i in range(5)
    ]
    recs += [
        {
            "nodeid": "t[x]",
            "op": "op0",
            "outcome": "xfailed",
            "failure_class": "unsupported",
            "message": "Could not run 'aten::mm' with arguments from the 'PrivateUse1' backend.",
        },
        {"nodeid": "t[p]", "op": "op9", "outcome": "passed"},
        {"nodeid": "t[n]", "op": "op8", "outcome": "no-reference"},
    ]  # an outcome this module does not know
    failing, expected = group_causes(recs)
    assert (failing["count"], failing["expected"], failing["aten_op"]) == (5, False, "aten::mm")
    assert failing["ops"] == [f"op{i}" for i in range(5)] and len(failing["examples"]) == 3
    assert failing["examples"][0] == {"nodeid": "t[0]", "repro": "pytest 't[0]'"}
    assert (expected["count"], expected["expected"]) == (1, True)


def test_most_failing_ranks_by_tests_then_causes_and_reports_ties():
    by_op = {"a": {"failed": 2, "total": 2}, "b": {"failed": 2, "total": 3}, "c": {"failed": 1, "total": 1}}
    causes = [{"ops": ["a", "b"]}, {"ops": ["b"]}, {"ops": ["c"]}]
    rows, tie = most_failing(by_op, causes)
    assert tie is None and [(r["name"], r["failing"], r["causes"]) for r in rows] == [
        ("b", 2, 2),
        ("a", 2, 1),
        ("c", 1, 1),
    ]
    rows, tie = most_failing({"a": {"failed": 1}, "b": {"error": 1}}, [{"ops": ["a", "b"]}])
    assert rows == [] and tie == "all 2 failing ops are tied: 1 failing test(s) and 1 cause(s) each"
