"""Random cases of the factories and samplers: ``rand*``, ``randn*``, ``randint*``, ``randperm``, ``multinomial``,
``poisson``, ``_standard_gamma``, ``_sample_dirichlet``, ``binomial``.

As :mod:`neuron_conformance.opsuites.randomops.cases` (its :class:`~neuron_conformance.opsuites.randomops.cases.RandomCase`, dtype lists and checks),
one case per overload and dtype its CPU kernel draws in (torch 2.13, probed): ``rand``/``randn`` in the
floating dtypes; ``randint`` in the integer dtypes, bounds clamped to each (:func:`int_bounds`: ``bool``
draws from ``[0, 2)``); ``randperm`` in the integer and floating dtypes with ``n`` the count of integers
the dtype holds exactly, at most ``N`` (``int8``: 128, ``bfloat16``: 257); ``multinomial`` and ``poisson``
with float32, bfloat16, float16 or float64 inputs; ``_standard_gamma``, ``_sample_dirichlet`` and
``binomial`` in float32 and float64 only (no reduced-precision CPU kernel). Laws: ``torch.rand`` U[0, 1),
``torch.randn`` N(0, 1), ``torch.randint`` uniform on ``[low, high)``, ``torch.randperm`` a permutation
(their docs); the samplers' from ``torch.distributions`` (Poisson, Gamma(alpha, 1), Dirichlet marginals
Beta(a_i, a_0 - a_i), Binomial).
"""

from __future__ import annotations

import functools
import math

import torch

from neuron_conformance.opsuites.randomops import stats as st
from neuron_conformance.opsuites.randomops.cases import (
    FLOATS,
    I64,
    INTS,
    N,
    RandomCase,
    dtype_of,
    empty,
    first,
    gen_kw,
    in_range,
    int_bounds,
    int_uniform,
    out_like,
    require,
    std_normal,
    uniform_dist,
)

RANDPERM_DTYPES = (*FLOATS, *(n for n in INTS if n != "bool"))
"""``randperm`` dtypes (no CPU kernel for bool)."""


def randperm_size(dtype: torch.dtype) -> int:
    """``n`` of the ``randperm`` case in ``dtype``: ``N``, or the count of integers ``0..m`` the dtype holds
    exactly when fewer (``2^p + 1`` for a floating dtype with ``p`` significand bits, ``max + 1``)."""
    if dtype.is_floating_point:
        return min(N, 2 ** (round(-math.log2(torch.finfo(dtype).eps)) + 1) + 1)
    return min(N, torch.iinfo(dtype).max + 1)


