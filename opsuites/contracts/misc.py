"""Shape contracts of core, metadata, optimizer, mixed-precision, matmul, sequence and attention overloads
(:mod:`neuron_conformance.opsuites.contracts.registry`).

The core ``sym_*`` queries (``torch.Tag.core``, CompositeImplicitAutograd: answered from the tensor's
sizes, strides and offset) are asked of non-contiguous, offset and channels-last views, whose metadata the
device copy must keep (:func:`neuron_conformance.conformance.backend.transfer.to_device_exact`). Optimizer steps follow
``torch.optim.Adam``/``AdamW``/``SGD`` (their ``fused=True`` path calls these overloads with one list
entry per parameter and float32 ``state_steps``); gradient-scaler steps follow ``torch.amp.GradScaler``.
"""

from __future__ import annotations

import torch

from neuron_conformance.opsuites.contracts.registry import Contract, index, positive, randn


def _views(gen):
    base = randn(gen, 6, 8, 5)
    stepped = base[1:, 2::2, 1:]  # offset 1*40 + 2*5 + 1 = 51, strides (40, 10, 1)
    return [
        stepped,
        stepped.transpose(0, 2),
        randn(gen, 2, 3, 4, 5).to(memory_format=torch.channels_last),
        base[2, 3],
        torch.tensor(1.5),
    ]


def sym_dims(gen):
    """Every dim (and -1) of each view with dims (a 0-dim tensor has no size to ask for)."""
    return [dict(self=v, dim=d) for v in _views(gen) if v.dim() for d in [*range(v.dim()), -1]]


def sym_whole(gen):
    return [dict(self=v) for v in _views(gen)]


def sym_contiguous(gen):
    views = _views(gen)
    return [dict(self=v) for v in views] + [
        dict(self=views[2], memory_format=torch.channels_last),
        dict(self=views[1], memory_format=torch.preserve_format),
    ]


def div_scalar(gen):
    x = randn(gen, 3, 4) * 5
    return [dict(self=x, other=o, rounding_mode=m) for o, m in ((2.5, "trunc"), (-3, "floor"), (0.75, None))]


def div_tensor_inplace(gen):
    x, y = randn(gen, 3, 4) * 5, positive(gen, 4) * torch.tensor([1.0, -1.0, 1.0, -1.0])
    return [dict(self=x, other=y, rounding_mode=m) for m in ("trunc", "floor", None)]


def select_scatter(gen):
    x = randn(gen, 3, 4, 5)
    return [dict(self=x, src=randn(gen, 3, 5), dim=1, index=2), dict(self=x, src=randn(gen, 4, 5), dim=0, index=-1)]


def var_dim(gen):
    x = randn(gen, 3, 4, 5)
    return [
        dict(self=x, dim=[1], unbiased=True, keepdim=True),
        dict(self=x, dim=[0, 2], unbiased=False),
        dict(self=x, dim=None),
    ]


_SHAPES = ((3, 4), (5,))  # two parameters of different shapes: one fused step updates a list


def _adam(gen, tensor_lr=False, amsgrad=False, maximize=False, weight_decay=0.1, scaled=False):
    params = [randn(gen, *s) for s in _SHAPES]
    sqs = [positive(gen, *s) * 0.01 for s in _SHAPES]
    d = dict(
        self=params,
        grads=[randn(gen, *s) for s in _SHAPES],
        exp_avgs=[randn(gen, *s) * 0.1 for s in _SHAPES],
        exp_avg_sqs=sqs,
        max_exp_avg_sqs=[q + 0.005 for q in sqs] if amsgrad else [],
        state_steps=[torch.tensor(3.0) for _ in _SHAPES],
        lr=torch.tensor(1e-2) if tensor_lr else 1e-2,
        beta1=0.9,
        beta2=0.999,
        weight_decay=weight_decay,
        eps=1e-8,
        amsgrad=amsgrad,
        maximize=maximize,
    )
    if scaled:  # torch.amp.GradScaler: grads divided by grad_scale, the step skipped when found_inf
        d.update(grad_scale=torch.tensor(4.0), found_inf=torch.tensor(0.0))
    return d


