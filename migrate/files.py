"""File discovery, reading with encoding detection, atomic writes; the cheap text pre-filter is
:mod:`neuron_conformance.migrate.prefilter` (re-exported here as :func:`may_have_findings`).

Nothing here imports or executes the files it reads.
"""

from __future__ import annotations

import codecs
import fnmatch
import os
import re
from pathlib import Path
from typing import Iterator, List, Sequence, Tuple

from neuron_conformance.conformance.results.atomic import write_bytes_atomic
from neuron_conformance.migrate.prefilter import may_have_findings  # noqa: F401 - re-exported (public API)

#: Directory and file patterns skipped unless named explicitly (``.gitignore``-style).
DEFAULT_EXCLUDES = (
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".env",
    "env",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "*.egg-info",
    ".ipynb_checkpoints",
)

_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


class SkipFile(Exception):
    """A file that is reported and skipped (message names the reason)."""


def _matches(rel: str, name: str, patterns: Sequence[str]) -> bool:
    for p in patterns:
        p = p.rstrip("/")
        if (
            fnmatch.fnmatch(name, p)
            or fnmatch.fnmatch(rel, p)
            or fnmatch.fnmatch(rel, p + "/*")
            or fnmatch.fnmatch("/" + rel, "*/" + p)
        ):
            return True
    return False


def discover(
    paths: Sequence[str], exclude: Sequence[str] = (), extend_exclude: Sequence[str] = ()
) -> Tuple[List[Path], List[Tuple[str, str]]]:
    """Python files under ``paths`` and a list of ``(path, reason)`` for paths that are skipped.

    Directories are walked without following symlinked directories; ``exclude`` globs (default
    :data:`DEFAULT_EXCLUDES`) match a file or directory name or its path relative to the root.
    A path named explicitly is checked even if an exclude matches it. A symlink whose target is
    outside the root it was found under is skipped with a reason.

    Raises:
        FileNotFoundError: a path that does not exist.
    """
    patterns = tuple(exclude or DEFAULT_EXCLUDES) + tuple(extend_exclude)
    out: List[Path] = []
    skipped: List[Tuple[str, str]] = []
    seen = set()
    for raw in paths:
        root = Path(raw)
        if not root.exists() and not root.is_symlink():
            raise FileNotFoundError(f"path {raw!r} does not exist")
        if root.is_file():
            if root not in seen:
                seen.add(root)
                out.append(root)
            continue
        root_real = root.resolve()
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            rel_dir = os.path.relpath(dirpath, root)
            keep = []
            for d in sorted(dirnames):
                rel = os.path.normpath(os.path.join(rel_dir, d))
                if _matches(rel, d, patterns):
                    continue
                full = Path(dirpath) / d
                if full.is_symlink():
                    skipped.append((str(full), "symlinked directory not followed"))
                    continue
                keep.append(d)
            dirnames[:] = keep
            for f in sorted(filenames):
                if not (f.endswith(".py") or f.endswith(".pyi")):
                    continue
                rel = os.path.normpath(os.path.join(rel_dir, f))
                if _matches(rel, f, patterns):
                    continue
                full = Path(dirpath) / f
                if full.is_symlink():
                    target = full.resolve()
                    try:
                        target.relative_to(root_real)
                    except ValueError:
                        skipped.append((str(full), f"symlink out of the tree (to {target})"))
                        continue
                if full not in seen:
                    seen.add(full)
                    out.append(full)
    return out, skipped


def detect_encoding(data: bytes) -> str:
    """PEP 263 encoding of ``data`` (BOM or coding cookie in the first two lines), default utf-8."""
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    for line in data.split(b"\n", 2)[:2]:
        m = _CODING.match(line)
        if m:
            name = m.group(1).decode("ascii", "replace")
            try:
                return codecs.lookup(name).name
            except LookupError:
                raise SkipFile(f"unknown encoding {name!r} in coding cookie")
    return "utf-8"


def read_source(path: Path) -> Tuple[str, str, str]:
    """Read a Python file: ``(text, encoding, newline)``.

    The text keeps its line endings (read with ``newline=""``) so a rewrite preserves them.

    Raises:
        SkipFile: binary (NUL bytes), not decodable in its declared encoding (UTF-8 by default),
            or unreadable.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SkipFile(f"cannot read: {exc.strerror or exc}")
    if b"\0" in data:
        raise SkipFile("binary file (contains NUL bytes)")
    enc = detect_encoding(data)
    try:
        text = data.decode(enc)
    except UnicodeDecodeError as exc:
        raise SkipFile(f"not valid {enc}: byte {exc.start}")
    if enc == "utf-8-sig" and text.startswith("\ufeff"):
        text = text[1:]
    newline = "\r\n" if "\r\n" in text else ("\r" if "\r" in text else "\n")
    return text, enc, newline


def write_atomic(path: Path, text: str, encoding: str) -> None:
    """Replace ``path`` with ``text`` atomically (:func:`neuron_conformance.conformance.results.atomic.write_bytes_atomic`): a temp
    file in the same directory, fsync, then ``os.replace``. The replaced file keeps its permission bits; a
    symlink is kept and its target rewritten. Line endings in ``text`` are written as is; a ``utf-8-sig``
    file keeps its BOM.

    Raises:
        OSError: the file no longer exists, or the directory is not writable (the original file is
            untouched).
    """
    os.stat(path)  # only ever replaces a file it read: a file deleted meanwhile is not recreated
    data = text.encode(encoding)
    if encoding == "utf-8-sig" and not data.startswith(codecs.BOM_UTF8):
        data = codecs.BOM_UTF8 + data
    write_bytes_atomic(path, data, keep_mode=True, follow_symlinks=True)


def iter_chunks(items: Sequence, n: int) -> Iterator[Sequence]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


__all__ = [
    "DEFAULT_EXCLUDES",
    "SkipFile",
    "discover",
    "read_source",
    "may_have_findings",
    "write_atomic",
    "detect_encoding",
]