def _permutation(what, x):
    """A permutation of ``0..n-1`` (``torch.randperm`` docs) whose first half is spread like a uniform
    sample (KS of ``x / n``; sampling without replacement makes the bound conservative)."""
    n = x.numel()
    s, _ = torch.sort(x.reshape(-1).long())
    if not torch.equal(s, torch.arange(n)):
        counts = torch.bincount(x.reshape(-1).long().clamp(0, n), minlength=n + 1)
        dup = int(torch.nonzero(counts > 1)[0]) if bool((counts > 1).any()) else None
        miss = int(torch.nonzero(counts[:n] == 0)[0]) if bool((counts[:n] == 0).any()) else None
        require(what, False, f"not a permutation of 0..{n - 1}: value {dup} repeated, {miss} missing")
    return st.ks_continuous(f"{what}[:n/2] / n vs U(0, 1)", x[: n // 2].double() / n, lambda v: v.clamp(0, 1))


def _add(cases, name, dname, make, dist, factory=False):
    """Append the case of overload ``name`` in dtype ``dname``: ``make(d, dt)`` gives its arguments; factories
    get ``device=`` and ``dtype=``, ``out`` overloads an empty ``out`` of the dtype, the named-tensor overloads
    (``*names*``) ``names=None``."""
    dt = dtype_of(dname)

    def build(d, g):
        kw = gen_kw(g, required="generator" in name)
        if "names" in name:
            kw["names"] = None
        if name.endswith("out"):
            kw["out"] = out_like(d, dt)
        elif factory:
            kw.update(device=d, dtype=dt)
        return make(d, dt), kw

    cases.append(RandomCase(f"aten::{name}", build, lambda r, a, k, w=f"aten::{name}": dist(w, first(r)), dname))


def _floating_factories(cases) -> None:
    u01 = uniform_dist(0.0, 1.0)
    for dname in FLOATS:
        for name in ("rand", "rand.generator", "rand.out"):
            _add(cases, name, dname, lambda d, dt: ([N],), u01, factory=True)
        for name in ("rand_like", "rand_like.generator", "rand_like.generator_out", "rand_like.out"):
            _add(cases, name, dname, lambda d, dt: (empty(d, dt),), u01)
        for name in ("randn", "randn.generator"):
            _add(cases, name, dname, lambda d, dt: ([N],), std_normal, factory=True)
        for name in ("randn_like", "randn_like.generator", "randn_like.generator_out", "randn_like.out"):
            _add(cases, name, dname, lambda d, dt: (empty(d, dt),), std_normal)
        for op, dist in (("rand", u01), ("randn", std_normal)):  # the named-tensor overloads (torch < 2.13)
            for suffix in ("names", "names_out", "generator_with_names", "generator_with_names_out"):
                _add(cases, f"{op}.{suffix}", dname, lambda d, dt: ([N],), dist, factory=True)


def _integer_factories(cases) -> None:
    for dname in INTS:
        dt = dtype_of(dname)
        top = int_bounds(dt, 0, 10)[1]
        lo, hi = int_bounds(dt, -3, 7)
        hi_only, low_hi = int_uniform(0, top), int_uniform(lo, hi)
        for name in ("randint", "randint.generator", "randint.generator_out", "randint.out"):
            _add(cases, name, dname, lambda d, dt, top=top: (top, [N]), hi_only, factory=True)
        for name in ("randint.low", "randint.low_generator", "randint.low_generator_out", "randint.low_out"):
            _add(cases, name, dname, lambda d, dt, lo=lo, hi=hi: (lo, hi, [N]), low_hi, factory=True)
        for name in ("randint_like", "randint_like.generator", "randint_like.generator_out", "randint_like.out"):
            _add(cases, name, dname, lambda d, dt, top=top: (empty(d, dt), top), hi_only)
        for name in (
            "randint_like.Tensor",
            "randint_like.Tensor_generator",
            "randint_like.Tensor_generator_out",
            "randint_like.Tensor_out",
        ):
            # high: a 0-dim CPU tensor ("high must be a scalar tensor and on CPU", randint_like's check)
            _add(cases, name, dname, lambda d, dt, top=top: (empty(d, dt), torch.tensor(top)), hi_only)
        for name in (
            "randint_like.low_dtype",
            "randint_like.low_generator_dtype",
            "randint_like.low_generator_dtype_out",
            "randint_like.low_dtype_out",
        ):
            _add(cases, name, dname, lambda d, dt, lo=lo, hi=hi: (empty(d, dt), lo, hi), low_hi)
    for dname in RANDPERM_DTYPES:
        n = randperm_size(dtype_of(dname))
        for name in ("randperm", "randperm.generator", "randperm.generator_out", "randperm.out"):
            _add(cases, name, dname, lambda d, dt, n=n: (n,), _permutation, factory=True)


def _samplers() -> list[RandomCase]:
    """``multinomial``, ``poisson``, ``_standard_gamma``, ``_sample_dirichlet``, ``binomial``."""
    weights = torch.arange(1.0, 9.0)  # categories 0..7 with weights 1..8 (exact in every floating dtype)
    rows_wr, rows_nr, draws = 2_000, 10_000, 10

    def multinomial(what, x, replacement):
        k = weights.numel()
        in_range(what, x, 0, k, integral=True)
        if not replacement:
            s, _ = torch.sort(x, dim=1)
            require(
                what, not bool((s[:, 1:] == s[:, :-1]).any()), "a category repeated in a row drawn without replacement"
            )
            x = x[:, 0]  # the first draw of each row follows the weights
        return st.ks_discrete(f"{what} vs Categorical(1..8)", x, st.categorical_cdf(weights), 0, k - 1)

    rate, alpha, count, prob = 4.0, 2.5, 10, 0.3
    conc = torch.tensor([1.0, 2.0, 3.0])

    def poisson(what, x):
        in_range(what, x, 0, math.inf, integral=True)
        return st.ks_discrete(f"{what} vs Poisson({rate})", x, st.poisson_cdf(rate), 0, int(x.max()))

    def gamma(what, x):
        in_range(what, x, 0, math.inf)
        return st.ks_continuous(
            f"{what} vs Gamma({alpha}, 1)",
            x,
            lambda v: torch.special.gammainc(torch.full_like(v, alpha), v.clamp_min(0)),
        )

    def dirichlet(what, x):
        in_range(what, x, 0, 1, hi_open=False)
        require(what, bool(((x.double().sum(1) - 1).abs() <= 1e-5).all()), "rows do not sum to 1")
        a0, fields = float(conc.sum()), {}
        for i, a in enumerate(conc.tolist()):  # the marginal of component i is Beta(a, a0 - a)
            var = a * (a0 - a) / (a0 * a0 * (a0 + 1))
            fields = st.z_sum(
                f"{what}[:, {i}] mean vs Beta({a}, {a0 - a})",
                float(x[:, i].double().sum()),
                x.shape[0] * a / a0,
                x.shape[0] * var,
            )
        return fields

    def binomial(what, x):
        in_range(what, x, 0, count, hi_open=False, integral=True)
        return st.ks_discrete(f"{what} vs Binomial({count}, {prob})", x, st.binomial_cdf(count, prob), 0, count)

    def full(value):
        return lambda d, dt: (torch.full((N,), value, dtype=dt, device=d),)

    specs = [  # overload, args(d, dt), dist(what, x), dtypes
        (
            "multinomial",
            lambda d, dt: (weights.to(dt).expand(rows_nr, -1).contiguous().to(d), 4),
            lambda w, x: multinomial(w, x, False),
            FLOATS,
        ),
        (
            "multinomial.out",
            lambda d, dt: (weights.to(dt).expand(rows_wr, -1).contiguous().to(d), draws, True),
            lambda w, x: multinomial(w, x, True),
            FLOATS,
        ),
        ("poisson", full(rate), poisson, FLOATS),
        ("poisson.out", full(rate), poisson, FLOATS),
        ("_standard_gamma", full(alpha), gamma, ("float32", "float64")),
        ("_standard_gamma.out", full(alpha), gamma, ("float32", "float64")),
        (
            "_sample_dirichlet",
            lambda d, dt: (conc.to(dt).expand(N, -1).contiguous().to(d),),
            dirichlet,
            ("float32", "float64"),
        ),
        (
            "_sample_dirichlet.out",
            lambda d, dt: (conc.to(dt).expand(N, -1).contiguous().to(d),),
            dirichlet,
            ("float32", "float64"),
        ),
        (
            "binomial",
            lambda d, dt: (full(float(count))(d, dt)[0], full(prob)(d, dt)[0]),
            binomial,
            ("float32", "float64"),
        ),
        (
            "binomial.out",
            lambda d, dt: (full(float(count))(d, dt)[0], full(prob)(d, dt)[0]),
            binomial,
            ("float32", "float64"),
        ),
    ]

    def build(d, g, name, make, dt):
        kw = gen_kw(g)
        if name.endswith(".out"):
            kw["out"] = out_like(d, I64 if name.startswith("multinomial") else dt)
        return make(d, dt), kw

    return [
        RandomCase(
            f"aten::{n}",
            functools.partial(build, name=n, make=m, dt=dtype_of(dname)),
            lambda r, a, k, w=f"aten::{n}", dist=dist: dist(w, first(r)),
            dname,
        )
        for n, m, dist, dtypes in specs
        for dname in dtypes
    ]


def cases() -> list[RandomCase]:
    """Every factory and sampler case."""
    out: list[RandomCase] = []
    _floating_factories(out)
    _integer_factories(out)
    return [*out, *_samplers()]


__all__ = ["RANDPERM_DTYPES", "cases", "randperm_size"]
