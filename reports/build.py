"""``neuron_conformance.reports.build``: turn a report directory into summary.json, summary.md and index.html."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._io import write_text_atomic
from .collect import collect
from .summary import summary_from_collected, write_summary
from .to_html import render_html
from .to_markdown import to_markdown


@dataclass
class BuildResult:
    """What :func:`build` wrote.

    Attributes:
        report_dir: the report directory.
        summary: the summary dict (schema in docs/reports.md).
        summary_json, summary_md, index_html: the files written.
        step_summary: the ``$GITHUB_STEP_SUMMARY`` file appended to, or None.
        warnings: warnings met while reading the records (also in ``summary["warnings"]``).
    """

    report_dir: Path
    summary: dict[str, Any]
    summary_json: Path
    summary_md: Path
    index_html: Path
    step_summary: Path | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """``failed``, ``passed`` or ``empty`` (see :func:`neuron_conformance.reports.summary.verdict`)."""
        return self.summary["verdict"]


def append_step_summary(markdown: str, env: os._Environ | dict | None = None) -> Path | None:
    """Append ``markdown`` to the file named by ``$GITHUB_STEP_SUMMARY``, when that is set.

    Source: GitHub Actions docs, "Adding a job summary" (the variable names a file that
    steps append Markdown to). Returns the file, or None when the variable is unset.
    """
    env = os.environ if env is None else env
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return path


def write_outputs(
    summary: dict[str, Any], out_dir: Path, *, step_summary: bool = True
) -> tuple[Path, Path, Path, Path | None]:
    """Write summary.json, summary.md and index.html of ``summary`` into ``out_dir``.

    Every file is rendered in memory first and written atomically, so a failure leaves
    no half-written file. Returns the three paths and the step-summary file (or None).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = to_markdown(summary)
    page = render_html(summary)
    paths = (out_dir / "summary.json", out_dir / "summary.md", out_dir / "index.html")
    write_summary(summary, paths[0])
    write_text_atomic(paths[1], markdown)
    write_text_atomic(paths[2], page)
    step = append_step_summary(markdown) if step_summary else None
    return paths[0], paths[1], paths[2], step


def build(report_dir: Path | str, *, step_summary: bool = True) -> BuildResult:
    """Read ``report_dir`` and write its summary.json, summary.md and index.html there.

    Args:
        report_dir: a harness report directory (``records/*.jsonl``, ``run.json``, optional
            ``coverage.json`` and ``repro/``).
        step_summary: append summary.md to ``$GITHUB_STEP_SUMMARY`` when that variable is set.

    Raises:
        ReportInputError: the directory, run.json, a worker file or coverage.json is
            missing or bad (the message names the file).
    """
    report_dir = Path(report_dir)
    collected = collect(report_dir)
    summary = summary_from_collected(collected)
    js, md, html_path, step = write_outputs(summary, report_dir, step_summary=step_summary)
    return BuildResult(report_dir, summary, js, md, html_path, step, list(collected.warnings))
