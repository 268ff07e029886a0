"""Shape contracts of normalization, embedding-bag, weight-norm and loss overloads (:mod:`neuron_conformance.opsuites.contracts.registry`).

Sizes used throughout: a batch ``N = 2`` of ``C = 6`` channels over ``4 x 5`` pixels (``HxW = 20``),
three groups for group norm. Auxiliary inputs a backward needs (saved mean and inverse standard deviation,
``offset2bag``, ``log_alpha``...) are computed on the CPU from their definition or by the CPU forward,
never by the device under test. Each contract's ``source`` names the schema line and kernel file of its
size checks (``aten/src/ATen/native/...`` of PyTorch 2.13).
"""

from __future__ import annotations

import torch

from neuron_conformance.opsuites.contracts.registry import Contract, index, positive, randn

N, C, H, W, G = 2, 6, 4, 5, 3
EPS = 1e-5
_STATS = "(input (N, C, *), weight/bias/running stats (C)): aten/src/ATen/native/Normalization.cpp"


def _bn(gen):
    return dict(
        input=randn(gen, N, C, H, W),
        weight=positive(gen, C),
        bias=randn(gen, C),
        running_mean=randn(gen, C) * 0.1,
        running_var=positive(gen, C),
    )


def _batch_stats(x):
    """Per-channel mean and biased inverse standard deviation of ``x`` (N, C, *): the statistics
    ``native_batch_norm`` saves in training mode (torch.nn.BatchNorm2d docs: biased variance)."""
    dims = [0, *range(2, x.dim())]
    mean = x.mean(dims)
    return mean, 1.0 / torch.sqrt(x.var(dims, unbiased=False) + EPS)


def native_batch_norm(gen):
    return [dict(**_bn(gen), training=t, momentum=0.1, eps=EPS) for t in (True, False)]


def legit(gen):
    return [dict(**_bn(gen), training=True, momentum=0.1, eps=EPS)]


def legit_no_stats(gen):
    b = _bn(gen)
    return [dict(input=b["input"], weight=b["weight"], bias=b["bias"], training=True, momentum=0.1, eps=EPS)]


def no_training(gen):
    return [dict(**_bn(gen), momentum=0.1, eps=EPS)]


def with_update(gen):
    return [dict(**_bn(gen), momentum=0.1, eps=EPS)]


def native_bn_backward(gen):
    b = _bn(gen)
    mean, invstd = _batch_stats(b["input"])
    train = dict(
        grad_out=randn(gen, N, C, H, W),
        input=b["input"],
        weight=b["weight"],
        running_mean=b["running_mean"],
        running_var=b["running_var"],
        save_mean=mean,
        save_invstd=invstd,
        train=True,
        eps=EPS,
        output_mask=[True, True, True],
    )
    return [train, {**train, "train": False, "save_mean": None, "save_invstd": None}]


def bn_backward(gen):
    b = _bn(gen)
    mean, invstd = _batch_stats(b["input"])
    return [
        dict(
            grad_out=randn(gen, N, C, H, W),
            input=b["input"],
            weight=b["weight"],
            running_mean=b["running_mean"],
            running_var=b["running_var"],
            save_mean=mean,
            save_var=invstd,
            update=True,
            eps=EPS,
            output_mask=[True, True, True],
            reserve=torch.empty(0, dtype=torch.uint8),
        )
    ]


def group_norm(gen):
    return [
        dict(
            input=randn(gen, N, C, H, W),
            weight=positive(gen, C),
            bias=randn(gen, C),
            N=N,
            C=C,
            HxW=H * W,
            group=G,
            eps=EPS,
        )
    ]


def group_norm_backward(gen):
    x = randn(gen, N, C, H, W)
    groups = x.reshape(N, G, -1)  # torch.nn.GroupNorm docs: statistics per (sample, group), biased variance
    mean, rstd = groups.mean(-1), 1.0 / torch.sqrt(groups.var(-1, unbiased=False) + EPS)
    return [
        dict(
            grad_out=randn(gen, N, C, H, W),
            input=x,
            mean=mean,
            rstd=rstd,
            weight=positive(gen, C),
            N=N,
            C=C,
            HxW=H * W,
            group=G,
            output_mask=[True, True, True],
        )
    ]


def layer_norm(gen):
    x = randn(gen, N, C, W)
    return [
        dict(input=x, normalized_shape=[W], weight=positive(gen, W), bias=randn(gen, W), eps=EPS),
        dict(input=x, normalized_shape=[C, W], weight=None, bias=None, eps=EPS),
    ]