def adam(tensor_lr):
    def build(gen):
        return [
            _adam(gen, tensor_lr),
            _adam(gen, tensor_lr, amsgrad=True, maximize=True),
            _adam(gen, tensor_lr, weight_decay=0.0, scaled=True),
        ]

    return build


def _sgd(gen, tensor_lr=False, **kw):
    d = dict(
        self=[randn(gen, *s) for s in _SHAPES],
        grads=[randn(gen, *s) for s in _SHAPES],
        momentum_buffer_list=[randn(gen, *s) for s in _SHAPES],
        weight_decay=0.1,
        momentum=0.9,
        lr=torch.tensor(0.05) if tensor_lr else 0.05,
        dampening=0.0,
        nesterov=False,
        maximize=False,
        is_first_step=False,
    )
    d.update(kw)
    return d


def sgd(tensor_lr):
    def build(gen):
        return [
            _sgd(gen, tensor_lr),
            _sgd(gen, tensor_lr, nesterov=True, maximize=True),
            _sgd(gen, tensor_lr, is_first_step=True, dampening=0.1, weight_decay=0.0),
            # a later step (buffers exist): buf = momentum * buf + (1 - dampening) * grad, where dampening
            # changes the result (torch/optim/sgd.py, _single_tensor_sgd; on the first step buf = grad)
            _sgd(gen, tensor_lr, dampening=0.5),
        ]

    return build


def amp_update_scale(gen):
    # torch.amp.GradScaler.update: scale float32 (1), growth_tracker int32 (1), found_inf float32 (1)
    return [
        dict(
            self=torch.tensor([65536.0]),
            growth_tracker=torch.tensor([t], dtype=torch.int32),
            found_inf=torch.tensor([f]),
            scale_growth_factor=2.0,
            scale_backoff_factor=0.5,
            growth_interval=2,
        )
        for t, f in ((0, 0.0), (1, 0.0), (1, 1.0))
    ]


def amp_unscale(gen):
    grads = [randn(gen, 3, 4), randn(gen, 5)]
    with_inf = [g.clone() for g in grads]
    with_inf[1][2] = float("inf")
    return [dict(self=g, found_inf=torch.tensor([0.0]), inv_scale=torch.tensor([0.25])) for g in (grads, with_inf)]


def int_mm(gen):
    # _int_mm: int8 (m, k) @ int8 (k, n) -> int32: aten/src/ATen/native/LinearAlgebra.cpp (k, n multiples of 8)
    return [
        dict(
            self=torch.randint(-128, 128, (17, 32), generator=gen, dtype=torch.int8),
            mat2=torch.randint(-128, 128, (32, 8), generator=gen, dtype=torch.int8),
        )
    ]


def scaled_mm(gen):
    # _scaled_mm: float8_e4m3fn (m, k) row-major @ (k, n) column-major, float32 scalar scales; the float8
    # output stays inside e4m3fn's range (|out| ~ N(0, 32 * 4**2), 4.5 sigma ~ 100 < 448), so its values are
    # judged by the float8 tolerance, not saturated (the OpInfo's samples all saturate to +-448)
    a = (randn(gen, 16, 32) * 2).to(torch.float8_e4m3fn)
    b = (randn(gen, 16, 32) * 2).to(torch.float8_e4m3fn).t()
    return [
        dict(self=a, mat2=b, scale_a=torch.tensor(0.5), scale_b=torch.tensor(2.0), out_dtype=dt)
        for dt in (torch.float32, torch.bfloat16, torch.float8_e4m3fn)
    ]


