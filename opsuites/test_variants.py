"""Variants of each OpInfo on the device: function, method, in-place, operator and aliases; and ``out=``.

``test_variants`` (variant ``variants``): every variant PyTorch's OpInfo declares runs on the device and on
the CPU on the same sample; each must agree with the CPU's result of the same variant (the op suites'
tolerance policy) and with the device's own function variant; an in-place variant must return its input.
When the CPU raises, the device must raise the same exception type.

``test_out`` (variant ``out``), for OpInfos with ``supports_out``, following PyTorch's ``test_out``
(``test/test_ops.py``) but with the CPU as the oracle of every aliasing behaviour:

1. a correctly sized ``out`` pre-filled with NaN (integers: ``iinfo.max``, bool: True) is returned,
   holds the function's values (judged as ``test_compare_cpu`` judges its function variant: the
   tolerance, then for floating dtypes fp64 arbitration, :func:`out_reference64`; the record names the
   rule), and is written in place: ``data_ptr()`` is unchanged when it is on the CPU;
2. a noncontiguous ``out`` (every other element of a larger buffer) keeps its strides and storage;
3. a zero-element ``out`` is resized to the result's shape;
4. an ``out`` of a dtype the result cannot be safely cast to raises when it raises on the CPU.

``test_out_device`` (variant ``out_device``, one test per op, in the first selected dtype the op supports):
an ``out`` on the wrong device (the CPU) with inputs on the device raises (PyTorch's ``test_out`` expects a
``RuntimeError``; any exception is accepted here).

Each test takes every sample of the OpInfo within ``--conformance-sample-budget`` seconds (:mod:`neuron_conformance.opsuites.sample_selection`;
``--conformance-sample N`` replays one); the record counts the samples compared and those left out by reason
(``time budget``; for ``out=``: ``CPU raised``, ``no tensor result for out=``; for ``out=`` on the wrong
device also ``0-dim input``). In-place variants skip the samples that broadcast their input, as PyTorch's
``test_variant_consistency_eager`` does; such a sample is still compared through its other variants.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._pytree import tree_flatten, tree_map

from neuron_conformance.conformance.backend.transfer import sample_to_device, triple_to_device
from neuron_conformance.conformance.pytest_plugin.options import selected_dtypes
from neuron_conformance.conformance.verdict.compare import check_same_error
from neuron_conformance.conformance.verdict.failures import (
    ConformanceFailure,
    MetadataFailure,
    NumericFailure,
    WrongErrorFailure,
)
from neuron_conformance.conformance.verdict.output_dtypes import device_shape_allowed
from neuron_conformance.opsuites.sample_selection import SampleSelection, require_compared
from neuron_conformance.opsuites.samples import reference_skipped_upstream, sample_inputs
from neuron_conformance.opsuites.suite_helpers import (
    annotate,
    call,
    finish,
    fold,
    for_sample,
    index_checker,
    opinfo,
    parametrize_opinfos,
    reference64_of,
    start_case,
    suite_params,
    up_to_gauge,
)

SUITE = "variants"
VARIANT = "variants"


def _has_variants(op) -> bool:
    return bool(op.method_variant or op.inplace_variant or op.operator_variant or op.aliases)


OPINFO_FILTER = _has_variants


def pytest_generate_tests(metafunc):
    parametrize_opinfos(metafunc)
    if {"out_op_name", "out_dtype_name"} <= set(metafunc.fixturenames):
        metafunc.parametrize(
            ("out_op_name", "out_dtype_name"),
            suite_params(metafunc.config, SUITE, variant="out", predicate=lambda op: op.supports_out),
        )
    if {"outdev_op_name", "outdev_dtype"} <= set(metafunc.fixturenames):
        metafunc.parametrize(
            ("outdev_op_name", "outdev_dtype"),
            suite_params(
                metafunc.config, SUITE, variant="out_device", per_dtype=False, predicate=lambda op: op.supports_out
            ),
        )


def _variants(op):
    """``[(label, callable, inplace)]`` of every non-function variant of ``op``."""
    out = []
    if op.method_variant is not None:
        out.append(("method", op.method_variant, False))
    if op.inplace_variant is not None:
        out.append(("inplace", op.inplace_variant, True))
    if op.operator_variant is not None:
        out.append(("operator", op.operator_variant, False))
    for alias in op.aliases or ():
        out.append((f"alias {alias.name}", alias.op, False))
        if alias.method_variant is not None:
            out.append((f"alias {alias.name} method", alias.method_variant, False))
        if alias.inplace_variant is not None:
            out.append((f"alias {alias.name} inplace", alias.inplace_variant, True))
    return out


def test_variants(op_name, dtype_name, device, device_profile, conformance_record, sample_index, sample_budget):
    op, dtype, tol, policy, tally, selection = start_case(
        op_name, dtype_name, device, device_profile, conformance_record, sample_index, budget=sample_budget
    )
    variants = _variants(op)
    for index, sample in selection:
        pristine = sample_to_device(sample, "cpu", op.name)
        b_inp, b_args, b_kwargs = triple_to_device(pristine, device, op.name, index=index)
        base, base_exc = call(op, b_inp, *b_args, **b_kwargs)
        try:
            _check_aliasing(
                op, pristine, b_inp, base, base_exc, f"{op_name} {dtype_name} sample {index} (function variant)"
            )
        except ConformanceFailure as exc:
            exc.sample = index
            finish(conformance_record, tally, selection, failed=True)
            raise
        sample_policy = for_sample(policy, op, sample, device_profile)  # dropout_p > 0: the values are random
        for label, fn, inplace in variants:
            where = f"{op_name} {dtype_name} sample {index} ({label} variant)"
            if inplace and getattr(sample, "broadcasts_input", False):
                continue  # the in-place result cannot take the broadcast shape (PyTorch skips these too)
            c_inp, c_args, c_kwargs = triple_to_device(pristine, "cpu", op.name)
            d_inp, d_args, d_kwargs = triple_to_device(pristine, device, op.name, index=index)
            reference64 = (
                reference64_of(lambda *a, **k: up_to_gauge(op, sample, device_profile, fn(*a, **k)), pristine, dtype)
                if sample_policy.arbitrate
                else None
            )
            semantics = None if inplace else index_checker(op_name, sample_policy, pristine)
            expected, cpu_exc = call(fn, c_inp, *c_args, **c_kwargs)
            actual, dev_exc = call(fn, d_inp, *d_args, **d_kwargs)
            try:
                if cpu_exc is not None:
                    check_same_error(dev_exc, cpu_exc, where)
                    continue
                if dev_exc is not None:
                    raise annotate(dev_exc, where, index)
                if inplace and actual is not d_inp:
                    raise MetadataFailure(f"{where}: the in-place variant returned a new tensor, not its input")
                if not inplace:  # SVD, eigenvectors: compared up to sign or phase
                    actual = up_to_gauge(op, sample, device_profile, actual)
                    expected = up_to_gauge(op, sample, device_profile, expected)
                fold(
                    tally,
                    index,
                    actual,
                    expected,
                    device=device,
                    profile=device_profile,
                    tol=tol,
                    where=where,
                    values=sample_policy,
                    reference64=reference64,
                    semantics=semantics,
                    op=op_name,
                )
                if base_exc is None and not inplace:
                    fold(
                        tally,
                        index,
                        actual,
                        up_to_gauge(op, sample, device_profile, base),
                        device=device,
                        profile=device_profile,
                        tol=tol,
                        where=where + " vs the device's function variant",
                        values=sample_policy,
                        check_strides=False,
                        op=op_name,
                    )
            except ConformanceFailure as exc:
                exc.sample = index
                finish(conformance_record, tally, selection, failed=True)
                raise
    finish(conformance_record, tally, selection, policy=policy)
    require_compared(selection, f"{op_name} {dtype_name} (variants)")


def _storage(t):
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None


def _check_aliasing(op, pristine, dev_inp, dev_result, dev_exc, where):
    """When the CPU result of the function variant is a view of the input (shares its storage), the
    device result must be a view of the device input too (a view op that copies fails as ``metadata``)."""
    c_inp, c_args, c_kwargs = triple_to_device(pristine, "cpu", op.name)
    c_res, c_exc = call(op, c_inp, *c_args, **c_kwargs)
    if (
        c_exc is not None
        or dev_exc is not None
        or not isinstance(c_inp, torch.Tensor)
        or not isinstance(dev_inp, torch.Tensor)
        or c_inp.numel() == 0
    ):
        return
    c_leaves, d_leaves = tree_flatten(c_res)[0], tree_flatten(dev_result)[0]
    for i, (c, d) in enumerate(zip(c_leaves, d_leaves)):
        if not isinstance(c, torch.Tensor) or not isinstance(d, torch.Tensor) or c.layout != torch.strided:
            continue
        if c.numel() and _storage(c) == _storage(c_inp) and _storage(d) != _storage(dev_inp):
            raise MetadataFailure(
                f"{where}, output {i}: on the CPU the result is a view of the input; on the "
                f"device it is a copy (it does not share the input's storage)"
            )


# ---------------------------------------------------------------------------------------------- out=


def _fill_value(dtype: torch.dtype):
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).max


def _make_out(expected, device, kind: str):
    """An ``out=`` structure shaped like ``expected`` on ``device``: ``kind`` is ``sized`` (filled),
    ``noncontig`` (every other element of a larger buffer, filled), or ``empty`` (zero elements)."""

    def make(t):
        if kind == "empty":
            return torch.empty(0, dtype=t.dtype, device=device)
        if kind == "noncontig":
            if t.dim() == 0:
                return torch.full((), _fill_value(t.dtype), dtype=t.dtype, device=device)
            big = torch.full((*t.shape[:-1], t.shape[-1] * 2), _fill_value(t.dtype), dtype=t.dtype, device=device)
            return big[..., ::2]
        return torch.full(t.shape, _fill_value(t.dtype), dtype=t.dtype, device=device)

    return tree_map(make, expected)


def _ptrs(out):
    return [t.data_ptr() for t in tree_flatten(out)[0]]


def _shapes(out):
    return [(tuple(t.shape), t.stride()) for t in tree_flatten(out)[0]]


def _out_arg(out):
    return tuple(out) if isinstance(out, list) else out


def _usable(expected) -> bool:
    leaves = tree_flatten(expected)[0]
    return bool(leaves) and all(isinstance(t, torch.Tensor) and t.layout == torch.strided for t in leaves)


def test_out(out_op_name, out_dtype_name, device, device_profile, conformance_record, sample_index, sample_budget):
    op, dtype, tol, policy, tally, selection = start_case(
        out_op_name, out_dtype_name, device, device_profile, conformance_record, sample_index, budget=sample_budget
    )
    for index, sample in selection:
        pristine = sample_to_device(sample, "cpu", op.name)
        (c_inp, *c_args), c_kwargs = _split(triple_to_device(pristine, "cpu", op.name))
        expected, exc = call(op, c_inp, *c_args, **c_kwargs)
        if exc is not None or not _usable(expected):
            selection.leave_out("CPU raised" if exc is not None else NO_OUT_RESULT)
            continue
        try:
            _check_out_sample(
                op,
                pristine,
                expected,
                device,
                device_profile,
                tol,
                tally,
                index,
                f"{out_op_name} {out_dtype_name} sample {index} (out=)",
                policy,
                out_reference64(op, pristine, dtype),
            )
        except ConformanceFailure as exc:
            exc.sample = index
            finish(conformance_record, tally, selection, failed=True)
            raise
    finish(conformance_record, tally, selection, policy=policy)
    require_compared(selection, f"{out_op_name} {out_dtype_name} (out=)")


NO_OUT_RESULT = "no tensor result for out="
"""Reason of a sample whose result is not a (list of) strided tensor(s) an ``out=`` argument can hold."""


def _split(triple):
    inp, args, kwargs = triple
    return (inp, *args), kwargs


def _run_out(op, triple, out):
    (inp, *args), kwargs = _split(triple)
    return call(op, inp, *args, **kwargs, out=_out_arg(out))


def _cpu_out_reproducible(op, pristine, expected, kind: str, c_out) -> bool:
    """True when running the CPU's out= case again gives the same values as the first run (compared
    after ``torch.nan_to_num``: NaN, inf and the dtype's extremes are equal to themselves and to each
    other's replacements). Checked only after a value mismatch, so passing tests pay nothing."""
    again = _make_out(expected, "cpu", kind)
    _, exc = _run_out(op, triple_to_device(pristine, "cpu", op.name), again)
    if exc is not None:
        return True
    for a, b in zip(tree_flatten(again)[0], tree_flatten(c_out)[0]):
        if a.shape != b.shape or not torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)):
            return False
    return True


