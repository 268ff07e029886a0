"""Generated inputs (Hypothesis): shapes, broadcasting, views, promotion, reductions, indexing, special values.

Every example runs on the device and on the CPU from the same CPU-built input (moved exactly, so views,
strides and storage offsets are kept) and is judged by :func:`neuron_conformance.conformance.verdict.oracle.judge` (exact for
exact-class ops and integer dtypes, else tolerance with fp64 arbitration). Values are drawn from a
strategy that mixes ordinary numbers with special values: ±0, ±inf, NaN, subnormals, the dtype's
extremes (``finfo.max``/``tiny``, ``iinfo.min``/``max``).

* ``test_unary``: elementwise unary ops over shapes with zero-size dims and 0-dim (scalar) tensors, seen
  through random views (permuted, sliced with steps, at a storage offset).
* ``test_binary``: binary ops over mutually broadcastable shapes and two dtypes drawn from the selected
  dtypes (type promotion): the result dtype must be the CPU's.
* ``test_promotion``: every ordered pair of selected dtypes, for each binary op (deterministic).
* ``test_reduction``: reductions over random dim subsets, with and without ``keepdim``.
* ``test_indexing``: integer indices with negative values, boolean masks, and ``index_put_``.
* ``test_scalar_overload``: every ``aten::<op>.Scalar``-style overload taking ``(Tensor, Scalar)`` (found
  from the schemas), called directly, for each selected dtype with integer, float and negative scalars:
  OpInfo samples reach these overloads rarely, because Python wraps numbers into tensors.

A failing example is shrunk by Hypothesis and printed as ``Falsifying example`` with a ``repro`` note.
The number of examples comes from the Hypothesis profile: ``conformance`` (default, bounded for CI) or
``--hypothesis-profile thorough`` (see :mod:`neuron_conformance.opsuites.conftest`).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from neuron_conformance.conformance.backend.transfer import to_device_exact
from neuron_conformance.conformance.pytest_plugin.options import selected_dtypes
from neuron_conformance.conformance.results.coverage import registered_overloads
from neuron_conformance.conformance.verdict.exact import is_exact_op
from neuron_conformance.conformance.verdict.failures import MetadataFailure, WrongErrorFailure
from neuron_conformance.conformance.verdict.oracle import judge

SUITE = "properties"

UNARY = {
    "abs": torch.abs,
    "neg": torch.neg,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "sin": torch.sin,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "floor": torch.floor,
    "sign": torch.sign,
    "nn.functional.relu": torch.relu,
    "clone": torch.clone,
}
BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div.no_rounding_mode": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "eq": torch.eq,
    "lt": torch.lt,
    "atan2": torch.atan2,
    "pow": torch.pow,
}
REDUCTIONS = {
    "sum": torch.sum,
    "mean": torch.mean,
    "amax": torch.amax,
    "amin": torch.amin,
    "prod": torch.prod,
    "any": torch.any,
    "all": torch.all,
    "std": torch.std,
}
INDEXING = ("__getitem__", "index_put")


def _params(names, variant):
    return [pytest.param(n, id=n, marks=pytest.mark.conformance(op=n, variant=variant, suite=SUITE)) for n in names]


def _dtypes(config, floating_only=False):
    names = [n for n in selected_dtypes(config) if not floating_only or getattr(torch, n).is_floating_point]
    return [getattr(torch, n) for n in names]


def _specials(dtype: torch.dtype) -> list:
    if dtype == torch.bool:
        return [True, False]
    if dtype.is_floating_point:
        fi = torch.finfo(dtype)
        return [
            0.0,
            -0.0,
            math.inf,
            -math.inf,
            math.nan,
            fi.tiny / 2,
            -fi.tiny / 4,
            fi.tiny,
            fi.max,
            -fi.max,
            fi.eps,
            1.0,
            -1.0,
        ]
    ii = torch.iinfo(dtype)
    return [0, 1, -1 if ii.min < 0 else 2, ii.min, ii.max]


def elements(dtype: torch.dtype):
    """Strategy for one element of ``dtype``: ordinary values and the dtype's special values."""
    if dtype == torch.bool:
        return st.booleans()
    special = st.sampled_from(_specials(dtype))
    if dtype.is_floating_point:
        return st.one_of(special, st.floats(-100, 100, allow_nan=False, width=32))
    ii = torch.iinfo(dtype)
    return st.one_of(special, st.integers(max(ii.min, -100), min(ii.max, 100)))


@st.composite
def tensors(draw, dtype, shape, label="tensor"):
    """A CPU tensor of ``dtype`` and ``shape`` from :func:`elements`."""
    n = math.prod(shape)
    vals = draw(st.lists(elements(dtype), min_size=n, max_size=n), label=f"{label} values")
    return torch.tensor(vals, dtype=dtype).reshape(shape) if n else torch.empty(shape, dtype=dtype)


shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@st.composite
def viewed(draw, dtype, shape):
    """A tensor of ``shape`` seen through a random view: permuted, sliced with a step, at an offset."""
    perm = draw(st.permutations(range(len(shape))), label="permutation")
    step = draw(st.integers(1, 3), label="step of the last dim")
    offset = draw(st.integers(0, 3), label="storage offset")
    inner = [shape[p] for p in perm]
    if inner:
        inner[-1] = inner[-1] * step
    base = draw(tensors(dtype, (offset + math.prod(inner),), "base"))
    t = base[offset:].view(inner) if inner else base[offset:].view(())
    if inner:
        t = t[..., ::step]
    inv = [perm.index(i) for i in range(len(shape))]
    return t.permute(inv) if inner else t


def _compare(op_name, actual, expected, where, reference64=None):
    if isinstance(expected, torch.Tensor):
        if actual.device.type == "cpu" and expected.device.type == "cpu" and actual is expected:
            raise MetadataFailure(f"{where}: the device result is the CPU result object")
        if actual.dtype != expected.dtype:
            raise MetadataFailure(f"{where}: dtype {actual.dtype}, the CPU gives {expected.dtype}")
    v = judge(actual, expected, exact=is_exact_op(op_name), reference64=reference64)
    v.raise_if_failed(where)


def _both(fn, device, *cpu_args, **kwargs):
    dev_args = [to_device_exact(a, device) if isinstance(a, torch.Tensor) else a for a in cpu_args]
    try:
        expected, cpu_exc = fn(*cpu_args, **kwargs), None
    except Exception as exc:  # noqa: BLE001
        expected, cpu_exc = None, exc
    try:
        actual, dev_exc = fn(*dev_args, **kwargs), None
    except Exception as exc:  # noqa: BLE001
        actual, dev_exc = None, exc
    return actual, dev_exc, expected, cpu_exc


def _judge_pair(op_name, fn, device, args, kwargs=None, *, fp64=True):
    kwargs = kwargs or {}
    actual, dev_exc, expected, cpu_exc = _both(fn, device, *args, **kwargs)
    where = f"{op_name}(" + ", ".join(_describe(a) for a in args) + (f", **{kwargs}" if kwargs else "") + ")"
    if currently_in_test_context():
        note(f"repro: {where}")
    if cpu_exc is not None:
        if dev_exc is None or not isinstance(dev_exc, type(cpu_exc)):
            raise WrongErrorFailure(
                f"{where}: the CPU raised {type(cpu_exc).__name__}: {cpu_exc}; the device "
                f"{'returned a result' if dev_exc is None else 'raised ' + repr(dev_exc)}"
            )
        return
    if dev_exc is not None:
        raise dev_exc
    ref = None
    if fp64 and isinstance(expected, torch.Tensor) and expected.is_floating_point() and expected.dtype != torch.float64:
        try:
            ref = fn(
                *[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args], **kwargs
            )
        except Exception:  # noqa: BLE001 - no fp64 kernel: tolerance only
            ref = None
        if not isinstance(ref, torch.Tensor) or ref.shape != expected.shape:
            ref = None
    _compare(op_name, actual, expected, where, ref)


def _describe(a):
    if isinstance(a, torch.Tensor):
        return (
            f"tensor({a.tolist()!r}, dtype={a.dtype}).as_strided({tuple(a.shape)}, {a.stride()}, {a.storage_offset()})"
            if a.numel() <= 16
            else f"<{a.dtype} {tuple(a.shape)} strides {a.stride()} offset {a.storage_offset()}>"
        )
    return repr(a)


@pytest.mark.parametrize("op_name", _params(UNARY, "generated"))
def test_unary(op_name, device, request):
    floats = _dtypes(request.config, floating_only=True)
    if not floats:
        pytest.skip("no floating dtype selected")

    @given(data=st.data())
    def run(data):
        dtype = data.draw(st.sampled_from(floats), label="dtype")
        shape = data.draw(shapes, label="shape")
        x = data.draw(viewed(dtype, shape), label="input")
        _judge_pair(op_name, UNARY[op_name], device, (x,))

    run()


@pytest.mark.parametrize("op_name", _params(BINARY, "generated"))
def test_binary(op_name, device, request):
    from hypothesis.extra.numpy import mutually_broadcastable_shapes

    dtypes = _dtypes(request.config)

    @given(data=st.data())
    def run(data):
        d1 = data.draw(st.sampled_from(dtypes), label="dtype of a")
        d2 = data.draw(st.sampled_from(dtypes), label="dtype of b")
        shp = data.draw(
            mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=3), label="shapes"
        )
        a = data.draw(tensors(d1, shp.input_shapes[0], "a"), label="a")
        b = data.draw(tensors(d2, shp.input_shapes[1], "b"), label="b")
        _judge_pair(op_name, BINARY[op_name], device, (a, b))

    run()


