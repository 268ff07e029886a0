"""Vocabulary of the result records and small derived values.

The record fields are those of docs/architecture.md ("Result records (schema 1)").
This module adds nothing to a record except, in the summary, two derived fields:
``family`` (see :func:`op_family`) and ``headroom`` (see :func:`headroom`).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

# The vocabulary is defined once, in the harness (torch-free modules).
from neuron_conformance.conformance.results.outcomes import FAILURE_SEVERITY, OUTCOME_SEVERITY, OUTCOMES

#: Namespaces of OpInfo ``full_name`` values that form an op family. Source: the
#: ``op_db`` of torch/testing/_internal/common_methods_invocations.py (torch 2.13),
#: whose dotted names start with these torch submodules; ``_refs`` is the prefix of
#: the ``python_ref_db`` entries in torch/testing/_internal/opinfo/refs.py.
OP_NAMESPACES = frozenset({"nn", "linalg", "special", "fft", "masked", "signal", "sparse", "nested", "_refs"})

#: Canonical dtype column order of the matrix; other dtypes follow alphabetically.
DTYPE_ORDER = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "complex128",
    "complex64",
    "complex32",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint64",
    "uint32",
    "uint16",
    "uint8",
    "bool",
)

#: Record fields the summary and the pages read; other fields are kept untouched. A subset of the
#: fields of :class:`neuron_conformance.conformance.results.records.ResultRecord` (checked by tests/conformance/test_record_schema.py).
RECORD_FIELDS = (
    "schema",
    "suite",
    "nodeid",
    "kind",
    "op",
    "variant",
    "dtype",
    "sample",
    "samples",
    "samples_total",
    "samples_left_out",
    "outcome",
    "failure_class",
    "rule",
    "max_abs",
    "max_rel",
    "max_ulp",
    "atol",
    "rtol",
    "message",
    "repro",
    "duration",
    "worker",
    "fallback_ops",
)


def op_family(name: str | None, kind: str | None = "op") -> str:
    """Return the family of an op name used by the report filters.

    For ``kind == "op"`` the family is the prefix before the first ``.`` when that
    prefix is a torch namespace of :data:`OP_NAMESPACES` (``nn.functional.conv2d`` ->
    ``nn``, ``linalg.svd`` -> ``linalg``), else ``core`` (``add``, and also
    ``max.reduction_with_dim``, whose suffix is an OpInfo ``variant_test_name``).
    Models, scenarios and device APIs get their kind as family (``model``,
    ``scenario``, ``api``).

    Example: ``op_family("special.erfcx")`` is ``"special"``; ``op_family("div.trunc_rounding")``
    is ``"core"``.
    """
    if kind not in (None, "op"):
        return str(kind)
    if not name:
        return "core"
    head = name.split(".", 1)[0]
    return head if "." in name and head in OP_NAMESPACES else "core"


def _finite_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def headroom(record: Mapping[str, Any]) -> float | None:
    """Return tolerance / observed error for a tolerance-checked record, or None.

    ``max(atol / max_abs, rtol / max_rel)`` over the pairs that are present. A value
    >= 1 is sufficient for the record to be within ``|a - b| <= atol + rtol * |b|``
    (the closeness rule of ``torch.testing.assert_close``): if every absolute error is
    <= atol, or every relative error is <= rtol, every element passes. A value < 1
    says by how much the worst error overshoots one criterion (it may still pass the
    combined rule). Returns None when no tolerance or no error is recorded, or when the
    observed error is 0 (infinite headroom).
    """
    ratios = []
    for tol_key, err_key in (("atol", "max_abs"), ("rtol", "max_rel")):
        tol = _finite_number(record.get(tol_key))
        err = _finite_number(record.get(err_key))
        if tol is None or err is None:
            continue
        if err == 0.0:
            return None
        ratios.append(tol / err)
    return max(ratios) if ratios else None


def dtype_sort_key(dtype: str | None) -> tuple[int, str]:
    """Sort key putting dtypes in :data:`DTYPE_ORDER`, then others by name, then None."""
    if dtype is None:
        return (len(DTYPE_ORDER) + 1, "")
    try:
        return (DTYPE_ORDER.index(dtype), dtype)
    except ValueError:
        return (len(DTYPE_ORDER), dtype)


def outcome_sort_key(outcome: str) -> tuple[int, str]:
    """Sort key putting outcomes in :data:`OUTCOMES` order, unknown ones last."""
    try:
        return (OUTCOMES.index(outcome), outcome)
    except ValueError:
        return (len(OUTCOMES), outcome)


def worst_outcome(outcomes: Iterable[str]) -> str | None:
    """Return the most severe outcome of :data:`OUTCOME_SEVERITY` (unknown ones rank as error)."""
    worst = None
    for o in outcomes:
        if worst is None or OUTCOME_SEVERITY.get(o, 6) > OUTCOME_SEVERITY.get(worst, 6):
            worst = o
    return worst


def failure_rank(record: Mapping[str, Any]) -> tuple:
    """Sort key ranking failing records: errors first, then by failure class severity, op, dtype."""
    cls = record.get("failure_class")
    try:
        cls_rank = FAILURE_SEVERITY.index(cls)
    except ValueError:
        cls_rank = len(FAILURE_SEVERITY)
    return (
        0 if record.get("outcome") == "error" else 1,
        cls_rank,
        str(record.get("suite") or ""),
        str(record.get("op") or ""),
        dtype_sort_key(record.get("dtype")),
        str(record.get("nodeid") or ""),
    )
