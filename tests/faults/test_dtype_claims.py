"""Per-op dtype claims, proven both ways on the emulated device.

The harness used to test every dtype the CPU supports for an op: a device with no integer ``mv`` (CUDA's
"addmv_impl_cuda not implemented for 'Char'") failed every integer ``mv`` test as ``unsupported``. Now a
backend declares the dtypes it claims per op (``CONFORMANCE_OP_DTYPES``; on a built-in device type OpInfo's
own per-device list decides), and:

* an unclaimed pair is ``not-claimed``, naming the declaration, and the claimed ones still run and pass;
* a claimed pair whose kernel raises is still a failure;
* with no declaration the same kernel fails, as before.
"""

from __future__ import annotations

import pytest

from neuron_conformance.conformance.backend import dtype_claims
from tests.faults.test_capability_faults import ROOT, _run

pytest_plugins = ["pytester"]


def _mv(records):
    return {r.get("dtype"): r for r in records if r.get("op") == "mv"}


def _run_mv(pytester, monkeypatch, declared: str | None):
    if declared is None:
        monkeypatch.delenv("CONFORMANCE_TEST_OP_DTYPES", raising=False)
    else:
        monkeypatch.setenv("CONFORMANCE_TEST_OP_DTYPES", declared)
    return _run(
        pytester,
        monkeypatch,
        "",
        str(ROOT / "opsuites" / "test_compare_cpu.py"),
        "--conformance-ops",
        "mv",
        "--conformance-dtypes",
        "float32,int32",
        fault="mv-no-integer",
    )


def test_an_unclaimed_dtype_is_not_claimed_and_the_claimed_one_passes(pytester, monkeypatch):
    result, records, _ = _run_mv(pytester, monkeypatch, "mv=float32+bfloat16+float16")
    got = _mv(records)
    assert {d: r["outcome"] for d, r in got.items()} == {"float32": "passed", "int32": "not-claimed"}, (
        result.stdout.str()[-3000:]
    )
    assert got["int32"]["not_claimed"] == [dtype_claims.NAME]
    assert "capability_backend:CONFORMANCE_OP_DTYPES" in got["int32"]["message"]
    assert result.ret == 0


def test_a_claimed_dtype_that_raises_is_a_failure(pytester, monkeypatch):
    result, records, _ = _run_mv(pytester, monkeypatch, "mv=float32+int32")
    got = _mv(records)
    assert got["int32"]["outcome"] == "failed", result.stdout.str()[-3000:]
    assert got["float32"]["outcome"] == "passed"


def test_without_a_declaration_the_missing_kernel_fails(pytester, monkeypatch):
    result, records, _ = _run_mv(pytester, monkeypatch, None)
    got = _mv(records)
    assert got["int32"]["outcome"] == "failed", result.stdout.str()[-3000:]


def test_opinfo_per_device_lists_decide_for_a_builtin_device_type():
    claims = dtype_claims.resolve("cuda", None)
    assert "dtypesIf['cuda']" in claims.unclaimed_reason("mv", "int8", "compare_cpu")
    assert claims.unclaimed_reason("mv", "float32", "compare_cpu") is None
    assert claims.unclaimed_reason("add", "int8", "compare_cpu") is None
    assert claims.unclaimed_reason("not-an-opinfo", "int8", "compare_cpu") is None


def test_a_privateuse1_device_is_not_given_opinfo_lists():
    claims = dtype_claims.resolve("neuron", None)
    assert not claims.use_opinfo
    assert claims.unclaimed_reason("mv", "int8", "compare_cpu") is None
    assert dtype_claims.header_line(claims) == []


@pytest.mark.parametrize(
    "value, fragment",
    [
        (["mv"], "must be a dict"),
        ({"mv": "float32"}, "must be a list of dtype names"),
        ({"mv": ["float33"]}, "'float33' is not a torch dtype name"),
        ({1: ["float32"]}, "must be an op-name glob"),
    ],
)
def test_a_malformed_declaration_is_named(value, fragment):
    with pytest.raises(dtype_claims.DtypeClaimError, match="mod:CONFORMANCE_OP_DTYPES") as info:
        dtype_claims.parse_declaration(value, "mod:CONFORMANCE_OP_DTYPES")
    assert fragment in str(info.value)


def test_globs_decide_in_order_and_a_callable_may_leave_a_pair_undecided():
    claims = dtype_claims.DtypeClaims(
        "neuron", dtype_claims.parse_declaration({"linalg.*": ["float32"], "*": ["float32", "int64"]}, "m:H"), "m:H"
    )
    assert claims.unclaimed_reason("linalg.inv", "int64") is not None
    assert claims.unclaimed_reason("add", "int64") is None
    undecided = dtype_claims.DtypeClaims("neuron", lambda op, dt: None if op == "add" else dt != "int8", "m:H")
    assert undecided.unclaimed_reason("add", "int8") is None
    assert undecided.unclaimed_reason("mul", "int8") is not None


def test_an_overload_with_no_kernel_for_a_builtin_device_type_is_not_claimed():
    """The registry of the running torch decides: an overload with CPU kernels only (``_add_relu``) is not
    claimed on cuda; a composite one (``linalg_svd``; ``add.Tensor``'s structured composite) is."""
    claims = dtype_claims.resolve("cuda", None)
    reason = claims.unclaimed_reason("aten::_add_relu.Tensor", "float32", "generated")
    assert reason is not None and "no CUDA kernel for aten::_add_relu.Tensor" in reason
    assert claims.unclaimed_reason("aten::add.Tensor", "float32", "generated") is None
    assert claims.unclaimed_reason("aten::linalg_svd", "float32", "generated") is None
    assert claims.unclaimed_reason("aten::not_an_op", "float32", "generated") is None
    assert dtype_claims.resolve("neuron", None).unclaimed_reason("aten::_add_relu.Tensor", "float32") is None
