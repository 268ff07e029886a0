"""The random aten overloads' cases: inputs, and the checks of their documented distributions.

One :class:`RandomCase` per overload that the aten audit counts as random
(:func:`neuron_conformance.conformance.results.aten_audit.random_targets`). A case builds its arguments on a given device (the
device under test, or the CPU for the metadata reference) with an optional explicit ``torch.Generator``,
and judges the result read back to the CPU by the semantics PyTorch documents for it -- never by the
CPU's values, since vendors use other generators (Philox, ...):

* support: ``uniform_`` in ``[from, to)``, ``randint``/``random_.from`` in ``[low, high)``, ``bernoulli``
  in {0, 1}, ``geometric`` in {1, 2, ...}, ``randperm`` a permutation, ``multinomial`` without
  replacement never repeating a category in a row, ``native_dropout`` giving 0 or ``x / (1 - p)`` with its
  mask, ``rrelu_with_noise`` writing its noise (sources: the ``torch.*`` and ``Tensor.*_`` docs of each
  op; ``aten/src/ATen/native/Dropout.cpp`` and ``RReLU`` in ``Activation.cpp`` for the helpers);
* distribution: a KS or z-test of :mod:`neuron_conformance.opsuites.randomops.stats` against the documented law with the
  parameters the case passed (parameter tensors varying per element are standardised first, so a kernel
  that mixes up elements fails too).

Dtypes: every case is built for one dtype, and each overload has a case per dtype its CPU kernel draws
in (torch 2.13, probed): :data:`FLOATS` for the floating laws, plus :data:`INTS` where the values are
integers drawn into an integer tensor (``random_``, ``randint``, ``randperm``, ``geometric_``,
``bernoulli`` into ``self``); the suite runs those that ``--conformance-dtypes`` selects. Integer bounds are clamped
to the dtype's range (:func:`int_bounds`); complex dtypes are left out (the checks are of real laws).

``deterministic`` cases are the attention overloads the ``nondeterministic_seeded`` tag marks for their
``dropout_p`` argument: run with ``dropout_p = 0``, their values are compared with the CPU kernel's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from neuron_conformance.conformance.verdict.failures import NumericFailure
from neuron_conformance.opsuites.randomops import stats as st

N = 20_000
"""Draws per call (KS critical value 0.019 at alpha 1e-6; see :mod:`neuron_conformance.opsuites.randomops.stats`)."""

F32, I64 = torch.float32, torch.int64
FLOATS = ("float32", "bfloat16", "float16", "float64")
"""Floating dtypes the CPU's random kernels draw in (float64 runs only when ``--conformance-dtypes`` asks for it)."""
INTS = ("int8", "int16", "int32", "int64", "uint8", "bool")
"""Integer dtypes of the overloads that draw integers (the default ``--conformance-dtypes`` integers)."""


@dataclass(frozen=True)
class RandomCase:
    """How to call one random overload in one dtype and judge its result.

    Attributes:
        overload: dispatcher name (``aten::uniform_``).
        build: ``(device, generator or None) -> (args, kwargs)``: fresh inputs on ``device``; the generator
            is passed as ``generator=`` when not None (``.generator`` overloads always get the keyword).
        check: ``(result, args, kwargs) -> record fields``, all read back to the CPU; raises
            :class:`neuron_conformance.conformance.verdict.failures.NumericFailure` when the documented semantics do not hold.
        dtype: the dtype the case runs in (record field; ``--conformance-dtypes`` selects by it): of the drawn values,
            or of the probabilities for ``multinomial``.
        deterministic: the values do not depend on the generator (compared with the CPU kernel instead).
    """

    overload: str
    build: Callable
    check: Callable
    dtype: str = "float32"
    deterministic: bool = False


def dtype_of(name: str) -> torch.dtype:
    """The ``torch.dtype`` named ``name`` (``"bfloat16"``)."""
    return getattr(torch, name)


def int_bounds(dtype: torch.dtype, lo: int, hi: int) -> tuple[int, int]:
    """``[lo, hi)`` clamped to the values of ``dtype`` (bool: ``[0, 2)``; floating dtypes unchanged), so
    ``random_(lo, hi)`` / ``randint`` accept it (their CPU check: ``from`` and ``to - 1`` in range)."""
    if dtype == torch.bool:
        return 0, 2
    if dtype.is_floating_point:
        return lo, hi
    info = torch.iinfo(dtype)
    return max(lo, info.min), min(hi, info.max + 1)


