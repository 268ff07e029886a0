"""Statistical checks of random samples against a documented distribution, with bounds from the sample size.

Every check takes CPU tensors, returns the record fields of the statistic it computed (``rule``,
``max_abs`` the statistic, ``atol`` its critical value) and raises
:class:`neuron_conformance.conformance.verdict.failures.NumericFailure` with the same fields when the statistic exceeds its bound.
The bounds are chosen so that a correct generator fails about once in a million tests:

* Kolmogorov-Smirnov (``rule`` ``ks``): ``D_n = sup_x |F_n(x) - F(x)|`` against the asymptotic critical
  value ``sqrt(-ln(alpha / 2) / 2) / sqrt(n)`` at :data:`ALPHA` (Kolmogorov's limit distribution,
  ``P(sqrt(n) D_n > t) <= 2 exp(-2 t^2)``: the Dvoretzky-Kiefer-Wolfowitz inequality with Massart's
  constant, which holds for every ``n`` and every distribution). For a discrete distribution the
  statistic is taken at the support points (where both step functions jump), and the bound holds too.
* z-test (``rule`` ``z-test``): a sum of independent draws against its expectation, in standard
  deviations of that sum; bound :data:`Z_BOUND` = 6 (two-sided normal tail 2e-9; with the
  Berry-Esseen correction still below 1e-6 for the sample sizes used here).

Reduced precision (bfloat16, float16): a draw read back is a rounded value, and generators may quantise
the uniform word they transform to about the dtype's significand (PyTorch's ``uniform_real`` masks it to
``std::numeric_limits<T>::digits`` bits: ``aten/src/ATen/core/TransformationHelper.h``; the CPU's
bfloat16 ``rand`` gives P(x < 0.5) = 0.501 at 2 million draws, beyond its rounding), so a continuous law's
KS bound alone raises false alarms there. The checks take two allowances, each a worst case for a
generator quantised no coarser than the dtype, so that the level stays below :data:`ALPHA`:

* rounding: each value ``r`` read back stands for an exact draw in ``[r-, r+]``, its neighbours in its dtype
  (one ULP either side, :func:`ulp_band`: a correctly rounded result is within half an ULP, a result
  computed in a wider type and rounded a few times within one). ``D+`` is taken at the upper ends and
  ``D-`` at the lower ends, each sorted on its own: ``max_i (i/n - F(hi_(i)))`` and
  ``max_i (F(lo_(i)) - (i-1)/n)`` are at most the KS statistic of the exact draws, whose DKW bound holds.
* resolution: a uniform quantised to ``2^-p`` (``p`` = the dtype's significand bits, :func:`resolution`)
  moves each CDF value by less than ``2^-p``, so the critical value grows by ``2^-p`` (bfloat16: 0.0039,
  float16: 0.00049, float32: 6e-8) and a count of successes by ``n 2^-p`` (:func:`z_sum`'s ``bias``).

For the CPU kernel at 2 million draws the remaining distance to the continuous law is below 0.0023 in
bfloat16 (``uniform_``, ``rand``, ``normal_``, ``exponential_``, ``cauchy_``, ``log_normal_``), under the
0.0039 allowed; a wrong parameter (``exponential_`` with rate 1 instead of 3: D = 0.38) stays far above.

Sizes: n = 20,000 draws give a KS critical value of 0.019, so a wrong parameter (``normal_`` with std 1
instead of 2: D = 0.19; ``bernoulli`` with p 0.5 instead of 0.3: z = 62) is found with a wide margin,
and a test draws in milliseconds.
"""

from __future__ import annotations

import math

import torch

from neuron_conformance.conformance.verdict.failures import NumericFailure

ALPHA = 1e-6
"""Significance level of the KS checks: a correct generator fails one test in a million."""

Z_BOUND = 6.0
"""Bound of the z-tests, in standard deviations (two-sided normal tail probability 2e-9)."""


