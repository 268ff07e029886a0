"""Capabilities: what a backend claims, which tests need what, and the ``not-claimed`` outcome.

A backend declares the capabilities it claims from the fixed vocabulary :data:`CAPABILITIES`; a test that
needs a capability the backend does not claim is not run and is recorded with the outcome ``not-claimed``
(:data:`neuron_conformance.conformance.results.outcomes.NOT_CLAIMED`), apart from failures, expected failures and skips. A claimed
capability is tested as before: a broken one fails.

Where a claim comes from, later overriding earlier (:func:`resolve`):

1. every capability is claimed (a backend that declares nothing is tested as before);
2. the backend module's ``CONFORMANCE_CAPABILITIES`` (the emulated device's is
   :data:`neuron_conformance.emulator.backend.CONFORMANCE_CAPABILITIES`): a dict ``name -> bool`` (names left out stay claimed), or a
   set, list or tuple of names (exactly those are claimed);
3. the ``[capabilities]`` table of the ``--conformance-manifest`` file(s): ``name = true|false``
   (:func:`parse_table`, called by :func:`neuron_conformance.conformance.results.manifest.parse_manifest`).

Built-in devices (``cpu``, ``cuda``, ...) claim everything: they are PyTorch's own reference devices; the
CPU skips the accelerator-only checks as before (``skipped``, not ``not-claimed``).

Which capabilities a test needs (:func:`required`): the ``capability`` marker's names
(``@pytest.mark.capability("streams", "events")``), plus a rule from its identity: dtype ``float64`` needs
``float64``, ``complex32/64/128`` need ``complex``, ``float8_*`` (:data:`neuron_conformance.conformance.verdict.float8_formats.FLOAT8_NAMES`) need ``float8`` (:data:`DTYPE_RULES`), and
the OpInfos ``to_sparse*`` / ``sparse.*`` need ``sparse`` (:data:`OP_RULES`).

Why not run rather than run and not judge: an unclaimed capability may crash or hang the device, costs
time, and its result would be thrown away; so a test that would pass is just ``not-claimed`` too.
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field

import pytest

from neuron_conformance.conformance.backend import dtype_claims
from neuron_conformance.conformance.verdict.float8_formats import FLOAT8_NAMES

HOOK = "CONFORMANCE_CAPABILITIES"
"""The backend-module attribute holding the declaration (docs/architecture.md, "Device under test")."""

MARKER = "capability"
"""``@pytest.mark.capability(name, ...)``: the capabilities a test needs."""

CAPABILITIES = {
    "float64": "float64 tensors and kernels",
    "complex": "complex dtypes (complex32, complex64, complex128)",
    "float8": "float8 dtypes (float8_e4m3fn, float8_e5m2, their fnuz variants, float8_e8m0fnu) and casts to/from them",
    "sparse": "sparse layouts (COO, CSR, CSC, BSR, BSC) and their kernels",
    "pinned_memory": "Tensor.pin_memory() and copies through pinned host memory",
    "streams": "torch.Stream on the device: current/side streams, wait_stream, record_stream",
    "events": "torch.Event on the device: record, wait, query, synchronize, elapsed_time",
    "generators": "an explicit torch.Generator(device=<type>) passed to random ops",
    "autocast": "torch.autocast(device_type=<type>)",
    "compile": "torch.compile with the device's own (or --conformance-compile-backend) backend",
    "inductor": "torch.compile's default backend (inductor) generating code for the device",
    "compile_dynamic": "torch.compile(dynamic=True): graphs with symbolic shapes, reused for other sizes",
    "distributed": "torch.distributed collectives on the device (backend: CONFORMANCE_DIST_BACKEND)",
}
"""The vocabulary: capability name -> what claiming it means. Names outside it are an error."""

DTYPE_RULES = {
    "float64": "float64",
    "complex32": "complex",
    "complex64": "complex",
    "complex128": "complex",
    **{name: "float8" for name in FLOAT8_NAMES},
}
"""A test's ``dtype`` -> the capability it needs."""

OP_RULES = (("sparse", ("to_sparse", "to_sparse_*", "sparse.*")),)
"""``(capability, op-name globs)``: OpInfos whose inputs or outputs are sparse tensors."""

CLAIMS_KEY = pytest.StashKey["Claims"]()
"""In ``config.stash``: the session's :class:`Claims` (:func:`start`)."""

DTYPE_CLAIMS_KEY = pytest.StashKey["dtype_claims.DtypeClaims"]()
"""In ``config.stash``: the session's per-op dtype claims (:mod:`neuron_conformance.conformance.backend.dtype_claims`)."""

