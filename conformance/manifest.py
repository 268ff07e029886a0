"""Expected-failure manifests (TOML): parse, validate, match tests, find stale entries.

Format (one table per entry; see docs/architecture.md)::

    [[xfail]]
    op = "to_sparse"                  # required: a name, a shell-style glob ("nn.functional.*") or a list of them
    dtype = ["float32", "bfloat16"]   # optional: a dtype name or a list; every dtype when absent
    variant = "function"              # optional: every variant when absent
    suite = "compare_cpu"             # optional: every suite when absent
    reason = "unsupported"            # required: a failure class (conformance.failures)
    note = "sparse layouts have no PrivateUse1 kernels"   # optional free text

A test matched by an entry is marked as an expected failure (strict): when it passes, the entry is stale
and the test fails, so a manifest never hides a fixed bug. This holds per test for an entry with an op list
or a glob too: each matched test that passes fails as stale, while the others stay expected failures; an
entry that matched no collected test is reported as unmatched. ``--update-manifest`` removes an entry only
when none of its matched tests still fails, and narrows one that some still fail to those
(:mod:`conformance.manifest_update`). A malformed manifest raises
:class:`ManifestError` naming the file and line before any test runs.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from .failures import FAILURE_CLASSES

REASONS = tuple(c for c in FAILURE_CLASSES if c not in ("stale",))
"""Reason categories an entry may give: the failure classes."""

_KEYS = {"op", "dtype", "variant", "suite", "reason", "note"}
_DTYPES = {
    "float32", "float64", "float16", "bfloat16", "complex64", "complex128", "complex32",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
}


class ManifestError(ValueError):
    """A manifest file is malformed. The message names the file and, where known, the line."""


@dataclass
class Entry:
    """One expected failure.

    Attributes:
        op: op / model / scenario name it matches: a name (exact), a shell-style glob (``*``, ``?``,
            ``[...]``; :func:`fnmatch.fnmatchcase`), or a tuple of names and globs (any of them).
        dtypes: dtype names it matches, or None for all.
        variant: variant it matches, or None for all.
        suite: suite it matches, or None for all.
        reason: failure class expected.
        note: free text shown in reports.
        source: ``file:line`` of the entry.
    """

    op: str | tuple[str, ...]
    reason: str
    dtypes: tuple[str, ...] | None = None
    variant: str | None = None
    suite: str | None = None
    note: str = ""
    source: str = ""
    matched: int = field(default=0, compare=False)

    def matches(self, *, op: str, dtype: str | None = None, variant: str | None = None,
                suite: str | None = None) -> bool:
        """True when this entry covers a test of ``op``/``dtype``/``variant``/``suite``."""
        if not self.matches_op(op):
            return False
        if self.dtypes is not None and dtype not in self.dtypes:
            return False
        if self.variant is not None and variant != self.variant:
            return False
        if self.suite is not None and suite != self.suite:
            return False
        return True


    def matches_op(self, op: str) -> bool:
        """True when ``op`` is the entry's op, one of its ops, or matches one of its globs."""
        return any(p == op or (_is_glob(p) and fnmatch.fnmatchcase(op, p)) for p in self.ops)

    @property
    def ops(self) -> tuple[str, ...]:
        """The entry's op names and globs as a tuple."""
        return (self.op,) if isinstance(self.op, str) else tuple(self.op)


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


class Manifest:
    """A set of expected-failure entries, possibly read from several files."""

    def __init__(self, entries: list[Entry] | None = None, paths: list[str] | None = None):
        self.entries = list(entries or [])
        self.paths = list(paths or [])

    def match(self, *, op: str, dtype: str | None = None, variant: str | None = None,
              suite: str | None = None) -> Entry | None:
        """The first entry covering the test, or None. Counts the match on the entry."""
        for e in self.entries:
            if e.matches(op=op, dtype=dtype, variant=variant, suite=suite):
                e.matched += 1
                return e
        return None

    def unmatched(self) -> list[Entry]:
        """Entries that matched no collected test (typos, or ops that left the database)."""
        return [e for e in self.entries if e.matched == 0]

    def __len__(self) -> int:
        return len(self.entries)

    def extend(self, other: "Manifest") -> None:
        """Add the entries of another manifest."""
        self.entries.extend(other.entries)
        self.paths.extend(other.paths)