def ks_critical(n: int, alpha: float = ALPHA) -> float:
    """Critical value of the one-sample KS statistic for ``n`` (> 0) draws at level ``alpha``
    (``sqrt(-ln(alpha/2)/2) / sqrt(n)``: DKW inequality, Massart 1990).

    Raises:
        ValueError: ``n`` < 1 or ``alpha`` not in (0, 1).
    """
    if n < 1 or not 0.0 < alpha < 1.0:
        raise ValueError(f"ks_critical: need n >= 1 and 0 < alpha < 1, got n={n}, alpha={alpha}")
    return math.sqrt(-math.log(alpha / 2.0) / 2.0) / math.sqrt(n)


def resolution(dtype: torch.dtype) -> float:
    """``2^-p`` for a floating ``dtype`` with ``p`` significand bits (``finfo.eps / 2``: bfloat16 2^-8,
    float16 2^-11, float32 2^-24); 0 for integer and bool dtypes, whose values are exact."""
    return torch.finfo(dtype).eps / 2.0 if dtype.is_floating_point else 0.0


def ulp_band(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(lower, upper)`` float64 neighbours of each of ``values`` in its own dtype (one ULP below and
    above, ``torch.nextafter``); integer and bool values are their own band."""
    v = values.detach().reshape(-1).cpu()
    if not v.is_floating_point():
        exact = v.double()
        return exact, exact
    inf = torch.full_like(v, math.inf)
    return torch.nextafter(v, -inf).double(), torch.nextafter(v, inf).double()


def _fields(rule: str, stat: float, bound: float) -> dict:
    return {"rule": rule, "max_abs": float(stat), "atol": float(bound), "rtol": 0.0}


def _fail(what: str, text: str, fields: dict) -> None:
    raise NumericFailure(f"{what}: {text}", fields=fields)


def ks_continuous(what: str, sample: torch.Tensor, cdf, *, transform=None) -> dict:
    """KS check of ``sample`` (the values read back, any shape and real dtype, >= 1 element) against a
    continuous CDF, with the rounding and resolution allowances of the sample's dtype (module docstring).

    Args:
        what: the call and distribution, for the message (``aten::uniform_ vs U(-2, 3)``).
        cdf: float64 tensor -> float64 tensor of the same shape, values in [0, 1].
        transform: applied to the flattened float64 values before ``cdf`` (standardisation with
            per-element parameters, ``log``); must be increasing in each element. None: identity.

    Raises:
        NumericFailure: the statistic above :func:`ks_critical` + :func:`resolution` (``rule="ks"``).
    """
    t = transform or (lambda v: v)
    lo, hi = ulp_band(sample)
    n = lo.numel()
    f_hi = cdf(torch.sort(t(hi)).values).clamp(0.0, 1.0)
    f_lo = cdf(torch.sort(t(lo)).values).clamp(0.0, 1.0)
    i = torch.arange(1, n + 1, dtype=torch.float64)
    d = float(torch.maximum(i / n - f_hi, f_lo - (i - 1) / n).max())
    res = resolution(sample.dtype)
    crit = ks_critical(n) + res
    fields = _fields("ks", d, crit)
    if not d <= crit:  # NaN fails
        _fail(
            what,
            f"Kolmogorov-Smirnov statistic {d:.4f} > critical value {crit:.4f} (n={n}, alpha={ALPHA}"
            f"{f', {sample.dtype} resolution {res:.2g}' if res > 1e-6 else ''})",
            fields,
        )
    return fields


def ks_discrete(what: str, sample: torch.Tensor, cdf_at, lo: int, hi: int) -> dict:
    """KS check of integer-valued ``sample`` against a discrete distribution on ``[lo, hi]`` (``hi``
    inclusive; a finite window holding every draw: values outside it must be rejected by a support check
    before): ``D = max_k |F_n(k) - F(k)|`` over the integers k of the window.

    Args:
        cdf_at: float64 tensor of integers k -> ``P(X <= k)``.

    Raises:
        NumericFailure: ``D`` above :func:`ks_critical` + :func:`resolution` of the sample's dtype (fields
            ``rule="ks"``).
    """
    x = sample.detach().reshape(-1).cpu().to(torch.float64)
    n = x.numel()
    ks = torch.arange(lo, hi + 1, dtype=torch.float64)
    counts = torch.bincount((x.round() - lo).clamp(0, hi - lo).long(), minlength=hi - lo + 1).double()
    ecdf = counts.cumsum(0) / n
    d = float((ecdf - cdf_at(ks)).abs().max())
    crit = ks_critical(n) + resolution(sample.dtype)
    fields = _fields("ks", d, crit)
    if not d <= crit:
        _fail(
            what,
            f"Kolmogorov-Smirnov statistic {d:.4f} > critical value {crit:.4f} (discrete on "
            f"[{lo}, {hi}], n={n}, alpha={ALPHA})",
            fields,
        )
    return fields


def z_sum(what: str, observed: float, mean: float, variance: float, *, bias: float = 0.0) -> dict:
    """z-test of a sum of independent draws: ``(|observed - mean| - bias) / sqrt(variance)`` at most
    :data:`Z_BOUND`; ``bias`` (>= 0) is the largest systematic error the sum may carry (a quantised
    generator's, ``n`` times :func:`resolution`).

    Raises:
        ValueError: ``variance`` <= 0 or ``bias`` < 0.
        NumericFailure: the deviation is above the bound (fields ``rule="z-test"``).
    """
    if not variance > 0 or not bias >= 0:
        raise ValueError(f"z_sum: variance must be > 0 and bias >= 0, got {variance}, {bias}")
    z = max(0.0, abs(float(observed) - mean) - bias) / math.sqrt(variance)
    fields = _fields("z-test", z, Z_BOUND)
    if not z <= Z_BOUND:
        _fail(
            what,
            f"sum {float(observed):.6g}, expected {mean:.6g} +- {math.sqrt(variance):.4g}"
            f"{f' (bias allowed {bias:.3g})' if bias >= 0.01 else ''} (z = {z:.2f} > {Z_BOUND})",
            fields,
        )
    return fields


def bernoulli_z(what: str, draws: torch.Tensor, p: torch.Tensor) -> dict:
    """z-test of 0/1 ``draws`` against per-element probabilities ``p`` (same shape, some in (0, 1)): the
    number of ones has mean ``sum p`` and variance ``sum p (1 - p)``; bias allowance ``n`` times the
    coarser :func:`resolution` of the two dtypes.

    Raises:
        NumericFailure: see :func:`z_sum`.
    """
    p64 = p.detach().cpu().double().reshape(-1)
    bias = p64.numel() * max(resolution(draws.dtype), resolution(p.dtype))
    return z_sum(
        what, float(draws.detach().cpu().double().sum()), float(p64.sum()), float((p64 * (1 - p64)).sum()), bias=bias
    )


def normal_cdf(x: torch.Tensor) -> torch.Tensor:
    """CDF of the standard normal distribution, ``(1 + erf(x / sqrt 2)) / 2``."""
    return 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def binomial_cdf(count: int, prob: float):
    """``k -> P(X <= k)`` of Binomial(count, prob), from the pmf ``C(n, k) p^k (1-p)^(n-k)``."""
    pmf = torch.tensor(
        [math.comb(count, k) * prob**k * (1 - prob) ** (count - k) for k in range(count + 1)], dtype=torch.float64
    )
    cum = pmf.cumsum(0)

    def cdf(ks: torch.Tensor) -> torch.Tensor:
        return cum[ks.long().clamp(0, count)] * (ks >= 0)

    return cdf


def poisson_cdf(rate: float):
    """``k -> P(X <= k)`` of Poisson(rate): the regularized upper incomplete gamma ``Q(k + 1, rate)``."""
    return lambda ks: torch.special.gammaincc(ks + 1.0, torch.full_like(ks, rate)) * (ks >= 0)


def categorical_cdf(probs: torch.Tensor):
    """``k -> P(X <= k)`` of the categorical distribution with (unnormalised) weights ``probs`` (1-D)."""
    cum = (probs.double() / probs.double().sum()).cumsum(0)
    return lambda ks: cum[ks.long().clamp(0, probs.numel() - 1)]


__all__ = [
    "ALPHA",
    "Z_BOUND",
    "bernoulli_z",
    "binomial_cdf",
    "categorical_cdf",
    "ks_continuous",
    "ks_critical",
    "ks_discrete",
    "normal_cdf",
    "poisson_cdf",
    "resolution",
    "ulp_band",
    "z_sum",
]
