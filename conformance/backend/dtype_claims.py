"""Per-op dtype claims: which ``(op, dtype)`` pairs the device under test claims to compute.

Every dtype the CPU supports for an op is collected; a device need not support them all (CUDA's ``mv`` has
no integer kernel: "addmv_impl_cuda not implemented for 'Char'"). A test of a pair the device does not
claim is not run and is recorded as ``not-claimed`` (``not_claimed: ["op-dtype"]``), as for an unclaimed
capability (:mod:`neuron_conformance.conformance.backend.capabilities`); a claimed pair that raises is a
failure as before.

Where a claim comes from, the first that decides:

1. the backend module's ``CONFORMANCE_OP_DTYPES`` (:data:`HOOK`): a mapping of op-name globs (the test's
   op: an OpInfo name such as ``mv`` or ``nn.functional.linear``, or an aten op name) to the dtype names
   claimed for the ops it matches, the first matching glob deciding; or a callable
   ``(op, dtype) -> bool | None`` (None: not decided);
2. for an aten overload (the generated and aten_replay suites) on a built-in device type, the running torch's
   dispatch registry: no kernel under the device's dispatch key and no composite one is not claimed
   (:func:`kernel_reason`; whatever the dtype);
3. OpInfo's per-device lists, for a device type OpInfo keeps its own list for
   (``torch/testing/_internal/opinfo/core.py``: ``OpInfo.dtypesIf[device_type]`` built from ``dtypesIfCUDA``,
   ``dtypesIfHpu``, ...; for the autograd suite also ``OpInfo.supported_backward_dtypes(device_type)``). A
   PrivateUse1 device has no such list (OpInfo gives it the CPU's), so nothing is decided for it here;
4. otherwise the pair is claimed.
"""

from __future__ import annotations

import fnmatch
import functools
import sys
from dataclasses import dataclass

import torch

HOOK = "CONFORMANCE_OP_DTYPES"
"""The backend-module attribute holding the declaration (docs/architecture.md, "Device under test")."""

NAME = "op-dtype"
"""The name an unclaimed pair gets in its record's ``not_claimed``."""

BACKWARD_SUITES = frozenset({"autograd"})
"""Suites whose tests run the backward: OpInfo's backward dtype list counts too."""


class DtypeClaimError(ValueError):
    """A malformed ``CONFORMANCE_OP_DTYPES``: one line naming the input."""


@dataclass(frozen=True)
class DtypeClaims:
    """The per-op dtype claims of the device under test.

    Attributes:
        device_type: the device type under test.
        declared: ``((glob, frozenset of dtype names), ...)`` in declaration order, or a callable, or None.
        source: where ``declared`` came from (``module:CONFORMANCE_OP_DTYPES``), or "".
        use_opinfo: True when OpInfo's per-device lists may decide (a built-in device type other than the CPU).
    """

    device_type: str
    declared: object = None
    source: str = ""
    use_opinfo: bool = False

    def unclaimed_reason(self, op: str, dtype: str | None, suite: str | None = None) -> str | None:
        """None when the device claims ``dtype`` for ``op``, else why not (one line naming the source)."""
        if not op or not dtype:
            return None
        decided = self._declared(op, dtype)
        if decided is not None:
            return None if decided else f"{op} does not claim {dtype} ({self.source})"
        if self.use_opinfo:
            if op.startswith("aten::"):
                return kernel_reason(self.device_type, op)
            return _opinfo_reason(self.device_type, op, dtype, suite in BACKWARD_SUITES)
        return None

    def _declared(self, op: str, dtype: str) -> bool | None:
        if self.declared is None:
            return None
        if callable(self.declared):
            try:
                value = self.declared(op, dtype)
            except Exception as exc:  # a declaration that raises is the backend's bug: named, not hidden
                raise DtypeClaimError(f"{self.source}({op!r}, {dtype!r}) raised {type(exc).__name__}: {exc}") from exc
            return None if value is None else bool(value)
        for glob, names in self.declared:
            if fnmatch.fnmatchcase(op, glob):
                return dtype in names
        return None


def _dtype_names(value, source: str, glob: str) -> frozenset:
    if isinstance(value, str) or not hasattr(value, "__iter__"):
        raise DtypeClaimError(f"{source}[{glob!r}]: must be a list of dtype names, got {value!r}")
    names = set()
    for item in value:
        name = str(item).removeprefix("torch.") if isinstance(item, torch.dtype) else item
        if not isinstance(name, str) or not isinstance(getattr(torch, name, None), torch.dtype):
            raise DtypeClaimError(f"{source}[{glob!r}]: {item!r} is not a torch dtype name")
        names.add(name)
    return frozenset(names)


