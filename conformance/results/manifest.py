"""Expected-failure manifests (TOML): parse, validate, match tests, find stale entries.

Format (one table per entry; see docs/architecture.md)::

    [[xfail]]
    op = "to_sparse"                  # required: a name, a shell-style glob ("nn.functional.*") or a list of them
    dtype = ["float32", "bfloat16"]   # optional: a dtype name or a list; every dtype when absent
    variant = "function"              # optional: every variant when absent
    suite = "compare_cpu"             # optional: every suite when absent
    reason = "unsupported"            # required: a failure class (neuron_conformance.conformance.verdict.failures)
    note = "sparse layouts have no PrivateUse1 kernels"   # optional free text
    torch = ">=2.14"                  # optional: the torch releases it holds for (a PEP 440 specifier set)
    margin = 4.0                      # numeric entries, optional: allowed factor over the bound (DEFAULT_MARGIN)
    bound.float32 = { max_abs = 1.2e-4, max_rel = 0.03, max_ulp = 2048.0 }   # numeric entries, optional:
                                      # the error recorded per dtype (written by --conformance-update-manifest)

An entry expects a failure of its reason's class; a numeric entry with a ``bound`` for the test's dtype
also expects its size: a failure of another class, or one whose ``max_abs``/``max_rel``/``max_ulp`` is
beyond ``margin`` times the bound, fails as ``unexpected`` (:mod:`neuron_conformance.conformance.verdict.expectations`).

An entry with a ``torch`` specifier set applies only while the running torch's release (``torch.__version__``
without its local label, a pre-release or nightly counted as its release) is in that set: a torch composite
that changed between releases, or a torch bug fixed in one, is written as one entry per range. An entry
that does not apply matches no test, is not reported as unmatched, and is kept as it is by
``--conformance-update-manifest``.

A ``[capabilities]`` table (``streams = false``, names: :data:`neuron_conformance.conformance.backend.capabilities.CAPABILITIES`)
says what the backend claims; a test of an unclaimed capability is recorded as ``not-claimed``, not run.

A test matched by an entry is marked as an expected failure (strict): when it passes, the entry is stale
and the test fails, so a manifest never hides a fixed bug. This holds per test for an entry with an op list
or a glob too: each matched test that passes fails as stale, while the others stay expected failures; an
entry that matched no collected test is reported as unmatched. ``--conformance-update-manifest`` removes an entry only
when none of its matched tests still fails, and narrows one that some still fail to those
(:mod:`neuron_conformance.conformance.results.manifest_update`). A malformed manifest raises
:class:`ManifestError` naming the file and line before any test runs.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from neuron_conformance.conformance.backend.capabilities import CapabilityError, parse_table
from neuron_conformance.conformance.verdict.failures import FAILURE_CLASSES

REASONS = tuple(c for c in FAILURE_CLASSES if c not in ("stale", "unexpected"))
"""Reason categories an entry may give: the failure classes."""

BOUND_METRICS = ("max_abs", "max_rel", "max_ulp")
"""Error sizes a bound may give (the result record's fields of the same names)."""

DEFAULT_MARGIN = 4.0
"""Factor by which an expected numeric failure may exceed its recorded bound before it is ``unexpected``.

A bound is one seeded run's error on one torch build; the same kernels reproduce it exactly. 4 leaves room
for what legitimately moves a rounding error without a wrong kernel: another BLAS or thread count
reordering a sum (an error of a reordered n-term float sum grows like sqrt(n) eps, so a factor 2 to 4
between orders is common; Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., sec. 4.2),
another first failing sample of similar size. A kernel off by a relative 1e-3 in float32 is ~100x the
decomposition differences the emulator's manifests record, far outside it."""

_KEYS = {"op", "dtype", "variant", "suite", "reason", "note", "margin", "bound", "torch"}
_DTYPES = {
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "complex64",
    "complex128",
    "complex32",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
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
        margin: factor over the bound (:data:`DEFAULT_MARGIN` when None).
        bounds: ``{dtype: {metric: recorded error}}`` (metrics of :data:`BOUND_METRICS`), or None (the
            failure's class alone is expected).
        torch: the torch releases the entry holds for, as a PEP 440 specifier set (``">=2.14,<2.16"``), or
            None for every release.
    """

    op: str | tuple[str, ...]
    reason: str
    dtypes: tuple[str, ...] | None = None
    variant: str | None = None
    suite: str | None = None
    note: str = ""
    source: str = ""
    margin: float | None = None
    bounds: dict[str, dict[str, float]] | None = None
    torch: str | None = None
    matched: int = field(default=0, compare=False)

    def bound_for(self, dtype: str | None) -> dict[str, float] | None:
        """The recorded error sizes of ``dtype``, or None (class-only expectation)."""
        if not self.bounds or dtype is None:
            return None
        return self.bounds.get(dtype)

    def matches(
        self, *, op: str, dtype: str | None = None, variant: str | None = None, suite: str | None = None
    ) -> bool:
        """True when this entry applies to the running torch and covers a test of ``op``/``dtype``/``variant``/``suite``."""
        if not self.applies():
            return False
        if not self.matches_op(op):
            return False
        if self.dtypes is not None and dtype not in self.dtypes:
            return False
        if self.variant is not None and variant != self.variant:
            return False
        if self.suite is not None and suite != self.suite:
            return False
        return True

    def applies(self, version: str | None = None) -> bool:
        """True when the torch release ``version`` (the running torch's when None) is in the entry's ``torch`` set."""
        return self.torch is None or _in_range(self.torch, version or running_torch())

    def matches_op(self, op: str) -> bool:
        """True when ``op`` is the entry's op, one of its ops, or matches one of its globs."""
        return any(p == op or (_is_glob(p) and fnmatch.fnmatchcase(op, p)) for p in self.ops)

    @property
    def ops(self) -> tuple[str, ...]:
        """The entry's op names and globs as a tuple."""
        return (self.op,) if isinstance(self.op, str) else tuple(self.op)


@functools.cache
def running_torch() -> str:
    """The running torch's ``__version__`` (imported on first use)."""
    import torch

    return str(torch.__version__)


@functools.cache
def _in_range(spec: str, version: str) -> bool:
    """True when ``version``'s release (``2.15.0+cu132`` -> ``2.15.0``, ``2.16.0.dev20261201`` -> ``2.16.0``) is
    in the specifier set ``spec``; parsed once per pair, as every collected test asks every entry."""
    return SpecifierSet(spec).contains(Version(Version(version).base_version), prereleases=True)


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


class Manifest:
    """A set of expected-failure entries, possibly read from several files."""

    def __init__(
        self,
        entries: list[Entry] | None = None,
        paths: list[str] | None = None,
        capabilities: dict[str, bool] | None = None,
    ):
        self.entries = list(entries or [])
        self.paths = list(paths or [])
        self.capabilities = dict(capabilities or {})
        """The ``[capabilities]`` table: name -> claimed (:mod:`neuron_conformance.conformance.backend.capabilities`); later files win."""
        self.capability_sources = {
            n: f"{self.paths[0]} [capabilities]" if self.paths else "manifest" for n in self.capabilities
        }

    def match(
        self, *, op: str, dtype: str | None = None, variant: str | None = None, suite: str | None = None
    ) -> Entry | None:
        """The first entry covering the test, or None. Counts the match on the entry."""
        for e in self.entries:
            if e.matches(op=op, dtype=dtype, variant=variant, suite=suite):
                e.matched += 1
                return e
        return None

    def unmatched(self) -> list[Entry]:
        """Entries for the running torch that matched no collected test (typos, or ops that left the database)."""
        return [e for e in self.entries if e.matched == 0 and e.applies()]

    def __len__(self) -> int:
        return len(self.entries)

    def extend(self, other: "Manifest") -> None:
        """Add the entries of another manifest."""
        self.entries.extend(other.entries)
        self.paths.extend(other.paths)
        self.capabilities.update(other.capabilities)
        self.capability_sources.update(other.capability_sources)


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
            unknown key, a wrong type, an unknown dtype name or reason category, a ``[capabilities]`` table
            with an unknown name or a value that is not true/false.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{source}: invalid TOML: {exc}") from None
    unknown = set(data) - {"xfail", "capabilities"}
    if unknown:
        raise ManifestError(
            f"{source}: unknown top-level key(s) {sorted(unknown)}; a manifest holds "
            f"[[xfail]] tables and one [capabilities] table only"
        )
    try:
        claims = parse_table(data["capabilities"], source) if "capabilities" in data else {}
    except CapabilityError as exc:
        raise ManifestError(str(exc)) from None
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
            raise ManifestError(
                f"{where}: reason {item['reason']!r} is not a failure class; use one of {', '.join(REASONS)}"
            )
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
        margin, bounds = _parse_bounds(item, dtypes, f"{where}: entry {i + 1} ({_label(op)})")
        spec = _parse_torch(item.get("torch"), f"{where}: entry {i + 1} ({_label(op)})")
        entries.append(
            Entry(
                op=op,
                reason=item["reason"],
                dtypes=dtypes,
                variant=item.get("variant"),
                suite=item.get("suite"),
                note=item.get("note", ""),
                source=where,
                margin=margin,
                bounds=bounds,
                torch=spec,
            )
        )
    return Manifest(entries, [source], claims)


def _parse_torch(spec, where: str) -> str | None:
    """The entry's ``torch`` specifier set, checked, or None.

    Raises:
        ManifestError: not a string, or not a PEP 440 specifier set of release versions (``">=2.14"``,
            ``">=2.13,<2.15"``); the message names ``where``.
    """
    if spec is None:
        return None
    example = 'e.g. torch = ">=2.14" or torch = ">=2.13,<2.15"'
    if not isinstance(spec, str) or not spec.strip():
        raise ManifestError(f"{where}: 'torch' must be a version specifier set, {example}; got {spec!r}")
    try:
        parsed = SpecifierSet(spec)
    except InvalidSpecifier:
        raise ManifestError(f"{where}: 'torch' {spec!r} is not a version specifier set, {example}") from None
    for s in parsed:
        try:
            Version(s.version.removesuffix(".*"))
        except InvalidVersion:
            raise ManifestError(f"{where}: 'torch' {spec!r}: {s.version!r} is not a release number") from None
    return spec.strip()


def _label(op) -> str:
    return op if isinstance(op, str) else ", ".join(op)


def _number(value) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and value == value
        and value not in (float("inf"), float("-inf"))
    )


def _parse_bounds(item: dict, dtypes: tuple | None, where: str) -> tuple[float | None, dict | None]:
    """``(margin, bounds)`` of a raw entry (module docstring).

    Raises:
        ManifestError: a bound or margin on a non-numeric entry, a margin that is not a finite number >= 1,
            a bound that is not a table of dtype names to tables of finite non-negative numbers named in
            :data:`BOUND_METRICS`, a bound's dtype the entry does not cover. The message names ``where``
            (file, line, entry number and op).
    """
    margin, raw = item.get("margin"), item.get("bound")
    if (margin is not None or raw is not None) and item["reason"] != "numeric":
        raise ManifestError(
            f"{where}: 'margin' and 'bound' apply to numeric entries only (reason is {item['reason']!r})"
        )
    if margin is not None and (not _number(margin) or margin < 1):
        raise ManifestError(f"{where}: 'margin' must be a finite number >= 1, got {margin!r}")
    if raw is None:
        return (float(margin) if margin is not None else None), None
    if not isinstance(raw, dict) or not raw:
        raise ManifestError(
            f"{where}: 'bound' must be a table of dtype names, e.g. bound.float32 = {{ max_abs = 1e-4 }}, got {raw!r}"
        )
    bounds = {}
    for dt, sizes in raw.items():
        if dt not in _DTYPES:
            raise ManifestError(f"{where}: bound.{dt}: unknown dtype {dt!r} (e.g. float32, bfloat16)")
        if dtypes is not None and dt not in dtypes:
            raise ManifestError(
                f"{where}: bound.{dt}: the entry does not cover dtype {dt!r} (its dtypes: {', '.join(dtypes)})"
            )
        if not isinstance(sizes, dict) or not sizes:
            raise ManifestError(
                f"{where}: bound.{dt} must be a table such as {{ max_abs = 1e-4, max_ulp = 8.0 }}, got {sizes!r}"
            )
        for metric, value in sizes.items():
            if metric not in BOUND_METRICS:
                raise ManifestError(
                    f"{where}: bound.{dt}.{metric}: unknown error size (accepted: {', '.join(BOUND_METRICS)})"
                )
            if not _number(value) or value < 0:
                raise ManifestError(f"{where}: bound.{dt}.{metric} must be a finite number >= 0, got {value!r}")
        bounds[dt] = {m: float(v) for m, v in sizes.items()}
    return (float(margin) if margin is not None else None), bounds


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
        if e.torch is not None:
            out.append(f"torch = {_q(e.torch)}")
        if e.margin is not None:
            out.append(f"margin = {_num(e.margin)}")
        for dt, sizes in sorted((e.bounds or {}).items()):
            # rounded up (x 1.0005 before 4 digits), so a written bound is never below what was recorded
            inner = ", ".join(f"{m} = {_num(sizes[m] * 1.0005)}" for m in BOUND_METRICS if m in sizes)
            out.append(f"bound.{dt} = {{ {inner} }}")
        out.append("")
    return "\n".join(out)


def _num(x: float) -> str:
    """A TOML float with 4 significant digits (``1.234e-05``, ``4.0``)."""
    text = f"{float(x):.4g}"
    return text if any(c in text for c in ".en") else text + ".0"


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
