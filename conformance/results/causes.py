"""Failures grouped by cause: one bug seen on many ops, dtypes and shapes counts once.

A *cause* is ``(failure class, normalised message, first aten op)``. :func:`normalize_message` keeps the
reason of a failure message (:func:`reason_line`: its first meaningful line, and the lines after it while
a line ends with ``:`` and only announces them, as in ``kernel build failed for logic_ops (...):``) and
replaces what differs between tests hit by the same bug (numbers, shapes, dtypes, addresses, hex, file
paths and line numbers, tensor values, the test's own op name) by placeholders; the dispatcher's
``Could not run 'aten::X' with arguments from the 'PrivateUse1' backend ...`` becomes ``no PrivateUse1
kernel for aten::X`` without the list of registered backends. A backend's own refusal
(:data:`BACKEND_NOT_IMPLEMENTED`, ``Operator 'aten::X' is not implemented for device D``) is one cause per
kind: its aten op becomes ``aten::<op>`` and the cause has no first aten op (its ``aten_ops`` lists them).
:func:`first_aten_op` takes the record's ``aten_op`` field when it has one, else the first
``aten::name.overload`` of the message.

:func:`group_causes` groups the records whose outcome is failing (:data:`neuron_conformance.conformance.results.outcomes.FAILING`)
and, separately (``expected: true``), the expected failures (``xfailed``); it names no other outcome, so
new outcomes need no change here. The reports (``summary.json`` ``causes``, summary.md, index.html, the
terminal table) and the proposed manifest (:mod:`neuron_conformance.conformance.results.manifest_update`) all use it.

This module imports only :mod:`neuron_conformance.conformance.results.outcomes` (no torch), so :mod:`reports` may use it.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from neuron_conformance.conformance.results.outcomes import FAILING

EXPECTED_OUTCOME = "xfailed"
"""The outcome grouped separately from the failing ones (an expected failure still has a cause)."""

MESSAGE_WIDTH = 200
"""Longest normalised message, cut at a word boundary with ``...``."""

EXAMPLES = 3
"""Example tests kept per cause."""

DETAIL_CHARS = 4000
"""Longest raw message kept per cause (``detail``), for the report's collapsible block."""

REASON_LINES = 4
"""Most lines :func:`reason_line` joins."""

BACKEND_NOT_IMPLEMENTED = re.compile(r"\bnot (?:yet )?(?:implemented|supported) (?:for|on) (?:the )?device\b", re.I)
"""A backend's own message that it has no kernel (``Operator 'aten::X' is not implemented for device D``):
failure class ``unsupported`` (:func:`neuron_conformance.conformance.verdict.failures.classify_exception`),
one cause for every aten op it names."""

_ATEN = re.compile(r"aten::[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?")
_DISPATCH = re.compile(r"Could not run '(?P<op>[\w:.]+)' with arguments from the '(?P<key>\w+)' backend")
_DTYPE_NAMES = (
    "float8_e4m3fnuz|float8_e5m2fnuz|float8_e8m0fnu|float8_e4m3fn|float8_e5m2|bfloat16|complex128|complex64|complex32|"
    "float64|float32|float16|uint64|uint32|uint16|uint8|int64|int32|int16|int8|bool|half|double|float|long"
    "|cfloat|cdouble"
)
# Order matters: larger constructs first, so their digits are not replaced one by one.
_RULES = (
    (re.compile(r"tensor\((?:[^()]|\([^()]*\))*\)", re.DOTALL), "<tensor>"),
    (re.compile(r"torch\.Size\(\[[^\]]*\]\)"), "<shape>"),
    (
        re.compile(
            r"(?:(?<![\w/])(?:[A-Za-z]:)?(?:~|\.{1,2})?/(?:[\w.\-]+/)*[\w.\-]+"
            r"|\b[\w\-]+(?:/[\w.\-]+)+\.[A-Za-z]\w*"
            r"|\b[\w\-]+\.(?:py|pyi|toml|cpp|cc|cu|c|h|hpp|json|jsonl|pt|so)\b)(?::\d+)*"
        ),
        "<path>",
    ),
    (re.compile(r"\bline \d+"), "line <n>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{12,}\b"), "<hex>"),
    (re.compile(r"\([\w-]+ layout\)"), "(<layout> layout)"),
    (re.compile(r"\([\w-]+ variant\)"), "(<variant> variant)"),
    (re.compile(rf"\btorch\.(?:{_DTYPE_NAMES})\b"), "<dtype>"),
    (re.compile(rf"\b(?:{_DTYPE_NAMES})\b"), "<dtype>"),
    (re.compile(r"\[\s*-?\d+(?:\s*,\s*-?\d+)*\s*,?\s*\]"), "<shape>"),
    (re.compile(r"\(\s*-?\d+(?:\s*,\s*-?\d+)+\s*,?\s*\)"), "<shape>"),
    (re.compile(r"(?<![\w.<])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?%?(?![\w>])"), "<n>"),
    (re.compile(r"(?<![\w<])[-+]?(?:nan|inf)\b", re.IGNORECASE), "<n>"),
)
_NOISE = re.compile(r"^(?:Traceback \(most recent call last\):|File \".*|During handling of .*|\^+|~+)$")


