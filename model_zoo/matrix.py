"""Print the model x dtype x check matrix of a run's model-zoo records.

    python -m neuron_conformance.model_zoo.matrix [REPORT_DIR]      # default: reports/latest

Each cell is one letter per check in :data:`neuron_conformance.model_zoo.registry.CHECKS` order (``F``orward,
``B``ackward, ``T``rain, ``G``enerate, ``R``outer, ``C``ompile, compiled train step ``K``): upper case passed, ``x`` failed
(or error), ``s`` skipped, ``e`` expected failure (xfailed), ``.`` not run; then, for models with records of
another attention implementation, ``sdpa:FB`` cells (forward and backward in that implementation). Below: counts by
outcome and by failure class, and the first divergent module of each localized failure.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

from neuron_conformance.conformance.results.records import RecordsError, read_records
from neuron_conformance.model_zoo.attention import CHECKS as ATTENTION_CHECKS
from neuron_conformance.model_zoo.attention import DEFAULT, IMPLEMENTATIONS, test_id_suffix
from neuron_conformance.model_zoo.registry import CHECKS

DTYPES = ("float32", "bfloat16", "float16")
_LETTER = {
    "forward": "F",
    "backward": "B",
    "train": "T",
    "generate": "G",
    "router": "R",
    "compile": "C",
    "compile_train": "K",
}


def cell(records_by_check: dict[str, dict], checks: tuple[str, ...] = CHECKS, suffix: str = "") -> str:
    """The letters of one model x dtype cell from ``{variant: record}``, one per check of ``checks``
    (the record of variant ``check + suffix``: ``suffix`` ``"-sdpa"`` reads the sdpa records)."""
    out = []
    for check in checks:
        rec = records_by_check.get(check + suffix)
        if rec is None:
            out.append(".")
            continue
        outcome = rec.get("outcome")
        out.append(
            _LETTER[check]
            if outcome == "passed"
            else "s"
            if outcome == "skipped"
            else "e"
            if outcome == "xfailed"
            else "x"
        )
    return "".join(out)


def attention_lines(table: dict[str, dict[str, dict[str, dict]]]) -> list[str]:
    """Lines of the attention-implementation matrix: per model with non-eager records, one cell per dtype
    of ``<implementation>:<forward letter><backward letter>`` (:mod:`neuron_conformance.model_zoo.attention`); [] when none."""
    impls = [i for i in IMPLEMENTATIONS if i != DEFAULT]
    lines = []
    for model in sorted(table):
        variants = {v for d in table[model].values() for v in d}
        present = [i for i in impls if any(v.endswith(test_id_suffix(i)) for v in variants)]
        if present:
            cells = [
                " ".join(f"{i}:{cell(table[model].get(d, {}), ATTENTION_CHECKS, test_id_suffix(i))}" for i in present)
                for d in DTYPES
            ]
            lines.append(f"{model:24s} " + " | ".join(cells))
    return ["", "attention implementations (forward, backward): " + ", ".join(DTYPES)] + lines if lines else []


def render(records: list[dict]) -> str:
    """The matrix, counts and localized failures as text (records of other suites are ignored)."""
    models = [r for r in records if r.get("suite") == "model_zoo" and r.get("kind") == "model"]
    table: dict[str, dict[str, dict[str, dict]]] = collections.defaultdict(lambda: collections.defaultdict(dict))
    for r in models:
        table[str(r.get("op"))][str(r.get("dtype"))][str(r.get("variant"))] = r
    lines = [f"{'model':24s} " + " ".join(f"{d:8s}" for d in DTYPES)]
    for model in sorted(table):
        lines.append(f"{model:24s} " + " ".join(f"{cell(table[model].get(d, {})):8s}" for d in DTYPES))
    lines += attention_lines(table)
    outcomes = collections.Counter(r.get("outcome") for r in models)
    classes = collections.Counter(r.get("failure_class") for r in models if r.get("failure_class"))
    lines.append("")
    lines.append(
        f"{len(models)} model records, {len(table)} models: "
        + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    )
    if classes:
        lines.append("failure classes: " + ", ".join(f"{k} {v}" for k, v in sorted(classes.items())))
    localized = [r for r in models if r.get("divergent_module")]
    for r in localized:
        lines.append(f"  {r['op']} {r['dtype']} {r['variant']}: first divergent module {r['divergent_module']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="model x dtype x check matrix of model-zoo records")
    parser.add_argument("report_dir", nargs="?", default="reports/latest", help="report directory")
    args = parser.parse_args(argv)
    if not (Path(args.report_dir) / "records").is_dir():
        print(
            f"neuron_conformance.model_zoo.matrix: no records/ folder under {args.report_dir!r}; run pytest model_zoo first",
            file=sys.stderr,
        )
        return 2
    try:
        records = read_records(
            args.report_dir
        )  # the report's merge rules (neuron_conformance.conformance.results.records)
    except RecordsError as exc:
        print(f"neuron_conformance.model_zoo.matrix: {exc}", file=sys.stderr)
        return 2
    print(render(records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
