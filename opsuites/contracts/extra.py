"""Shape contracts of foreach, fake-quantization, histogram, split and other overloads the
schema-derived inputs leave out (:mod:`neuron_conformance.opsuites.contracts.registry`).

Fake quantization follows
``torch.fake_quantize_per_channel_affine``'s docs: float scales, integer zero points in
``[quant_min, quant_max]``, one per channel of ``axis``.
"""

from __future__ import annotations

import torch

from neuron_conformance.opsuites.contracts.registry import Contract, index, positive, randn


def foreach_pointwise(gen):
    shapes = ((3,), (2, 4))
    return [
        dict(
            self=[randn(gen, *s) for s in shapes],
            tensor1=[randn(gen, *s) for s in shapes],
            tensor2=[positive(gen, *s) for s in shapes],
            scalars=torch.tensor([0.5, -2.0]),
        )
    ]


def foreach_mm(gen):
    return [dict(self=[randn(gen, 2, 3), randn(gen, 1, 2)], mat2=[randn(gen, 3, 4), randn(gen, 2, 5)])]


def per_channel_cachemask(gen):
    return [
        dict(
            self=randn(gen, 3, 4) * 3,
            scale=positive(gen, 4) * 0.05,
            zero_point=torch.tensor([0, 10, 128, 255], dtype=torch.int32),
            axis=1,
            quant_min=0,
            quant_max=255,
        )
    ]


def per_tensor_cachemask(gen):
    return [dict(self=randn(gen, 3, 4) * 3, scale=0.05, zero_point=10, quant_min=0, quant_max=255)]


def per_tensor_qparams(gen):
    return [
        dict(
            self=randn(gen, 3, 4) * 3,
            scale=torch.tensor([0.05]),
            zero_point=torch.tensor([10], dtype=torch.int32),
            fake_quant_enabled=torch.tensor([1]),
            quant_min=0,
            quant_max=255,
        )
    ]


def learnable_per_channel(gen):
    return [
        dict(
            self=randn(gen, 3, 4) * 3,
            scale=positive(gen, 4) * 0.05,
            zero_point=torch.tensor([0.0, 10.0, 128.0, 255.0]),
            axis=1,
            quant_min=0,
            quant_max=255,
        )
    ]


def learnable_per_channel_backward(gen):
    return [dict(grad=randn(gen, 3, 4), **learnable_per_channel(gen)[0])]


def learnable_per_tensor_backward(gen):
    return [
        dict(
            grad=randn(gen, 3, 4),
            self=randn(gen, 3, 4) * 3,
            scale=torch.tensor([0.05]),
            zero_point=torch.tensor([10.0]),
            quant_min=0,
            quant_max=255,
        )
    ]


def histogramdd_cts(gen):
    return [dict(self=randn(gen, 7, 2), bins=[3, 4], weight=positive(gen, 7), density=d) for d in (False, True)]


def histogramdd_edges(gen):
    return [dict(self=randn(gen, 7, 2), bins=[3, 4], range=[-2.0, 2.0, -1.0, 3.0])]


def histogramdd_tensors(gen):
    return [
        dict(
            self=randn(gen, 7, 2),
            bins=[torch.tensor([-2.0, 0.0, 0.5, 2.0]), torch.tensor([-1.0, 1.0, 3.0])],
            weight=positive(gen, 7),
            density=False,
        )
    ]


def set_storage(gen):
    return [dict(self=randn(gen, 2, 2), source=randn(gen, 10).untyped_storage())]


def set_storage_offset(gen):
    return [
        dict(
            self=randn(gen, 2, 2), source=randn(gen, 12).untyped_storage(), storage_offset=off, size=size, stride=stride
        )
        for off, size, stride in ((2, [2, 3], [3, 1]), (1, [3, 2], [1, 4]), (0, [4], []), (5, [2, 2], [0, 1]))
    ]


