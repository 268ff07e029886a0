"""Integer outputs the CPU does not fix, judged by the semantics that do hold.

Where PyTorch calls an op's integer results implementation-defined (its OpInfo skips its own
``test_compare_cpu`` on every device: :func:`neuron_conformance.opsuites.samples.reference_skipped_upstream`) and the backend
does not mirror the CPU, :func:`neuron_conformance.conformance.verdict.compare.compare_outputs` does not compare those outputs with
the CPU's element by element (rule ``implementation-defined``). They are not free, though: whatever the
order or the tie-breaking, an index output must select what the op says it selects. :func:`checker` gives,
for the ops listed in :data:`CHECKS`, a check of the device result against these rules (rule
:data:`RULE`), from PyTorch's documented semantics (``torch.unique``, ``torch.sort``, ``torch.topk``,
``torch.max(dim)``, ``torch.linalg.lu_factor`` in the PyTorch docs):

* **selection** (``max``/``min`` with ``dim``, ``kthvalue``, ``mode``, ``median``/``nanmedian`` with
  ``dim``): every index is in ``[0, size(dim))`` and ``input.gather(dim, indices)`` equals the values;
* **sort** (``sort``, ``argsort``, ``msort``-like ``topk``): each row of indices along ``dim`` is a
  permutation of ``range(size(dim))`` (``topk``: ``k`` distinct indices), the input gathered at them
  equals the values, and the sorted values equal the CPU's (sorted values do not depend on tie-breaking;
  ``topk(sorted=False)``: as a multiset);
* **unique**: the values are the CPU's distinct values or slices (in the CPU's order when ``sorted``,
  else as a set); ``values[inverse]`` (``index_select`` along ``dim``) rebuilds the input; ``counts`` is
  the number of occurrences of each value (``bincount`` of the inverse);
* **LU pivots** (``linalg.lu_factor``, ``lu_factor_ex``): every pivot is in ``[1, m]`` (LAPACK's 1-based
  row indices) and ``P @ L @ U`` rebuilt from the device's factors (``torch.lu_unpack``) is as close to
  the input as the CPU's is (:func:`neuron_conformance.conformance.verdict.oracle.judge` with the input as fp64 reference); ``info``
  equals the CPU's.

Values are compared exactly (NaN equal to NaN): each check reads positions of the input, it does not
compute.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from neuron_conformance.conformance.verdict.failures import MetadataFailure, NumericFailure
from neuron_conformance.conformance.verdict.oracle import Verdict, judge
from neuron_conformance.conformance.verdict.tolerances import Tolerance

RULE = "index-semantics"
"""Rule of the verdicts of these checks (ranked above ``implementation-defined``, below ``exact``)."""

DEVICE_CHOOSES_TIES = frozenset({"sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "mode"})
"""OpInfos whose index among tied values the docs leave to the device, judged by these semantics on every
backend that does not mirror the CPU (not only where PyTorch skips its own CPU comparison):

* ``torch.sort``/``torch.argsort``: only ``stable=True`` "guarantees that the order of equivalent elements is
  preserved"; with it the indices must be the CPU's exactly (:func:`check_sort`'s ``stable``);
* ``torch.median``/``torch.nanmedian`` with ``dim``: "indices does not necessarily contain the first
  occurrence of each median value found, unless it is unique. The exact implementation details are
  device-specific";
* ``torch.topk``, ``torch.kthvalue``, ``torch.mode``: the docs name no index among equal values.

