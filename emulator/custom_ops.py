"""The emulated device's custom ops (NKI-style kernels): fused RMSNorm, rotary embedding, attention.

Each op is defined with ``torch.library.custom_op`` in the ``neuron_ops`` namespace with a kernel for the
device type ``neuron`` only (the PrivateUse1 key), a fake kernel (``register_fake``: output metadata with
no data, what ``torch.compile`` and FakeTensor tracing call) and an autograd formula
(``register_autograd``: a hand-written backward, as a vendor's fused kernel has). The device kernels
compute half-precision inputs in float32 and round the result once, as fused kernels do.

They are declared to the harness in :data:`CUSTOM_OPS` (the backend module's ``CONFORMANCE_CUSTOM_OPS``,
as plain mappings) with a CPU reference written from each op's definition, not from its
kernel. The kernel, fake and backward functions are public so a fault test can swap exactly one of them
(``tests/faults/custom_op_backend.py``).

Sources of the formulas: RMSNorm (Zhang & Sennrich 2019, ``y = x / sqrt(mean(x^2) + eps) * w``), rotary
embedding (Su et al. 2021, the ``rotate_half`` form of Hugging Face's Llama), scaled dot-product attention
(Vaswani et al. 2017; the causal mask keeps key ``j <= i``).
"""

from __future__ import annotations

import math

import torch

NAMESPACE = "neuron_ops"
"""The ``torch.library`` namespace of the emulated device's custom ops."""


def _up(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float32 when it is a half type (bfloat16/float16), else unchanged."""
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t


# --- RMSNorm --------------------------------------------------------------------------------------------


def rms_norm_kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Fused RMSNorm over the last dimension: ``x * rsqrt(mean(x^2, -1) + eps) * weight`` (dtype of ``x``)."""
    xf = _up(x)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * rstd * _up(weight)).to(x.dtype)


def rms_norm_fake(x, weight, eps):
    """Output metadata of :func:`rms_norm_kernel`: the shape and dtype of ``x``."""
    return torch.empty_like(x)


def rms_norm_setup(ctx, inputs, output):
    """Save ``x`` and ``weight`` and ``eps`` for :func:`rms_norm_backward`."""
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def rms_norm_backward(ctx, grad):
    """``(dx, dweight, None)``: ``dx = r * (g*w - x * r^2 * mean(g*w*x))``, ``dw = sum(g * x * r)`` over
    the leading dimensions, with ``r = rsqrt(mean(x^2) + eps)``."""
    x, weight = ctx.saved_tensors
    xf, wf, gf = _up(x), _up(weight), _up(grad)
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + ctx.eps)
    gw = gf * wf
    dx = rstd * (gw - xf * rstd.pow(2) * (gw * xf).mean(-1, keepdim=True))
    dw = (gf * xf * rstd).reshape(-1, x.shape[-1]).sum(0)
    return dx.to(x.dtype), dw.to(weight.dtype), None


def rms_norm_reference(x, weight, eps):
    """CPU reference of ``neuron_ops::rms_norm`` from its definition (differentiable, any float dtype)."""
    xf = _up(x)
    return (xf / torch.sqrt((xf * xf).mean(-1, keepdim=True) + eps) * _up(weight)).to(x.dtype)


# --- rotary embedding -----------------------------------------------------------------------------------


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotate_half_t(u: torch.Tensor) -> torch.Tensor:
    """The transpose of :func:`_rotate_half` (its inverse): ``(u1, u2) -> (u2, -u1)``."""
    u1, u2 = u.chunk(2, dim=-1)
    return torch.cat((u2, -u1), dim=-1)


