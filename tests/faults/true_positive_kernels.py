"""Wrong kernels like the real deviations a CUDA run showed (torch 2.11, H200): each must stay a failure in
every emulator mode, beside the correct-but-different kernels of the alternate mode.

Each targets its own op, so :data:`TRUE_POSITIVE_FAULTS` can be installed together (``fault_backend`` takes a
comma-separated list) and one run checks them all.
"""

from __future__ import annotations

import os
import signal

import torch

from neuron_conformance.emulator import faults, storage


def _embedding_renorm_skips_strided(self, indices, max_norm, norm_type):
    """``embedding_renorm_`` that leaves a non-contiguous weight unnormalised."""
    if not self.is_contiguous():
        return self
    return faults.correct("aten::embedding_renorm_", self, indices, max_norm, norm_type)


def _clamp_wraps_bounds(result, self, min=None, max=None):
    """``clamp`` of uint8 with a wider integer bound that converts the bound to uint8 first (-1 becomes 255)."""
    wider = [b for b in (min, max) if isinstance(b, torch.Tensor) and b.dtype != torch.uint8]
    if self.dtype == torch.uint8 and wider:
        lo = None if min is None else storage.cpu_alias(min).to(torch.uint8)
        hi = None if max is None else storage.cpu_alias(max).to(torch.uint8)
        wrong = torch.clamp(storage.cpu_alias(self), lo, hi)
        storage.cpu_alias(result).copy_(wrong.to(result.dtype))
    return result


def _channel_shuffle_refuses_strided(op_name):
    def kernel(self, groups):
        if not self.is_contiguous():
            raise RuntimeError("channel_shuffle: the input must be contiguous")
        return faults.correct(op_name, self, groups)

    return kernel


_BATCH_NORMS = (
    "aten::native_batch_norm",
    "aten::_native_batch_norm_legit",
    "aten::_native_batch_norm_legit_no_training",
    "aten::_batch_norm_with_update",
)
"""The batch-norm overloads a forward reaches in either mode (the composite or its decompositions)."""


def _batch_norm_zero_channels(op_name):
    def kernel(input, *args, **kwargs):
        if input.dim() > 1 and input.shape[1] == 0:
            os.kill(os.getpid(), signal.SIGFPE)  # a division by the channel count
        return faults.correct(op_name, input, *args, **kwargs)

    return kernel


def _rounded_integer(result, *args, **kwargs):
    """Integer ``linspace`` rounded to nearest instead of truncated toward zero."""
    if isinstance(result, torch.Tensor) and not result.is_floating_point() and result.numel() > 2:
        host = storage.cpu_alias(result)
        start, end = float(args[0]), float(args[1])
        steps = result.numel()
        exact = torch.linspace(start, end, steps, dtype=torch.float64)
        host.copy_(torch.round(exact).to(host.dtype))
    return result


def _avg_pool2d_out_skips_strided(result, *args, **kwargs):
    out = kwargs.get("out")
    if isinstance(out, torch.Tensor) and not out.is_contiguous():
        storage.cpu_alias(out).fill_(float("nan"))  # never written: what the memory held
    return result


def _cumsum_in_storage_dtype(result, self, dim, dtype=None, **kwargs):
    """Half-precision ``cumsum`` accumulated in the storage dtype (every partial sum rounded)."""
    if isinstance(result, torch.Tensor) and result.dtype in (torch.bfloat16, torch.float16) and result.numel():
        host = storage.cpu_alias(result)
        src = storage.cpu_alias(self) if self.device.type != "cpu" else self
        moved = src.to(result.dtype).movedim(dim, 0)
        acc = torch.zeros_like(moved[0]) if moved.dim() else torch.zeros((), dtype=result.dtype)
        parts = []
        for k in range(moved.shape[0] if moved.dim() else 1):
            acc = (acc + (moved[k] if moved.dim() else moved)).to(result.dtype)
            parts.append(acc.clone())
        host.copy_(torch.stack(parts).movedim(0, dim) if moved.dim() else parts[0])
    return result


def _five_ulp_bfloat16(result, *args, **kwargs):
    if isinstance(result, torch.Tensor) and result.dtype == torch.bfloat16:
        host = storage.cpu_alias(result)
        moved = host.clone()
        for _ in range(5):
            moved = torch.nextafter(moved, torch.full_like(moved, float("inf")))
        host.copy_(torch.where(torch.isfinite(host) & (host != 0), moved, host))
    return result


TRUE_POSITIVE_FAULTS = {
    "tp-embedding-renorm-strided": lambda: faults.override(
        "aten::embedding_renorm_", _embedding_renorm_skips_strided, receives="args"
    ),
    "tp-clamp-uint8-bounds": lambda: faults.override("aten::clamp.Tensor", _clamp_wraps_bounds),
    "tp-channel-shuffle-strided": lambda: tuple(
        faults.override(name, _channel_shuffle_refuses_strided(name), receives="args")
        for name in ("aten::channel_shuffle", "aten::native_channel_shuffle")
    ),
    "tp-range-out-crash": lambda: faults.make_segfault(faults.resolve("aten::range.out_")),
    "tp-batch-norm-zero-channels": lambda: tuple(
        faults.override(name, _batch_norm_zero_channels(name), receives="args") for name in _BATCH_NORMS
    ),
    "tp-integer-linspace": lambda: (
        faults.override("aten::linspace", _rounded_integer),
        faults.override("aten::linspace.out", _rounded_integer),
    ),
    "tp-avg-pool2d-strided-out": lambda: faults.override("aten::avg_pool2d.out", _avg_pool2d_out_skips_strided),
    "tp-cumsum-storage-accumulation": lambda: (
        faults.override("aten::cumsum", _cumsum_in_storage_dtype),
        faults.override("aten::cumsum.out", _cumsum_in_storage_dtype),
    ),
    "tp-logspace-bf16-5ulp": lambda: (
        faults.override("aten::logspace", _five_ulp_bfloat16),
        faults.override("aten::logspace.out", _five_ulp_bfloat16),
    ),
}
"""Fault name -> factory (merged into :data:`tests.faults.fault_backend.FAULTS`)."""