``torch.max``/``torch.min`` with ``dim`` and ``argmax``/``argmin`` stay exact: their docs fix the first
maximal (minimal) index. Their gradients are compared up to the tie choice (:func:`tie_canonical_gradient`)."""

GRADIENT_TIES = DEVICE_CHOOSES_TIES | {"msort"}
"""OpInfos whose gradient goes to the input their (device-chosen) index among ties names: those above, and
``msort`` (``torch.msort``: ``torch.sort(input, dim=0)[0]``, an unstable sort whose values do not depend on the
tie choice but whose backward scatters by its indices). Their gradients are compared up to the tie choice
(:func:`tie_canonical_gradient`)."""


def tie_canonical_gradient(grad: torch.Tensor, leaf: torch.Tensor) -> torch.Tensor:
    """``grad`` flattened and ordered by the value of ``leaf`` (the input it is the gradient of), then by its
    own value: the same on two devices whose gradients differ only in which of several equal inputs each
    gradient entry went to.

    The backward of an op in :data:`DEVICE_CHOOSES_TIES` sends each output's gradient to the input its index
    names (``sort``, ``topk``: a scatter by the indices; ``kthvalue``, ``median``, ``mode``: to the chosen
    element), so a device that chose another of the tied inputs puts the same gradient entries at other
    positions among those inputs. Elements with distinct input values keep their relative order, so a
    gradient sent to an input of another value still differs.
    """
    g = _host(grad).reshape(-1)
    x = _host(leaf).reshape(-1)
    if g.numel() != x.numel() or g.is_complex() or x.is_complex():
        return _host(grad)
    by_grad = torch.argsort(torch.nan_to_num(g.double(), nan=math.inf), stable=True)
    order = by_grad[torch.argsort(torch.nan_to_num(x[by_grad].double(), nan=math.inf), stable=True)]
    return g[order]


def _host(t):
    return t.detach().cpu() if isinstance(t, torch.Tensor) else t


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def _bind(args: tuple, kwargs: dict, names: tuple, defaults: tuple) -> dict:
    """The op's arguments after the input, by name: positional ``args`` first, then ``kwargs``, then the
    documented defaults."""
    bound = dict(zip(names, defaults))
    bound.update(zip(names, args))
    bound.update({k: v for k, v in kwargs.items() if k in names})
    return bound


def _fail(cls, where: str, message: str):
    raise cls(f"{where}: {message} ({RULE})", fields={"rule": RULE})


def _check_range(where: str, name: str, idx: torch.Tensor, low: int, high: int) -> None:
    if idx.is_floating_point() or idx.is_complex() or idx.dtype == torch.bool:
        _fail(MetadataFailure, where, f"{name} has dtype {idx.dtype}, not an integer dtype")
    if idx.numel() and (int(idx.min()) < low or int(idx.max()) >= high):
        _fail(
            NumericFailure,
            where,
            f"{name} out of range: min {int(idx.min())}, max {int(idx.max())}, allowed [{low}, {high})",
        )


def _dim(x: torch.Tensor, dim) -> int:
    return 0 if x.dim() == 0 else int(dim) % x.dim()


def check_selection(
    x: torch.Tensor, values: torch.Tensor, indices: torch.Tensor, dim, keepdim: bool, where: str
) -> None:
    """``indices`` (device result, on the CPU) select ``values`` from ``x`` along ``dim``.

    Raises:
        NumericFailure: an index out of ``[0, size(dim))``, or the input at an index is not the value.
        MetadataFailure: ``indices`` is not integer, or its shape is not ``values``'.
    """
    if indices.shape != values.shape:
        _fail(
            MetadataFailure,
            where,
            f"indices shape {tuple(indices.shape)} differs from the values' {tuple(values.shape)}",
        )
    if x.dim() == 0:
        _check_range(where, "indices", indices, 0, 1)
        return
    d = _dim(x, dim)
    _check_range(where, "indices", indices, 0, x.shape[d])
    idx = indices if keepdim else indices.unsqueeze(d)
    picked = x.gather(d, idx.long())
    if not _same(picked if keepdim else picked.squeeze(d), values):
        _fail(NumericFailure, where, "the input at the returned indices is not the returned values")


def check_sort(
    x: torch.Tensor,
    values: torch.Tensor | None,
    indices: torch.Tensor,
    cpu_values: torch.Tensor,
    dim,
    where: str,
    *,
    k: int | None = None,
    ordered: bool = True,
    cpu_indices: torch.Tensor | None = None,
) -> None:
    """``indices`` along ``dim`` are distinct (a permutation; ``k`` of them for topk), select ``values``
    from ``x``, and the values equal ``cpu_values`` (the CPU's sorted values; as a multiset when not
    ``ordered``). ``values`` None (argsort): the gathered input is compared with ``cpu_values``.
    ``cpu_indices`` (a stable sort): the indices must also be the CPU's, element for element.

    Raises:
        NumericFailure, MetadataFailure: as :func:`check_selection`, or a row that repeats an index.
    """
    if cpu_indices is not None and not _same(indices.long(), cpu_indices.long()):
        _fail(NumericFailure, where, "a stable sort's indices differ from the CPU's (stable=True fixes them)")
    if x.dim() == 0:
        _check_range(where, "indices", indices, 0, 1)
        return
    d = _dim(x, dim)
    n = x.shape[d]
    _check_range(where, "indices", indices, 0, n)
    if indices.numel() == 0:  # nothing selected (an empty input or k=0): only the shapes, compared already
        return
    rows = indices.movedim(d, -1).reshape(-1, indices.shape[d] if indices.dim() else 1).long()
    if bool((rows.sort(-1).values.diff(dim=-1) == 0).any()):
        _fail(NumericFailure, where, "a row of indices repeats an index: not a permutation of the input's")
    got = x.gather(d, indices.long())
    if values is not None and not _same(got, values):
        _fail(NumericFailure, where, "the input at the returned indices is not the returned values")
    want = cpu_values
    if not ordered:
        got, want = got.sort(d).values, cpu_values.sort(d).values
    if not _same(got, want):
        _fail(
            NumericFailure,
            where,
            f"the selected values are not the CPU's sorted values (k={k})"
            if k
            else "the values at the returned indices are not the CPU's sorted values",
        )


def check_unique(
    x: torch.Tensor,
    outs: list,
    cpu_values: torch.Tensor,
    *,
    sorted_: bool,
    return_inverse: bool,
    return_counts: bool,
    dim,
    where: str,
) -> None:
    """``torch.unique``'s outputs ``[values, inverse?, counts?]`` (device, on the CPU) are consistent with
    ``x`` and hold the CPU's distinct values (module docstring).

    Raises:
        NumericFailure: other distinct values, an inverse that does not rebuild ``x``, wrong counts.
        MetadataFailure: missing outputs or shapes that do not fit.
    """
    expected = 1 + int(return_inverse) + int(return_counts)
    if len(outs) != expected:
        _fail(MetadataFailure, where, f"{len(outs)} output(s), unique returns {expected} with these flags")
    values = outs[0]
    d = None if dim is None else _dim(x, dim)

    def flat(t: torch.Tensor) -> torch.Tensor:  # one row per value (dim None) or per slice along d
        if d is None:
            return t.reshape(-1, 1)
        rest = [n for i, n in enumerate(t.shape) if i != d]
        return t.movedim(d, 0).reshape(t.shape[d], math.prod(rest))

    if d is not None and values.dim() != x.dim():
        _fail(MetadataFailure, where, f"values have {values.dim()} dims, the input {x.dim()}")
    n = values.numel() if d is None else values.shape[d]
    if sorted_:
        if not _same(values, cpu_values):
            _fail(NumericFailure, where, "the sorted distinct values are not the CPU's")
    elif sorted(map(tuple, flat(values).tolist())) != sorted(map(tuple, flat(cpu_values).tolist())):
        _fail(NumericFailure, where, "the distinct values are not the CPU's (compared as a set)")
    at = 1
    if return_inverse:
        inverse = outs[at]
        at += 1
        want_shape = x.shape if d is None else (x.shape[d],)
        if tuple(inverse.shape) != tuple(want_shape):
            _fail(MetadataFailure, where, f"inverse shape {tuple(inverse.shape)}, expected {tuple(want_shape)}")
        _check_range(where, "inverse", inverse, 0, max(n, 1) if x.numel() else 1)
        rebuilt = values.reshape(-1)[inverse.long()] if d is None else values.index_select(d, inverse.long())
        if x.numel() and not _same(rebuilt, x):
            _fail(NumericFailure, where, "values[inverse] does not rebuild the input")
    if return_counts:
        counts = outs[at]
        if tuple(counts.shape) != (n,):
            _fail(MetadataFailure, where, f"counts shape {tuple(counts.shape)}, expected ({n},)")
        rows = flat(x)
        uniq = flat(values)
        want = torch.stack([(rows == u).all(-1).sum() for u in uniq]) if n else torch.zeros(0, dtype=torch.long)
        if not torch.equal(counts.long(), want.long()):
            _fail(NumericFailure, where, "counts are not the number of occurrences of each value")


def check_lu(x: torch.Tensor, outs: list, cpu_outs: list, tolerance: Tolerance, where: str) -> Verdict:
    """``linalg.lu_factor(_ex)``'s ``(LU, pivots[, info])`` (device, on the CPU): pivots in ``[1, m]``,
    ``P @ L @ U`` as close to ``x`` as the CPU's (fp64 rule of :func:`neuron_conformance.conformance.verdict.oracle.judge`), ``info``
    equal to the CPU's. Returns the reconstruction's verdict.

    Raises:
        NumericFailure: a pivot out of range, a reconstruction further from ``x``, another ``info``.
    """
    lu, pivots = outs[0], outs[1]
    m = x.shape[-2]
    _check_range(where, "pivots", pivots, 1, m + 1)
    if len(outs) > 2 and not torch.equal(outs[2], cpu_outs[2]):
        _fail(NumericFailure, where, f"info {outs[2].tolist()} differs from the CPU's {cpu_outs[2].tolist()}")
    if not x.numel():
        return Verdict(True, RULE)
    p, low, up = torch.lu_unpack(lu, pivots)
    pc, lc, uc = torch.lu_unpack(cpu_outs[0], cpu_outs[1])
    v = judge(p @ low @ up, pc @ lc @ uc, reference64=x.double(), atol=tolerance.atol, rtol=tolerance.rtol)
    if not v.passed:
        _fail(NumericFailure, where, f"P @ L @ U from the pivots does not rebuild the input: {v.message}")
    return Verdict(True, RULE, max_abs=v.max_abs, max_rel=v.max_rel, max_ulp=v.max_ulp, atol=v.atol, rtol=v.rtol)


def _selection(name_defaults):
    names, defaults = name_defaults

    def run(x, args, kwargs, outs, cpu_outs, tol, where):
        if len(outs) != 2:
            return None
        b = _bind(args, kwargs, names, defaults)
        check_selection(x, outs[0], outs[1], b["dim"], bool(b["keepdim"]), where)
        return Verdict(True, RULE)

    return run


def _sort(x, args, kwargs, outs, cpu_outs, tol, where):
    b = _bind(args, kwargs, ("dim", "descending", "stable"), (-1, False, False))
    stable = cpu_outs[1] if b["stable"] and len(cpu_outs) > 1 else None
    check_sort(x, outs[0], outs[1], cpu_outs[0], b["dim"], where, cpu_indices=stable)
    return Verdict(True, RULE)


def _argsort(x, args, kwargs, outs, cpu_outs, tol, where):
    b = _bind(args, kwargs, ("dim", "descending", "stable"), (-1, False, False))
    want = torch.sort(x, dim=b["dim"], descending=bool(b["descending"])).values if x.dim() else x
    check_sort(x, None, outs[0], want, b["dim"], where, cpu_indices=cpu_outs[0] if b["stable"] else None)
    return Verdict(True, RULE)


def _topk(x, args, kwargs, outs, cpu_outs, tol, where):
    b = _bind(args, kwargs, ("k", "dim", "largest", "sorted"), (None, -1, True, True))
    check_sort(x, outs[0], outs[1], cpu_outs[0], b["dim"], where, k=b["k"], ordered=bool(b["sorted"]))
    return Verdict(True, RULE)


def _unique(x, args, kwargs, outs, cpu_outs, tol, where):
    b = _bind(args, kwargs, ("sorted", "return_inverse", "return_counts", "dim"), (True, False, False, None))
    check_unique(
        x,
        outs,
        cpu_outs[0],
        sorted_=bool(b["sorted"]),
        return_inverse=bool(b["return_inverse"]),
        return_counts=bool(b["return_counts"]),
        dim=b["dim"],
        where=where,
    )
    return Verdict(True, RULE)


def _lu(x, args, kwargs, outs, cpu_outs, tol, where):
    return check_lu(x, outs, cpu_outs, tol, where)


_DIM_KEEPDIM = (("dim", "keepdim"), (None, False))
CHECKS: dict[str, Callable] = {
    "max.reduction_with_dim": _selection(_DIM_KEEPDIM),
    "min.reduction_with_dim": _selection(_DIM_KEEPDIM),
    "median": _selection(_DIM_KEEPDIM),
    "nanmedian": _selection(_DIM_KEEPDIM),
    "mode": _selection((("dim", "keepdim"), (-1, False))),
    "kthvalue": _selection((("k", "dim", "keepdim"), (None, -1, False))),
    "sort": _sort,
    "argsort": _argsort,
    "topk": _topk,
    "unique": _unique,
    "linalg.lu_factor": _lu,
    "linalg.lu_factor_ex": _lu,
}
"""OpInfo name -> ``check(input, args, kwargs, device outputs, CPU outputs, tolerance, where) -> Verdict``
(or None: the call's outputs are not the indexed form, e.g. ``median`` without ``dim``)."""


def checker(op_name: str, triple) -> Callable | None:
    """``check(actual, expected, tolerance, where) -> [Verdict]`` for ``op_name`` called on ``triple`` =
    ``(input, args, kwargs)`` (CPU tensors, not mutated by the op), or None when no rule is listed for it
    (:data:`CHECKS`) or its input is not a tensor. ``actual`` is the device result, ``expected`` the
    CPU's; the device outputs are read back to the CPU.

    Raises (from the returned check):
        NumericFailure, MetadataFailure: the device's integer outputs break the op's semantics.
    """
    rule = CHECKS.get(op_name)
    if rule is None or not isinstance(triple[0], torch.Tensor):
        return None
    x, args, kwargs = triple

    def check(actual, expected, tolerance: Tolerance, where: str) -> list[Verdict]:
        outs = [_host(t) for t in (actual if isinstance(actual, (tuple, list)) else (actual,))]
        cpu_outs = list(expected) if isinstance(expected, (tuple, list)) else [expected]
        v = rule(_host(x), tuple(args), dict(kwargs), outs, cpu_outs, tolerance, where)
        return [v] if v is not None else []

    return check


__all__ = [
    "CHECKS",
    "DEVICE_CHOOSES_TIES",
    "RULE",
    "check_lu",
    "check_selection",
    "check_sort",
    "check_unique",
    "checker",
]
