"""The random aten overloads' cases: inputs, and the checks of their documented distributions.

One :class:`RandomCase` per overload that the aten audit counts as random
(:func:`conformance.aten_audit.random_targets`). A case builds its arguments on a given device (the
device under test, or the CPU for the metadata reference) with an optional explicit ``torch.Generator``,
and judges the result read back to the CPU by the semantics PyTorch documents for it -- never by the
CPU's values, since vendors use other generators (Philox, ...):

* support: ``uniform_`` in ``[from, to)``, ``randint``/``random_.from`` in ``[low, high)``, ``bernoulli``
  in {0, 1}, ``geometric`` in {1, 2, ...}, ``randperm`` a permutation, ``multinomial`` without
  replacement never repeating a category in a row, ``native_dropout`` giving 0 or ``x / (1 - p)`` with its
  mask, ``rrelu_with_noise`` writing its noise (sources: the ``torch.*`` and ``Tensor.*_`` docs of each
  op; ``aten/src/ATen/native/Dropout.cpp`` and ``RReLU`` in ``Activation.cpp`` for the helpers);
* distribution: a KS or z-test of :mod:`opsuites.random_stats` against the documented law with the
  parameters the case passed (parameter tensors varying per element are standardised first, so a kernel
  that mixes up elements fails too).

``deterministic`` cases are the attention overloads the ``nondeterministic_seeded`` tag marks for their
``dropout_p`` argument: run with ``dropout_p = 0``, their values are compared with the CPU kernel's.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import torch

from conformance.failures import NumericFailure
from opsuites import random_stats as st

N = 20_000
"""Draws per call (KS critical value 0.019 at alpha 1e-6; see :mod:`opsuites.random_stats`)."""

F32, I64 = torch.float32, torch.int64


@dataclass(frozen=True)
class RandomCase:
    """How to call one random overload and judge its result.

    Attributes:
        overload: dispatcher name (``aten::uniform_``).
        build: ``(device, generator or None) -> (args, kwargs)``: fresh inputs on ``device``; the generator
            is passed as ``generator=`` when not None (``.generator`` overloads always get the keyword).
        check: ``(result, args, kwargs) -> record fields``, all read back to the CPU; raises
            :class:`conformance.failures.NumericFailure` when the documented semantics do not hold.
        dtype: the dtype of the drawn values (record field).
        deterministic: the values do not depend on the generator (compared with the CPU kernel instead).
    """

    overload: str
    build: Callable
    check: Callable
    dtype: str = "float32"
    deterministic: bool = False


def gen_kw(gen, required: bool = False) -> dict:
    """``{"generator": gen}`` when ``gen`` is given or the overload requires the keyword, else ``{}``."""
    return {"generator": gen} if gen is not None or required else {}


def first(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def require(what: str, ok: bool, text: str) -> None:
    if not ok:
        raise NumericFailure(f"{what}: {text}", fields={"rule": "support"})


def in_range(what: str, x: torch.Tensor, lo: float, hi: float, *, hi_open: bool = True,
              integral: bool = False) -> None:
    """Every element of ``x`` finite, in ``[lo, hi)`` (``[lo, hi]`` when not ``hi_open``), integral if asked."""
    x = x.double()
    bad = ~torch.isfinite(x) | (x < lo) | ((x >= hi) if hi_open else (x > hi))
    if integral:
        bad |= x != x.round()
    if bool(bad.any()):
        v = float(x.reshape(-1)[bad.reshape(-1)][0])
        kind = "integers in " if integral else ""
        require(what, False, f"{int(bad.sum())} of {x.numel()} values outside {kind}[{lo}, {hi}{')' if hi_open else ']'}"
                 f", e.g. {v!r}")


# ---- distribution checks: (what, values (CPU)) -> fields ----

def uniform_dist(lo: float, hi: float):
    def check(what, x):
        in_range(what, x, lo, hi)
        return st.ks_continuous(f"{what} vs U({lo}, {hi})", x, lambda v: (v - lo) / (hi - lo))
    return check


def _std_normal(what, z):
    in_range(what, z, -math.inf, math.inf, hi_open=False)
    return st.ks_continuous(f"{what} vs N(0, 1) (standardised)", z, st.normal_cdf)


def _int_uniform(lo: int, hi: int):
    def check(what, x):
        in_range(what, x, lo, hi, integral=True)
        return st.ks_discrete(f"{what} vs U{{{lo}..{hi - 1}}}", x, lambda k: ((k - lo + 1) / (hi - lo)).clamp(0, 1),
                              lo, hi - 1)
    return check


def _random_full(what, x, dtype):
    """``random_()`` without bounds: ``[0, 2**mantissa]`` for floating dtypes, ``[0, max]`` for integers
    (``Tensor.random_`` docs); judged as continuous uniform on ``x / top`` (steps of ``1 / top``)."""
    digits = round(-math.log2(torch.finfo(dtype).eps)) + 1 if dtype.is_floating_point else None  # 24 for float32
    top = float(2 ** digits) if digits else float(torch.iinfo(dtype).max)
    in_range(what, x, 0, top, hi_open=False, integral=True)
    return st.ks_continuous(f"{what} vs U{{0..{top:.0f}}}", x.double() / top, lambda v: v)


def _bernoulli(what, x, p):
    require(what, bool(((x == 0) | (x == 1)).all()), "values other than 0 and 1")
    return st.bernoulli_z(f"{what} vs Bernoulli(p)", x, p)


# ---- input builders ----

def _lin(lo: float, hi: float, device, dtype=F32) -> torch.Tensor:
    return torch.linspace(lo, hi, N, dtype=dtype).to(device)


def empty(device, dtype=F32, n: int = N) -> torch.Tensor:
    return torch.empty(n, dtype=dtype, device=device)


def out_like(device, dtype=F32) -> torch.Tensor:
    return torch.empty(0, dtype=dtype, device=device)


def _self_family(base: str, params: tuple, dist, *, dtype=F32, transform=None) -> list[RandomCase]:
    """The functional, ``.out`` and in-place (``base_``) overloads of a ``Tensor.<base>_`` distribution
    that fills ``self`` from scalar ``params``; ``dist(what, values)`` judges the values (after
    ``transform``)."""
    t = transform or (lambda x: x)

    def check(name):
        return lambda res, args, kwargs: dist(name, t(first(res)))
    cases = [
        RandomCase(f"aten::{base}", lambda d, g: ((empty(d, dtype), *params), gen_kw(g)), check(f"aten::{base}")),
        RandomCase(f"aten::{base}.out", lambda d, g: ((empty(d, dtype), *params), {**gen_kw(g), "out": out_like(d, dtype)}),
                   check(f"aten::{base}.out")),
        RandomCase(f"aten::{base}_", lambda d, g: ((empty(d, dtype), *params), gen_kw(g)), check(f"aten::{base}_")),
    ]
    return [RandomCase(c.overload, c.build, c.check, str(dtype).removeprefix("torch.")) for c in cases]


def _scalar_families() -> list[RandomCase]:
    lam, p_geo = 2.0, 0.2
    mu, sigma = 0.5, 0.75

    def geometric(what, x):
        in_range(what, x, 1, math.inf, integral=True)
        return st.ks_discrete(f"{what} vs Geometric({p_geo})", x, lambda k: 1 - (1 - p_geo) ** k, 1, int(x.max()))

    def exponential(what, x):
        in_range(what, x, 0, math.inf)
        return st.ks_continuous(f"{what} vs Exp({lam})", x, lambda v: 1 - torch.exp(-lam * v))

    def cauchy(what, x):
        return st.ks_continuous(f"{what} vs Cauchy(1, 2)", x, lambda v: 0.5 + torch.atan((v - 1.0) / 2.0) / math.pi)

    def log_normal(what, x):
        in_range(what, x, 0, math.inf)
        return _std_normal(what, (x.double().log() - mu) / sigma)

    return [*_self_family("uniform", (-2.0, 3.0), uniform_dist(-2.0, 3.0)),
            *_self_family("exponential", (lam,), exponential),
            *_self_family("geometric", (p_geo,), geometric),
            *_self_family("cauchy", (1.0, 2.0), cauchy),
            *_self_family("log_normal", (mu, sigma), log_normal),
            *_self_family("random", (), lambda w, x: _random_full(w, x, F32))]


def _random_bounded() -> list[RandomCase]:
    """``random.to``/``random.from`` and their ``.out`` and in-place overloads on int64 ``self``."""
    out = []
    for suffix, params, lo, hi in (("to", (9,), 0, 9), ("from", (-4, 12), -4, 12)):
        dist = _int_uniform(lo, hi)
        for name, inplace, with_out in ((f"random.{suffix}", False, False), (f"random.{suffix}_out", False, True),
                                        (f"random_.{suffix}", True, False)):
            def build(d, g, params=params, with_out=with_out):
                return (empty(d, I64), *params), {**gen_kw(g), **({"out": out_like(d, I64)} if with_out else {})}
            out.append(RandomCase(f"aten::{name}", build, lambda r, a, k, w=f"aten::{name}", dist=dist: dist(w, first(r)),
                                  "int64"))
    return out


def _normal_family() -> list[RandomCase]:
    mu, sd = 0.5, 2.0
    mean_t, std_t = (lambda d: _lin(-3.0, 3.0, d)), (lambda d: _lin(0.5, 2.0, d))
    mean_c, std_c = mean_t("cpu").double(), std_t("cpu").double()

    def judged(name, mean, std):
        return lambda r, a, k: _std_normal(name, (first(r).double() - mean) / std)
    rows = [  # name, build(d, g) -> (args, kwargs) without out, mean, std
        ("normal_", lambda d: (empty(d), mu, sd), mu, sd),
        ("normal_functional", lambda d: (empty(d), mu, sd), mu, sd),
        ("normal.out", lambda d: (empty(d), mu, sd), mu, sd),
        ("normal.Tensor_Tensor", lambda d: (mean_t(d), std_t(d)), mean_c, std_c),
        ("normal.Tensor_Tensor_out", lambda d: (mean_t(d), std_t(d)), mean_c, std_c),
        ("normal.Tensor_float", lambda d: (mean_t(d), sd), mean_c, sd),
        ("normal.Tensor_float_out", lambda d: (mean_t(d), sd), mean_c, sd),
        ("normal.float_Tensor", lambda d: (mu, std_t(d)), mu, std_c),
        ("normal.float_Tensor_out", lambda d: (mu, std_t(d)), mu, std_c),
        ("normal.float_float", lambda d: (mu, sd, [N]), mu, sd),
        ("normal.float_float_out", lambda d: (mu, sd, [N]), mu, sd),
    ]
    cases = []
    for name, make, mean, std in rows:
        def build(d, g, make=make, name=name):
            kw = gen_kw(g)
            if name.endswith("out"):  # sized: normal.Tensor_float_out does not resize an empty out (torch 2.13)
                kw["out"] = empty(d)
            elif name == "normal.float_float":
                kw["device"] = d
            return make(d), kw
        cases.append(RandomCase(f"aten::{name}", build, judged(f"aten::{name}", mean, std)))
    return cases


def _bernoulli_family() -> list[RandomCase]:
    p0 = 0.3
    p_t = lambda d: _lin(0.05, 0.95, d)  # noqa: E731 - per-element probabilities
    p_c = p_t("cpu")
    rows = [  # name, args(d), kwargs(d), p
        ("bernoulli", lambda d: (p_t(d),), lambda d: {}, p_c),
        ("bernoulli.out", lambda d: (p_t(d),), lambda d: {"out": out_like(d)}, p_c),
        ("bernoulli.Tensor", lambda d: (empty(d), p_t(d)), lambda d: {}, p_c),
        ("bernoulli.Tensor_out", lambda d: (empty(d), p_t(d)), lambda d: {"out": out_like(d)}, p_c),
        ("bernoulli_.Tensor", lambda d: (empty(d), p_t(d)), lambda d: {}, p_c),
        ("bernoulli.p", lambda d: (empty(d), p0), lambda d: {}, torch.full((N,), p0)),
        ("bernoulli.float_out", lambda d: (empty(d), p0), lambda d: {"out": out_like(d)}, torch.full((N,), p0)),
        ("bernoulli_.float", lambda d: (empty(d), p0), lambda d: {}, torch.full((N,), p0)),
    ]
    return [RandomCase(f"aten::{name}", lambda d, g, a=a, k=k: (a(d), {**gen_kw(g), **k(d)}),
                       lambda r, a_, k_, w=f"aten::{name}", p=p: _bernoulli(w, first(r), p))
            for name, a, k, p in rows]


def _factories() -> list[RandomCase]:
    """``rand``/``randn``/``randint``/``randperm`` and their ``_like``, ``.generator`` and ``.out`` overloads."""
    cases = []

    def add(name, make, dist, dtype=F32, factory=False):
        def build(d, g, make=make, name=name, factory=factory, dtype=dtype):
            kw = gen_kw(g, required="generator" in name)
            if name.endswith("out"):
                kw["out"] = out_like(d, dtype)
            elif factory:
                kw["device"] = d
            return make(d), kw
        cases.append(RandomCase(f"aten::{name}", build, lambda r, a, k, w=f"aten::{name}": dist(w, first(r)),
                                str(dtype).removeprefix("torch.")))
    u01 = uniform_dist(0.0, 1.0)
    for name in ("rand", "rand.generator", "rand.out"):
        add(name, lambda d: ([N],), u01, factory=True)
    for name in ("rand_like", "rand_like.generator", "rand_like.generator_out", "rand_like.out"):
        add(name, lambda d: (empty(d),), u01)
    for name in ("randn", "randn.generator"):
        add(name, lambda d: ([N],), _std_normal, factory=True)
    for name in ("randn_like", "randn_like.generator", "randn_like.generator_out", "randn_like.out"):
        add(name, lambda d: (empty(d),), _std_normal)
    hi_only, low_hi = _int_uniform(0, 10), _int_uniform(-3, 7)
    for name in ("randint", "randint.generator", "randint.generator_out", "randint.out"):
        add(name, lambda d: (10, [N]), hi_only, I64, factory=True)
    for name in ("randint.low", "randint.low_generator", "randint.low_generator_out", "randint.low_out"):
        add(name, lambda d: (-3, 7, [N]), low_hi, I64, factory=True)
    for name in ("randint_like", "randint_like.generator", "randint_like.generator_out", "randint_like.out"):
        add(name, lambda d: (empty(d, I64), 10), hi_only, I64)
    for name in ("randint_like.Tensor", "randint_like.Tensor_generator", "randint_like.Tensor_generator_out",
                 "randint_like.Tensor_out"):
        # high: a 0-dim CPU tensor ("high must be a scalar tensor and on CPU", randint_like's check)
        add(name, lambda d: (empty(d, I64), torch.tensor(10)), hi_only, I64)
    for name in ("randint_like.low_dtype", "randint_like.low_generator_dtype", "randint_like.low_generator_dtype_out",
                 "randint_like.low_dtype_out"):
        add(name, lambda d: (empty(d, I64), -3, 7), low_hi, I64)
    for name in ("randperm", "randperm.generator", "randperm.generator_out", "randperm.out"):
        add(name, lambda d: (N,), _permutation, I64, factory=True)
    return cases


def _permutation(what, x):
    """A permutation of ``0..n-1`` (``torch.randperm`` docs) whose first half is spread like a uniform
    sample (KS of ``x / n``; sampling without replacement makes the bound conservative)."""
    n = x.numel()
    s, _ = torch.sort(x.reshape(-1).long())
    expect = torch.arange(n)
    if not torch.equal(s, expect):
        counts = torch.bincount(x.reshape(-1).long().clamp(0, n), minlength=n + 1)
        dup = int(torch.nonzero(counts > 1)[0]) if bool((counts > 1).any()) else None
        miss = int(torch.nonzero(counts[:n] == 0)[0]) if bool((counts[:n] == 0).any()) else None
        require(what, False, f"not a permutation of 0..{n - 1}: value {dup} repeated, {miss} missing")
    return st.ks_continuous(f"{what}[:n/2] / n vs U(0, 1)", x[: n // 2].double() / n, lambda v: v.clamp(0, 1))


def _samplers() -> list[RandomCase]:
    """``multinomial``, ``poisson``, ``_standard_gamma``, ``_sample_dirichlet``, ``binomial``."""
    weights = torch.arange(1.0, 9.0)  # categories 0..7 with weights 1..8
    rows_wr, rows_nr, draws = 2_000, 10_000, 10

    def multinomial(what, x, replacement):
        k = weights.numel()
        in_range(what, x, 0, k, integral=True)
        if not replacement:
            s, _ = torch.sort(x, dim=1)
            require(what, not bool((s[:, 1:] == s[:, :-1]).any()),
                     "a category repeated in a row drawn without replacement")
            x = x[:, 0]  # the first draw of each row follows the weights
        return st.ks_discrete(f"{what} vs Categorical(1..8)", x, st.categorical_cdf(weights), 0, k - 1)

    rate, alpha, count, prob = 4.0, 2.5, 10, 0.3
    conc = torch.tensor([1.0, 2.0, 3.0])

    def poisson(what, x):
        in_range(what, x, 0, math.inf, integral=True)
        return st.ks_discrete(f"{what} vs Poisson({rate})", x, st.poisson_cdf(rate), 0, int(x.max()))

    def gamma(what, x):
        in_range(what, x, 0, math.inf)
        return st.ks_continuous(f"{what} vs Gamma({alpha}, 1)", x,
                                lambda v: torch.special.gammainc(torch.full_like(v, alpha), v))

    def dirichlet(what, x):
        in_range(what, x, 0, 1, hi_open=False)
        require(what, bool(((x.double().sum(1) - 1).abs() <= 1e-5).all()), "rows do not sum to 1")
        a0, fields = float(conc.sum()), {}
        for i, a in enumerate(conc.tolist()):  # the marginal of component i is Beta(a, a0 - a)
            var = a * (a0 - a) / (a0 * a0 * (a0 + 1))
            fields = st.z_sum(f"{what}[:, {i}] mean vs Beta({a}, {a0 - a})", float(x[:, i].double().sum()),
                              x.shape[0] * a / a0, x.shape[0] * var)
        return fields

    def binomial(what, x):
        in_range(what, x, 0, count, hi_open=False, integral=True)
        return st.ks_discrete(f"{what} vs Binomial({count}, {prob})", x, st.binomial_cdf(count, prob), 0, count)

    def probs(d, rows):
        return weights.expand(rows, -1).contiguous().to(d)

    def dirichlet_in(d):
        return conc.expand(N, -1).contiguous().to(d)
    specs = [  # overload, args(d), dist(what, x)
        ("multinomial", lambda d: (probs(d, rows_nr), 4), lambda w, x: multinomial(w, x, False)),
        ("multinomial.out", lambda d: (probs(d, rows_wr), draws, True), lambda w, x: multinomial(w, x, True)),
        ("poisson", lambda d: (torch.full((N,), rate, device=d),), poisson),
        ("poisson.out", lambda d: (torch.full((N,), rate, device=d),), poisson),
        ("_standard_gamma", lambda d: (torch.full((N,), alpha, device=d),), gamma),
        ("_standard_gamma.out", lambda d: (torch.full((N,), alpha, device=d),), gamma),
        ("_sample_dirichlet", lambda d: (dirichlet_in(d),), dirichlet),
        ("_sample_dirichlet.out", lambda d: (dirichlet_in(d),), dirichlet),
        ("binomial", lambda d: (torch.full((N,), float(count), device=d), torch.full((N,), prob, device=d)), binomial),
        ("binomial.out", lambda d: (torch.full((N,), float(count), device=d), torch.full((N,), prob, device=d)),
         binomial),
    ]
    dtypes = {"multinomial": "int64", "multinomial.out": "int64"}

    def build(d, g, name, make):
        kw = gen_kw(g)
        if name.endswith(".out"):
            kw["out"] = out_like(d, I64 if name.startswith("multinomial") else F32)
        return make(d), kw
    return [RandomCase(f"aten::{n}", functools.partial(build, name=n, make=m),
                       lambda r, a, k, w=f"aten::{n}", dist=dist: dist(w, first(r)), dtypes.get(n, "float32"))
            for n, m, dist in specs]


def cases() -> list[RandomCase]:
    """Every distribution case of this module (the nn helpers' are in :mod:`opsuites.random_nn_cases`)."""
    return [*_scalar_families(), *_random_bounded(), *_normal_family(), *_bernoulli_family(), *_factories(),
            *_samplers()]


__all__ = ["N", "RandomCase", "cases", "empty", "first", "gen_kw", "in_range", "out_like", "require", "uniform_dist"]