def layer_norm_backward(gen):
    x = randn(gen, N, C, W)
    mean = x.mean(-1, keepdim=True)  # torch.nn.LayerNorm docs: over the last normalized_shape dims, biased
    rstd = 1.0 / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + EPS)
    return [
        dict(
            grad_out=randn(gen, N, C, W),
            input=x,
            normalized_shape=[W],
            mean=mean,
            rstd=rstd,
            weight=positive(gen, W),
            bias=randn(gen, W),
            output_mask=[True, True, True],
        )
    ]


NUM_WEIGHTS, DIM = 10, 3
_OFFSETS = torch.tensor([0, 2, 5])  # three bags over 8 indices: sizes 2, 3, 3 (torch.nn.EmbeddingBag docs)


def _bag(gen, mode):
    weight = randn(gen, NUM_WEIGHTS, DIM)
    indices = index(gen, NUM_WEIGHTS, 8)
    psw = randn(gen, 8) if mode == 0 else None  # per_sample_weights: mode 'sum' only
    return dict(weight=weight, indices=indices, offsets=_OFFSETS.clone(), mode=mode, per_sample_weights=psw)


def embedding_bag(gen):
    return [_bag(gen, mode) for mode in (0, 1, 2)]


def _bag_saved(gen, mode):
    b = _bag(gen, mode)
    _, offset2bag, bag_size, max_idx = torch.ops.aten._embedding_bag(  # the CPU forward's saved tensors
        b["weight"], b["indices"], b["offsets"], False, mode, False, b["per_sample_weights"]
    )
    return b, offset2bag, bag_size, max_idx


def embedding_bag_backward(gen):
    out = []
    for mode in (0, 1, 2):
        b, offset2bag, bag_size, max_idx = _bag_saved(gen, mode)
        out.append(
            dict(
                grad=randn(gen, 3, DIM),
                indices=b["indices"],
                offsets=b["offsets"],
                offset2bag=offset2bag,
                bag_size=bag_size,
                maximum_indices=max_idx,
                num_weights=NUM_WEIGHTS,
                scale_grad_by_freq=False,
                mode=mode,
                sparse=False,
                per_sample_weights=b["per_sample_weights"],
            )
        )
    return out


_OFFSET2BAG = torch.tensor([0, 0, 1, 1, 1, 2, 2, 2])  # the bag of each index, by _OFFSETS' definition


def embedding_bag_dense_backward(gen):
    """As :func:`embedding_bag_backward`; ``offset2bag`` by definition (the CPU forward leaves it empty
    on its fast path for mode sum, which the dense backward does not recompute)."""
    return [
        {**{k: v for k, v in d.items() if k not in ("offsets", "sparse")}, "offset2bag": _OFFSET2BAG.clone()}
        for d in embedding_bag_backward(gen)
    ]


def embedding_bag_psw_backward(gen):
    b = _bag(gen, 0)
    return [
        dict(
            grad=randn(gen, 3, DIM),
            weight=b["weight"],
            indices=b["indices"],
            offsets=b["offsets"],
            offset2bag=_OFFSET2BAG.clone(),
            mode=0,
        )
    ]


def weight_norm(gen):
    return [
        dict(v=randn(gen, 4, 3), g=positive(gen, 4, 1), dim=0),
        dict(v=randn(gen, 4, 3), g=positive(gen, 1, 3), dim=1),
    ]


def weight_norm_backward(gen):
    v, g = randn(gen, 4, 3), positive(gen, 4, 1)
    return [dict(grad_w=randn(gen, 4, 3), saved_v=v, saved_g=g, saved_norms=v.norm(dim=1, keepdim=True), dim=0)]


T, S, K = 6, 3, 5  # CTC: input length, target length, classes (blank 0)


def _ctc(gen, full=False):
    log_probs = torch.log_softmax(randn(gen, T, N, K), -1)
    targets = torch.randint(1, K, (N, S), generator=gen)
    return log_probs, targets, [T, T] if full else [T, T - 1], [S, S] if full else [S, S - 1]


def ctc(gen):
    """Full lengths: the CPU forward allocates log_alpha (N, T, 2 S + 1) uninitialised and writes only the
    steps and states within each sample's lengths (LossCTC.cpp), so shorter ones leave undefined values."""
    lp, tg, il, tl = _ctc(gen, full=True)
    return [dict(log_probs=lp, targets=tg, input_lengths=il, target_lengths=tl, blank=0)]


def ctc_tensor(gen):
    lp, tg, il, tl = _ctc(gen, full=True)
    return [dict(log_probs=lp, targets=tg, input_lengths=torch.tensor(il), target_lengths=torch.tensor(tl), blank=0)]


def ctc_backward(gen):
    lp, tg, il, tl = _ctc(gen)
    nll, alpha = torch.ops.aten._ctc_loss(lp, tg, il, tl, 0)  # the CPU forward's saved tensors
    return [
        dict(
            grad=positive(gen, N),
            log_probs=lp,
            targets=tg,
            input_lengths=il,
            target_lengths=tl,
            neg_log_likelihood=nll,
            log_alpha=alpha,
            blank=0,
        )
    ]