def shorten(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters, cut at a word boundary with ``...`` (never
    mid-word; a single word longer than ``width`` is cut with ``...``)."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[: max(width - 3, 1)]
    space = cut.rfind(" ")
    if space > 0:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "..."


def first_line(message: str | None) -> str:
    """The first meaningful line of a message: not blank, not a traceback frame or caret line."""
    for line in str(message or "").splitlines():
        line = line.strip()
        if line and not _NOISE.match(line):
            return line
    return ""


def reason_line(message: str | None) -> str:
    """The reason a message gives, on one line: its first meaningful line (:func:`first_line`), joined with
    the next meaningful lines while the last one taken ends with ``:`` (a heading such as ``kernel build
    failed for logic_ops (...):`` whose reason follows), at most :data:`REASON_LINES` lines."""
    lines = []
    for line in str(message or "").splitlines():
        line = line.strip()
        if not line or _NOISE.match(line):
            continue
        if lines and (not lines[-1].endswith(":") or len(lines) >= REASON_LINES):
            break
        lines.append(line)
    return " ".join(lines)


def backend_refusal(message: str | None) -> bool:
    """True when ``message`` is a backend's own "not implemented for device" refusal (:data:`BACKEND_NOT_IMPLEMENTED`)."""
    return bool(BACKEND_NOT_IMPLEMENTED.search(reason_line(message)))


def first_aten_op(record: Mapping[str, Any]) -> str | None:
    """The aten overload a failure is about: the record's ``aten_op`` field, else the first
    ``aten::name.overload`` in its message, else None."""
    field = record.get("aten_op")
    if isinstance(field, str) and field:
        return field if field.startswith("aten::") else f"aten::{field}"
    found = _ATEN.search(str(record.get("message") or ""))
    return found.group(0) if found else None


def normalize_message(
    message: str | None, *, op: str | None = None, variant: str | None = None, width: int = MESSAGE_WIDTH
) -> str:
    """The message of a failure with what varies between tests of one bug replaced by placeholders.

    ``op`` and ``variant`` (the test's own op name and variant) are replaced by ``<op>`` and ``<variant>``
    so that the same message on different ops and variants groups together; so is the layout a layout
    check names (``(noncontiguous layout)``). Examples::

        Could not run 'aten::add.Tensor' with arguments from the 'PrivateUse1' backend. ... [CPU, Meta, ...]
            -> no PrivateUse1 kernel for aten::add.Tensor
        max_abs 0.0123 > atol 1e-05 at index (2, 3) for torch.float32
            -> max_abs <n> > atol <n> at index <shape> for <dtype>
    """
    text = str(message or "")
    dispatch = _DISPATCH.search(text)
    if dispatch:
        return f"no {dispatch.group('key')} kernel for {dispatch.group('op')}"
    line = reason_line(text)
    if not line:
        return "(no message)"
    atens: list[str] = []
    refusal = bool(BACKEND_NOT_IMPLEMENTED.search(line))

    def keep_aten(m: re.Match) -> str:
        atens.append("aten::<op>" if refusal else m.group(0))
        return "\x00" + "".join(chr(65 + int(d)) for d in str(len(atens) - 1)) + "\x00"  # no digits

    line = _ATEN.sub(keep_aten, line)
    for name, placeholder in ((op, "<op>"), (variant, "<variant>")):
        if name and len(name) >= 3:
            line = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w])", placeholder, line)
    for pattern, placeholder in _RULES:
        line = pattern.sub(placeholder, line)
    line = re.sub(r"\x00([A-J]+)\x00", lambda m: atens[int("".join(str(ord(ch) - 65) for ch in m.group(1)))], line)
    return shorten(line, width)


