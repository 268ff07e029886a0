"""Custom-op declarations: what a backend says about its own ``torch.library`` ops, validated.

A backend whose performance kernels are custom ops (NKI kernels registered with ``torch.library``)
declares them in its backend module (``--conformance-backend-module``) as a module-level list::

    from neuron_conformance.conformance.backend.custom_ops import CustomOpSpec, TensorArg

    CONFORMANCE_CUSTOM_OPS = [
        CustomOpSpec("my_ns::rms_norm", reference=rms_norm_reference, dtypes=("float32", "bfloat16"),
                     samples=((TensorArg((4, 64), grad=True), TensorArg((64,), grad=True), 1e-6),)),
    ]

or, in a backend that imports nothing of the harness, the same as plain mappings of the fields:
``{"name": "my_ns::rms_norm", "reference": ..., "dtypes": (...), "samples": (({"shape": (4, 64), "grad": True},
...),)}`` (the emulated device declares its ops this way).

Why a module attribute and not an entry point: every other declaration of the device under test is an
attribute of the backend module (``CONFORMANCE_CAPABILITIES``, ``CONFORMANCE_MIRRORS_CPU``, ...), the
module is already imported before the suites are collected, and a run can swap it with one option (the
fault tests do); an entry point would need an installed distribution and could not be chosen per run.

Validation (:func:`parse_declaration`) stops the run with one line naming the declaration and what is
accepted (exit code 2, raised by the suite at collection): a value that is not a list of
:class:`CustomOpSpec`, a name that is not ``namespace::op`` or names no registered operator, a reference
that is not callable, no samples, an unknown dtype, a ``grad`` flag on a non-floating argument.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import torch

HOOK = "CONFORMANCE_CUSTOM_OPS"
"""The backend-module attribute holding the declaration."""

FLOAT_DTYPES = ("float32", "float64", "bfloat16", "float16")
"""The dtypes a declaration may name (the floating dtypes the harness compares with a tolerance)."""


class CustomOpError(ValueError):
    """A malformed custom-op declaration; one line naming it and what is accepted."""


ERROR_KEY = "conformance_custom_ops_error"
"""Attribute of the pytest config holding the :class:`CustomOpError` the suite met at collection, for the
op suites' conftest to end the run with (one line, exit code 2) once collection is done."""


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument of a declared sample.

    Attributes:
        shape: its shape (non-negative ints).
        grad: the argument requires grad: the backward is checked with respect to it.
        dtype: a dtype name, or None for the test's dtype.
        low, high: the range of its uniformly drawn values (``torch.testing.make_tensor``).
    """

    shape: tuple
    grad: bool = False
    dtype: str | None = None
    low: float = -2.0
    high: float = 2.0


@dataclass(frozen=True)
class CustomOpSpec:
    """One declared custom op.

    Attributes:
        name: the operator's qualified name ``"namespace::op"`` (its ``.default`` overload is tested).
        reference: a CPU implementation from the op's definition, differentiable with autograd, called with
            the sample's arguments on the CPU (float64 copies for the fp64 rule of :mod:`neuron_conformance.conformance.verdict.oracle`).
        dtypes: the dtype names the op is declared for (a subset of :data:`FLOAT_DTYPES`).
        samples: argument tuples: :class:`TensorArg` for tensors, Python numbers/bools as they are.
    """

    name: str
    reference: object
    dtypes: tuple
    samples: tuple

    @property
    def test_id(self) -> str:
        """The op's name in test ids and records: ``namespace.op`` (``::`` would split a pytest id)."""
        return self.name.replace("::", ".")

    def overload(self) -> torch._ops.OpOverload:
        """The operator's ``.default`` overload (``torch.ops.<ns>.<op>.default``).

        Raises:
            CustomOpError: no operator of that name is registered.
        """
        ns, _, op = self.name.partition("::")
        try:
            return getattr(getattr(torch.ops, ns), op).default
        except (AttributeError, RuntimeError) as exc:
            raise CustomOpError(
                f"{self.name!r} names no registered operator with a default overload "
                f"({type(exc).__name__}: {exc}); define it with torch.library before the "
                f"declaration is read"
            ) from None


def _from_mapping(entry: Mapping, source: str) -> CustomOpSpec:
    """A :class:`CustomOpSpec` from a plain mapping of its fields, tensor arguments as mappings of
    :class:`TensorArg`'s fields: the form a backend uses that imports nothing of the harness."""
    try:
        samples = entry.get("samples")
        if isinstance(samples, tuple):
            samples = tuple(
                tuple(TensorArg(**a) if isinstance(a, Mapping) else a for a in s) if isinstance(s, tuple) else s
                for s in samples
            )
        return CustomOpSpec(**{**entry, "samples": samples})
    except TypeError as exc:
        raise CustomOpError(
            f"{source}: a mapping entry takes the fields of CustomOpSpec (name, reference, dtypes, "
            f"samples) and TensorArg (shape, grad, dtype, low, high): {exc}"
        ) from None