def scaled_mm_v2(gen):
    # _scaled_mm_v2: float8_e4m3fn (m, k) row-major @ (k, n) column-major, scales and recipes as lists;
    # recipe 0 TensorWise (float32 singletons), 1 RowWise (float32 (m, 1) and (1, n)), swizzle 0 (none):
    # enum ScalingType / SwizzleType in aten/src/ATen/BlasBackend.h
    a = (randn(gen, 16, 32) * 2).to(torch.float8_e4m3fn)
    b = (randn(gen, 16, 32) * 2).to(torch.float8_e4m3fn).t()
    tensorwise = dict(scale_a=[torch.tensor(0.5)], recipe_a=[0], scale_b=[torch.tensor(2.0)], recipe_b=[0])
    rowwise = dict(scale_a=[positive(gen, 16, 1)], recipe_a=[1], scale_b=[positive(gen, 1, 16)], recipe_b=[1])
    return [
        dict(self=a, mat2=b, swizzle_a=[0], swizzle_b=[0], bias=bias, out_dtype=dt, **scales)
        for scales, bias, dt in (
            (tensorwise, None, torch.float32),
            (tensorwise, randn(gen, 16), torch.float32),
            (rowwise, None, torch.bfloat16),
        )
    ]


def grouped_mm(gen):
    # _grouped_mm: bf16 2-D (total_m, k) x 3-D (groups, k, n), offs int32 cumulative group ends
    return [
        dict(
            self=randn(gen, 8, 16, dtype=torch.bfloat16),
            mat2=randn(gen, 2, 16, 8, dtype=torch.bfloat16),
            offs=torch.tensor([3, 8], dtype=torch.int32),
        )
    ]


def pack_padded(gen):
    # torch.nn.utils.rnn.pack_padded_sequence: lengths a 1-D CPU int64 tensor, decreasing (enforce_sorted)
    return [
        dict(input=randn(gen, 4, 3, 2), lengths=torch.tensor([4, 3, 1]), batch_first=False),
        dict(input=randn(gen, 3, 4, 2), lengths=torch.tensor([4, 2, 2]), batch_first=True),
    ]


E, HEADS, L = 4, 2, 3


def _attention_weights(gen):
    return dict(
        qkv_weight=randn(gen, 3 * E, E) * 0.5,
        qkv_bias=randn(gen, 3 * E) * 0.1,
        proj_weight=randn(gen, E, E) * 0.5,
        proj_bias=randn(gen, E) * 0.1,
    )


def mha(gen):
    x = randn(gen, 2, L, E)
    w = _attention_weights(gen)
    return [
        dict(query=x, key=x, value=x, embed_dim=E, num_head=HEADS, **w, need_weights=True, average_attn_weights=a)
        for a in (True, False)
    ]


def encoder_layer(gen):
    w = _attention_weights(gen)
    return [
        dict(
            src=randn(gen, 2, L, E),
            embed_dim=E,
            num_heads=HEADS,
            **w,
            use_gelu=g,
            norm_first=f,
            eps=1e-5,
            norm_weight_1=positive(gen, E),
            norm_bias_1=randn(gen, E),
            norm_weight_2=positive(gen, E),
            norm_bias_2=randn(gen, E),
            ffn_weight_1=randn(gen, 8, E) * 0.5,
            ffn_bias_1=randn(gen, 8) * 0.1,
            ffn_weight_2=randn(gen, E, 8) * 0.5,
            ffn_bias_2=randn(gen, E) * 0.1,
        )
        for g, f in ((False, False), (True, True))
    ]


_LENGTHS = torch.tensor([2, 0, 3, 1])  # four segments over 6 rows, one empty


def segment_reduce(gen):
    data = randn(gen, 6, 3)
    return [
        dict(data=data, reduce="sum", lengths=_LENGTHS.clone()),
        dict(data=data, reduce="max", lengths=_LENGTHS.clone(), initial=-2.0),
        dict(data=data, reduce="mean", offsets=torch.tensor([0, 2, 2, 5, 6]), initial=0.0),
    ]


