"""Shape contracts of convolution, pooling, upsampling, padding and grid-sampling overloads
(:mod:`neuron_conformance.opsuites.contracts.registry`).

Sizes: a batch of 2 with 2 input and 3 output channels over ``5 x 6`` (2-D) or ``4 x 5 x 5`` (3-D) inputs,
3-wide kernels. A backward's ``grad_output`` has the size its forward gives for the same arguments
(the output-size formulas of the torch.nn.Conv2d / MaxPool2d / Upsample docs); pooling indices come
from the CPU forward. Sources name the schema and the shape checks in
``aten/src/ATen/native/{Convolution,ConvolutionMM2d,..}.cpp`` of PyTorch 2.13.
"""

from __future__ import annotations

import torch

from neuron_conformance.opsuites.contracts.registry import Contract, randn

B, CI, CO = 2, 2, 3


def _conv_args(gen, dims, transposed=False, groups=1):
    spatial = (5, 6) if dims == 2 else (4, 5, 5)
    weight = randn(gen, CI, CO // groups, *[3] * dims) if transposed else randn(gen, CO, CI // groups, *[3] * dims)
    return dict(input=randn(gen, B, CI, *spatial), weight=weight, bias=randn(gen, CO))


def convolution(gen):
    out = []
    for dims, transposed in ((2, False), (2, True), (3, False)):
        d = _conv_args(gen, dims, transposed)
        out.append(
            dict(
                **d,
                stride=[2] + [1] * (dims - 1),
                padding=[1] * dims,
                dilation=[1] * dims,
                transposed=transposed,
                output_padding=[1] + [0] * (dims - 1) if transposed else [0] * dims,
                groups=1,
            )
        )
    return out


def underscore_convolution(gen):
    return [
        dict(**d, benchmark=False, deterministic=True, cudnn_enabled=False, allow_tf32=False) for d in convolution(gen)
    ]


def convolution_backward(gen):
    out = []
    for d in convolution(gen):
        y = torch.ops.aten.convolution(**d)  # grad_output has the forward's output size
        out.append(
            dict(
                grad_output=randn(gen, *y.shape),
                input=d["input"],
                weight=d["weight"],
                bias_sizes=[CO],
                stride=d["stride"],
                padding=d["padding"],
                dilation=d["dilation"],
                transposed=d["transposed"],
                output_padding=d["output_padding"],
                groups=1,
                output_mask=[True, True, True],
            )
        )
    return out


def _thnn(gen, dims, **extra):
    d = _conv_args(gen, dims)
    return dict(self=d["input"], weight=d["weight"], kernel_size=[3] * dims, bias=d["bias"], **extra)


def slow_conv2d(gen):
    return [_thnn(gen, 2, stride=[1, 2], padding=[1, 0])]


def slow_conv2d_backward(gen):
    d = _thnn(gen, 2, stride=[1, 2], padding=[1, 0])
    y = torch.ops.aten._slow_conv2d_forward(**d)
    return [
        dict(
            grad_output=randn(gen, *y.shape),
            self=d["self"],
            weight=d["weight"],
            kernel_size=[3, 3],
            stride=[1, 2],
            padding=[1, 0],
            output_mask=[True, True, True],
        )
    ]


def slow_conv2d_backward_grad_input(gen):
    d = slow_conv2d_backward(gen)[0]
    del d["output_mask"]
    return [{**d, **{k: torch.empty(0) for k in ("grad_input", "grad_weight", "grad_bias")}}]  # resized by the kernel


def slow_conv3d(gen):
    return [_thnn(gen, 3, stride=[1, 2, 1], padding=[1, 0, 1])]


def dilated(dims):
    def build(gen):
        return [_thnn(gen, dims, stride=[1] * dims, padding=[2] * dims, dilation=[2] * dims)]

    return build


def transpose(dims):
    def build(gen):
        d = _conv_args(gen, dims, transposed=True)
        return [
            dict(
                self=d["input"],
                weight=d["weight"],
                kernel_size=[3] * dims,
                bias=d["bias"],
                stride=[2] * dims,
                padding=[1] * dims,
                output_padding=[1] * dims,
                dilation=[1] * dims,
            )
        ]

    return build


def conv_tbc(gen):
    # conv_tbc(self (time, batch, in), weight (k, in, out), bias (out)): aten/src/ATen/native/ConvolutionTBC.cpp
    return [dict(self=randn(gen, 7, B, CI), weight=randn(gen, 3, CI, CO), bias=randn(gen, CO), pad=1)]


def im2col(gen):
    return [dict(self=randn(gen, B, CI, 5, 6), kernel_size=[2, 3], dilation=[1, 1], padding=[1, 0], stride=[1, 2])]


def col2im(gen):
    # blocks: (5 + 2 - 2) / 1 + 1 = 6 by (6 - 3) / 2 + 1 = 2 -> L = 12 columns of C * 2 * 3 (torch.nn.Fold docs)
    return [
        dict(
            self=randn(gen, B, CI * 6, 12),
            output_size=[5, 6],
            kernel_size=[2, 3],
            dilation=[1, 1],
            padding=[1, 0],
            stride=[1, 2],
        )
    ]


def avg_pool1d(gen):
    x = randn(gen, B, CI, 9)
    return [
        dict(self=x, kernel_size=[3], stride=[2], padding=[1], ceil_mode=c, count_include_pad=i)
        for c, i in ((False, True), (True, False))
    ]


def avg_pool(dims):
    """avg_pool2d/3d samples where ``count_include_pad`` decides the border values: padding in one spatial
    dim only (a kernel that applies the flag to one dim and not the other differs there), no
    ``divisor_override`` (which makes the flag irrelevant: the OpInfo samples that set
    ``count_include_pad=False`` all set it), with and without ``ceil_mode``; torch.nn.AvgPool2d/3d docs."""

    def build(gen):
        spatial, kernel = ((5, 6), [3, 2]) if dims == 2 else ((4, 5, 6), [2, 3, 2])
        x = randn(gen, B, CI, *spatial)
        pads = ([1, 0], [0, 1]) if dims == 2 else ([1, 0, 0], [0, 1, 1])
        return [
            dict(
                self=x,
                kernel_size=kernel,
                stride=[2] * dims,
                padding=p,
                ceil_mode=c,
                count_include_pad=i,
                divisor_override=None,
            )
            for p in pads
            for c in (False, True)
            for i in (True, False)
        ]

    return build


def avg_pool_backward(dims):
    def build(gen):
        forward = torch.ops.aten.avg_pool2d if dims == 2 else torch.ops.aten.avg_pool3d
        samples = []
        for d in avg_pool(dims)(gen):
            y = forward(**d)
            samples.append(dict(grad_output=randn(gen, *y.shape), **d))
        return samples

    return build


def adaptive(dims, size):
    def build(gen):
        spatial = (9, 7, 6)[:dims]
        return [
            dict(self=randn(gen, B, CI, *spatial), output_size=list(size)),
            dict(self=randn(gen, CI, *spatial), output_size=list(size)),
        ]

    return build


def max_pool3d(gen):
    return [
        dict(
            self=randn(gen, B, CI, 4, 5, 5),
            kernel_size=[2, 3, 3],
            stride=[2, 2, 2],
            padding=[1, 1, 1],
            dilation=[1, 1, 1],
            ceil_mode=False,
        )
    ]


def max_pool3d_backward(gen):
    d = max_pool3d(gen)[0]
    y, idx = torch.ops.aten.max_pool3d_with_indices(**d)
    return [dict(grad_output=randn(gen, *y.shape), **d, indices=idx)]


def max_unpool(dims):
    def build(gen):
        x = randn(gen, B, CI, *(4, 6, 6)[-dims:])
        pool = torch.ops.aten.max_pool2d_with_indices if dims == 2 else torch.ops.aten.max_pool3d_with_indices
        y, idx = pool(x, [2] * dims, [2] * dims)  # indices into each (N, C) plane, from the CPU forward
        d = dict(self=y, indices=idx, output_size=list(x.shape[2:]))
        if dims == 3:
            d.update(stride=[2, 2, 2], padding=[0, 0, 0])
        return [d]

    return build


def fractional_backward(dims):
    def build(gen):
        x = randn(gen, B, CI, *(7, 8, 6)[:dims])
        out_size, kernel = [3] * dims, [2] * dims
        pool = torch.ops.aten.fractional_max_pool2d if dims == 2 else torch.ops.aten.fractional_max_pool3d
        y, idx = pool(x, kernel, out_size, torch.rand(B, CI, dims, generator=gen))
        return [dict(grad_output=randn(gen, *y.shape), self=x, kernel_size=kernel, output_size=out_size, indices=idx)]

    return build


def upsample_vec(mode):
    def build(gen):
        x = randn(gen, B, CI, 4, 5)
        extra = dict(align_corners=False) if mode == "bilinear" else {}
        return [
            dict(input=x, output_size=[7, 3], scale_factors=None, **extra),
            dict(input=x, output_size=None, scale_factors=[1.5, 2.0], **extra),
        ]

    return build


def upsample_aa(gen):
    x = randn(gen, B, CI, 6, 7)
    return [dict(self=x, output_size=[4, 9], align_corners=a) for a in (False, True)]


def upsample_aa_backward(gen):
    return [
        dict(grad_output=randn(gen, B, CI, 4, 9), output_size=[4, 9], input_size=[B, CI, 6, 7], align_corners=a)
        for a in (False, True)
    ]


def constant_pad(gen):
    x = randn(gen, B, CI, 4, 5)
    return [
        dict(self=x, pad=[1, 2], value=-1.5),
        dict(self=x, pad=[0, 1, 2, 0, 1, 1]),
        dict(self=x, pad=[-1, 2, 1, -2]),
    ]


def reflection_pad2d(gen):
    return [dict(self=randn(gen, B, CI, 4, 5), padding=[1, 2, 3, 0])]


def pad_backward(dims, op):
    def build(gen):
        x = randn(gen, B, CI, *(4, 5, 3)[:dims])
        padding = [1, 2, 2, 0, 1, 1][: 2 * dims]
        y = op(x, padding)
        return [dict(grad_output=randn(gen, *y.shape), self=x, padding=padding)]

    return build


def _grid(gen, dims):
    return torch.rand(B, *(3, 4, 5)[:dims], dims, generator=gen) * 2.2 - 1.1  # a little outside [-1, 1]


def grid_sampler(dims):
    def build(gen):
        x = randn(gen, B, CI, *(4, 5, 6)[:dims])
        return [
            dict(input=x, grid=_grid(gen, dims), interpolation_mode=m, padding_mode=p, align_corners=a)
            for m, p, a in ((0, 0, False), (1, 1, True), (0, 2, False))
        ]

    return build


def grid_sampler_backward(dims):
    def build(gen):
        out = []
        for d in grid_sampler(dims)(gen):
            y = torch.ops.aten.grid_sampler_2d(**d) if dims == 2 else torch.ops.aten.grid_sampler_3d(**d)
            out.append(dict(grad_output=randn(gen, *y.shape), **d, output_mask=[True, True]))
        return out

    return build


def grid_fallback_backward(gen):
    out = []
    for d in grid_sampler(2)(gen):
        y = torch.ops.aten._grid_sampler_2d_cpu_fallback(**d)
        out.append(dict(grad_output=randn(gen, *y.shape), **d))
    return out


def affine_grid(gen):
    theta = torch.eye(2, 3).expand(B, 2, 3) + 0.1 * randn(gen, B, 2, 3)
    return [dict(theta=theta, size=[B, CI, 4, 5], align_corners=a) for a in (False, True)]


_CONV = "convolution(input (N, C_in, *), weight (C_out, C_in / groups, *k) or transposed (C_in, C_out / groups, *k)): Convolution.cpp"
_MM = "_slow_conv2d_forward(self (N, C_in, H, W), weight (C_out, C_in, kH, kW), kernel_size == weight's): ConvolutionMM2d.cpp"
CONTRACTS = (
    Contract(("aten::convolution.out",), convolution, _CONV),
    Contract(("aten::_convolution", "aten::_convolution.out"), underscore_convolution, _CONV),
    Contract(
        ("aten::convolution_backward.out",),
        convolution_backward,
        "convolution_backward: grad_output of the forward's output size, bias_sizes (C_out): Convolution.cpp",
    ),
    Contract(("aten::_slow_conv2d_forward", "aten::_slow_conv2d_forward.output"), slow_conv2d, _MM),
    Contract(
        ("aten::_slow_conv2d_backward.output_mask", "aten::_slow_conv2d_backward.output_mask_out"),
        slow_conv2d_backward,
        _MM,
    ),
    Contract(("aten::_slow_conv2d_backward.grad_input",), slow_conv2d_backward_grad_input, _MM),
    Contract(
        ("aten::slow_conv3d_forward", "aten::slow_conv3d_forward.output"),
        slow_conv3d,
        "slow_conv3d_forward: as _slow_conv2d_forward in 3-D: ConvolutionMM3d.cpp",
    ),
    Contract(
        ("aten::slow_conv_dilated2d", "aten::slow_conv_dilated2d.out"),
        dilated(2),
        "slow_conv_dilated2d: kernel_size == weight's spatial sizes: NaiveDilatedConvolution.cpp",
    ),
    Contract(
        ("aten::slow_conv_dilated3d", "aten::slow_conv_dilated3d.out"),
        dilated(3),
        "slow_conv_dilated3d: as slow_conv_dilated2d: NaiveDilatedConvolution.cpp",
    ),
    Contract(
        ("aten::slow_conv_transpose2d", "aten::slow_conv_transpose2d.out"),
        transpose(2),
        "slow_conv_transpose2d: weight (C_in, C_out, k...), output_padding < stride: NaiveConvolutionTranspose2d.cpp",
    ),
    Contract(
        ("aten::slow_conv_transpose3d", "aten::slow_conv_transpose3d.out"),
        transpose(3),
        "slow_conv_transpose3d: as slow_conv_transpose2d: NaiveConvolutionTranspose3d.cpp",
    ),
    Contract(
        ("aten::conv_tbc", "aten::conv_tbc.out"),
        conv_tbc,
        "conv_tbc(self (T, B, C_in), weight (k, C_in, C_out), bias (C_out)): ConvolutionTBC.cpp",
    ),
    Contract(("aten::im2col.out",), im2col, "im2col (torch.nn.Unfold docs): aten/src/ATen/native/Im2Col.cpp"),
    Contract(("aten::col2im.out",), col2im, "col2im: L = prod of the block counts (torch.nn.Fold docs): Col2Im.cpp"),
    Contract(
        ("aten::avg_pool1d", "aten::avg_pool1d.out"),
        avg_pool1d,
        "avg_pool1d(self (N, C, L) or (C, L), kernel_size, stride, padding <= kernel / 2): torch.nn.AvgPool1d docs",
    ),
    Contract(
        ("aten::avg_pool2d", "aten::avg_pool2d.out"),
        avg_pool(2),
        "avg_pool2d(self (N, C, H, W), kernel_size, stride, padding <= kernel / 2, ceil_mode, "
        "count_include_pad, divisor_override): torch.nn.AvgPool2d docs, AveragePool2d.cpp",
    ),
    Contract(
        ("aten::avg_pool2d_backward", "aten::avg_pool2d_backward.grad_input"),
        avg_pool_backward(2),
        "avg_pool2d_backward(grad_output of the forward's output size, self, the forward's arguments): "
        "derivatives.yaml, AveragePool2d.cpp",
    ),
    Contract(
        ("aten::avg_pool3d", "aten::avg_pool3d.out"),
        avg_pool(3),
        "avg_pool3d(self (N, C, D, H, W), ...): torch.nn.AvgPool3d docs, AveragePool3d.cpp",
    ),
    Contract(
        ("aten::avg_pool3d_backward", "aten::avg_pool3d_backward.grad_input"),
        avg_pool_backward(3),
        "avg_pool3d_backward(grad_output, self, the forward's arguments): derivatives.yaml, AveragePool3d.cpp",
    ),
    Contract(
        ("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool1d.out"),
        adaptive(1, (4,)),
        "adaptive_avg_pool1d(self (N, C, L) or (C, L), output_size [L_out]): AdaptiveAveragePooling.cpp",
    ),
    Contract(
        ("aten::adaptive_avg_pool2d.out", "aten::_adaptive_avg_pool2d.out"),
        adaptive(2, (4, 3)),
        "adaptive_avg_pool2d(self (N, C, H, W) or (C, H, W)): AdaptiveAveragePooling.cpp",
    ),
    Contract(
        ("aten::adaptive_avg_pool3d.out", "aten::_adaptive_avg_pool3d.out"),
        adaptive(3, (4, 3, 2)),
        "adaptive_avg_pool3d(self (N, C, D, H, W) or (C, D, H, W)): AdaptiveAveragePooling3d.cpp",
    ),
    Contract(
        ("aten::max_pool3d_with_indices.out",), max_pool3d, "max_pool3d: padding <= kernel / 2: DilatedMaxPool3d.cpp"
    ),
    Contract(
        ("aten::max_pool3d_with_indices_backward.grad_input",),
        max_pool3d_backward,
        "max_pool3d_with_indices_backward: indices of the forward: DilatedMaxPool3d.cpp",
    ),
    Contract(
        ("aten::max_unpool2d.out",), max_unpool(2), "max_unpool2d: indices of max_pool2d (torch.nn.MaxUnpool2d docs)"
    ),
    Contract(
        ("aten::max_unpool3d.out",), max_unpool(3), "max_unpool3d: indices of max_pool3d (torch.nn.MaxUnpool3d docs)"
    ),
    Contract(
        ("aten::fractional_max_pool2d_backward", "aten::fractional_max_pool2d_backward.grad_input"),
        fractional_backward(2),
        "fractional_max_pool2d_backward: indices of the forward: FractionalMaxPool2d.cpp",
    ),
    Contract(
        ("aten::fractional_max_pool3d_backward", "aten::fractional_max_pool3d_backward.grad_input"),
        fractional_backward(3),
        "fractional_max_pool3d_backward: indices of the forward: FractionalMaxPool3d.cpp",
    ),
    Contract(
        ("aten::upsample_bilinear2d.vec", "aten::upsample_bilinear2d.vec_out"),
        upsample_vec("bilinear"),
        "upsample_bilinear2d.vec: exactly one of output_size [H, W] / scale_factors: UpSample.cpp",
    ),
    Contract(
        ("aten::upsample_nearest2d.vec", "aten::upsample_nearest2d.vec_out"),
        upsample_vec("nearest"),
        "upsample_nearest2d.vec: exactly one of output_size [H, W] / scale_factors: UpSample.cpp",
    ),
    Contract(
        ("aten::_upsample_bicubic2d_aa", "aten::_upsample_bicubic2d_aa.out"),
        upsample_aa,
        "_upsample_bicubic2d_aa(self (N, C, H, W), output_size [H, W]): UpSampleBicubic2d.cpp (antialias)",
    ),
    Contract(
        ("aten::_upsample_lanczos2d_aa", "aten::_upsample_lanczos2d_aa.out"),
        upsample_aa,
        "_upsample_lanczos2d_aa: as _upsample_bicubic2d_aa: aten/src/ATen/native/UpSample.cpp",
    ),
    Contract(
        ("aten::_upsample_bicubic2d_aa_backward", "aten::_upsample_bicubic2d_aa_backward.grad_input"),
        upsample_aa_backward,
        "backward: grad_output (N, C, *output_size), input_size 4 sizes: UpSample.cpp",
    ),
    Contract(
        ("aten::_upsample_lanczos2d_aa_backward", "aten::_upsample_lanczos2d_aa_backward.grad_input"),
        upsample_aa_backward,
        "backward: grad_output (N, C, *output_size), input_size 4 sizes: UpSample.cpp",
    ),
    Contract(
        ("aten::constant_pad_nd", "aten::constant_pad_nd.out"),
        constant_pad,
        "constant_pad_nd: pad pairs from the last dim, negative crops (torch.nn.functional.pad docs): PadNd.cpp",
    ),
    Contract(
        ("aten::reflection_pad2d.out",),
        reflection_pad2d,
        "reflection_pad2d: padding < the dim's size: ReflectionPad.cpp",
    ),
    Contract(
        ("aten::reflection_pad2d_backward.grad_input",),
        pad_backward(2, torch.ops.aten.reflection_pad2d),
        "reflection_pad2d_backward: grad_output of the padded size: ReflectionPad.cpp",
    ),
    Contract(
        ("aten::replication_pad2d_backward.grad_input",),
        pad_backward(2, torch.ops.aten.replication_pad2d),
        "replication_pad2d_backward: grad_output of the padded size: ReplicationPadding.cpp",
    ),
    Contract(
        ("aten::replication_pad3d_backward.grad_input",),
        pad_backward(3, torch.ops.aten.replication_pad3d),
        "replication_pad3d_backward: grad_output of the padded size: ReplicationPadding.cpp",
    ),
    Contract(
        ("aten::grid_sampler_2d.out", "aten::_grid_sampler_2d_cpu_fallback", "aten::_grid_sampler_2d_cpu_fallback.out"),
        grid_sampler(2),
        "grid_sampler_2d(input (N, C, H, W), grid (N, H_out, W_out, 2)): GridSampler.cpp",
    ),
    Contract(
        ("aten::grid_sampler_3d.out",),
        grid_sampler(3),
        "grid_sampler_3d(input (N, C, D, H, W), grid (N, D_out, H_out, W_out, 3)): GridSampler.cpp",
    ),
    Contract(
        ("aten::grid_sampler_2d_backward.out",),
        grid_sampler_backward(2),
        "grid_sampler_2d_backward: grad_output (N, C, H_out, W_out): GridSampler.cpp",
    ),
    Contract(
        ("aten::grid_sampler_3d_backward.out",),
        grid_sampler_backward(3),
        "grid_sampler_3d_backward: grad_output (N, C, D_out, H_out, W_out): GridSampler.cpp",
    ),
    Contract(
        ("aten::_grid_sampler_2d_cpu_fallback_backward",),
        grid_fallback_backward,
        "as grid_sampler_2d_backward: GridSampler.cpp",
    ),
    Contract(
        ("aten::affine_grid_generator", "aten::affine_grid_generator.out"),
        affine_grid,
        "affine_grid_generator(theta (N, 2, 3), size [N, C, H, W]): torch.nn.functional.affine_grid docs",
    ),
)
"""The contracts of this module (see :class:`neuron_conformance.opsuites.contracts.registry.Contract`)."""


__all__ = ["CONTRACTS"]