NOT_CLAIMED_KEY = pytest.StashKey[list]()
"""On a test item: the unclaimed capabilities it needs (its record's ``not_claimed``)."""


class CapabilityError(ValueError):
    """A declaration names a capability outside :data:`CAPABILITIES` or has the wrong shape. One line
    naming the input and listing the accepted names."""


def _accepted() -> str:
    return ", ".join(CAPABILITIES)


def check_name(name, source: str) -> str:
    """``name`` when it is in the vocabulary.

    Raises:
        CapabilityError: not a string or not a known name; the message names ``source`` and the accepted names.
    """
    if not isinstance(name, str) or name not in CAPABILITIES:
        raise CapabilityError(f"{source}: unknown capability {name!r} (accepted: {_accepted()})")
    return name


def parse_table(table, source: str) -> dict[str, bool]:
    """The manifest's ``[capabilities]`` table: ``{name: claimed}``.

    Raises:
        CapabilityError: not a table, an unknown name, or a value that is not true/false.
    """
    if not isinstance(table, dict):
        raise CapabilityError(
            f"{source}: [capabilities] must be a table of name = true|false (accepted names: {_accepted()})"
        )
    out = {}
    for name, value in table.items():
        check_name(name, f"{source}: [capabilities]")
        if not isinstance(value, bool):
            raise CapabilityError(f"{source}: [capabilities] {name} must be true or false, got {value!r}")
        out[name] = value
    return out


def parse_declaration(value, source: str) -> dict[str, bool]:
    """A backend module's ``CONFORMANCE_CAPABILITIES``: ``{name: claimed}`` for every name it decides.

    A dict gives ``name -> bool`` (other names stay claimed); a set, frozenset, list or tuple of names
    claims exactly those (every other name is not claimed).

    Raises:
        CapabilityError: another type, a non-bool value, or an unknown name.
    """
    if isinstance(value, dict):
        return parse_table(value, source)
    if isinstance(value, (set, frozenset, list, tuple)):
        names = {check_name(n, source) for n in value}
        return {n: n in names for n in CAPABILITIES}
    raise CapabilityError(
        f"{source}: must be a dict name -> bool or a set of names, got "
        f"{type(value).__name__} (accepted names: {_accepted()})"
    )


@dataclass
class Claims:
    """What the backend under test claims.

    Attributes:
        claimed: the claimed capability names.
        sources: unclaimed name -> where that was decided (``module:CONFORMANCE_CAPABILITIES`` or the manifest).
    """

    claimed: frozenset = frozenset(CAPABILITIES)
    sources: dict = field(default_factory=dict)

    def claims(self, name: str) -> bool:
        """True when ``name`` is claimed."""
        return name in self.claimed

    def not_claimed(self) -> list[str]:
        """The unclaimed names in vocabulary order."""
        return [n for n in CAPABILITIES if n not in self.claimed]


def module_declaration(profile, backend_module: str | None) -> tuple[dict[str, bool], str]:
    """``({name: claimed}, source)`` the backend module declares (empty when it declares nothing).

    Raises:
        CapabilityError: a malformed declaration (:func:`parse_declaration`).
    """
    if profile is None or profile.backend == "torch":
        return {}, ""
    module = sys.modules.get(backend_module or profile.backend)
    value = getattr(module, HOOK, None) if module is not None else None
    if value is None:
        return {}, ""
    source = f"{module.__name__}:{HOOK}"
    return parse_declaration(value, source), source


def resolve(profile, backend_module: str | None, manifest) -> Claims:
    """The :class:`Claims` of the device under test (module docstring: defaults, module, manifest).

    Raises:
        CapabilityError: a malformed backend-module declaration.
    """
    decided, source = module_declaration(profile, backend_module)
    sources = {n: source for n, v in decided.items() if not v}
    table = getattr(manifest, "capabilities", {}) or {}
    for name, value in table.items():
        decided[name] = value
        if not value:
            sources[name] = manifest.capability_sources.get(name, "manifest")
    claimed = frozenset(n for n in CAPABILITIES if decided.get(n, True))
    return Claims(claimed, {n: s for n, s in sources.items() if n not in claimed})


def start(config: pytest.Config, session) -> Claims | None:
    """Resolve the claims of ``session``'s device and keep them in ``config.stash`` (``pytest_configure``).

    Ends the session with one line and exit code 2 on a malformed backend-module declaration (the manifest
    table is checked when the manifest is read).
    """
    try:
        claims = resolve(session.profile, session.backend_module(), session.manifest)
        device_type = session.profile.type if session.profile is not None else "cpu"
        config.stash[DTYPE_CLAIMS_KEY] = dtype_claims.resolve(device_type, session.backend_module())
    except (CapabilityError, dtype_claims.DtypeClaimError) as exc:
        pytest.exit(f"conformance: {exc}", returncode=2)
        return None
    config.stash[CLAIMS_KEY] = claims
    return claims