def _cpu_out_agrees(c_out, expected) -> bool:
    """True when the CPU's ``out=`` tensors hold its functional result (``torch.testing`` default
    tolerances, NaN equal to NaN)."""
    outs, refs = tree_flatten(c_out)[0], tree_flatten(expected)[0]
    if len(outs) != len(refs):
        return False
    try:
        for o, r in zip(outs, refs):
            torch.testing.assert_close(o, r, equal_nan=True, check_stride=False, check_dtype=False)
    except (AssertionError, TypeError, ValueError, RuntimeError):
        return False
    return True


def out_reference64(op, pristine, dtype: torch.dtype):
    """The float64 reference of an ``out=`` comparison: ``op``'s functional result on float64 copies of
    ``pristine`` (:func:`neuron_conformance.opsuites.suite_helpers.reference64_of`), for every floating dtype, as
    ``test_compare_cpu`` arbitrates its function variant; None for other dtypes. The out= tensors mirror
    the functional result's structure (:func:`_make_out`), so its leaves line up with theirs."""
    return reference64_of(op, pristine, dtype)


def _check_out_sample(op, pristine, expected, device, profile, tol, tally, index, where, policy, reference64=None):
    # out= indices judged as the function's (index semantics), one check for every out= kind
    semantics = index_checker(getattr(op, "full_name", op.name), policy, pristine)
    # cases 1-3: sized, noncontiguous, zero-element out; the CPU's behaviour decides what is required
    for kind in ("sized", "noncontig", "empty"):
        w = f"{where} [{kind} out]"
        c_out, d_out = _make_out(expected, "cpu", kind), _make_out(expected, device, kind)
        c_before, d_before = _ptrs(c_out), _ptrs(d_out)
        c_res, c_exc = _run_out(op, triple_to_device(pristine, "cpu", op.name), c_out)
        d_res, d_exc = _run_out(op, triple_to_device(pristine, device, op.name, index=index), d_out)
        if c_exc is not None:
            check_same_error(d_exc, c_exc, w)
            continue
        if d_exc is not None:
            raise annotate(d_exc, w, index)
        c_leaves, d_leaves = tree_flatten(c_res)[0], tree_flatten(d_res)[0]
        c_outs, d_outs = tree_flatten(c_out)[0], tree_flatten(d_out)[0]
        for i, (cr, co, dr, do) in enumerate(zip(c_leaves, c_outs, d_leaves, d_outs)):
            if (cr is co) and (dr is not do):
                raise MetadataFailure(f"{w}, output {i}: the device returned a new tensor, not the out= tensor")
        # outputs the CPU leaves empty and a device may fill (eval-mode batch-norm statistics, output_dtypes
        # rule 2): resized by the device as CUDA does, so neither kept in place nor of the CPU's shape
        filled = {
            i
            for i, ((cs, _), (ds, _)) in enumerate(zip(_shapes(c_out), _shapes(d_out)))
            if cs != ds and device_shape_allowed(op.name, i, ds, cs)
        }
        for i, (cb, db, ca, da) in enumerate(zip(c_before, d_before, _ptrs(c_out), _ptrs(d_out))):
            if kind != "empty" and cb == ca and db != da and i not in filled:
                raise MetadataFailure(
                    f"{w}, output {i}: out= was reallocated (data_ptr {db:#x} -> {da:#x}); "
                    f"a correctly sized out must be written in place"
                )
        for i, ((cs, cst), (ds, dst)) in enumerate(zip(_shapes(c_out), _shapes(d_out))):
            if i not in filled and (cs != ds or (kind != "empty" and cst != dst)):
                raise MetadataFailure(
                    f"{w}, output {i}: out= has shape {ds} strides {dst} after the call, "
                    f"the CPU's has shape {cs} strides {cst}"
                )
        try:
            fold(
                tally,
                index,
                _out_arg(d_out),
                _out_arg(c_out),
                device=device,
                profile=profile,
                tol=tol,
                where=w,
                values=policy,
                check_strides=False,
                reference64=reference64,
                semantics=semantics,
                op=op.name,
            )
        except NumericFailure:
            if _cpu_out_reproducible(op, pristine, expected, kind, c_out) and _cpu_out_agrees(c_out, expected):
                raise
            # the CPU's own out= values differ from run to run, or from its functional result (seen for
            # linalg.matrix_rank with a zero-element out in full runs, on the CPU as device too): there
            # is no reference to hold the device to
    # case 5: unsafe cast of the result into out (float/complex result into an integer out)
    leaves = tree_flatten(expected)[0]
    if any(t.is_floating_point() or t.is_complex() for t in leaves):
        w = f"{where} [int64 out for a {leaves[0].dtype} result]"

        def as_long(t):
            return torch.zeros(t.shape, dtype=torch.long, device=t.device)

        c_out = tree_map(as_long, _make_out(expected, "cpu", "sized"))
        d_out = tree_map(as_long, _make_out(expected, device, "sized"))
        _, c_exc = _run_out(op, triple_to_device(pristine, "cpu", op.name), c_out)
        _, d_exc = _run_out(op, triple_to_device(pristine, device, op.name, index=index), d_out)
        if c_exc is not None:
            check_same_error(d_exc, c_exc, w)


