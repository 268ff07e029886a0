"""Errors raised by the report builders for bad input.

Every error names the file it is about, so that the CLI can print one line
(``error: <file>: <what>``) and exit with status 2 instead of a traceback.
"""

from __future__ import annotations

from pathlib import Path


class ReportInputError(Exception):
    """An input file of the report (records, run.json, summary.json, ...) is unusable.

    Attributes:
        path: the file (or directory) at fault, as given.
        problem: what is wrong with it and, where possible, what to do.
    """

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class ShardMismatchError(ReportInputError):
    """Two shard summaries describe different runs and cannot be merged.

    Attributes:
        path: the first shard's file; ``other`` the second (the message names both files' folders too).
        field: the run field that differs (``torch_version``, ``device.type``, ...).
        left, right: its value in ``path`` and in ``other``.
    """

    def __init__(self, path: Path | str, other: Path | str, field: str, left: object, right: object) -> None:
        self.other = Path(other)
        self.field = field
        self.left, self.right = left, right
        super().__init__(
            path,
            f"cannot merge with {self.other}: {field} differs ({left!r} in {Path(path).parent}, {right!r} in "
            f"{self.other.parent}); merge only shards of the same run (same torch, device and harness versions)",
        )
