"""Random cases of the nn helpers: dropout, ``rrelu_with_noise`` and the attention overloads with ``dropout_p``.

* ``native_dropout(input, p, train=True)`` returns ``(output, mask)``: ``mask`` is bool, ``output`` is
  ``input * mask / (1 - p)`` (``aten/src/ATen/native/Dropout.cpp``, ``native_dropout_cpu``; the
  ``torch.nn.Dropout`` docs: "the outputs are scaled by a factor of 1/(1-p) during training"), and each
  element is dropped with probability ``p`` (z-test of the number of zeros of the mask).
* ``rrelu_with_noise(self, noise, lower, upper, training=True)``: for ``self < 0`` the noise is drawn from
  ``U(lower, upper)`` and the output is ``self * noise``; elsewhere ``noise = 1`` and the output is
  ``self`` (``torch.nn.RReLU`` docs; ``rrelu_with_noise_out_cpu`` in ``aten/src/ATen/native/Activation.cpp``).
* ``_fused_sdp_choice`` returns an ``SDPBackend`` number (compared with the CPU kernel's, and a usable
  backend); ``_scaled_dot_product_fused_attention_overrideable`` (the attention entry point PyTorch keeps
  for PrivateUse1 backends; its CPU kernel raises, so it ends ``no-reference``) with ``dropout_p = 0`` is
  compared with the CPU kernel by the caller (:attr:`opsuites.random_cases.RandomCase.deterministic`).
"""

from __future__ import annotations

import torch

from conformance.failures import NumericFailure
from opsuites import random_stats as st
from opsuites.random_cases import N, RandomCase, empty, first, gen_kw, in_range, out_like, require, uniform_dist

P_DROP = 0.4
LOWER, UPPER = 0.1, 0.3


def _x(device) -> torch.Tensor:
    """Inputs 1..2 of alternating sign, none zero (float32, ``N`` elements)."""
    x = torch.linspace(1.0, 2.0, N)
    x[1::2] *= -1
    return x.to(device)


def _dropout_check(what):
    def check(res, args, kwargs):
        out, mask = res
        x = args[0]
        require(what, mask.dtype == torch.bool, f"mask dtype {mask.dtype}, expected torch.bool")
        want = torch.where(mask, x / (1 - P_DROP), torch.zeros_like(x))
        err = float((out - want).abs().max())
        bound = 2e-6 * float(want.abs().max())  # a few float32 ULPs of x / (1 - p) (x * scale rounds once more)
        if not err <= bound:
            raise NumericFailure(f"{what}: output is not input * mask / (1 - p) (max abs error {err:.3g} > {bound:.3g})",
                                 fields={"rule": "tolerance", "max_abs": err, "atol": bound, "rtol": 0.0})
        dropped = float((~mask).double().sum())
        return st.z_sum(f"{what}: zeros of the mask vs Binomial(n, p={P_DROP})", dropped, N * P_DROP,
                        N * P_DROP * (1 - P_DROP))
    return check


def _rrelu_check(what, noise_of):
    dist = uniform_dist(LOWER, UPPER)

    def check(res, args, kwargs):
        out, noise = first(res), noise_of(res, args)
        x = _x("cpu")
        neg = x < 0
        require(what, bool((noise[~neg] == 1).all()), "noise is not 1 where the input is >= 0")
        require(what, bool(torch.equal(out[~neg], x[~neg])), "output differs from the input where it is >= 0")
        err = float((out[neg] - x[neg] * noise[neg]).abs().max())
        if not err <= 1e-6 * float(x.abs().max()):
            raise NumericFailure(f"{what}: output is not input * noise where the input is < 0 (max abs error {err:.3g})",
                                 fields={"rule": "tolerance", "max_abs": err, "atol": 1e-6, "rtol": 0.0})
        in_range(what, noise[neg], LOWER, UPPER, hi_open=False)
        return dist(f"{what} noise", noise[neg])
    return check


def _sdp_choice(res, args, kwargs):
    values = {int(b) for b in torch.nn.attention.SDPBackend.__members__.values()}
    require("aten::_fused_sdp_choice", isinstance(res, int) and res in values and res >= 0,
            f"returned {res!r}, expected a usable torch.nn.attention.SDPBackend number ({sorted(values)})")
    return {"rule": "support"}


def _qkv(device):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 2, 8, 4, generator=g).to(device) for _ in range(3))


def cases() -> list[RandomCase]:
    """The dropout, rrelu and attention cases."""
    out2 = lambda d: {"out0": out_like(d), "out1": out_like(d, torch.bool)}  # noqa: E731
    rrelu_args = lambda d: (_x(d), empty(d), LOWER, UPPER, True)  # noqa: E731
    return [
        RandomCase("aten::native_dropout", lambda d, g: ((_x(d), P_DROP, True), {}),
                   _dropout_check("aten::native_dropout")),
        RandomCase("aten::native_dropout.out", lambda d, g: ((_x(d), P_DROP, True), out2(d)),
                   _dropout_check("aten::native_dropout.out")),
        # aten::_fused_dropout.out is excluded by the audit: its functional has a CUDA kernel only
        RandomCase("aten::rrelu_with_noise", lambda d, g: (rrelu_args(d), gen_kw(g)),
                   _rrelu_check("aten::rrelu_with_noise", lambda r, a: a[1])),
        # out sized: the CPU kernel does not resize an empty out, it writes past it (SIGSEGV, torch 2.13)
        RandomCase("aten::rrelu_with_noise.out", lambda d, g: (rrelu_args(d), {**gen_kw(g), "out": empty(d)}),
                   _rrelu_check("aten::rrelu_with_noise.out", lambda r, a: a[1])),
        RandomCase("aten::rrelu_with_noise_", lambda d, g: (rrelu_args(d), gen_kw(g)),
                   _rrelu_check("aten::rrelu_with_noise_", lambda r, a: a[1])),
        RandomCase("aten::rrelu_with_noise_functional", lambda d, g: (rrelu_args(d), gen_kw(g)),
                   _rrelu_check("aten::rrelu_with_noise_functional", lambda r, a: r[1])),
        RandomCase("aten::_fused_sdp_choice", lambda d, g: ((*_qkv(d), None, 0.0, False), {}), _sdp_choice,
                   deterministic=True),
        RandomCase("aten::_scaled_dot_product_fused_attention_overrideable", lambda d, g: (_qkv(d), {}),
                   lambda r, a, k: {}, deterministic=True),
    ]


__all__ = ["LOWER", "P_DROP", "UPPER", "cases"]