def cause_key(record: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """``(failure class, normalised message, first aten op)`` of a failing or xfailed record; a backend's own
    refusal (:func:`backend_refusal`) has no first aten op: one cause for all the ops it refuses."""
    message = record.get("message")
    return (
        str(record.get("failure_class") or "unclassified"),
        normalize_message(message, op=record.get("op"), variant=record.get("variant")),
        None if backend_refusal(message) else first_aten_op(record),
    )


def cause_id(key: tuple[str, str, str | None], expected: bool) -> str:
    """A short stable id of a cause (the same cause gets the same id in every run)."""
    text = "\x1f".join([*(k or "" for k in key), "expected" if expected else "failing"])
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


def repro_of(record: Mapping[str, Any]) -> str:
    """The repro command of a record (``pytest '<nodeid>'`` when it has none)."""
    return str(record.get("repro") or f"pytest {record['nodeid']!r}")


def group_causes(records: Iterable[Mapping[str, Any]], *, examples: int = EXAMPLES) -> list[dict[str, Any]]:
    """Group failing records (and, apart, xfailed ones) by :func:`cause_key`.

    Returns one dict per cause, failing causes first, then by count (largest first), class and message:
    ``id``, ``failure_class``, ``message`` (normalised), ``aten_op`` (or None), ``expected`` (True for the
    xfailed group), ``count``, ``outcomes`` {outcome: count}, ``ops``, ``dtypes``, ``suites`` (sorted,
    ``(none)`` for null), ``detail`` (the first example's raw message, at most :data:`DETAIL_CHARS`
    characters) and ``examples`` [{``nodeid``, ``repro``}] (at most ``examples``, by node id); a cause
    without a first aten op also has ``aten_ops``, the aten ops its records name (sorted; often ``[]``).
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for rec in records:
        outcome = rec.get("outcome")
        if outcome in FAILING or outcome == EXPECTED_OUTCOME:
            groups[(outcome not in FAILING, cause_key(rec))].append(rec)
    causes = []
    for (expected, key), recs in groups.items():
        recs = sorted(recs, key=lambda r: str(r.get("nodeid")))
        cls, message, aten = key
        extra = {} if aten is not None else {"aten_ops": sorted({a for r in recs if (a := first_aten_op(r))})}
        causes.append(
            {
                "id": cause_id(key, expected),
                "failure_class": cls,
                "message": message,
                "aten_op": aten,
                "expected": expected,
                "count": len(recs),
                "outcomes": dict(sorted(Counter(str(r.get("outcome")) for r in recs).items())),
                "ops": _values(recs, "op"),
                "dtypes": _values(recs, "dtype"),
                "suites": _values(recs, "suite"),
                "detail": str(recs[0].get("message") or "")[:DETAIL_CHARS],
                "examples": [{"nodeid": r["nodeid"], "repro": repro_of(r)} for r in recs[:examples]],
                **extra,
            }
        )
    causes.sort(key=lambda c: (c["expected"], -c["count"], c["failure_class"], c["message"], c["aten_op"] or ""))
    return causes


def _values(recs: list[Mapping[str, Any]], key: str) -> list[str]:
    return sorted({"(none)" if r.get(key) is None else str(r.get(key)) for r in recs})


def most_failing(
    by_op: Mapping[str, Mapping[str, Any]], causes: Iterable[Mapping[str, Any]], top: int = 10
) -> tuple[list[dict[str, Any]], str | None]:
    """The most failing ops, ranked by failing tests, then by number of (failing) causes, then name.

    Args:
        by_op: ``summary["counts"]["by_op"]`` (outcome counts per op).
        causes: the causes of :func:`group_causes` (only the failing ones are counted).

    Returns:
        ``(rows, tie)``: rows of ``name``, ``kind``, ``failing``, ``total``, ``causes`` (at most ``top``),
        and, when more than one op fails and all rank the same, a sentence saying so (then the rows are
        not worth listing and ``rows`` is empty).
    """
    n_causes: Counter = Counter()
    for c in causes:
        if not c.get("expected"):
            for op in c.get("ops") or ():
                n_causes[op] += 1
    rows = []
    for name, t in by_op.items():
        failing = sum(int(t.get(o, 0) or 0) for o in FAILING)
        if failing:
            rows.append(
                {
                    "name": name,
                    "kind": t.get("kind"),
                    "failing": failing,
                    "total": t.get("total", 0),
                    "causes": n_causes.get(name, 0),
                }
            )
    rows.sort(key=lambda r: (-r["failing"], -r["causes"], r["name"]))
    if len(rows) > 1 and len({(r["failing"], r["causes"]) for r in rows}) == 1:
        r = rows[0]
        return [], (
            f"all {len(rows)} failing ops are tied: {r['failing']} failing test(s) and {r['causes']} cause(s) each"
        )
    return rows[:top], None


__all__ = [
    "BACKEND_NOT_IMPLEMENTED",
    "backend_refusal",
    "cause_id",
    "cause_key",
    "first_aten_op",
    "first_line",
    "group_causes",
    "most_failing",
    "normalize_message",
    "reason_line",
    "repro_of",
    "shorten",
]