def test_out_device(outdev_op_name, outdev_dtype, device, conformance_record, request, sample_index, sample_budget):
    if device.type == "cpu":
        pytest.skip("the device under test is the CPU: there is no wrong device to put out= on")
    op = opinfo(outdev_op_name)
    supported = op.supported_dtypes("cpu")
    dtypes = [getattr(torch, n) for n in selected_dtypes(request.config) if getattr(torch, n) in supported]
    if not dtypes:
        pytest.skip("the op supports none of the selected dtypes")
    dtype = dtypes[0]
    conformance_record.update(dtype=str(dtype).removeprefix("torch."), rule="error")
    selection = SampleSelection(sample_inputs(op, "cpu", dtype), budget=sample_budget, only=sample_index)
    for index, sample in selection:
        pristine = sample_to_device(sample, "cpu", op.name)
        (c_inp, *c_args), c_kwargs = _split(triple_to_device(pristine, "cpu", op.name))
        expected, exc = call(op, c_inp, *c_args, **c_kwargs)
        if exc is not None or not _usable(expected):
            selection.leave_out("CPU raised" if exc is not None else NO_OUT_RESULT)
            continue
        d_inp, _, _ = triple_to_device(pristine, device, op.name, index=index)
        if not isinstance(d_inp, torch.Tensor) or d_inp.dim() == 0:
            selection.leave_out("0-dim input")  # 0-dim tensors may mix devices in PyTorch
            continue
        _, d_exc = _run_out(
            op, triple_to_device(pristine, device, op.name, index=index), _make_out(expected, "cpu", "sized")
        )
        if d_exc is None and reference_skipped_upstream(outdev_op_name, "test_out"):
            conformance_record.update(**selection.record_fields())
            pytest.skip(
                "an out= tensor on the CPU did not raise, and PyTorch's OpInfo marks test_out an "
                "expected failure on every device: this op's out= is not the standard contract "
                "(e.g. torch.lu copies into out in Python, which works across devices)"
            )
        if d_exc is None:
            selection.drain()
            conformance_record.update(**selection.record_fields())
            raise WrongErrorFailure(
                f"{outdev_op_name} {dtype} sample {index} (out=): an out= tensor on the CPU "
                f"with inputs on {device} did not raise",
                sample=index,
            )
    conformance_record.update(**selection.record_fields())
    require_compared(selection, f"{outdev_op_name} {dtype} (out= on the wrong device)")