def ctc_backward_tensor(gen):
    d = ctc_backward(gen)[0]
    return [
        {**d, "input_lengths": torch.tensor(d["input_lengths"]), "target_lengths": torch.tensor(d["target_lengths"])}
    ]


def bce(gen):
    return [
        dict(
            self=torch.rand(N, C, generator=gen) * 0.98 + 0.01,
            target=torch.rand(N, C, generator=gen),
            weight=positive(gen, N, C),
            reduction=0,
        )
    ]  # out=: the CPU kernel writes per element first


def bce_backward(gen):
    return [dict(grad_output=positive(gen, N, C), **bce(gen)[0])]


def bce_logits(gen):
    return [
        dict(
            self=randn(gen, N, C),
            target=torch.rand(N, C, generator=gen),
            weight=positive(gen, C),
            pos_weight=positive(gen, C),
            reduction=r,
        )
        for r in (0, 1)
    ]


def multi_margin(gen):
    return [dict(self=randn(gen, 4, C), target=index(gen, C, 4), weight=positive(gen, C))]


def multi_margin_backward(gen):
    d = multi_margin(gen)[0]
    return [
        dict(grad_output=torch.tensor(1.5), self=d["self"], target=d["target"], p=1, margin=1.0, weight=d["weight"])
    ]


def multilabel_margin_backward(gen):
    x = randn(gen, 4, C)
    target = torch.tensor([[3, 0, -1, 1, 2, 5], [1, -1, 2, 0, 0, 0], [5, 4, 3, -1, 0, 0], [0, 1, 2, 3, 4, 5]])
    is_target = torch.zeros(4, C)  # torch.nn.MultiLabelMarginLoss docs: targets before the first -1
    for r in range(4):
        for t in target[r]:
            if t < 0:
                break
            is_target[r, t] = 1
    return [dict(grad_output=torch.tensor(1.0), self=x, target=target, reduction=1, is_target=is_target)]


def nll2d(gen):
    return [
        dict(
            self=torch.log_softmax(randn(gen, N, C, H, W), 1),
            target=index(gen, C, N, H, W),
            weight=positive(gen, C),
            reduction=1,
            ignore_index=2,
        )
    ]


def nll2d_backward(gen):
    d = nll2d(gen)[0]
    _, total = torch.ops.aten.nll_loss2d_forward(d["self"], d["target"], d["weight"], 1, 2)
    return [dict(grad_output=torch.tensor(1.0), **d, total_weight=total)]


