"""Noncontiguous inputs and memory layouts on the device, each against the CPU on the same input.

For every OpInfo and selected dtype, every sample with a tensor of two or more elements (the others are
left out, counted in the record as ``0-dim input``, ``one-element tensors only`` or ``no strided
tensor``; :mod:`neuron_conformance.opsuites.sample_selection`, within ``--conformance-sample-budget``) is rewritten into these layouts
(the device copy keeps storage offset and strides, :mod:`neuron_conformance.conformance.backend.transfer`). Each layout rewrites
only the tensors it changes for real, and a layout that changes no tensor of a sample is not run:

* ``noncontiguous``: ``SampleInput.noncontiguous()`` (PyTorch's own noncontiguous copy) of every tensor
  of two or more elements;
* ``transposed``: every tensor whose last two dims both have two or more elements, stored transposed;
* ``sliced``: every tensor of two or more elements taken with step 2 along its last dim from a larger
  buffer, at offset 1;
* ``expanded``: the input's last dim (two or more elements) broadcast from its first element (stride 0);
* ``channels_last``: every 4-D tensor with two or more channels and two or more pixels in
  ``torch.channels_last`` memory format;
* ``offset``: every tensor with one or more dims and elements placed at storage offset 3 of a larger buffer.

Both devices run the op on the same rewritten values; results must agree (values with the tolerance
policy, strides too when the backend mirrors the CPU). When the CPU raises (e.g. an in-place write into
an expanded tensor), the device must raise the same exception type.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_map

from neuron_conformance.conformance.backend.transfer import sample_to_device
from neuron_conformance.conformance.verdict.compare import check_same_error
from neuron_conformance.conformance.verdict.failures import ConformanceFailure
from neuron_conformance.opsuites.sample_selection import require_compared
from neuron_conformance.opsuites.samples import DEFINED_UP_TO_GAUGE
from neuron_conformance.opsuites.suite_helpers import (
    VALUES_UNDEFINED,
    ValuePolicy,
    annotate,
    call,
    finish,
    fold,
    for_sample,
    index_checker,
    parametrize_opinfos,
    reference64_of,
    require_reference,
    reseed,
    start_case,
    up_to_gauge,
)

SUITE = "layouts"


def pytest_generate_tests(metafunc):
    parametrize_opinfos(metafunc)


VARIANT = "layouts"


def _strided(t, min_numel: int = 2) -> bool:
    return isinstance(t, torch.Tensor) and t.layout == torch.strided and t.dim() > 0 and t.numel() >= min_numel


def _place(t: torch.Tensor, view_fn) -> torch.Tensor:
    out = view_fn(t)
    with torch.no_grad():
        out.copy_(t)
    return out.requires_grad_(t.requires_grad) if t.requires_grad else out


def _noncontiguous(t):
    """``SampleInput.noncontiguous()`` for one tensor of two or more elements (``common_utils.
    noncontiguous_like``: same values, every other element of a larger buffer), leaving sparse and other
    non-strided tensors alone (the OpInfo method raises on a sparse CSR input)."""
    if not _strided(t):
        return t
    from torch.testing._internal.common_utils import noncontiguous_like  # deferred: imports the test utils

    return noncontiguous_like(t)


def _transposed(t):
    if not _strided(t) or t.dim() < 2 or t.shape[-1] < 2 or t.shape[-2] < 2:
        return t  # transposing a dim of one element leaves the memory order as it was
    return t.detach().transpose(-1, -2).contiguous().transpose(-1, -2).requires_grad_(t.requires_grad)


def _sliced(t):
    if not _strided(t):
        return t
    return _place(t.detach(), lambda x: torch.empty((*x.shape[:-1], 2 * x.shape[-1] + 1), dtype=x.dtype)[..., 1::2])


def _offset(t):
    if not _strided(t, min_numel=1):
        return t
    return _place(t.detach(), lambda x: torch.empty(x.numel() + 3, dtype=x.dtype)[3:].view(x.shape))


def _channels_last(t):
    if not _strided(t) or t.dim() != 4 or t.shape[1] < 2 or t.shape[2] * t.shape[3] < 2:
        return t  # one channel or one pixel: channels_last strides describe the contiguous order
    return t.detach().contiguous(memory_format=torch.channels_last).requires_grad_(t.requires_grad)


def _expanded(t):
    if not _strided(t) or t.shape[-1] < 2:
        return t
    return t.detach().narrow(-1, 0, 1).expand(t.shape).requires_grad_(t.requires_grad)


def reject(sample) -> str | None:
    """Why ``sample`` has nothing a layout can change (its reason in ``samples_left_out``), else None:
    every layout needs a strided tensor of two or more elements (``offset`` alone would move a single
    element, which the suite does not count as exercising a layout)."""
    tensors = [t for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0] if isinstance(t, torch.Tensor)]
    strided = [t for t in tensors if t.layout == torch.strided]
    if any(t.numel() >= 2 for t in strided):
        return None
    if not strided:
        return "no strided tensor"
    if all(t.dim() == 0 for t in strided):
        return "0-dim input"
    return "one-element tensors only"


def _rewrite(sample, fn, *, input_only: bool = False):
    from types import SimpleNamespace

    inp = tree_map(fn, sample.input)
    if input_only:
        return SimpleNamespace(input=inp, args=sample.args, kwargs=sample.kwargs)
    return SimpleNamespace(input=inp, args=tree_map(fn, sample.args), kwargs=tree_map(fn, sample.kwargs))


def _layouts(sample):
    """``[(name, rewritten sample)]``; a layout that changed no tensor is left out."""
    out = []
    for name, fn in (
        ("noncontiguous", _noncontiguous),
        ("transposed", _transposed),
        ("sliced", _sliced),
        ("offset", _offset),
        ("channels_last", _channels_last),
    ):
        out.append((name, _rewrite(sample, fn)))
    out.append(("expanded", _rewrite(sample, _expanded, input_only=True)))
    return [(n, s) for n, s in out if _changed(sample, s)]


def _changed(a, b) -> bool:
    la = tree_flatten((a.input, a.args, a.kwargs))[0]
    lb = tree_flatten((b.input, b.args, b.kwargs))[0]
    return any(x is not y for x, y in zip(la, lb) if isinstance(x, torch.Tensor))


def test_layouts(op_name, dtype_name, device, device_profile, conformance_record, sample_index, sample_budget):
    op, dtype, tol, policy, tally, selection = start_case(
        op_name,
        dtype_name,
        device,
        device_profile,
        conformance_record,
        sample_index,
        budget=sample_budget,
        reject=reject,
    )
    cases = cpu_raised = 0
    first_cpu_exc = None
    for index, sample in selection:
        for layout, variant in _layouts(sample):
            cases += 1
            where = f"{op_name} {dtype_name} sample {index} ({layout} layout)"
            d_inp, d_args, d_kwargs = sample_to_device(variant, device, op.name, index=index)
            c_inp, c_args, c_kwargs = sample_to_device(variant, "cpu", op.name)
            sample_policy = for_sample(policy, op, variant, device_profile)  # dropout_p > 0: the values are random
            if layout == "expanded" and op.full_name in DEFINED_UP_TO_GAUGE and not device_profile.mirrors_cpu:
                # a matrix whose rows repeat has rank one: the singular vectors (eigenvectors) of its repeated zero
                # singular values are any orthonormal basis ("not unique" in torch.linalg.svd's docs), not a sign
                sample_policy = ValuePolicy(False, False, False, VALUES_UNDEFINED)
            reference64 = (
                reference64_of(
                    lambda *a, **k: up_to_gauge(op, variant, device_profile, op(*a, **k)),
                    (c_inp, c_args, c_kwargs),
                    dtype,
                )
                if sample_policy.arbitrate
                else None
            )
            semantics = index_checker(op_name, sample_policy, (c_inp, c_args, c_kwargs))
            seed = torch.initial_seed()
            expected, cpu_exc = call(op, c_inp, *c_args, **c_kwargs)
            dev_exc = reseed(seed)  # a device RNG failure is the device call's
            if dev_exc is None:
                actual, dev_exc = call(op, d_inp, *d_args, **d_kwargs)
            try:
                if cpu_exc is not None:
                    cpu_raised += 1
                    first_cpu_exc = first_cpu_exc or cpu_exc
                    # a layout the CPU kernel rejects (native_group_norm wants contiguous input) gives no
                    # reference: the device may accept it; if it raises too, the error type must match
                    if dev_exc is not None:
                        check_same_error(dev_exc, cpu_exc, where)
                    continue
                if dev_exc is not None:
                    raise annotate(dev_exc, where, index)
                actual = up_to_gauge(op, variant, device_profile, actual)  # SVD, eigenvectors: up to sign
                expected = up_to_gauge(op, variant, device_profile, expected)
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
                    op=op.name,
                )
            except ConformanceFailure as exc:
                exc.sample = index
                finish(conformance_record, tally, selection, failed=True)
                raise
    finish(conformance_record, tally, selection, policy=policy)
    require_reference(f"{op_name} {dtype_name} (layouts)", cpu_raised, cases, first_cpu_exc)
    require_compared(selection, f"{op_name} {dtype_name} (layouts)")
