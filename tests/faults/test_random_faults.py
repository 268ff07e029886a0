"""The random_ops suite has teeth: a wrong random kernel is flagged in both emulator modes.

Each case runs ``opsuites/test_random_ops.py`` on one random aten overload in a pytest subprocess against
the emulated device in mirror and in device mode, with one fault of ``fault_backend`` installed
(:mod:`tests.faults.random_kernels`: a constant ``uniform_``, a ``randperm`` with a repeated value, a
``bernoulli_`` that ignores p, a ``normal_`` that ignores std, a ``native_dropout`` without the 1/(1-p)
rescale, a generator that ignores the seed, a device draw from the CPU's stream; and kernels right in
float32 but wrong in half precision: ``exponential_`` ignoring ``lambd`` in bfloat16 and in float16,
``normal_`` ignoring ``std`` in float16, ``uniform_`` short of ``to`` in bfloat16), and asserts that the
overload's record in the faulted dtype failed as ``numeric`` with the rule of the check that should catch
it, and its float32 record (for the half-precision faults) passed. The control
runs the same overloads without a fault and asserts they pass: the clean emulator raises no false alarm.
"""

from __future__ import annotations

import pytest

from tests.faults.suite_run import run_suite

pytest_plugins = ["pytester"]

CASES = [
    # fault of fault_backend.FAULTS, overload the suite calls, dtype it is wrong in, rule of the check that must flag it
    ("uniform-constant", "aten::uniform_", "float32", "ks"),
    ("randperm-duplicate", "aten::randperm", "int64", "support"),
    ("bernoulli-ignores-p", "aten::bernoulli_.float", "float32", "z-test"),
    ("normal-ignores-std", "aten::normal_", "float32", "ks"),
    ("dropout-no-rescale", "aten::native_dropout", "float32", "tolerance"),
    ("generator-ignores-seed", "aten::uniform_", "float32", "seeded-reproducible"),
    ("draws-cpu-stream", "aten::normal_", "float32", "seeded-reproducible"),
    # right in float32, wrong in half precision: found only by draws in the dtype
    ("exponential-ignores-lambd-bf16", "aten::exponential_", "bfloat16", "ks"),
    ("exponential-ignores-lambd-fp16", "aten::exponential_", "float16", "ks"),
    ("normal-ignores-std-fp16", "aten::normal_", "float16", "ks"),
    ("uniform-short-range-bf16", "aten::uniform_", "bfloat16", "ks"),
]
MODES = ("mirror", "device")


HALF = ("bfloat16", "float16")


def _dtypes(dtype: str) -> str:
    """``--conformance-dtypes`` of a case: its dtype, and float32 beside a half-precision one (which must pass)."""
    return f"float32,{dtype}" if dtype in HALF else dtype


def _run(pytester, monkeypatch, fault: str, overloads: str, mode: str, dtypes: str):
    return run_suite(
        pytester, monkeypatch, "test_random_ops.py", fault, overloads, mode, f"--conformance-dtypes={dtypes}"
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fault", "overload", "dtype", "rule"), CASES, ids=[c[0] for c in CASES])
def test_random_ops_flags_fault(pytester, monkeypatch, fault, overload, dtype, rule, mode):
    result, records = _run(pytester, monkeypatch, fault, overload, mode, _dtypes(dtype))
    mine = [r for r in records if r.get("suite") == "random_ops" and r.get("op") == overload]
    assert sorted(r.get("dtype") for r in mine) == sorted(set(_dtypes(dtype).split(","))), (
        f"records of {overload}: {[(r.get('dtype'), r.get('outcome')) for r in mine]}\n{result.stdout.str()[-3000:]}"
    )
    failed = [(r.get("dtype"), r.get("failure_class"), r.get("rule")) for r in mine if r.get("outcome") == "failed"]
    assert failed == [(dtype, "numeric", rule)], (
        f"fault {fault!r} on {overload} {dtype} not flagged (alone) as numeric/{rule} in {mode} mode: "
        f"{[(r.get('dtype'), r.get('outcome'), r.get('rule'), r.get('message')) for r in mine]}\n"
        f"{result.stdout.str()[-3000:]}"
    )


@pytest.mark.parametrize("mode", MODES)
def test_clean_emulator_passes_random_overloads(pytester, monkeypatch, mode):
    """Control: without a fault the same overloads pass in both modes, in every dtype the cases use."""
    overloads = sorted({c[1] for c in CASES})
    dtypes = sorted({c[2] for c in CASES} | {"float32"})
    result, records = _run(pytester, monkeypatch, "", ",".join(overloads), mode, ",".join(dtypes))
    mine = [r for r in records if r.get("suite") == "random_ops"]
    assert sorted({r.get("op") for r in mine}) == overloads, result.stdout.str()[-3000:]
    assert all(r.get("outcome") == "passed" for r in mine), [
        (r.get("op"), r.get("dtype"), r.get("message")) for r in mine if r.get("outcome") != "passed"
    ]