def gen_kw(gen, required: bool = False) -> dict:
    """``{"generator": gen}`` when ``gen`` is given or the overload requires the keyword, else ``{}``."""
    return {"generator": gen} if gen is not None or required else {}


def first(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def require(what: str, ok: bool, text: str) -> None:
    if not ok:
        raise NumericFailure(f"{what}: {text}", fields={"rule": "support"})


def in_range(what: str, x: torch.Tensor, lo: float, hi: float, *, hi_open: bool = True, integral: bool = False) -> None:
    """Every element of ``x`` finite, in ``[lo, hi)`` (``[lo, hi]`` when not ``hi_open``), integral if asked."""
    x = x.double()
    bad = ~torch.isfinite(x) | (x < lo) | ((x >= hi) if hi_open else (x > hi))
    if integral:
        bad |= x != x.round()
    if bool(bad.any()):
        v = float(x.reshape(-1)[bad.reshape(-1)][0])
        kind = "integers in " if integral else ""
        require(
            what,
            False,
            f"{int(bad.sum())} of {x.numel()} values outside {kind}[{lo}, {hi}{')' if hi_open else ']'}, e.g. {v!r}",
        )


# ---- distribution checks: (what, values (CPU, in the case's dtype)) -> fields ----


def uniform_dist(lo: float, hi: float):
    def check(what, x):
        in_range(what, x, lo, hi)
        return st.ks_continuous(f"{what} vs U({lo}, {hi})", x, lambda v: (v - lo) / (hi - lo))

    return check


def std_normal(what, x, mean=0.0, std=1.0):
    """``x`` finite and, standardised with ``mean`` and ``std`` (scalars or float64 tensors of ``x``'s
    shape), N(0, 1) by KS."""
    in_range(what, x, -math.inf, math.inf, hi_open=False)
    m = mean.reshape(-1) if isinstance(mean, torch.Tensor) else mean
    s = std.reshape(-1) if isinstance(std, torch.Tensor) else std
    return st.ks_continuous(f"{what} vs N(0, 1) (standardised)", x, st.normal_cdf, transform=lambda v: (v - m) / s)


def int_uniform(lo: int, hi: int):
    def check(what, x):
        in_range(what, x, lo, hi, integral=True)
        return st.ks_discrete(
            f"{what} vs U{{{lo}..{hi - 1}}}", x, lambda k: ((k - lo + 1) / (hi - lo)).clamp(0, 1), lo, hi - 1
        )

    return check


def _random_full(what, x):
    """``random_()`` without bounds: ``[0, 2**mantissa]`` for floating dtypes, ``[0, max]`` for integers
    (``Tensor.random_`` docs); a discrete uniform KS up to 2^16 values, above that continuous on ``x / top``."""
    dtype = x.dtype
    if dtype == torch.bool:
        top = 1
    elif dtype.is_floating_point:
        top = 2 ** (round(-math.log2(torch.finfo(dtype).eps)) + 1)  # 2**24 for float32, 2**8 for bfloat16
    else:
        top = torch.iinfo(dtype).max
    in_range(what, x, 0, top, hi_open=False, integral=True)
    if top <= 2**16:
        return st.ks_discrete(f"{what} vs U{{0..{top}}}", x, lambda k: ((k + 1) / (top + 1)).clamp(0, 1), 0, top)
    return st.ks_continuous(f"{what} vs U{{0..{top}}}", x.double() / top, lambda v: v)


def _bernoulli(what, x, p):
    require(what, bool(((x == 0) | (x == 1)).all()), "values other than 0 and 1")
    return st.bernoulli_z(f"{what} vs Bernoulli(p)", x, p)


# ---- input builders ----


def lin(lo: float, hi: float, device, dtype=F32) -> torch.Tensor:
    """``N`` evenly spaced values from ``lo`` to ``hi`` (computed in float32, then rounded to ``dtype``)."""
    return torch.linspace(lo, hi, N, dtype=F32).to(dtype).to(device)


def empty(device, dtype=F32, n: int = N) -> torch.Tensor:
    return torch.empty(n, dtype=dtype, device=device)


def out_like(device, dtype=F32) -> torch.Tensor:
    return torch.empty(0, dtype=dtype, device=device)


def _self_family(base: str, params, dist, dtypes) -> list[RandomCase]:
    """The functional, ``.out`` and in-place (``base_``) overloads of a ``Tensor.<base>_`` distribution
    that fills ``self`` in each of ``dtypes``; ``params(dtype)`` gives its scalar arguments and
    ``dist(dtype)(what, values)`` judges the values."""
    cases = []
    for name in dtypes:
        dt, ps, judge = dtype_of(name), params(dtype_of(name)), dist(dtype_of(name))

        def check(over, judge=judge):
            return lambda res, args, kwargs: judge(over, first(res))

        cases += [
            RandomCase(
                f"aten::{base}",
                lambda d, g, dt=dt, ps=ps: ((empty(d, dt), *ps), gen_kw(g)),
                check(f"aten::{base}"),
                name,
            ),
            RandomCase(
                f"aten::{base}.out",
                lambda d, g, dt=dt, ps=ps: ((empty(d, dt), *ps), {**gen_kw(g), "out": out_like(d, dt)}),
                check(f"aten::{base}.out"),
                name,
            ),
            RandomCase(
                f"aten::{base}_",
                lambda d, g, dt=dt, ps=ps: ((empty(d, dt), *ps), gen_kw(g)),
                check(f"aten::{base}_"),
                name,
            ),
        ]
    return cases


def _scalar_families() -> list[RandomCase]:
    lam, p_geo = 2.0, 0.2
    mu, sigma = 0.5, 0.75

    def geometric(what, x):
        in_range(what, x, 1, math.inf, integral=True)
        return st.ks_discrete(f"{what} vs Geometric({p_geo})", x, lambda k: 1 - (1 - p_geo) ** k, 1, int(x.max()))

    def exponential(what, x):
        in_range(what, x, 0, math.inf)
        return st.ks_continuous(f"{what} vs Exp({lam})", x, lambda v: 1 - torch.exp(-lam * v.clamp_min(0)))

    def cauchy(what, x):
        return st.ks_continuous(f"{what} vs Cauchy(1, 2)", x, lambda v: 0.5 + torch.atan((v - 1.0) / 2.0) / math.pi)

    def log_normal(what, x):
        in_range(what, x, 0, math.inf)
        # log of the band's lower end: 0 or below stands for -inf (CDF 0)
        return st.ks_continuous(
            f"{what} vs N(0, 1) (log, standardised)",
            x,
            st.normal_cdf,
            transform=lambda v: (v.clamp_min(0).log() - mu) / sigma,
        )

    def same(check):
        return lambda dt: check

    geo_dtypes = (*FLOATS, *(n for n in INTS if n != "bool"))  # no geometric_ kernel for bool
    return [
        *_self_family("uniform", lambda dt: (-2.0, 3.0), same(uniform_dist(-2.0, 3.0)), FLOATS),
        *_self_family("exponential", lambda dt: (lam,), same(exponential), FLOATS),
        *_self_family("geometric", lambda dt: (p_geo,), same(geometric), geo_dtypes),
        *_self_family("cauchy", lambda dt: (1.0, 2.0), same(cauchy), FLOATS),
        *_self_family("log_normal", lambda dt: (mu, sigma), same(log_normal), FLOATS),
        *_self_family("random", lambda dt: (), same(_random_full), (*FLOATS, *INTS)),
        *_random_bounded(),
    ]


def _random_bounded() -> list[RandomCase]:
    """``random.to``/``random.from`` and their ``.out`` and in-place overloads, bounds clamped per dtype."""
    out = []
    for suffix, lo, hi in (("to", 0, 9), ("from", -4, 12)):
        for dname in (*FLOATS, *INTS):
            dt = dtype_of(dname)
            a, b = int_bounds(dt, lo, hi)
            params = (b,) if suffix == "to" else (a, b)
            dist = int_uniform(a, b)
            for name, with_out in (
                (f"random.{suffix}", False),
                (f"random.{suffix}_out", True),
                (f"random_.{suffix}", False),
            ):

                def build(d, g, params=params, with_out=with_out, dt=dt):
                    return (empty(d, dt), *params), {**gen_kw(g), **({"out": out_like(d, dt)} if with_out else {})}

                out.append(
                    RandomCase(
                        f"aten::{name}", build, lambda r, a_, k, w=f"aten::{name}", dist=dist: dist(w, first(r)), dname
                    )
                )
    return out


def _normal_family() -> list[RandomCase]:
    mu, sd = 0.5, 2.0
    names = (
        "normal_",
        "normal_functional",
        "normal.out",
        "normal.Tensor_Tensor",
        "normal.Tensor_Tensor_out",
        "normal.Tensor_float",
        "normal.Tensor_float_out",
        "normal.float_Tensor",
        "normal.float_Tensor_out",
        "normal.float_float",
        "normal.float_float_out",
    )
    cases = []
    for dname in FLOATS:
        dt = dtype_of(dname)
        mean_t, std_t = (lambda d, dt=dt: lin(-3.0, 3.0, d, dt)), (lambda d, dt=dt: lin(0.5, 2.0, d, dt))
        mean_c, std_c = mean_t("cpu").double(), std_t("cpu").double()  # the parameters as rounded to dt
        rows = {  # name -> (args(d) without out, mean, std)
            "normal_": (lambda d, dt=dt: (empty(d, dt), mu, sd), mu, sd),
            "normal.Tensor_Tensor": (lambda d, m=mean_t, s=std_t: (m(d), s(d)), mean_c, std_c),
            "normal.Tensor_float": (lambda d, m=mean_t: (m(d), sd), mean_c, sd),
            "normal.float_Tensor": (lambda d, s=std_t: (mu, s(d)), mu, std_c),
            "normal.float_float": (lambda d: (mu, sd, [N]), mu, sd),
        }
        for name in names:
            make, mean, std = rows.get(name.removesuffix("_out"), rows["normal_"])

            def build(d, g, make=make, name=name, dt=dt):
                kw = gen_kw(g)
                if name.endswith("out"):  # sized: normal.Tensor_float_out does not resize an empty out (torch 2.13)
                    kw["out"] = empty(d, dt)
                elif name == "normal.float_float":
                    kw.update(device=d, dtype=dt)
                return make(d), kw

            cases.append(
                RandomCase(
                    f"aten::{name}",
                    build,
                    lambda r, a, k, w=f"aten::{name}", m=mean, s=std: std_normal(w, first(r), m, s),
                    dname,
                )
            )
    return cases


def _bernoulli_family() -> list[RandomCase]:
    """``bernoulli`` overloads: those whose values take ``self``'s dtype in floating and integer dtypes,
    those whose values take ``p``'s dtype in floating dtypes (``p`` a float32 tensor for integer ``self``)."""
    p0 = 0.3
    rows = [  # name, args(d, dt, p tensor), kwargs(d, dt), self typed
        ("bernoulli", lambda d, dt, p: (p,), lambda d, dt: {}, False),
        ("bernoulli.out", lambda d, dt, p: (p,), lambda d, dt: {"out": out_like(d, dt)}, False),
        ("bernoulli.Tensor", lambda d, dt, p: (empty(d, dt), p), lambda d, dt: {}, True),
        ("bernoulli.Tensor_out", lambda d, dt, p: (empty(d, dt), p), lambda d, dt: {"out": out_like(d, dt)}, True),
        ("bernoulli_.Tensor", lambda d, dt, p: (empty(d, dt), p), lambda d, dt: {}, True),
        ("bernoulli.p", lambda d, dt, p: (empty(d, dt), p0), lambda d, dt: {}, True),
        ("bernoulli.float_out", lambda d, dt, p: (empty(d, dt), p0), lambda d, dt: {"out": out_like(d, dt)}, True),
        ("bernoulli_.float", lambda d, dt, p: (empty(d, dt), p0), lambda d, dt: {}, True),
    ]
    cases = []
    for name, a, k, self_typed in rows:
        for dname in (*FLOATS, *INTS) if self_typed else FLOATS:
            dt = dtype_of(dname)
            p_dt = dt if dt.is_floating_point else F32
            per_element = "float" not in name and name != "bernoulli.p"
            p_c = lin(0.05, 0.95, "cpu", p_dt) if per_element else torch.full((N,), p0, dtype=torch.float64)
            cases.append(
                RandomCase(
                    f"aten::{name}",
                    lambda d, g, a=a, k=k, dt=dt, p_dt=p_dt: (
                        a(d, dt, lin(0.05, 0.95, d, p_dt)),
                        {**gen_kw(g), **k(d, dt)},
                    ),
                    lambda r, a_, k_, w=f"aten::{name}", p=p_c: _bernoulli(w, first(r), p),
                    dname,
                )
            )
    return cases


def cases() -> list[RandomCase]:
    """The ``Tensor.<dist>_``, ``random``, ``normal`` and ``bernoulli`` cases (the factories' and samplers'
    are in :mod:`neuron_conformance.opsuites.randomops.factory_cases`, the nn helpers' in :mod:`neuron_conformance.opsuites.randomops.nn_cases`)."""
    return [*_scalar_families(), *_normal_family(), *_bernoulli_family()]


__all__ = [
    "F32",
    "FLOATS",
    "I64",
    "INTS",
    "N",
    "RandomCase",
    "cases",
    "dtype_of",
    "empty",
    "first",
    "gen_kw",
    "in_range",
    "int_bounds",
    "int_uniform",
    "lin",
    "out_like",
    "require",
    "std_normal",
    "uniform_dist",
]