def segment_reduce_backward(gen):
    out = []
    for d in segment_reduce(gen):
        y = torch.ops.aten.segment_reduce(**d)  # the forward's output, as autograd saves it
        out.append(dict(grad=randn(gen, *y.shape), output=y, **d))
    return out


def linear_combination(gen):
    # out[i] = sum_j coefficients[i, j] * input[j]: aten/src/ATen/native/LinearAlgebra.cpp
    return [dict(input=randn(gen, 3, 4, 5), coefficients=randn(gen, 2, 3))]


def _spd(gen, n):
    a = randn(gen, n, n)
    return a @ a.T + n * torch.eye(n)


def blas_inplace(kind):
    def build(gen):
        shapes = {
            "addmm": ((3, 4), (3, 5), (5, 4)),
            "addmv": ((3,), (3, 5), (5,)),
            "addr": ((3, 4), (3,), (4,)),
            "baddbmm": ((2, 3, 4), (2, 3, 5), (2, 5, 4)),
        }[kind]
        names = {
            "addmm": ("mat1", "mat2"),
            "addmv": ("mat", "vec"),
            "addr": ("vec1", "vec2"),
            "baddbmm": ("batch1", "batch2"),
        }[kind]
        t = [randn(gen, *s) for s in shapes]
        return [{"self": t[0], names[0]: t[1], names[1]: t[2], "beta": 0.5, "alpha": 2.0}]

    return build


def addmm_activation(gen):
    return [dict(self=randn(gen, 4), mat1=randn(gen, 3, 5), mat2=randn(gen, 5, 4), use_gelu=g) for g in (False, True)]


def glu_jvp(gen):
    x, dx = randn(gen, 4, 6), randn(gen, 4, 6)
    return [dict(glu=torch.ops.aten.glu(x, 1), x=x, dx=dx, dim=1)]


def glu_backward_jvp(gen):
    x, grad_glu = randn(gen, 4, 6), randn(gen, 4, 3)
    return [
        dict(
            grad_x=torch.ops.aten.glu_backward(grad_glu, x, 1),
            grad_glu=grad_glu,
            x=x,
            dgrad_glu=randn(gen, 4, 3),
            dx=randn(gen, 4, 6),
            dim=1,
        )
    ]


def scatter_reduce_inplace(gen):
    idx = torch.tensor([[0, 2, 2], [4, 4, 1], [3, 0, 3]])
    return [
        dict(self=randn(gen, 3, 5), dim=1, index=idx, src=randn(gen, 3, 3), reduce=r, include_self=i)
        for r, i in (("sum", True), ("prod", False), ("mean", True), ("amax", False), ("amin", True))
    ]


def scatter_reduce_legacy(value):
    def build(gen):
        idx = torch.tensor([[0, 2], [4, 4], [3, 0]])
        src = dict(value=1.5) if value else dict(src=randn(gen, 3, 2))
        return [dict(self=randn(gen, 3, 5), dim=1, index=idx, reduce=r, **src) for r in ("add", "multiply")]

    return build


def index_reduce(gen):
    return [
        dict(
            self=randn(gen, 5, 3),
            dim=0,
            index=torch.tensor([0, 2, 2, 4]),
            source=randn(gen, 4, 3),
            reduce=r,
            include_self=i,
        )
        for r, i in (("prod", True), ("mean", False), ("amax", True), ("amin", False))
    ]


