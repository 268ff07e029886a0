"""Small file helpers: JSON loading with clear errors, and the atomic writer.

``write_text_atomic`` is :func:`neuron_conformance.conformance.results.atomic.write_text_atomic` (new files get ``0o666 & ~umask``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neuron_conformance.conformance.results.atomic import (
    write_text_atomic,
)  # the project's one atomic writer (re-exported here)

from .errors import ReportInputError

__all__ = ["load_json_object", "write_text_atomic"]


def load_json_object(path: Path, what: str) -> dict[str, Any]:
    """Read ``path`` as a JSON object.

    Args:
        path: the file to read.
        what: a few words saying what the file should be ("run metadata"), used in errors.

    Raises:
        ReportInputError: the file is missing, unreadable, not JSON, or not a JSON object.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportInputError(path, f"file not found (expected the {what})") from None
    except IsADirectoryError:
        raise ReportInputError(path, f"is a directory, expected the {what} file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportInputError(path, f"cannot read the {what}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportInputError(
            path, f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg} (expected the {what})"
        ) from None
    if not isinstance(data, dict):
        raise ReportInputError(path, f"expected a JSON object (the {what}), got {type(data).__name__}")
    return data
