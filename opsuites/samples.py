"""OpInfo selection and sample iteration shared by the op suites.

Uses PyTorch's own OpInfo database (``torch.testing._internal.common_methods_invocations.op_db``);
nothing here copies it. Sample inputs are generated on the CPU (deterministic for a seed, independent of
the device under test) and moved to the device with :func:`conformance.transfer.sample_to_device`.
"""

from __future__ import annotations

import functools
import unittest

import pytest
import torch


@functools.lru_cache(maxsize=1)
def op_db() -> tuple:
    """PyTorch's OpInfo database (702 entries in torch 2.13), imported once per process."""
    from torch.testing._internal.common_methods_invocations import op_db as db

    return tuple(db)


@functools.lru_cache(maxsize=None)
def opinfo_by_name() -> dict:
    """OpInfo ``full_name`` -> OpInfo."""
    return {op.full_name: op for op in op_db()}


def _aten_tags(name: str) -> set:
    packet = getattr(torch.ops.aten, name, None)
    tags: set = set()
    if packet is None:
        return tags
    try:
        for ov in packet.overloads():
            tags.update(getattr(packet, ov).tags)
    except (AttributeError, RuntimeError):
        pass
    return tags


# Seeded-tagged ops that are deterministic in their OpInfo samples (dropout_p = 0 / no RNG use).
_SEEDED_BUT_DETERMINISTIC = {
    "nn.functional.scaled_dot_product_attention",
    "torch.ops.aten._flash_attention_forward",
    "torch.ops.aten._efficient_attention_forward",
    "signal.windows.exponential",
    "nn.functional.feature_alpha_dropout.without_train",
}


@functools.lru_cache(maxsize=None)
def is_random(full_name: str) -> bool:
    """True for ops whose output depends on the RNG stream: values are not compared with CPU.

    Decided from the ``nondeterministic_seeded`` tag of the op's aten overloads (torch's own
    native_functions.yaml tags) and, for Python-level ops with no aten name, from ``dropout`` in the name.
    """
    if full_name in _SEEDED_BUT_DETERMINISTIC:
        return False
    op = opinfo_by_name()[full_name]
    names = {op.aten_name, op.name.split(".")[-1]}
    if any(torch.Tag.nondeterministic_seeded in _aten_tags(n) for n in names if n):
        return True
    return "dropout" in op.name and "without_train" not in full_name


@functools.lru_cache(maxsize=None)
def has_undefined_values(full_name: str) -> bool:
    """True for ops whose output values are undefined (``empty*``): only metadata is compared.

    Source: ``OpInfo.has_nondeterministic_output`` is not set consistently, so the ``empty`` family is
    also recognised by name.
    """
    op = opinfo_by_name()[full_name]
    return bool(getattr(op, "has_nondeterministic_output", False)) or op.name.startswith(("empty", "new_empty"))


@functools.lru_cache(maxsize=None)
def reference_skipped_upstream(full_name: str) -> bool:
    """True when PyTorch's OpInfo skips its own ``test_compare_cpu`` for the op on every device.

    Those ops have implementation-defined results (e.g. shifts past the bit width); their values are then
    compared only when the backend mirrors the CPU kernels.
    """
    from torch.testing._internal.opinfo.core import DecorateInfo

    op = opinfo_by_name()[full_name]
    for info in list(op.decorators) + list(op.skips):
        if isinstance(info, DecorateInfo) and info.test_name == "test_compare_cpu" and info.device_type is None \
                and info.dtypes is None:
            for deco in info.decorators:
                if getattr(deco, "__qualname__", "").startswith("skip") or deco is unittest.expectedFailure:
                    return True
    return False


def opinfo_dtypes(op, selected: tuple[str, ...]) -> list[str]:
    """Names of the ``selected`` dtypes that ``op`` supports on the CPU (the reference device)."""
    supported = op.supported_dtypes("cpu")
    return [name for name in selected if getattr(torch, name) in supported]


def opinfo_params(selected: tuple[str, ...], suite: str, *, variant: str = "function",
                  predicate=None) -> list:
    """``pytest.param(full_name, dtype)`` for every OpInfo x selected dtype, with readable ids
    (``add-float32``), the ``conformance`` marker and an ``xdist_group`` per op (so ``--dist loadgroup``
    keeps an op's tests on one worker)."""
    params = []
    for op in op_db():
        if predicate is not None and not predicate(op):
            continue
        for dt in opinfo_dtypes(op, selected):
            params.append(pytest.param(
                op.full_name, dt, id=f"{op.full_name}-{dt}",
                marks=[pytest.mark.conformance(op=op.full_name, dtype=dt, variant=variant, suite=suite),
                       pytest.mark.xdist_group(op.full_name)]))
    return params


def cpu_samples(op, dtype: torch.dtype, *, requires_grad: bool = False, only: int | None = None) -> list:
    """``[(index, SampleInput)]`` of ``op`` on the CPU for ``dtype``; ``only`` keeps one index."""
    samples = op.sample_inputs("cpu", dtype, requires_grad=requires_grad)
    out = []
    for i, s in enumerate(samples):
        if only is None or i == only:
            out.append((i, s))
        if only is not None and i >= only:
            break
    return out