def _line_of(text: str, index: int) -> int:
    """Line number (1-based) of the ``index``-th ``[[xfail]]`` header in ``text``."""
    headers = [m.start() for m in re.finditer(r"^[ \t]*\[\[[ \t]*xfail[ \t]*\]\]", text, re.M)]
    if index < len(headers):
        return text.count("\n", 0, headers[index]) + 1
    return 0


def parse_manifest(text: str, source: str = "<string>") -> Manifest:
    """Parse manifest TOML ``text``; ``source`` names it in errors.

    Raises:
        ManifestError: invalid TOML (with its line), unknown top-level table, an entry with a missing or
            unknown key, a wrong type, an unknown dtype name or reason category.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{source}: invalid TOML: {exc}") from None
    unknown = set(data) - {"xfail"}
    if unknown:
        raise ManifestError(f"{source}: unknown top-level key(s) {sorted(unknown)}; a manifest holds "
                            f"[[xfail]] tables only")
    raw = data.get("xfail", [])
    if not isinstance(raw, list):
        raise ManifestError(f"{source}: 'xfail' must be an array of tables ([[xfail]])")
    entries = []
    for i, item in enumerate(raw):
        where = f"{source}:{_line_of(text, i)}"
        if not isinstance(item, dict):
            raise ManifestError(f"{where}: entry {i + 1} is not a table")
        bad = set(item) - _KEYS
        if bad:
            raise ManifestError(f"{where}: unknown key(s) {sorted(bad)} (accepted: {sorted(_KEYS)})")
        for key in ("op", "reason"):
            if key not in item:
                raise ManifestError(f"{where}: entry is missing the required key {key!r}")
        op = item["op"]
        if isinstance(op, list):
            if not op or not all(isinstance(o, str) and o for o in op):
                raise ManifestError(f"{where}: 'op' must be a name, a glob or a non-empty list of them, got {op!r}")
            op = tuple(op)
        elif not isinstance(op, str) or not op:
            raise ManifestError(f"{where}: 'op' must be a name, a glob or a non-empty list of them, got {op!r}")
        for key in ("reason", "variant", "suite", "note"):
            if key in item and not isinstance(item[key], str):
                raise ManifestError(f"{where}: {key!r} must be a string, got {item[key]!r}")
        if item["reason"] not in REASONS:
            raise ManifestError(f"{where}: reason {item['reason']!r} is not a failure class; use one of "
                                f"{', '.join(REASONS)}")
        dtypes = item.get("dtype")
        if dtypes is not None:
            if isinstance(dtypes, str):
                dtypes = [dtypes]
            if not isinstance(dtypes, list) or not all(isinstance(d, str) for d in dtypes):
                raise ManifestError(f"{where}: 'dtype' must be a dtype name or a list of names")
            for d in dtypes:
                if d not in _DTYPES:
                    raise ManifestError(f"{where}: unknown dtype {d!r} (e.g. float32, bfloat16, int64)")
            dtypes = tuple(dtypes)
        entries.append(Entry(op=op, reason=item["reason"], dtypes=dtypes,
                             variant=item.get("variant"), suite=item.get("suite"),
                             note=item.get("note", ""), source=where))
    return Manifest(entries, [source])


def load_manifest(path: str | Path) -> Manifest:
    """Read and parse a manifest file.

    Raises:
        ManifestError: the file is missing, unreadable, not UTF-8 or malformed (see :func:`parse_manifest`).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(f"{path}: manifest file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read manifest: {exc}") from None
    return parse_manifest(text, str(path))


def dump_manifest(entries: list[Entry]) -> str:
    """TOML text for ``entries``, in the format :func:`parse_manifest` reads."""
    out = []
    for e in entries:
        out.append("[[xfail]]")
        out.append(f"op = {_q(e.op)}" if isinstance(e.op, str) else "op = [" + ", ".join(_q(o) for o in e.op) + "]")
        if e.dtypes is not None:
            out.append("dtype = [" + ", ".join(_q(d) for d in e.dtypes) + "]")
        if e.variant is not None:
            out.append(f"variant = {_q(e.variant)}")
        if e.suite is not None:
            out.append(f"suite = {_q(e.suite)}")
        out.append(f"reason = {_q(e.reason)}")
        if e.note:
            out.append(f"note = {_q(e.note)}")
        out.append("")
    return "\n".join(out)


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