_CORE = "native_functions.yaml schema and the op's torch docs"
# fmt: off
CONTRACTS = (
    Contract(("aten::sym_size.int", "aten::sym_stride.int"), sym_dims,
             "sym_size/sym_stride(self, dim): Tensor.size/stride docs; c10/core/TensorImpl.h sym_sizes/sym_strides"),
    Contract(("aten::sym_numel", "aten::sym_storage_offset"), sym_whole,
             "sym_numel/sym_storage_offset: Tensor.numel/storage_offset docs; c10/core/TensorImpl.h"),
    Contract(("aten::sym_is_contiguous",), sym_contiguous,
             "sym_is_contiguous(self, memory_format): Tensor.is_contiguous docs; c10/core/TensorImpl.h"),
    Contract(("aten::div.Scalar_mode", "aten::div.Scalar_mode_out", "aten::div_.Scalar_mode"), div_scalar,
             "div(self, other, rounding_mode None / trunc / floor): torch.div docs"),
    Contract(("aten::div_.Tensor_mode",), div_tensor_inplace, "div_(self, other broadcast to self): torch.div docs"),
    Contract(("aten::select_scatter", "aten::select_scatter.out"), select_scatter,
             "select_scatter: src has self's shape without dim: torch.select_scatter docs"),
    Contract(("aten::var.dim",), var_dim, "var(self, dim, unbiased, keepdim): torch.var docs"),
    Contract(("aten::_fused_adam", "aten::_fused_adam_", "aten::_fused_adam.out", "aten::_fused_adamw",
              "aten::_fused_adamw_", "aten::_fused_adamw.out"), adam(False),
             "_fused_adam(w): lists of one shape per parameter, float32 0-dim state_steps, max_exp_avg_sqs when "
             "amsgrad: torch/optim/adam.py (_fused_adam); aten/src/ATen/native/FusedAdam.cpp"),
    Contract(("aten::_fused_adam.tensor_lr", "aten::_fused_adam_.tensor_lr", "aten::_fused_adam.tensor_lr_out",
              "aten::_fused_adamw.tensor_lr", "aten::_fused_adamw_.tensor_lr", "aten::_fused_adamw.tensor_lr_out"),
             adam(True), "as _fused_adam, lr a 0-dim tensor: torch/optim/adam.py; FusedAdam.cpp"),
    Contract(("aten::_fused_sgd", "aten::_fused_sgd_", "aten::_fused_sgd.out"), sgd(False),
             "_fused_sgd: momentum buffers of the parameters' shapes: torch/optim/sgd.py; FusedSGD.cpp"),
    Contract(("aten::_fused_sgd.tensor_lr", "aten::_fused_sgd_.tensor_lr", "aten::_fused_sgd.tensor_lr_out"),
             sgd(True), "as _fused_sgd, lr a 0-dim tensor: torch/optim/sgd.py; FusedSGD.cpp"),
    Contract(("aten::_amp_update_scale", "aten::_amp_update_scale_", "aten::_amp_update_scale.out"), amp_update_scale,
             "_amp_update_scale_(scale (1), growth_tracker int32 (1), found_inf (1)): torch/amp/grad_scaler.py; "
             "aten/src/ATen/native/AmpKernels.cpp"),
    Contract(("aten::_amp_foreach_non_finite_check_and_unscale_", "aten::_amp_foreach_non_finite_check_and_unscale",
              "aten::_amp_foreach_non_finite_check_and_unscale.out"), amp_unscale,
             "grads (list), found_inf (1), inv_scale (1): torch/amp/grad_scaler.py; AmpKernels.cpp"),
    Contract(("aten::_int_mm", "aten::_int_mm.out"), int_mm, "_int_mm: int8 x int8 -> int32: LinearAlgebra.cpp "
             "(its out= kernel checks the out's sizes, it does not resize)", sized_outs=True),
    Contract(("aten::_scaled_mm_v2", "aten::_scaled_mm_v2.out"), scaled_mm_v2,
             "_scaled_mm_v2: float8 operands (mat2 column-major), tensor-wise or row-wise float32 scales in lists "
             "with their recipes: aten/src/ATen/native/Blas.cpp, torch.nn.functional.scaled_mm docs"),
    Contract(("aten::_scaled_mm", "aten::_scaled_mm.out"), scaled_mm,
             "_scaled_mm: float8 operands (mat2 column-major), scalar float32 scales: aten/src/ATen/native/Blas.cpp"),
    Contract(("aten::_grouped_mm",), grouped_mm, "_grouped_mm 2d x 3d with offs: aten/src/ATen/native/GroupedMMUtils.h"),
    Contract(("aten::_pack_padded_sequence", "aten::_pack_padded_sequence.out"), pack_padded,
             "_pack_padded_sequence(input (T, B, *) or batch_first, lengths CPU int64 (B) decreasing): "
             "aten/src/ATen/native/PackedSequence.cpp; batch_sizes is made with lengths' options: a CPU "
             "tensor on every device", cpu_args=("lengths", "out1"), cpu_outputs=(1,)),
    Contract(("aten::_native_multi_head_attention", "aten::_native_multi_head_attention.out"), mha,
             "_native_multi_head_attention(q/k/v (B, L, E), qkv_weight (3E, E), proj (E, E)): "
             "aten/src/ATen/native/transformers/attention.cpp"),
    Contract(("aten::_transformer_encoder_layer_fwd", "aten::_transformer_encoder_layer_fwd.out"), encoder_layer,
             "_transformer_encoder_layer_fwd: as MHA plus LayerNorm (E) and FFN (F, E)/(E, F): transformer.cpp"),
    Contract(("aten::segment_reduce.out",), segment_reduce,
             "segment_reduce(data, reduce, lengths summing to data.size(axis) or offsets): SegmentReduce.cpp"),
    Contract(("aten::_segment_reduce_backward.out",), segment_reduce_backward,
             "_segment_reduce_backward: output of the forward: aten/src/ATen/native/SegmentReduce.cpp"),
    Contract(("aten::_compute_linear_combination", "aten::_compute_linear_combination.out"), linear_combination,
             "_compute_linear_combination(input (n, *), coefficients (m, n)) -> (m, *): LinearAlgebra.cpp "
             "(its out= kernel adds into the out without resizing it)", sized_outs=True),
    Contract(("aten::addmm_",), blas_inplace("addmm"), "addmm_: self (n, p), mat1 (n, m), mat2 (m, p): torch.addmm docs"),
    Contract(("aten::addmv_",), blas_inplace("addmv"), "addmv_: self (n), mat (n, m), vec (m): torch.addmv docs"),
    Contract(("aten::addr_",), blas_inplace("addr"), "addr_: self (n, m), vec1 (n), vec2 (m): torch.addr docs"),
    Contract(("aten::baddbmm_",), blas_inplace("baddbmm"), "baddbmm_: (b, n, p), (b, n, m), (b, m, p): torch.baddbmm docs"),
    Contract(("aten::_addmm_activation", "aten::_addmm_activation.out"), addmm_activation,
             "_addmm_activation: addmm then relu or gelu: aten/src/ATen/native/LinearAlgebra.cpp"),
    Contract(("aten::glu_jvp", "aten::glu_jvp.out"), glu_jvp, "glu_jvp(glu of x, x, dx, dim): FunctionsManual.cpp"),
    Contract(("aten::glu_backward_jvp", "aten::glu_backward_jvp.out"), glu_backward_jvp,
             "glu_backward_jvp: grad_x = glu_backward(grad_glu, x, dim): FunctionsManual.cpp"),
    Contract(("aten::scatter_reduce_.two",), scatter_reduce_inplace,
             "scatter_reduce_(self, dim, index of src's shape, src, reduce, include_self): torch.Tensor.scatter_reduce_ docs"),
    Contract(("aten::scatter_.reduce",), scatter_reduce_legacy(False), "scatter_(reduce add / multiply): Tensor.scatter_ docs"),
    Contract(("aten::scatter_.value_reduce",), scatter_reduce_legacy(True), "scatter_(value, reduce): Tensor.scatter_ docs"),
    Contract(("aten::index_reduce_",), index_reduce,
             "index_reduce_(self, dim, index (len source.size(dim)), source, reduce): Tensor.index_reduce_ docs"),
    Contract(("aten::cholesky_solve", "aten::cholesky_solve.out"),
             lambda gen: [dict(self=randn(gen, 3, 2), input2=torch.linalg.cholesky(_spd(gen, 3)), upper=False)],
             "cholesky_solve(B (n, k), L (n, n) lower Cholesky factor): torch.cholesky_solve docs"),
    Contract(("aten::mv", "aten::mv.out"), lambda gen: [dict(self=randn(gen, 3, 5), vec=randn(gen, 5))], _CORE),
    Contract(("aten::clamp_",), lambda gen: [dict(self=randn(gen, 3, 4), min=-0.5, max=0.5)], "torch.clamp docs"),
    Contract(("aten::clamp_.Tensor",), lambda gen: [dict(self=randn(gen, 3, 4), min=randn(gen, 4) - 1, max=randn(gen, 3, 1) + 1)],
             "torch.clamp docs: min/max broadcast to self"),
    Contract(("aten::index_fill.int_Tensor", "aten::index_fill.int_Tensor_out"),
             lambda gen: [dict(self=randn(gen, 3, 4), dim=1, index=torch.tensor([0, 2]), value=torch.tensor(1.5))],
             "index_fill(self, dim, index, value 0-dim): Tensor.index_fill_ docs"),
    Contract(("aten::diagonal_backward", "aten::diagonal_backward.out"),
             lambda gen: [dict(grad_output=randn(gen, 3), input_sizes=[3, 4], offset=1, dim1=0, dim2=1)],
             "diagonal_backward: grad_output of the diagonal's length (torch.diagonal docs)"),
    Contract(("aten::diagonal_scatter", "aten::diagonal_scatter.out"),
             lambda gen: [dict(self=randn(gen, 3, 4), src=randn(gen, 3), offset=1)], "torch.diagonal_scatter docs"),
    Contract(("aten::select_backward", "aten::select_backward.out"),
             lambda gen: [dict(grad_output=randn(gen, 3, 5), input_sizes=[3, 4, 5], dim=1, index=2)],
             "select_backward: grad_output of self's shape without dim (torch.select docs)"),
    Contract(("aten::norm.ScalarOpt_dim_dtype", "aten::norm.dtype_out"),
             lambda gen: [dict(self=randn(gen, 3, 4), p=3, dim=[1], keepdim=False, dtype=torch.float64)], "torch.norm docs"),
    Contract(("aten::norm.ScalarOpt_dtype", "aten::norm.ScalarOpt_dtype_out"),
             lambda gen: [dict(self=randn(gen, 3, 4), p=1, dtype=torch.float64)], "torch.norm docs"),
    Contract(("aten::embedding_dense_backward.out",),
             lambda gen: [dict(grad_output=randn(gen, 5, 3), indices=index(gen, 7, 5), num_weights=7, padding_idx=-1,
                               scale_grad_by_freq=False)], "embedding_dense_backward: indices < num_weights (torch.nn.Embedding)"),
    Contract(("aten::view_as_real_copy", "aten::view_as_real_copy.out"),
             lambda gen: [dict(self=randn(gen, 3, 4, dtype=torch.complex64))], "torch.view_as_real docs: complex input"),
    Contract(("aten::view_as_complex_copy", "aten::view_as_complex_copy.out"),
             lambda gen: [dict(self=randn(gen, 3, 4, 2))], "torch.view_as_complex docs: last dim of size 2"),
    Contract(("aten::_conj_copy", "aten::_conj_copy.out"),
             lambda gen: [dict(self=randn(gen, 3, 4, dtype=torch.complex64))], "torch.conj docs: complex input"),
    Contract(("aten::linalg_matrix_exp.out",), lambda gen: [dict(self=randn(gen, 3, 3) * 0.5)],
             "torch.linalg.matrix_exp docs: square matrices"),
)
# fmt: on
"""The contracts of this module (see :class:`neuron_conformance.opsuites.contracts.registry.Contract`)."""

__all__ = ["CONTRACTS"]