def _check_spec(spec, source: str) -> CustomOpSpec:
    if isinstance(spec, Mapping):
        spec = _from_mapping(spec, source)
    if not isinstance(spec, CustomOpSpec):
        raise CustomOpError(
            f"{source}: entries must be neuron_conformance.conformance.backend.custom_ops.CustomOpSpec "
            f"or a mapping of its fields, got {type(spec).__name__}"
        )
    where = f"{source}: {spec.name!r}"
    ns, sep, op = spec.name.partition("::") if isinstance(spec.name, str) else ("", "", "")
    if not (sep and ns.isidentifier() and op.isidentifier()):
        raise CustomOpError(f"{source}: name {spec.name!r} is not 'namespace::op'")
    try:
        spec.overload()
    except CustomOpError as exc:
        raise CustomOpError(f"{source}: {exc}") from None
    if not callable(spec.reference):
        raise CustomOpError(
            f"{where}: reference must be a callable CPU implementation, got {type(spec.reference).__name__}"
        )
    bad = [d for d in spec.dtypes if d not in FLOAT_DTYPES] if isinstance(spec.dtypes, tuple) else [spec.dtypes]
    if bad or not spec.dtypes:
        raise CustomOpError(
            f"{where}: dtypes must be a non-empty tuple of {', '.join(FLOAT_DTYPES)}; got {spec.dtypes!r}"
        )
    if not isinstance(spec.samples, tuple) or not spec.samples or not all(isinstance(s, tuple) for s in spec.samples):
        raise CustomOpError(f"{where}: samples must be a non-empty tuple of argument tuples")
    for i, sample in enumerate(spec.samples):
        for arg in sample:
            _check_arg(arg, f"{where} sample {i}")
    return spec


def _check_arg(arg, where: str) -> None:
    if not isinstance(arg, TensorArg):
        if not isinstance(arg, (bool, int, float)) and arg is not None:
            raise CustomOpError(
                f"{where}: arguments must be TensorArg, a number, a bool or None; got {type(arg).__name__}"
            )
        return
    if not isinstance(arg.shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in arg.shape):
        raise CustomOpError(f"{where}: TensorArg shape must be a tuple of non-negative ints, got {arg.shape!r}")
    if arg.dtype is not None and not isinstance(getattr(torch, str(arg.dtype), None), torch.dtype):
        raise CustomOpError(f"{where}: TensorArg dtype {arg.dtype!r} is not a torch dtype name")
    if arg.grad and arg.dtype is not None and not getattr(torch, arg.dtype).is_floating_point:
        raise CustomOpError(f"{where}: grad=True needs a floating dtype, got {arg.dtype}")


def parse_declaration(value, source: str) -> list[CustomOpSpec]:
    """The validated list of a ``CONFORMANCE_CUSTOM_OPS`` value (rules: module docstring).

    Raises:
        CustomOpError: the first malformed entry, or a repeated name; the message names ``source``.
    """
    if not isinstance(value, (list, tuple)):
        raise CustomOpError(
            f"{source}: must be a list of neuron_conformance.conformance.backend.custom_ops.CustomOpSpec "
            f"(or mappings of its fields), got "
            f"{type(value).__name__}"
        )
    specs = [_check_spec(spec, source) for spec in value]
    names = [s.name for s in specs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise CustomOpError(f"{source}: {', '.join(repeated)} declared more than once")
    return specs


def declared_ops(backend_module: str | None) -> list[CustomOpSpec]:
    """The custom ops the device under test declares: the :data:`HOOK` attribute of ``backend_module``
    (the session's backend module: ``--conformance-backend-module``, or the module the harness imported for an
    emulated device); ``[]`` when there
    is no backend module (built-in devices) or it declares nothing.

    Raises:
        CustomOpError: a malformed declaration (:func:`parse_declaration`).
        ImportError: ``backend_module`` cannot be imported (the session imported it already at start-up).
    """
    if not backend_module:
        return []
    module = sys.modules.get(backend_module) or importlib.import_module(backend_module)
    value = getattr(module, HOOK, None)
    if value is None:
        return []
    return parse_declaration(value, f"{module.__name__}:{HOOK}")


def build_args(sample: tuple, dtype: torch.dtype, seed: int) -> tuple:
    """The CPU arguments of a declared ``sample`` in ``dtype``: each :class:`TensorArg` drawn with
    ``torch.testing.make_tensor`` from a generator seeded with ``seed`` (so the device and compile checks see
    the same values), ``requires_grad`` as declared; other arguments as they are."""
    torch.manual_seed(seed)
    out = []
    for arg in sample:
        if isinstance(arg, TensorArg):
            t = torch.testing.make_tensor(
                arg.shape,
                dtype=getattr(torch, arg.dtype) if arg.dtype else dtype,
                device="cpu",
                low=arg.low,
                high=arg.high,
            )
            out.append(t.requires_grad_(arg.grad))
        else:
            out.append(arg)
    return tuple(out)