def parse_declaration(value, source: str):
    """``CONFORMANCE_OP_DTYPES`` as :attr:`DtypeClaims.declared`.

    Raises:
        DtypeClaimError: neither a mapping of glob -> dtype names nor a callable; a key that is not a string;
            a value that is not a list of torch dtype names.
    """
    if callable(value):
        return value
    if not isinstance(value, dict):
        raise DtypeClaimError(
            f"{source}: must be a dict op-glob -> dtype names or a callable (op, dtype) -> bool, "
            f"got {type(value).__name__}"
        )
    out = []
    for glob, names in value.items():
        if not isinstance(glob, str):
            raise DtypeClaimError(f"{source}: key {glob!r} must be an op-name glob (a string)")
        out.append((glob, _dtype_names(names, source, glob)))
    return tuple(out)


def resolve(device_type: str, backend_module: str | None) -> DtypeClaims:
    """The :class:`DtypeClaims` of ``device_type`` with the backend module's declaration, if any.

    Raises:
        DtypeClaimError: a malformed declaration.
    """
    module = sys.modules.get(backend_module) if backend_module else None
    value = getattr(module, HOOK, None) if module is not None else None
    declared, source = None, ""
    if value is not None:
        source = f"{module.__name__}:{HOOK}"
        declared = parse_declaration(value, source)
    builtin = device_type not in ("cpu", torch._C._get_privateuse1_backend_name())
    return DtypeClaims(device_type, declared, source, use_opinfo=builtin)


@functools.lru_cache(maxsize=1)
def _opinfos() -> dict:
    from torch.testing._internal.common_methods_invocations import op_db

    return {op.full_name: op for op in op_db}


@functools.lru_cache(maxsize=None)
def _opinfo_reason(device_type: str, op_name: str, dtype: str, backward: bool) -> str | None:
    op = _opinfos().get(op_name)
    dt = getattr(torch, dtype, None)
    if op is None or not isinstance(dt, torch.dtype):
        return None
    own = getattr(op, "dtypesIf", {}) or {}
    if device_type in own and dt not in own[device_type]:
        return f"{op_name} does not claim {dtype} on {device_type} (OpInfo dtypesIf[{device_type!r}])"
    if backward and device_type in own and op.supports_autograd and dt not in op.supported_backward_dtypes(device_type):
        return f"{op_name} does not claim the backward in {dtype} on {device_type} (OpInfo supported_backward_dtypes)"
    return None


DISPATCH_KEYS = {"cuda": "CUDA", "xpu": "XPU", "mps": "MPS", "hpu": "HPU"}
"""Built-in device type -> the dispatch key its kernels are registered under."""

COMPOSITE_KEYS = ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
"""Keys whose kernel serves every device type (a composite of other ops)."""


@functools.lru_cache(maxsize=None)
def kernel_reason(device_type: str, overload: str) -> str | None:
    """Why an aten overload is not claimed on a built-in device type: torch registers no kernel for it under
    the device's dispatch key and no composite one (``aten::_add_relu`` and ``aten::histogram`` have CPU
    kernels only: "Could not run ... with arguments from the 'CUDA' backend"); None when it is claimed or the
    registry cannot tell. The running torch's registry decides (``torch._C._dispatch_has_kernel_for_dispatch_key``)."""
    key = DISPATCH_KEYS.get(device_type)
    if key is None:
        return None
    try:
        has = [torch._C._dispatch_has_kernel_for_dispatch_key(overload, k) for k in (key, *COMPOSITE_KEYS)]
    except RuntimeError:  # not a registered overload in this torch
        return None
    if any(has):
        return None
    return f"torch registers no {key} kernel for {overload} (and no composite one)"


def header_line(claims: DtypeClaims) -> list[str]:
    """The report header's line saying where per-op dtype claims come from, or [] when every pair is claimed."""
    parts = []
    if claims.source:
        parts.append(claims.source)
    if claims.use_opinfo:
        parts.append(f"OpInfo's own dtype lists for {claims.device_type}")
    if not parts:
        return []
    return ["conformance: per-op dtype claims from " + " then ".join(parts) + " (others: not-claimed)"]


__all__ = [
    "BACKWARD_SUITES",
    "DtypeClaimError",
    "DtypeClaims",
    "HOOK",
    "NAME",
    "header_line",
    "kernel_reason",
    "parse_declaration",
    "resolve",
]
