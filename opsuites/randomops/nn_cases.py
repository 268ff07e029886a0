"""Random cases of the nn helpers: dropout, ``rrelu_with_noise`` and the attention overloads with ``dropout_p``.

* ``native_dropout(input, p, train=True)`` returns ``(output, mask)``: ``mask`` is bool, ``output`` is
  ``input * mask / (1 - p)`` (``aten/src/ATen/native/Dropout.cpp``, ``native_dropout_cpu``; the
  ``torch.nn.Dropout`` docs: "the outputs are scaled by a factor of 1/(1-p) during training"), and each
  element is dropped with probability ``p`` (z-test of the number of zeros of the mask).
* ``rrelu_with_noise(self, noise, lower, upper, training=True)``: for ``self < 0`` the noise is drawn from
  ``U(lower, upper)`` and the output is ``self * noise``; elsewhere ``noise = 1`` and the output is
  ``self`` (``torch.nn.RReLU`` docs; ``rrelu_with_noise_out_cpu`` in ``aten/src/ATen/native/Activation.cpp``).
* ``_fused_sdp_choice`` returns an ``SDPBackend`` number (compared with the CPU kernel's, and a usable
  backend; :attr:`neuron_conformance.opsuites.randomops.cases.RandomCase.deterministic`).
  ``_scaled_dot_product_fused_attention_overrideable`` (the attention entry point PyTorch keeps for
  PrivateUse1 backends) has no case: its CPU kernel raises by design, and the aten audit excludes it with
  that reason (:data:`neuron_conformance.conformance.results.aten_audit.EXCLUSIONS`).

Dtypes: ``native_dropout`` in every floating dtype, ``rrelu_with_noise`` in float32, bfloat16 and float64
(the CPU kernels' dtypes, torch 2.13; no float16 rrelu), the attention helpers in float32. Value bounds
are a few ULPs of the dtype (``finfo.eps``), and the mask count's z-test allows the generator's
resolution (:func:`neuron_conformance.opsuites.randomops.stats.resolution`).
"""

from __future__ import annotations

import torch

from neuron_conformance.conformance.verdict.failures import NumericFailure
from neuron_conformance.opsuites.randomops import stats as st
from neuron_conformance.opsuites.randomops.cases import (
    FLOATS,
    N,
    RandomCase,
    dtype_of,
    empty,
    first,
    gen_kw,
    in_range,
    out_like,
    require,
)

P_DROP = 0.4
LOWER, UPPER = 0.1, 0.3
RRELU_DTYPES = ("float32", "bfloat16", "float64")
ULPS = 8
"""Bound of the value checks, in ULPs (``finfo.eps`` times the largest magnitude): the kernels round a
product or quotient once or twice, in the dtype or in float32."""


def _x(device, dtype=torch.float32) -> torch.Tensor:
    """Inputs 1..2 of alternating sign, none zero (``N`` elements, computed in float32, rounded to ``dtype``)."""
    x = torch.linspace(1.0, 2.0, N)
    x[1::2] *= -1
    return x.to(dtype).to(device)


def _dropout_check(what):
    def check(res, args, kwargs):
        out, mask = res
        x = args[0]
        require(what, mask.dtype == torch.bool, f"mask dtype {mask.dtype}, expected torch.bool")
        want = torch.where(mask, x.double() / (1 - P_DROP), torch.zeros_like(x, dtype=torch.float64))
        err = float((out.double() - want).abs().max())
        bound = ULPS * torch.finfo(x.dtype).eps * float(want.abs().max())
        if not err <= bound:
            raise NumericFailure(
                f"{what}: output is not input * mask / (1 - p) (max abs error {err:.3g} > {bound:.3g})",
                fields={"rule": "tolerance", "max_abs": err, "atol": bound, "rtol": 0.0},
            )
        dropped = float((~mask).double().sum())
        return st.z_sum(
            f"{what}: zeros of the mask vs Binomial(n, p={P_DROP})",
            dropped,
            N * P_DROP,
            N * P_DROP * (1 - P_DROP),
            bias=N * st.resolution(x.dtype),
        )

    return check