_NORM = "native_functions.yaml native_batch_norm " + _STATS
CONTRACTS = (
    Contract(("aten::native_batch_norm", "aten::native_batch_norm.out"), native_batch_norm, _NORM),
    Contract(
        (
            "aten::_native_batch_norm_legit",
            "aten::_native_batch_norm_legit.out",
            "aten::_native_batch_norm_legit_functional",
        ),
        legit,
        _NORM,
    ),
    Contract(
        ("aten::_native_batch_norm_legit.no_stats", "aten::_native_batch_norm_legit.no_stats_out"),
        legit_no_stats,
        _NORM,
    ),
    Contract(
        ("aten::_native_batch_norm_legit_no_training", "aten::_native_batch_norm_legit_no_training.out"),
        no_training,
        _NORM,
    ),
    Contract(
        (
            "aten::_batch_norm_with_update",
            "aten::_batch_norm_with_update.out",
            "aten::_batch_norm_with_update_functional",
        ),
        with_update,
        _NORM,
    ),
    Contract(("aten::_batch_norm_no_update", "aten::_batch_norm_no_update.out"), with_update, _NORM),
    Contract(
        ("aten::native_batch_norm_backward", "aten::native_batch_norm_backward.out"),
        native_bn_backward,
        "native_batch_norm_backward: save_mean/save_invstd (C) of the batch when train " + _STATS,
    ),
    Contract(
        ("aten::batch_norm_backward",),
        bn_backward,
        "batch_norm_backward: as native_batch_norm_backward, reserve empty on CPU " + _STATS,
    ),
    Contract(
        ("aten::native_group_norm", "aten::native_group_norm.out"),
        group_norm,
        "native_group_norm(input (N, C, HxW...), weight/bias (C), N, C, HxW, group | C): "
        "aten/src/ATen/native/group_norm.cpp",
    ),
    Contract(
        ("aten::native_group_norm_backward", "aten::native_group_norm_backward.out"),
        group_norm_backward,
        "native_group_norm_backward: mean/rstd (N, group): aten/src/ATen/native/group_norm.cpp",
    ),
    Contract(
        ("aten::native_layer_norm", "aten::native_layer_norm.out"),
        layer_norm,
        "native_layer_norm: input's trailing dims == normalized_shape == weight/bias shape: layer_norm.cpp",
    ),
    Contract(
        ("aten::native_layer_norm_backward", "aten::native_layer_norm_backward.out"),
        layer_norm_backward,
        "native_layer_norm_backward: mean/rstd of the leading dims, keepdim: aten/src/ATen/native/layer_norm.cpp",
    ),
    Contract(
        (
            "aten::_embedding_bag",
            "aten::_embedding_bag.out",
            "aten::_embedding_bag_forward_only",
            "aten::_embedding_bag_forward_only.out",
        ),
        embedding_bag,
        "_embedding_bag(weight (num_weights, dim), indices (n), offsets (bags) increasing from 0, "
        "per_sample_weights (n) for mode sum): aten/src/ATen/native/EmbeddingBag.cpp",
    ),
    Contract(
        ("aten::_embedding_bag_backward",),
        embedding_bag_backward,
        "_embedding_bag_backward: offset2bag/bag_size/maximum_indices of the forward: EmbeddingBag.cpp",
    ),
    Contract(
        ("aten::_embedding_bag_dense_backward", "aten::_embedding_bag_dense_backward.out"),
        embedding_bag_dense_backward,
        "_embedding_bag_dense_backward: as _embedding_bag_backward: EmbeddingBag.cpp",
    ),
    Contract(
        ("aten::_embedding_bag_per_sample_weights_backward", "aten::_embedding_bag_per_sample_weights_backward.out"),
        embedding_bag_psw_backward,
        "_embedding_bag_per_sample_weights_backward: mode sum only: EmbeddingBag.cpp",
    ),
    Contract(
        ("aten::_weight_norm_interface", "aten::_weight_norm_interface.out"),
        weight_norm,
        "_weight_norm_interface(v, g, dim): g has v's size at dim and 1 elsewhere: WeightNorm.cpp",
    ),
    Contract(
        ("aten::_weight_norm_interface_backward", "aten::_weight_norm_interface_backward.out"),
        weight_norm_backward,
        "_weight_norm_interface_backward: saved_norms = ||v|| over the other dims: WeightNorm.cpp",
    ),
    Contract(
        ("aten::_ctc_loss", "aten::_ctc_loss.out"),
        ctc,
        "_ctc_loss(log_probs (T, N, C), targets (N, S), lengths (N) <= T / S): aten/src/ATen/native/LossCTC.cpp",
    ),
    Contract(("aten::_ctc_loss.Tensor", "aten::_ctc_loss.Tensor_out"), ctc_tensor, "as _ctc_loss, lengths as tensors"),
    Contract(
        ("aten::_ctc_loss_backward", "aten::_ctc_loss_backward.out"),
        ctc_backward,
        "_ctc_loss_backward: neg_log_likelihood and log_alpha of the forward: LossCTC.cpp",
    ),
    Contract(("aten::_ctc_loss_backward.Tensor",), ctc_backward_tensor, "as _ctc_loss_backward, lengths as tensors"),
    Contract(
        ("aten::binary_cross_entropy.out",),
        bce,
        sized_outs=True,
        source="binary_cross_entropy: self in [0, 1], target and weight of self's shape: aten/src/ATen/native/Loss.cpp",
    ),
    Contract(
        ("aten::binary_cross_entropy_backward.grad_input",),
        bce_backward,
        sized_outs=True,
        source="as binary_cross_entropy: Loss.cpp",
    ),
    Contract(
        ("aten::binary_cross_entropy_with_logits", "aten::binary_cross_entropy_with_logits.out"),
        bce_logits,
        "binary_cross_entropy_with_logits: weight/pos_weight broadcast over the class dim: Loss.cpp",
    ),
    Contract(
        ("aten::multi_margin_loss.out",),
        multi_margin,
        "multi_margin_loss(self (N, C), target (N) in [0, C), weight (C)): LossMultiMargin.cpp",
    ),
    Contract(("aten::multi_margin_loss_backward.grad_input",), multi_margin_backward, "as multi_margin_loss"),
    Contract(
        ("aten::multilabel_margin_loss_backward.grad_input",),
        multilabel_margin_backward,
        "multilabel_margin_loss: target (N, C), labels before the first -1; is_target of the forward: "
        "LossMultiLabelMargin.cpp",
    ),
    Contract(
        ("aten::nll_loss2d_forward.output",),
        nll2d,
        "nll_loss2d(self (N, C, H, W), target (N, H, W) in [0, C), weight (C)): LossNLL2d.cpp",
    ),
    Contract(
        ("aten::nll_loss2d_backward.grad_input",), nll2d_backward, "nll_loss2d_backward: total_weight of the forward"
    ),
)
"""The contracts of this module (see :class:`neuron_conformance.opsuites.contracts.registry.Contract`)."""

__all__ = ["CONTRACTS"]