def fused_obs_fake_quant(gen):
    """Per-tensor (running stats 0-dim, qparams 1 element) and per-row along ``ch_axis`` 0 (3 of each),
    asymmetric and symmetric, observer and fake quantization on and off (1-element int tensors)."""

    def sample(per_row, symmetric, on):
        c = 3 if per_row else 1
        stat = (lambda v: torch.full((3,), v)) if per_row else (lambda v: torch.tensor(v))
        return dict(
            self=randn(gen, 3, 4) * 3,
            observer_on=torch.tensor([on]),
            fake_quant_on=torch.tensor([on]),
            running_min=stat(-1.0),
            running_max=stat(2.0),
            scale=positive(gen, c) * 0.05,
            zero_point=torch.full((c,), 3, dtype=torch.int32),
            averaging_const=0.25,
            quant_min=-128 if symmetric else 0,
            quant_max=127 if symmetric else 255,
            ch_axis=0,
            per_row_fake_quant=per_row,
            symmetric_quant=symmetric,
        )

    return [sample(p, s, on) for p, s, on in ((False, False, 1), (True, False, 1), (False, True, 1), (True, True, 0))]


def split_sizes(gen):
    return [
        dict(self=randn(gen, 5, 3), split_sizes=[2, 3], dim=0),
        dict(self=randn(gen, 5, 3), split_sizes=[1, 0, 2], dim=1),
    ]


