"""A private overload's device kernel that refuses schema-built inputs is ``no-reference``, not a failure;
a public overload's is still a failure.

The generated suite builds inputs from an overload's schema; for an internal overload (``aten::_...``) the
schema names the types, not the values it accepts, and a device kernel that validates its arguments where
the CPU kernel does not raised on inputs no caller passes (13 false alarms on an H200:
``_softmax_backward_data``, ``_masked_softmax``, ``_transform_bias_rescale_qkv``, ...).
"""

from __future__ import annotations

from tests.faults.test_suites_catch_faults import _run

pytest_plugins = ["pytester"]


def test_a_private_overload_refusing_schema_built_inputs_is_no_reference(pytester, monkeypatch):
    op = "aten::_softmax_backward_data"
    result, records = _run(pytester, monkeypatch, "softmax-backward-refuses", "test_generated.py", op, "float32")
    got = [r for r in records if r.get("op") == op]
    assert got and got[0]["outcome"] == "no-reference", (got, result.stdout.str()[-3000:])
    assert "private overload" in got[0]["message"]


def test_a_public_overload_refusing_them_still_fails(pytester, monkeypatch):
    op = "aten::trace"
    result, records = _run(pytester, monkeypatch, "trace-refuses", "test_generated.py", op, "float32")
    got = [r for r in records if r.get("op") == op]
    assert got and got[0]["outcome"] == "failed", (got, result.stdout.str()[-3000:])
