"""Per bug class counts: how many cases of each class ran and how many passed (summary.json ``bug_classes``).

The bug-class suite (``opsuites/test_bug_classes.py``) writes ``bug_class`` (the class's name, e.g.
``duplicate-indices``), ``case`` and ``bug_class_description`` (the class's one-line description) into
each of its records. This module reads only those record fields (no torch), so a report can be rebuilt
from the records anywhere.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

from neuron_conformance.conformance.results.outcomes import FAILING, OUTCOMES

#: Outcomes that do not judge the device (a skipped case; a not-claimed one, e.g. no pinned memory): left out of the rate.
UNJUDGED = ("skipped", "not-claimed")


def bug_class_table(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Class name -> ``{cases, <outcome>: count..., failing, judged, pass_rate, description}``.

    Args:
        records: result records; those without a ``bug_class`` field are ignored.

    Returns:
        One entry per class in the order the classes first appear (the suite runs them in
        ``CLASS_MODULES`` order). ``cases`` counts the class's tests (case x dtype); every outcome of
        :data:`neuron_conformance.conformance.results.outcomes.OUTCOMES` is a key (0 when absent; unknown outcomes are added);
        ``failing`` = failed + error; ``judged`` = ``cases`` minus :data:`UNJUDGED` outcomes;
        ``pass_rate`` = (passed + xfailed) / judged as a fraction in [0, 1], or None when nothing was
        judged; ``description`` is the first non-empty ``bug_class_description`` seen (None if none).
    """
    outcomes: dict[str, Counter] = {}
    descriptions: dict[str, Any] = {}
    for r in records:
        name = r.get("bug_class")
        if not name:
            continue
        name = str(name)
        outcomes.setdefault(name, Counter())[str(r.get("outcome"))] += 1
        if not descriptions.get(name) and r.get("bug_class_description"):
            descriptions[name] = str(r["bug_class_description"])
    table = {}
    for name, c in outcomes.items():
        row: dict[str, Any] = {"cases": sum(c.values())}
        row.update({o: c.get(o, 0) for o in OUTCOMES})
        row.update({o: c[o] for o in sorted(set(c) - set(OUTCOMES))})
        row["failing"] = sum(c.get(o, 0) for o in FAILING)
        row["judged"] = row["cases"] - sum(c.get(o, 0) for o in UNJUDGED)
        good = c.get("passed", 0) + c.get("xfailed", 0)
        row["pass_rate"] = round(good / row["judged"], 4) if row["judged"] else None
        row["description"] = descriptions.get(name)
        table[name] = row
    return table


def pass_rate_text(row: Mapping[str, Any]) -> str:
    """``"97.5 %"`` for a :func:`bug_class_table` row, ``"-"`` when none of its cases was judged."""
    rate = row.get("pass_rate")
    return "-" if rate is None else f"{100 * float(rate):.1f} %"