def claims_of(config: pytest.Config) -> Claims:
    """The session's :class:`Claims`; everything claimed when :func:`start` did not run."""
    return config.stash.get(CLAIMS_KEY, None) or Claims()


def dtype_claims_of(config: pytest.Config) -> dtype_claims.DtypeClaims | None:
    """The session's per-op dtype claims, or None when :func:`start` did not run."""
    return config.stash.get(DTYPE_CLAIMS_KEY, None)


def header_line(claims: Claims) -> list[str]:
    """The report header's line naming the unclaimed capabilities and where each was decided, or []."""
    if not claims.not_claimed():
        return []
    by_source: dict[str, list[str]] = {}
    for name in claims.not_claimed():
        by_source.setdefault(claims.sources.get(name) or "declaration", []).append(name)
    return [
        "conformance: capabilities not claimed (their tests are recorded as not-claimed): "
        + "; ".join(f"{', '.join(names)} ({src})" for src, names in by_source.items())
    ]


def required(item: pytest.Item, identity: dict) -> list[str]:
    """The capabilities test ``item`` needs: its ``capability`` markers, its dtype's and its op's rule.

    Raises:
        CapabilityError: a marker names an unknown capability (a suite bug, reported at collection).
    """
    names = []
    for mark in item.iter_markers(MARKER):
        names.extend(check_name(n, f"{item.nodeid}: @pytest.mark.capability") for n in mark.args)
    dtype_need = DTYPE_RULES.get(str(identity.get("dtype")))
    if dtype_need:
        names.append(dtype_need)
    op = str(identity.get("op") or "")
    names.extend(cap for cap, globs in OP_RULES if any(fnmatch.fnmatchcase(op, g) for g in globs))
    return list(dict.fromkeys(names))


def mark_unclaimed(claims: Claims, items: list, identity_of, op_dtypes: dtype_claims.DtypeClaims | None = None) -> int:
    """Skip every test that needs an unclaimed capability, or tests an ``(op, dtype)`` pair ``op_dtypes``
    does not claim, before its fixtures run; its record's outcome becomes ``not-claimed`` (:func:`outcome_of`).
    ``identity_of(item) -> dict`` gives suite, op and dtype. Returns how many tests were marked.

    Raises:
        pytest.UsageError: a ``capability`` marker names an unknown capability (one line: the test, the name,
            the accepted names), or the backend's dtype-claim callable raised.
    """
    marked = 0
    for item in items:
        identity = identity_of(item)
        try:
            needs = required(item, identity)
            pair = (
                None
                if op_dtypes is None
                else op_dtypes.unclaimed_reason(
                    str(identity.get("op") or ""), identity.get("dtype"), identity.get("suite")
                )
            )
        except (CapabilityError, dtype_claims.DtypeClaimError) as exc:
            raise pytest.UsageError(f"conformance: {exc}") from None
        missing = [n for n in needs if not claims.claims(n)]
        if pair is not None:
            item.add_marker(pytest.mark.skip(reason=f"not claimed: {pair}"))
            item.stash[NOT_CLAIMED_KEY] = [*missing, dtype_claims.NAME]
            marked += 1
            continue
        if not missing:
            continue
        where = "; ".join(sorted({claims.sources.get(n) or "declaration" for n in missing}))
        item.add_marker(pytest.mark.skip(reason=f"not claimed: {', '.join(missing)} ({where})"))
        item.stash[NOT_CLAIMED_KEY] = missing
        marked += 1
    return marked


def outcome_of(item: pytest.Item, outcome: str) -> list[str] | None:
    """The unclaimed capabilities of a test recorded as ``skipped`` because of them, else None."""
    if outcome != "skipped":
        return None
    return item.stash.get(NOT_CLAIMED_KEY, None)


__all__ = [
    "CAPABILITIES",
    "CapabilityError",
    "Claims",
    "DTYPE_RULES",
    "HOOK",
    "MARKER",
    "OP_RULES",
    "check_name",
    "claims_of",
    "dtype_claims_of",
    "header_line",
    "mark_unclaimed",
    "module_declaration",
    "outcome_of",
    "parse_declaration",
    "parse_table",
    "required",
    "resolve",
    "start",
]
