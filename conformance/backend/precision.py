"""Reduced-precision modes of the device under test: detected at start-up, named in the report, and the
tolerance of the ops they apply to.

PyTorch lets a device trade float32 accuracy for speed, and documents it ("TensorFloat-32 (TF32) on Ampere
(and later) devices" and "Reduced Precision Reduction in FP16/BF16 GEMMs" in the CUDA semantics notes):

* ``torch.backends.cudnn.allow_tf32`` (on by default): float32 convolutions in TF32 (10 mantissa bits);
* ``torch.backends.cuda.matmul.allow_tf32``, or ``torch.set_float32_matmul_precision("high"|"medium")``
  (the device-generic switch): float32 matrix products in TF32 or bfloat16;
* ``torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction`` and ``..._bf16_...`` (on by
  default): half-precision GEMMs with reduced-precision intermediate sums.

A device in such a mode is correct, and differs from the CPU's float32 by about 1e-3 relative. Each active
mode is named in the run's header and ``run.json`` (``device.precision_modes``); the float32 ops of its family
are judged at the TF32 tolerance (:data:`TF32_TOLERANCE`, source ``reduced-precision``), every other op as
before. The half-precision reductions stay at their dtype's tolerance with fp64 arbitration, which already
allows their error; they are named only.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import torch

TF32_TOLERANCE = 5e-3
"""atol and rtol of a float32 result computed in TF32: PyTorch's own convolution and matmul tests run with
``tf32_on_and_off(0.005)`` (``torch/testing/_internal/common_cuda.py``, used in ``test/test_nn.py``)."""

MATMUL_OPS = (
    "mm", "bmm", "addmm", "addmm.*", "baddbmm", "addbmm", "matmul", "__rmatmul__", "nn.functional.linear",
    "nn.functional.bilinear", "einsum", "tensordot", "inner", "linalg.multi_dot", "chain_matmul",
)  # fmt: skip
"""OpInfo names whose float32 results go through a matrix product (a GEMM)."""

CONV_OPS = ("nn.functional.conv*", "conv*", "nn.functional.conv_transpose*")
"""OpInfo names whose float32 results go through a convolution."""


@dataclass(frozen=True)
class PrecisionMode:
    """One active reduced-precision mode.

    Attributes:
        name: ``tf32-matmul``, ``tf32-conv``, ``fp16-reduced-reduction`` or ``bf16-reduced-reduction``.
        setting: the switch that turned it on, as a user would write it.
        ops: OpInfo-name globs whose float32 results it changes (empty: named only).
    """

    name: str
    setting: str
    ops: tuple = ()

    def to_dict(self) -> dict:
        """For ``run.json``."""
        return {"name": self.name, "setting": self.setting}


def _flag(path: str):
    obj = torch
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def detect(device_type: str) -> list[PrecisionMode]:
    """The reduced-precision modes active for ``device_type`` now (none for the CPU)."""
    if device_type == "cpu":
        return []
    modes = []
    precision = torch.get_float32_matmul_precision()
    if precision != "highest":
        modes.append(PrecisionMode("tf32-matmul", f'torch.set_float32_matmul_precision("{precision}")', MATMUL_OPS))
    if device_type == "cuda":
        if _flag("backends.cuda.matmul.allow_tf32") and not modes:
            modes.append(PrecisionMode("tf32-matmul", "torch.backends.cuda.matmul.allow_tf32 = True", MATMUL_OPS))
        if _flag("backends.cudnn.allow_tf32"):
            modes.append(PrecisionMode("tf32-conv", "torch.backends.cudnn.allow_tf32 = True", CONV_OPS))
        for half in ("fp16", "bf16"):
            if _flag(f"backends.cuda.matmul.allow_{half}_reduced_precision_reduction"):
                modes.append(
                    PrecisionMode(
                        f"{half}-reduced-reduction",
                        f"torch.backends.cuda.matmul.allow_{half}_reduced_precision_reduction = True",
                    )
                )
    return modes


def mode_for(modes: list, op_name: str, dtype: torch.dtype) -> PrecisionMode | None:
    """The mode that changes ``op_name``'s results of ``dtype`` (float32 only), or None."""
    if dtype != torch.float32:
        return None
    for mode in modes:
        if any(fnmatch.fnmatchcase(op_name, g) for g in mode.ops):
            return mode
    return None


def header_line(modes: list) -> list[str]:
    """The report header's line naming the active modes, or []."""
    if not modes:
        return []
    return [
        "conformance: reduced-precision modes on (float32 results of their ops judged at the TF32 tolerance "
        f"{TF32_TOLERANCE:g}): " + "; ".join(f"{m.name} ({m.setting})" for m in modes)
    ]


__all__ = ["CONV_OPS", "MATMUL_OPS", "PrecisionMode", "TF32_TOLERANCE", "detect", "header_line", "mode_for"]
