"""The one atomic file writer of the project (records' run.json, reports, proposed manifests, the codemod).

A file is written to a temporary file in the same directory, flushed and fsynced, then renamed over the
target with :func:`os.replace`: a reader sees the old file or the new one, never half of one. On any error
(including ``KeyboardInterrupt``) the temporary file is removed and the old file is left as it was.

Permission bits:

* a new file gets the mode any other new file gets, ``0o666`` minus the process umask: the temporary file
  is created with ``os.open(..., 0o666)`` and the kernel applies the umask (and a default ACL, if the
  directory has one), so the umask is never read or changed here (``os.umask`` can only be read by
  setting it, which is process-global and racy between threads);
* ``keep_mode=True`` (the codemod rewriting user source files) gives the replaced file the permission bits
  of the file it replaces (a new file still gets the umask mode);
* an explicit ``mode`` is applied as given, whatever the umask.

This module imports only the standard library (no torch), so :mod:`reports` and :mod:`migrate` use it.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tmp"
"""Suffix of the temporary files (``.<name>.<random>.tmp`` next to the target)."""


def _create_temp(directory: Path, name: str) -> tuple[int, Path]:
    """Create and open a new temporary file in ``directory``, mode ``0o666 & ~umask`` (like ``open``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = directory / f".{name}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name for {name!r} in {directory}")  # pragma: no cover


def write_bytes_atomic(
    path: str | os.PathLike,
    data: bytes,
    *,
    mode: int | None = None,
    keep_mode: bool = False,
    follow_symlinks: bool = False,
) -> Path:
    """Replace (or create) ``path`` with ``data`` atomically.

    Args:
        path: the file to write; missing parent directories are created.
        data: the new content.
        mode: permission bits to give the file; default: ``0o666 & ~umask`` (see the module docstring).
        keep_mode: when ``path`` exists, give the new file its permission bits (``mode`` is then only used
            for a new file).
        follow_symlinks: when ``path`` is a symlink, replace the file it points to and keep the link
            (default: the link itself is replaced by a regular file).

    Returns:
        The path actually written (the symlink's target with ``follow_symlinks``).

    Raises:
        OSError: the directory is not writable, the disk is full...; the old file is untouched and no
            temporary file is left.
    """
    target = Path(path)
    if follow_symlinks and target.is_symlink():
        target = target.resolve()
    if keep_mode:
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            pass
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(target.parent, target.name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            try:
                os.fsync(fh.fileno())
            except OSError:  # pragma: no cover - filesystems without fsync
                pass
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


def write_text_atomic(
    path: str | os.PathLike,
    text: str,
    *,
    mode: int | None = None,
    keep_mode: bool = False,
    encoding: str = "utf-8",
    follow_symlinks: bool = False,
) -> Path:
    """Write ``text`` to ``path`` atomically (:func:`write_bytes_atomic`), encoded with ``encoding``.

    Line endings are written as they are in ``text`` (no newline translation on any platform).
    """
    return write_bytes_atomic(
        path, text.encode(encoding), mode=mode, keep_mode=keep_mode, follow_symlinks=follow_symlinks
    )


def write_json_atomic(path: str | os.PathLike, data: Any, *, mode: int | None = None) -> Path:
    """Write ``data`` as indented JSON (and a final newline) to ``path`` atomically.

    Values JSON cannot represent are written as their ``repr``; NaN and infinities as ``NaN`` /
    ``Infinity`` (what :func:`json.dump` writes by default).
    """
    return write_text_atomic(path, json.dumps(data, indent=2, default=repr) + "\n", mode=mode)


__all__ = ["TEMP_SUFFIX", "write_bytes_atomic", "write_json_atomic", "write_text_atomic"]