@pytest.mark.parametrize("op_name", _params(BINARY, "promotion"))
def test_promotion(op_name, device, request):
    """Every ordered pair of selected dtypes: the result dtype (and values) must be the CPU's."""
    fn = BINARY[op_name]
    dtypes = _dtypes(request.config)
    for d1, d2 in itertools.product(dtypes, dtypes):
        a = torch.tensor([[0, 1, 2], [3, 4, 5]]).to(d1)
        b = torch.tensor([1, 2, 3]).to(d2)
        _judge_pair(op_name, fn, device, (a, b))


@pytest.mark.parametrize("op_name", _params(REDUCTIONS, "generated"))
def test_reduction(op_name, device, request):
    fn = REDUCTIONS[op_name]
    dtypes = [d for d in _dtypes(request.config) if op_name not in ("mean", "std") or d.is_floating_point]

    @given(data=st.data())
    def run(data):
        dtype = data.draw(st.sampled_from(dtypes), label="dtype")
        shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple), label="shape")
        x = data.draw(viewed(dtype, shape), label="input")
        dims = data.draw(
            st.lists(
                st.integers(-len(shape), len(shape) - 1),
                min_size=1,
                max_size=len(shape),
                unique_by=lambda d: d % len(shape),
            ),
            label="dims",
        )
        keepdim = data.draw(st.booleans(), label="keepdim")
        if op_name in ("any", "all", "prod"):  # single-dim reductions in torch 2.13
            dims = dims[0]
        _judge_pair(op_name, fn, device, (x,), {"dim": dims, "keepdim": keepdim})

    run()


@pytest.mark.parametrize("op_name", _params(INDEXING, "generated"))
def test_indexing(op_name, device, request):
    dtypes = _dtypes(request.config)

    @given(data=st.data())
    def run(data):
        dtype = data.draw(st.sampled_from(dtypes), label="dtype")
        shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), label="shape")
        x = data.draw(tensors(dtype, shape, "x"), label="x")
        n = shape[0]
        if data.draw(st.booleans(), label="boolean mask"):
            mask = torch.tensor(data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="mask"))
            index = mask
        else:
            idx = data.draw(st.lists(st.integers(-n, n - 1), min_size=0, max_size=5), label="indices")
            index = torch.tensor(idx, dtype=torch.long)
        if op_name == "__getitem__":
            _judge_pair(op_name, lambda t, i: t[i], device, (x, index), fp64=False)
        else:
            k = int(index.sum()) if index.dtype == torch.bool else index.numel()
            vals = data.draw(tensors(dtype, (k, *shape[1:]), "values"), label="values")

            def put(t, i, v):
                return t.clone().index_put_((i,), v)

            if index.dtype != torch.bool and len(set(index.remainder(n).tolist())) != index.numel():
                return  # duplicate indices without accumulate: which write wins is unspecified
            _judge_pair(op_name, put, device, (x, index, vals), fp64=False)

    run()


def scalar_overloads() -> list[str]:
    """Registered ``aten::<op>.<...Scalar...>`` overloads with schema ``(Tensor, Scalar, defaults...) -> Tensor``
    (not in-place, not out=, not private): 35 in torch 2.13."""
    out = []
    for n in registered_overloads():
        base, _, ov = n[len("aten::") :].partition(".")
        if "Scalar" not in ov or base.startswith("_") or base.endswith("_") or ov.endswith("out"):
            continue
        op = getattr(getattr(torch.ops.aten, base), ov)
        args, rets = op._schema.arguments, op._schema.returns
        if len(args) < 2 or str(args[0].type) != "Tensor" or str(args[1].type) != "number":
            continue
        if any(a.default_value is None for a in args[2:]):
            continue
        if len(rets) == 1 and str(rets[0].type) == "Tensor" and rets[0].alias_info is None:
            out.append(n)
    return out


@pytest.mark.parametrize("overload", _params(scalar_overloads(), "scalar"))
def test_scalar_overload(overload, device, request):
    base, _, ov = overload[len("aten::") :].partition(".")
    fn = getattr(getattr(torch.ops.aten, base), ov)
    for dtype in _dtypes(request.config):
        x = torch.tensor([_specials(dtype)[i % len(_specials(dtype))] for i in range(6)], dtype=dtype)
        for scalar in (2, -1.5, 0) if dtype != torch.bool else (True, 1):
            _judge_pair(overload, fn, device, (x, scalar), fp64=False)