CONTRACTS = (
    Contract(
        (
            "aten::_foreach_addcdiv.Tensor",
            "aten::_foreach_addcdiv_.Tensor",
            "aten::_foreach_addcdiv.Tensor_out",
            "aten::_foreach_addcmul.Tensor",
            "aten::_foreach_addcmul_.Tensor",
            "aten::_foreach_addcmul.Tensor_out",
        ),
        foreach_pointwise,
        "_foreach_addcdiv/addcmul.Tensor: lists of one length, scalars a 1-D CPU tensor "
        "with one value per entry on every device: aten/src/ATen/native/ForeachUtils.h",
        cpu_args=("scalars",),
    ),
    Contract(("aten::_foreach_mm",), foreach_mm, "_foreach_mm: pairwise (n, m) @ (m, p): ForeachOpsKernels.cpp"),
    Contract(
        ("aten::fake_quantize_per_channel_affine_cachemask", "aten::fake_quantize_per_channel_affine_cachemask.out"),
        per_channel_cachemask,
        "torch.fake_quantize_per_channel_affine docs: scale/zero_point (C of axis)",
    ),
    Contract(
        ("aten::fake_quantize_per_tensor_affine_cachemask.out",),
        per_tensor_cachemask,
        "torch.fake_quantize_per_tensor_affine docs",
    ),
    Contract(
        ("aten::_fake_quantize_per_tensor_affine_cachemask_tensor_qparams.out",),
        per_tensor_qparams,
        "as fake_quantize_per_tensor_affine, qparams as 1-element tensors: FakeQuantPerTensorAffine.cpp",
    ),
    Contract(
        ("aten::_fake_quantize_learnable_per_channel_affine", "aten::_fake_quantize_learnable_per_channel_affine.out"),
        learnable_per_channel,
        "float zero_point (C of axis): aten/src/ATen/native/quantized/FakeQuantPerChannelAffine.cpp",
    ),
    Contract(
        ("aten::_fake_quantize_learnable_per_channel_affine_backward",),
        learnable_per_channel_backward,
        "as _fake_quantize_learnable_per_channel_affine: FakeQuantPerChannelAffine.cpp",
    ),
    Contract(
        ("aten::_fake_quantize_learnable_per_tensor_affine_backward",),
        learnable_per_tensor_backward,
        "scale/zero_point 1-element float tensors: FakeQuantPerTensorAffine.cpp",
    ),
    Contract(
        ("aten::_histogramdd_from_bin_cts.out",),
        histogramdd_cts,
        "histogramdd(self (N, D), bins D counts, weight (N)): torch.histogramdd docs",
    ),
    Contract(
        ("aten::_histogramdd_bin_edges.out",),
        histogramdd_edges,
        "histogramdd bin edges: D lists of bins + 1 edges, range 2 D values: torch.histogramdd docs",
    ),
    Contract(
        ("aten::_histogramdd_from_bin_tensors.out",),
        histogramdd_tensors,
        "histogramdd with D increasing edge tensors: torch.histogramdd docs",
    ),
    Contract(
        ("aten::split_with_sizes_copy.out", "aten::unsafe_split_with_sizes.out"),
        split_sizes,
        "split_with_sizes: sizes summing to self.size(dim): torch.split docs",
    ),
    Contract(
        ("aten::glu_backward.grad_input",),
        lambda gen: [dict(grad_output=randn(gen, 4, 3), self=randn(gen, 4, 6), dim=1)],
        "glu_backward: grad_output has self's shape with dim halved (torch.nn.functional.glu docs)",
    ),
    Contract(
        ("aten::bincount.out",),
        lambda gen: [dict(self=index(gen, 5, 9), weights=positive(gen, 9), minlength=7)],
        "bincount(self 1-D non-negative int, weights of self's length): torch.bincount docs",
    ),
    Contract(
        ("aten::view_copy.dtype_out",),
        lambda gen: [dict(self=randn(gen, 3, 4), dtype=torch.int32)],
        "Tensor.view(dtype) docs: same element size",
    ),
    Contract(
        ("aten::_conj",),
        lambda gen: [dict(self=randn(gen, 3, 4, dtype=torch.complex64))],
        "torch.conj docs: a view with the conjugate bit, complex input",
    ),
    Contract(
        ("aten::set.source_Storage", "aten::set.source_Storage_out"),
        set_storage,
        "Tensor.set_(source) docs: self takes source's storage, sizes (numel,) and offset 0",
    ),
    Contract(
        ("aten::set.source_Storage_storage_offset", "aten::set.source_Storage_storage_offset_out"),
        set_storage_offset,
        "Tensor.set_(source, storage_offset, size, stride) docs: the view must fit in "
        "the storage; stride [] is contiguous (aten/src/ATen/native/TensorShape.cpp, set_storage_cpu_)",
    ),
    Contract(
        ("aten::_fused_moving_avg_obs_fq_helper", "aten::_fused_moving_avg_obs_fq_helper.out"),
        fused_obs_fake_quant,
        "torch.ao.quantization FusedMovingAvgObsFakeQuantize: running min/max 0-dim "
        "(per tensor) or of size self.size(ch_axis) (per row), scale float and zero_point int32 of 1 or "
        "that size, observer_on/fake_quant_on 1-element: aten/src/ATen/native/quantized/"
        "FusedObsFakeQuant.cpp",
    ),
    Contract(
        ("aten::_fused_moving_avg_obs_fq_helper_functional",),
        fused_obs_fake_quant,
        "the functional form of _fused_moving_avg_obs_fq_helper (returns the updated statistics): "
        "native_functions.yaml",
    ),
    Contract(
        ("aten::isin.Tensor_Scalar_out",),
        lambda gen: [
            dict(elements=index(gen, 5, 3, 4), test_element=t, invert=inv)
            for t, inv in ((2, False), (7, False), (3, True))
        ],
        "torch.isin docs: elements tensor, one test value",
    ),
    Contract(
        ("aten::isin.Scalar_Tensor_out",),
        lambda gen: [
            dict(element=e, test_elements=index(gen, 5, 6), invert=inv)
            for e, inv in ((2, False), (9, False), (1, True))
        ],
        "torch.isin docs: one element, a tensor of test values (0-dim result)",
    ),
    Contract(
        ("aten::empty_permuted", "aten::empty_permuted.out"),
        lambda gen: [dict(size=[2, 3, 4], physical_layout=[2, 0, 1])],
        "torch.empty_permuted docs: values uninitialised, strides of the physical layout",
        values=False,
    ),
)
"""The contracts of this module (see :class:`neuron_conformance.opsuites.contracts.registry.Contract`)."""

__all__ = ["CONTRACTS"]
