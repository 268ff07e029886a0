"""Conformance reports: summary.json, summary.md, index.html, baseline diff and shard merge.

Public API (docs/reports.md):

* :func:`build` (report dir -> :class:`BuildResult`), called by the harness at session end;
* :func:`neuron_conformance.reports.terminal.print_summary` for the end-of-run table;
* :func:`neuron_conformance.reports.diff.diff_summaries` for ``--conformance-baseline``;
* :func:`neuron_conformance.reports.merge.merge_summaries` for sharded runs;
* :func:`load_summary` and :data:`SCHEMA_VERSION`.
"""

from . import terminal
from .build import BuildResult, build
from .diff import Diff, DiffEntry, diff_summaries
from .errors import ReportInputError, ShardMismatchError
from .merge import merge_summaries
from .summary import SCHEMA_VERSION, load_summary

__all__ = [
    "SCHEMA_VERSION",
    "BuildResult",
    "Diff",
    "DiffEntry",
    "ReportInputError",
    "ShardMismatchError",
    "build",
    "diff_summaries",
    "load_summary",
    "merge_summaries",
    "terminal",
]