def rotary_kernel(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding: ``x * cos + rotate_half(x) * sin`` (``cos``/``sin`` broadcast to ``x``)."""
    xf = _up(x)
    return (xf * _up(cos) + _rotate_half(xf) * _up(sin)).to(x.dtype)


def rotary_fake(x, cos, sin):
    """Output metadata of :func:`rotary_kernel`: the shape and dtype of ``x``."""
    return torch.empty_like(x)


def rotary_setup(ctx, inputs, output):
    """Save ``cos`` and ``sin`` for :func:`rotary_backward`."""
    _x, cos, sin = inputs
    ctx.save_for_backward(cos, sin)


def rotary_backward(ctx, grad):
    """``(dx, None, None)``: ``dx = g * cos + rotate_half^T(g * sin)`` (the tables are not differentiated)."""
    cos, sin = ctx.saved_tensors
    gf = _up(grad)
    dx = gf * _up(cos) + _rotate_half_t(gf * _up(sin))
    return dx.to(grad.dtype), None, None


def rotary_reference(x, cos, sin):
    """CPU reference of ``neuron_ops::rotary`` (the ``rotate_half`` form)."""
    x1, x2 = _up(x).chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    return (_up(x) * _up(cos) + rotated * _up(sin)).to(x.dtype)


# --- attention ------------------------------------------------------------------------------------------


def _probabilities(q, k, scale: float, causal: bool) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) * scale
    if causal:
        n, m = scores.shape[-2:]
        keep = torch.ones(n, m, dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1)


def attention_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool) -> torch.Tensor:
    """Attention ``softmax(q k^T * scale [+ causal mask]) v`` over ``(..., L, E)`` inputs, in float32."""
    qf, kf, vf = _up(q), _up(k), _up(v)
    return (_probabilities(qf, kf, scale, causal) @ vf).to(q.dtype)


def attention_fake(q, k, v, scale, causal):
    """Output metadata of :func:`attention_kernel`: ``q``'s leading shape with ``v``'s last dimension."""
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


def attention_setup(ctx, inputs, output):
    """Save ``q``, ``k``, ``v`` (the probabilities are recomputed in the backward, as flash kernels do)."""
    q, k, v, scale, causal = inputs
    ctx.save_for_backward(q, k, v)
    ctx.scale, ctx.causal = scale, causal


def attention_backward(ctx, grad):
    """``(dq, dk, dv, None, None)`` from the recomputed probabilities ``p``: ``dv = p^T g``,
    ``ds = p * (g v^T - rowsum(g v^T * p))``, ``dq = ds k * scale``, ``dk = ds^T q * scale``."""
    q, k, v = ctx.saved_tensors
    qf, kf, vf, gf = _up(q), _up(k), _up(v), _up(grad)
    p = _probabilities(qf, kf, ctx.scale, ctx.causal)
    dv = p.transpose(-2, -1) @ gf
    dp = gf @ vf.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = ds @ kf * ctx.scale
    dk = ds.transpose(-2, -1) @ qf * ctx.scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None


def attention_reference(q, k, v, scale, causal):
    """CPU reference of ``neuron_ops::attention``: ``torch.nn.functional.scaled_dot_product_attention``."""
    out = torch.nn.functional.scaled_dot_product_attention(_up(q), _up(k), _up(v), is_causal=causal, scale=scale)
    return out.to(q.dtype)


# --- definitions ----------------------------------------------------------------------------------------


def define(qualname: str, kernel, fake, setup, backward, device_type: str = "neuron"):
    """Define the custom op ``qualname`` (``"ns::name"``) with ``kernel`` on ``device_type`` only, its fake
    kernel and autograd formula; returns the ``torch.library.CustomOpDef``. The schema is inferred from
    ``kernel``'s type hints (``torch.library.infer_schema``)."""
    op = torch.library.custom_op(qualname, mutates_args=(), device_types=device_type)(kernel)
    op.register_fake(fake)
    op.register_autograd(backward, setup_context=setup)
    return op


_OPS: dict = {}


def _define_all() -> None:
    if _OPS:
        return
    _OPS["rms_norm"] = define(
        f"{NAMESPACE}::rms_norm", rms_norm_kernel, rms_norm_fake, rms_norm_setup, rms_norm_backward
    )
    _OPS["rotary"] = define(f"{NAMESPACE}::rotary", rotary_kernel, rotary_fake, rotary_setup, rotary_backward)
    _OPS["attention"] = define(
        f"{NAMESPACE}::attention", attention_kernel, attention_fake, attention_setup, attention_backward
    )


_define_all()

FLOAT_DTYPES = ("float32", "bfloat16", "float16")
"""The dtypes the emulated device's custom ops are declared for."""

_SCALE = 1.0 / math.sqrt(16)


def _arg(*shape: int, grad: bool = False) -> dict:
    """A tensor argument of a declared sample (the harness's ``TensorArg`` fields)."""
    return {"shape": shape, "grad": grad}


def _op(name: str, reference, samples: tuple) -> dict:
    return {"name": f"{NAMESPACE}::{name}", "reference": reference, "dtypes": FLOAT_DTYPES, "samples": samples}


CUSTOM_OPS: list[dict] = [
    _op(
        "rms_norm",
        rms_norm_reference,
        ((_arg(2, 5, 64, grad=True), _arg(64, grad=True), 1e-6), (_arg(3, 33, grad=True), _arg(33, grad=True), 1e-5)),
    ),
    _op("rotary", rotary_reference, ((_arg(2, 4, 6, 16, grad=True), _arg(6, 16), _arg(6, 16)),)),
    _op(
        "attention",
        attention_reference,
        (
            (_arg(2, 2, 7, 16, grad=True), _arg(2, 2, 7, 16, grad=True), _arg(2, 2, 7, 16, grad=True), _SCALE, True),
            (_arg(1, 3, 5, 16, grad=True), _arg(1, 3, 9, 16, grad=True), _arg(1, 3, 9, 8, grad=True), _SCALE, False),
        ),
    ),
]
"""The declaration of the emulated device's custom ops, as plain mappings (the backend module's
``CONFORMANCE_CUSTOM_OPS``; the fields are those of the harness's custom-op declaration)."""
