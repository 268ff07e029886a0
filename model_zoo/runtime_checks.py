"""The catalogue of training-runtime checks: name -> dtypes, needed capability, CI membership, and dispatch.

Check names (the record's ``variant``; the record's ``op`` is ``train_runtime``) and where each is
defined: ``<sgd|adam|adamw>-<loop|foreach|fused>`` and ``kernel-<aten op>`` in
:mod:`neuron_conformance.model_zoo.train_runtime`; ``grad_scaler-*``, ``clip-*``, ``accumulate``, ``sched-*``, ``hooks``,
``checkpoint-*`` and ``dataloader-pin`` in :mod:`neuron_conformance.model_zoo.train_loop`.
"""

from __future__ import annotations

import dataclasses

import torch

from neuron_conformance.model_zoo.dtypes import as_dtype
from neuron_conformance.model_zoo.results import CheckResult
from neuron_conformance.model_zoo.train_loop import LOOP_MEASURES, check_loop
from neuron_conformance.model_zoo.train_runtime import (
    FLOAT32_KERNELS,
    IMPLEMENTATIONS,
    KERNEL_MEASURES,
    OPTIMIZERS,
    check_kernel,
    check_optimizer,
)

ALL = ("float32", "bfloat16", "float16")
#: The loop checks run in float32 and bfloat16; float16 training needs a GradScaler (checked on its own).
LOOP_DTYPES = ("float32", "bfloat16")
#: The bounded subset run under the ``model_zoo_ci`` marker (about 0.1-0.8 s each on the emulator).
CI = {
    "adamw-fused",
    "sgd-foreach",
    "kernel-_fused_adamw_",
    "kernel-_amp_update_scale_",
    "grad_scaler-fused",
    "clip-foreach",
    "sched-onecycle",
    "hooks",
    "checkpoint-device",
}


@dataclasses.dataclass(frozen=True)
class RuntimeCheck:
    """One training-runtime check: its name, dtypes, the capability it needs (or None), CI membership."""

    name: str
    dtypes: tuple[str, ...]
    capability: str | None = None

    @property
    def ci(self) -> bool:
        return self.name in CI


def catalogue() -> list[RuntimeCheck]:
    """Every training-runtime check, in a stable order."""
    out = [RuntimeCheck(f"{o}-{i}", ALL) for o in OPTIMIZERS for i in IMPLEMENTATIONS]
    out += [RuntimeCheck(f"kernel-{op}", ("float32",) if op in FLOAT32_KERNELS else ALL) for op in KERNEL_MEASURES]
    # GradScaler: float32 parameters (AMP's master weights; GradScaler refuses to unscale float16 gradients)
    out += [RuntimeCheck(f"grad_scaler-{i}", ("float32",)) for i in ("foreach", "fused")]
    out += [
        RuntimeCheck(n, ("float32",), "pinned_memory") if n == "dataloader-pin" else RuntimeCheck(n, LOOP_DTYPES)
        for n in LOOP_MEASURES
    ]
    return out


def run_runtime_check(name: str, dtype: torch.dtype | str, device) -> CheckResult | None:
    """Run training-runtime check ``name`` in ``dtype`` on ``device`` against CPU.

    Returns ``None`` when the check does not apply to the device: ``*-fused`` optimizers where torch
    offers no fused kernels for the device type, ``dataloader-pin`` on CPU.

    Raises:
        KeyError: unknown check name.
        neuron_conformance.conformance.verdict.failures.NoReference: the CPU gave no usable reference.
    """
    dt = as_dtype(dtype)
    head, _, tail = name.partition("-")
    if head in OPTIMIZERS and tail in IMPLEMENTATIONS:
        return check_optimizer(head, tail, dt, device)
    if head == "kernel":
        return check_kernel(tail, dt, device)
    return check_loop(name, dt, device)
