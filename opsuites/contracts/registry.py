"""Hand-written sample inputs for aten overloads whose arguments must agree in size with each other.

Schema-derived inputs (:mod:`neuron_conformance.opsuites.generated_inputs`) give every tensor the same candidate shape, so an
overload whose contract ties its arguments together (``native_group_norm``'s ``N``, ``C``, ``HxW`` and
``group``; a batch norm's running statistics of length ``C``; ``_embedding_bag``'s ``offsets`` into
``indices``; a CTC loss's ``input_lengths``/``target_lengths``) is either refused by the CPU kernel or, for
kernels that do not check (:data:`neuron_conformance.conformance.results.aten_audit.SCHEMA_UNSAFE`), crashes or reads out of bounds.
The tables (:data:`neuron_conformance.opsuites.contracts.nn.CONTRACTS`, :data:`neuron_conformance.opsuites.contracts.conv.CONTRACTS`,
:data:`neuron_conformance.opsuites.contracts.misc.CONTRACTS`, :data:`neuron_conformance.opsuites.contracts.extra.CONTRACTS`) give such
overloads inputs built from their documented contract: the ``native_functions.yaml`` schema, the op's
documentation and the size checks of its CPU kernel (each :class:`Contract` names its source).

A contract builds the arguments of its first (functional or in-place) overload by name. The ``out=``
overloads of the same contract get their ``out`` arguments here (:func:`call_samples`): an empty tensor of
the functional result's dtype for a ``Tensor(a!)`` (the kernel resizes it, ``at::native::resize_output``)
or, with :attr:`Contract.sized_outs` and for ``Tensor(a!)[]`` lists (foreach-style kernels do not resize),
zero tensors of the functional result's sizes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from neuron_conformance.conformance.results import aten_audit, coverage

SEED = 0
"""Seed of the generator every contract builds its tensors with (the same inputs in every run)."""


@dataclass(frozen=True)
class Contract:
    """Sample inputs of one or more aten overloads that share argument names (functional, ``out=``,
    in-place forms).

    Attributes:
        overloads: dispatcher names (``aten::native_group_norm``, ``aten::native_group_norm.out``); the
            first is the functional (or in-place) form the ``out=`` tensors are sized from.
        build: ``build(gen) -> [dict]``: one dict per sample, argument name -> value (CPU tensors made with
            the ``torch.Generator`` ``gen``), for the first overload's schema; ``out`` arguments may be
            left out (see the module docstring).
        source: where the size contract comes from (schema, docs, the CPU kernel's checks).
        values: False when the results' values are unspecified: only metadata is compared.
        reproducible: False when the CPU kernel is not reproducible call to call: judged with the dtype's
            tolerance even on a backend that mirrors the CPU.
        sized_outs: ``out=`` tensors are given the functional result's sizes (the kernel does not resize).
        cpu_args: argument names that stay CPU tensors in the device call (documented as CPU-only, like
            ``_pack_padded_sequence``'s ``lengths``, its ``out1``).
        cpu_outputs: indices of the outputs that are CPU tensors on every device (``batch_sizes``).
    """

    overloads: tuple[str, ...]
    build: Callable[[torch.Generator], list[dict]]
    source: str
    values: bool = True
    reproducible: bool = True
    sized_outs: bool = False
    cpu_args: tuple[str, ...] = ()
    cpu_outputs: tuple[int, ...] = ()


def registry(tables: Iterable[Iterable[Contract]], *, absent: list[str] | None = None) -> dict[str, Contract]:
    """Dispatcher name -> its :class:`Contract`, over every table in ``tables``.

    Args:
        absent: None (the tables' own check): an overload without a ``torch.ops.aten`` binding is an error.
            A list: such overloads (ops the running torch lacks, e.g. ``_upsample_lanczos2d_aa`` before
            torch 2.13) are left out and appended to it, so a suite builds its cases from the running torch.

    Raises:
        ValueError: an overload appears in two contracts, or has no ``torch.ops.aten`` binding and ``absent``
            is None (the message names it).
    """
    out: dict[str, Contract] = {}
    for table in tables:
        for contract in table:
            for name in contract.overloads:
                if name in out:
                    raise ValueError(f"shape contracts: {name!r} has two contracts")
                if coverage._overload(name) is None:
                    if absent is None:
                        raise ValueError(f"shape contracts: {name!r} has no torch.ops.aten binding")
                    absent.append(name)
                    continue
                out[name] = contract
    return out


def _is_out(arg) -> bool:
    return bool(arg.kwarg_only and arg.alias_info is not None and arg.alias_info.is_write)


def call_arguments(op, named: dict, where: str) -> tuple[list, dict]:
    """``(args, kwargs)`` for ``op`` from argument name -> value: positional arguments in schema order up
    to the first one left at its default, the rest (and keyword-only ones) by name.

    Raises:
        ValueError: ``named`` has a name the schema lacks, or lacks an argument without a default
            (the message names ``where`` and the argument).
    """
    schema_args = op._schema.arguments
    unknown = set(named) - {a.name for a in schema_args}
    if unknown:
        raise ValueError(f"{where}: {op._schema.name}.{op._overloadname} has no argument {sorted(unknown)}")
    args: list = []
    kwargs: dict = {}
    positional = True
    for a in schema_args:
        if a.name not in named:
            if not a.has_default_value() and not _is_out(a):
                raise ValueError(f"{where}: argument {a.name!r} of {op._schema.name} has no value")
            positional = False
            continue
        if a.kwarg_only or not positional:
            kwargs[a.name] = named[a.name]
        else:
            args.append(named[a.name])
    return args, kwargs


def _outs(op, functional, named: dict, sized: bool, where: str) -> dict:
    """The ``out`` arguments ``named`` lacks, from the CPU result of ``functional`` on ``named``."""
    missing = [a for a in op._schema.arguments if _is_out(a) and a.name not in named]
    if not missing:
        return {}
    f_args, f_kwargs = call_arguments(functional, named, where)
    result = functional(*f_args, **f_kwargs)
    # a tuple is one result per return; a list is one Tensor[] return. The out arguments take the first
    # results: a functional form returns the new values of its mutated arguments after them
    # (_amp_update_scale's growth_tracker_out, _fused_adam's grads_out...)
    results = list(result) if isinstance(result, tuple) else [result]
    if len(results) < len(missing):
        raise ValueError(f"{where}: {len(missing)} out argument(s), {len(results)} result(s) of the functional")
    outs = {}
    for arg, res in zip(missing, results):
        if isinstance(res, (list, tuple)):
            outs[arg.name] = [torch.zeros_like(t) for t in res]
        else:
            outs[arg.name] = torch.zeros_like(res) if sized else torch.empty(0, dtype=res.dtype)
    return outs


def call_samples(name: str, contract: Contract) -> list[tuple[list, dict]]:
    """The ``(args, kwargs)`` of every sample of overload ``name`` (CPU tensors, freshly built).

    Raises:
        ValueError: the contract's arguments do not fit ``name``'s schema (see :func:`call_arguments`).
    """
    op = aten_audit.overload_of(name)
    functional = aten_audit.overload_of(coverage.functional_of_out().get(name) or contract.overloads[0])

    def fresh():
        return contract.build(torch.Generator().manual_seed(SEED))

    out = []
    for i, named in enumerate(fresh()):
        where = f"{name} sample {i}"
        named.update(_outs(op, functional, fresh()[i], contract.sized_outs, where))  # sized on a copy
        out.append(call_arguments(op, named, where))
    return out


def randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Standard normal values of ``shape`` and ``dtype`` drawn from ``gen``."""
    return torch.randn(shape, generator=gen, dtype=dtype)


def positive(gen: torch.Generator, *shape: int) -> torch.Tensor:
    """float32 values in ``[0.5, 1.5)`` of ``shape`` (variances, scales: away from 0)."""
    return torch.rand(shape, generator=gen) + 0.5


def index(gen: torch.Generator, high: int, *shape: int) -> torch.Tensor:
    """int64 values in ``[0, high)`` of ``shape``."""
    return torch.randint(0, high, shape, generator=gen)


__all__ = ["Contract", "SEED", "call_arguments", "call_samples", "index", "positive", "randn", "registry"]
