"""Small file helpers: atomic text writes and JSON loading with clear errors."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import ReportInputError

_UMASK = os.umask(0)
os.umask(_UMASK)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file and ``os.replace``.

    A reader never sees a half-written file; on error the temporary file is removed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the usual file mode
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


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