def _rrelu_check(what, noise_of, dtype):
    def check(res, args, kwargs):
        out, noise = first(res), noise_of(res, args)
        x = _x("cpu", dtype)
        neg = x < 0
        require(what, bool((noise[~neg] == 1).all()), "noise is not 1 where the input is >= 0")
        require(what, bool(torch.equal(out[~neg], x[~neg])), "output differs from the input where it is >= 0")
        err = float((out[neg].double() - x[neg].double() * noise[neg].double()).abs().max())
        bound = ULPS * torch.finfo(dtype).eps * float(x.abs().max())
        if not err <= bound:
            raise NumericFailure(
                f"{what}: output is not input * noise where the input is < 0 (max abs error {err:.3g})",
                fields={"rule": "tolerance", "max_abs": err, "atol": bound, "rtol": 0.0},
            )
        # the bounds as rounded to the dtype (bfloat16 0.1 is 0.10009765625)
        lo, hi = (float(torch.tensor(v, dtype=dtype)) for v in (LOWER, UPPER))
        in_range(what, noise[neg], lo, hi, hi_open=False)
        return st.ks_continuous(
            f"{what} noise vs U({LOWER}, {UPPER})", noise[neg], lambda v: (v - LOWER) / (UPPER - LOWER)
        )

    return check


def _sdp_choice(res, args, kwargs):
    values = {int(b) for b in torch.nn.attention.SDPBackend.__members__.values()}
    require(
        "aten::_fused_sdp_choice",
        isinstance(res, int) and res in values and res >= 0,
        f"returned {res!r}, expected a usable torch.nn.attention.SDPBackend number ({sorted(values)})",
    )
    return {"rule": "support"}


def _qkv(device):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 2, 8, 4, generator=g).to(device) for _ in range(3))


def cases() -> list[RandomCase]:
    """The dropout, rrelu and attention cases, one per overload and dtype."""
    out = []
    for dname in FLOATS:
        dt = dtype_of(dname)
        out2 = lambda d, dt=dt: {"out0": out_like(d, dt), "out1": out_like(d, torch.bool)}  # noqa: E731
        out += [
            RandomCase(
                "aten::native_dropout",
                lambda d, g, dt=dt: ((_x(d, dt), P_DROP, True), {}),
                _dropout_check("aten::native_dropout"),
                dname,
            ),
            RandomCase(
                "aten::native_dropout.out",
                lambda d, g, dt=dt, o=out2: ((_x(d, dt), P_DROP, True), o(d)),
                _dropout_check("aten::native_dropout.out"),
                dname,
            ),
        ]
        # aten::_fused_dropout.out is excluded by the audit: its functional has a CUDA kernel only
    for dname in RRELU_DTYPES:
        dt = dtype_of(dname)
        args = lambda d, dt=dt: (_x(d, dt), empty(d, dt), LOWER, UPPER, True)  # noqa: E731
        out += [
            RandomCase(
                "aten::rrelu_with_noise",
                lambda d, g, a=args: (a(d), gen_kw(g)),
                _rrelu_check("aten::rrelu_with_noise", lambda r, a: a[1], dt),
                dname,
            ),
            # out sized: the CPU kernel does not resize an empty out, it writes past it (SIGSEGV, torch 2.13)
            RandomCase(
                "aten::rrelu_with_noise.out",
                lambda d, g, a=args, dt=dt: (a(d), {**gen_kw(g), "out": empty(d, dt)}),
                _rrelu_check("aten::rrelu_with_noise.out", lambda r, a: a[1], dt),
                dname,
            ),
            RandomCase(
                "aten::rrelu_with_noise_",
                lambda d, g, a=args: (a(d), gen_kw(g)),
                _rrelu_check("aten::rrelu_with_noise_", lambda r, a: a[1], dt),
                dname,
            ),
            RandomCase(
                "aten::rrelu_with_noise_functional",
                lambda d, g, a=args: (a(d), gen_kw(g)),
                _rrelu_check("aten::rrelu_with_noise_functional", lambda r, a: r[1], dt),
                dname,
            ),
        ]
    return [
        *out,
        RandomCase(
            "aten::_fused_sdp_choice", lambda d, g: ((*_qkv(d), None, 0.0, False), {}), _sdp_choice, deterministic=True
        ),
    ]


__all__ = ["LOWER", "P_DROP", "RRELU_DTYPES", "UPPER", "cases"]
