"""Command line: ``python -m neuron_conformance.reports {build,diff,merge,show}``.

Exit codes: 0 success; 1 ``diff --conformance-fail-on-regression`` found a regression (or
``build --fail-on-failure`` found a failing test); 2 bad input (the message names the
file) or bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from rich.console import Console

from .build import build, write_outputs
from .diff import diff_json, diff_summaries
from .errors import ReportInputError
from .merge import merge_summaries
from .summary import load_summary
from .terminal import print_summary

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT = 0, 1, 2


def make_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m neuron_conformance.reports``."""
    parser = argparse.ArgumentParser(
        prog="python -m neuron_conformance.reports", description="Build, compare and merge conformance reports"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{build,diff,merge,show}")

    p = sub.add_parser("build", help="Write summary.json, summary.md and index.html of a report directory")
    p.add_argument("report_dir", type=Path, help="Report directory (records/, run.json)")
    p.add_argument("--no-step-summary", action="store_true", help="Do not append to $GITHUB_STEP_SUMMARY")
    p.add_argument("--quiet", "-q", action="store_true", help="Do not print the summary table")
    p.add_argument("--fail-on-failure", action="store_true", help="Exit 1 when a test failed or errored")

    p = sub.add_parser("diff", help="Compare a run with a baseline: regressions, fixes, new and removed tests")
    p.add_argument("old", type=Path, help="Baseline summary.json (or its report directory)")
    p.add_argument("new", type=Path, help="New summary.json (or its report directory)")
    p.add_argument(
        "--fail-on-regression",
        "--conformance-fail-on-regression",
        action="store_true",
        help="Exit 1 when a test went from passing to failing",
    )
    p.add_argument("--json", action="store_true", help="Print the diff as JSON")
    p.add_argument("--limit", type=int, default=50, help="Entries listed per category (default: 50)")

    p = sub.add_parser("merge", help="Merge shard reports of one run into one report")
    p.add_argument("inputs", nargs="+", type=Path, help="Shard summary.json files or shard report directories")
    p.add_argument("-o", "--output", type=Path, required=True, help="Directory for the merged report")
    p.add_argument("--no-step-summary", action="store_true", help="Do not append to $GITHUB_STEP_SUMMARY")
    p.add_argument("--quiet", "-q", action="store_true", help="Do not print the summary table")

    p = sub.add_parser("show", help="Print the summary table of a summary.json or report directory")
    p.add_argument("summary", type=Path, help="summary.json or its report directory")
    return parser


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    """Run the command line and return the exit code (see the module docstring)."""
    args = make_parser().parse_args(argv)
    console = console or Console()
    try:
        if args.command == "build":
            result = build(args.report_dir, step_summary=not args.no_step_summary)
            if not args.quiet:
                print_summary(result.summary, console)
                console.file.write(f"report: {result.index_html}\n")
            return EXIT_REGRESSION if args.fail_on_failure and result.verdict == "failed" else EXIT_OK
        if args.command == "diff":
            diff = diff_summaries(load_summary(args.old), load_summary(args.new))
            console.file.write(diff_json(diff) if args.json else diff.to_text(limit=args.limit))
            return EXIT_REGRESSION if args.fail_on_regression and diff.has_regressions else EXIT_OK
        if args.command == "merge":
            summary = merge_summaries(args.inputs, out_dir=args.output)
            paths = write_outputs(summary, args.output, step_summary=not args.no_step_summary)
            if not args.quiet:
                print_summary(summary, console)
                console.file.write(f"merged {len(args.inputs)} shard(s) into {paths[2]}\n")
            return EXIT_OK
        if args.command == "show":
            print_summary(load_summary(args.summary), console)
            return EXIT_OK
    except ReportInputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_BAD_INPUT
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects unknown commands
