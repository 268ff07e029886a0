"""Output formats: ``full`` (rich with source snippets on a terminal, plain text otherwise),
``concise`` (one line per finding), ``json``, ``sarif`` (SARIF 2.1.0) and ``github`` (workflow
commands)."""

from __future__ import annotations

import json
from typing import Dict, List, Sequence, TextIO

from neuron_conformance.migrate import __version__, registry
from neuron_conformance.migrate.rule import REPORT, SAFE, Violation

FORMATS = ("full", "concise", "json", "sarif", "github")


def _marker(v: Violation) -> str:
    return "[*] " if v.fix_applicability == SAFE else ("[~] " if v.fix_applicability != REPORT else "")


def concise_line(v: Violation) -> str:
    return f"{v.path}:{v.line}:{v.column + 1}: {v.code} {_marker(v)}{v.message}"


def to_json(violations: Sequence[Violation], skipped: Sequence[tuple]) -> str:
    items = []
    for v in violations:
        items.append(
            {
                "code": v.code,
                "name": registry.RULES[v.code].name,
                "message": v.message,
                "filename": v.path,
                "location": {"row": v.line, "column": v.column + 1},
                "end_location": {"row": v.end_line, "column": v.end_column + 1},
                "fix": None
                if v.fix_applicability == REPORT
                else {"applicability": v.fix_applicability, "message": v.fix_title},
            }
        )
    for path, reason in skipped:
        items.append(
            {
                "code": None,
                "name": "skipped-file",
                "message": reason,
                "filename": path,
                "location": None,
                "end_location": None,
                "fix": None,
            }
        )
    return json.dumps(items, indent=2)


def to_sarif(violations: Sequence[Violation], skipped: Sequence[tuple]) -> str:
    codes = sorted({v.code for v in violations})
    rules = [
        {
            "id": c,
            "name": registry.RULES[c].name,
            "shortDescription": {"text": registry.RULES[c].doc["what"]},
            "fullDescription": {"text": registry.RULES[c].doc["why"]},
            "help": {"text": registry.RULES[c].render_doc()},
            "properties": {"fix": registry.RULES[c].applicability},
        }
        for c in codes
    ]
    results = [
        {
            "ruleId": v.code,
            "ruleIndex": codes.index(v.code),
            "level": "warning",
            "message": {"text": v.message + (f" ({v.fix_title})" if v.fix_title else "")},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": v.path.replace("\\", "/")},
                        "region": {
                            "startLine": v.line,
                            "startColumn": v.column + 1,
                            "endLine": v.end_line,
                            "endColumn": v.end_column + 1,
                        },
                    }
                }
            ],
        }
        for v in violations
    ]
    notifications = [{"level": "error", "message": {"text": f"{p}: {r}"}} for p, r in skipped]
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "neuron-migrate",
                        "version": __version__,
                        "informationUri": "https://github.com/",
                        "rules": rules,
                    }
                },
                "results": results,
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
            }
        ],
    }
    return json.dumps(doc, indent=2)


def to_github(violations: Sequence[Violation], skipped: Sequence[tuple]) -> str:
    lines = []
    for v in violations:
        msg = v.message.replace("%", "%25").replace("\n", "%0A")
        lines.append(
            f"::warning title=neuron-migrate ({v.code}),file={v.path},line={v.line},col={v.column + 1},"
            f"endLine={v.end_line},endColumn={v.end_column + 1}::{v.code} {msg}"
        )
    for p, r in skipped:
        lines.append(f"::error title=neuron-migrate (skipped),file={p}::{r}")
    return "\n".join(lines) + ("\n" if lines else "")


def _snippet_lines(sources: Dict[str, str], v: Violation) -> List[str]:
    text = sources.get(v.path)
    if text is None:
        return []
    lines = text.splitlines()
    if not 1 <= v.line <= len(lines):
        return []
    return lines[max(0, v.line - 2) : v.line]


def write_full(out: TextIO, violations: Sequence[Violation], sources: Dict[str, str], color: bool) -> None:
    """Human format: header line, source snippet with a caret, and the fix title."""
    if color:
        # Deferred for start-up cost: rich takes longer to import than a small check run, and
        # only the coloured terminal output needs it.
        from rich.console import Console
        from rich.markup import escape
        from rich.syntax import Syntax

        console = Console(file=out, highlight=False, soft_wrap=True)
        for v in violations:
            console.print(
                f"[bold]{escape(v.path)}[/]:[cyan]{v.line}[/]:[cyan]{v.column + 1}[/]: "
                f"[bold red]{v.code}[/] {'[green]' + escape(_marker(v)) + '[/]' if _marker(v) else ''}"
                f"{escape(v.message)}"
            )
            text = sources.get(v.path)
            if text is not None:
                start = max(1, v.line - 1)
                end = v.end_line if v.end_line - v.line < 3 else v.line
                console.print(
                    Syntax(
                        text,
                        "python",
                        line_numbers=True,
                        line_range=(start, end),
                        highlight_lines={v.line},
                        theme="ansi_dark",
                        word_wrap=False,
                    )
                )
            if v.fix_title:
                console.print(
                    f"  [green]help[/]: {escape(v.fix_title)}"
                    + (" [dim](unsafe fix: --unsafe-fixes)[/]" if v.fix_applicability == "unsafe" else "")
                )
            console.print()
        return
    for v in violations:
        out.write(concise_line(v) + "\n")
        snippet = _snippet_lines(sources, v)
        if snippet:
            width = len(str(v.line))
            for i, line in enumerate(snippet):
                n = v.line - len(snippet) + 1 + i
                out.write(f"  {str(n).rjust(width)} | {line}\n")
            underline = max(1, (v.end_column - v.column) if v.end_line == v.line else len(snippet[-1]) - v.column)
            out.write(f"  {' ' * width} | {' ' * v.column}{'^' * underline}\n")
        if v.fix_title:
            out.write(
                f"  help: {v.fix_title}"
                + (" (unsafe fix: --unsafe-fixes)\n" if v.fix_applicability == "unsafe" else "\n")
            )
        out.write("\n")
