"""Wrong kernels of overloads that only the shape_contracts suite's hand-written inputs reach:
``Tensor.set_(storage, offset, size, stride)``, ``isin`` with a scalar (``out=``), ``_scaled_mm_v2``'s scale lists, and the fused moving-average
observer of quantization-aware training. Each is a plausible backend bug: an argument ignored.
"""

from __future__ import annotations

from neuron_conformance.emulator import faults

_SET = "aten::set.source_Storage_storage_offset"
_ISIN = "aten::isin.Tensor_Scalar_out"
_OBS = "aten::_fused_moving_avg_obs_fq_helper"
_SCALED_MM_V2 = "aten::_scaled_mm_v2"


def _set_ignores_offset(self, source, storage_offset, size, stride=()):
    return faults.correct(_SET, self, source, 0, size, stride)


def _isin_ignores_invert(elements, test_element, *, assume_unique=False, invert=False, out):
    return faults.correct(_ISIN, elements, test_element, assume_unique=assume_unique, invert=False, out=out)


def _observer_keeps_running_stats(self, observer_on, fake_quant_on, running_min, running_max, *rest, **kwargs):
    # the statistics are updated on copies: running_min/running_max keep their old values
    return faults.correct(
        _OBS, self, observer_on, fake_quant_on, running_min.clone(), running_max.clone(), *rest, **kwargs
    )


def _scaled_mm_v2_ignores_scale_b(self, mat2, scale_a, recipe_a, swizzle_a, scale_b, *rest, **kwargs):
    ones = [faults.correct("aten::ones_like.default", t) for t in scale_b]
    return faults.correct(_SCALED_MM_V2, self, mat2, scale_a, recipe_a, swizzle_a, ones, *rest, **kwargs)


CONTRACT_FAULTS = {
    "set-storage-ignores-offset": lambda: faults.override(_SET, _set_ignores_offset, receives="args"),
    "isin-scalar-out-ignores-invert": lambda: faults.override(_ISIN, _isin_ignores_invert, receives="args"),
    "scaled-mm-v2-ignores-scale-b": lambda: faults.override(
        _SCALED_MM_V2, _scaled_mm_v2_ignores_scale_b, receives="args"
    ),
    "obs-fake-quant-keeps-running-stats": lambda: faults.override(_OBS, _observer_keeps_running_stats, receives="args"),
}
"""Fault name -> factory of its :class:`neuron_conformance.emulator.faults.Fault` (merged into fault_backend.FAULTS)."""

__all__ = ["CONTRACT_FAULTS"]
