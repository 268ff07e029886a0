"""Noncontiguous inputs and memory layouts on the device, each against the CPU on the same input.

For every OpInfo and selected dtype, each of the first :data:`MAX_SAMPLES` samples is rewritten into
these layouts (the device copy keeps storage offset and strides, :mod:`conformance.transfer`):

* ``noncontiguous``: ``SampleInput.noncontiguous()`` (PyTorch's own noncontiguous copy of every tensor);
* ``transposed``: every tensor with two or more dims stored transposed (last two dims swapped in memory);
* ``sliced``: every tensor taken with step 2 along its last dim from a larger buffer, at offset 1;
* ``expanded``: the input's last dim broadcast from its first element (stride 0);
* ``channels_last``: every 4-D tensor in ``torch.channels_last`` memory format;
* ``offset``: every tensor placed at storage offset 3 of a larger buffer.

Both devices run the op on the same rewritten values; results must agree (values with the tolerance
policy, strides too when the backend mirrors the CPU). When the CPU raises (e.g. an in-place write into
an expanded tensor), the device must raise the same exception type. Layouts that leave a sample
unchanged (0-dim tensors only) are skipped.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from conformance.compare import check_same_error
from conformance.failures import ConformanceFailure
from conformance.transfer import sample_to_device
from opsuites.suite_helpers import (
    annotate,
    call,
    finish,
    fold,
    parametrize_opinfos,
    reference64_of,
    require_reference,
    reseed,
    start_case,
)

SUITE = "layouts"


def pytest_generate_tests(metafunc):
    parametrize_opinfos(metafunc)


VARIANT = "layouts"
MAX_SAMPLES = 3
"""Samples per op and dtype; each runs in six layouts."""


def _strided(t) -> bool:
    return isinstance(t, torch.Tensor) and t.layout == torch.strided and t.dim() > 0 and t.numel() > 0


def _place(t: torch.Tensor, view_fn) -> torch.Tensor:
    out = view_fn(t)
    with torch.no_grad():
        out.copy_(t)
    return out.requires_grad_(t.requires_grad) if t.requires_grad else out


def _noncontiguous(t):
    """``SampleInput.noncontiguous()`` for one tensor (``common_utils.noncontiguous_like``: same values,
    every other element of a larger buffer), leaving sparse and other non-strided tensors alone (the
    OpInfo method raises on a sparse CSR input)."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return t
    from torch.testing._internal.common_utils import noncontiguous_like

    return noncontiguous_like(t)


def _transposed(t):
    if not _strided(t) or t.dim() < 2:
        return t
    return t.detach().transpose(-1, -2).contiguous().transpose(-1, -2).requires_grad_(t.requires_grad)


def _sliced(t):
    if not _strided(t):
        return t
    return _place(t.detach(), lambda x: torch.empty((*x.shape[:-1], 2 * x.shape[-1] + 1), dtype=x.dtype)[..., 1::2])


def _offset(t):
    if not _strided(t):
        return t
    return _place(t.detach(), lambda x: torch.empty(x.numel() + 3, dtype=x.dtype)[3:].view(x.shape))


def _channels_last(t):
    if not _strided(t) or t.dim() != 4:
        return t
    return t.detach().contiguous(memory_format=torch.channels_last).requires_grad_(t.requires_grad)


def _expanded(t):
    if not _strided(t) or t.shape[-1] < 2:
        return t
    return t.detach().narrow(-1, 0, 1).expand(t.shape).requires_grad_(t.requires_grad)


def _rewrite(sample, fn, *, input_only: bool = False):
    from types import SimpleNamespace

    inp = tree_map(fn, sample.input)
    if input_only:
        return SimpleNamespace(input=inp, args=sample.args, kwargs=sample.kwargs)
    return SimpleNamespace(input=inp, args=tree_map(fn, sample.args), kwargs=tree_map(fn, sample.kwargs))


def _layouts(sample):
    """``[(name, rewritten sample)]``; a layout that changed no tensor is left out."""
    out = [("noncontiguous", _rewrite(sample, _noncontiguous))]
    for name, fn in (("transposed", _transposed), ("sliced", _sliced), ("offset", _offset),
                     ("channels_last", _channels_last)):
        out.append((name, _rewrite(sample, fn)))
    out.append(("expanded", _rewrite(sample, _expanded, input_only=True)))
    return [(n, s) for n, s in out if n == "noncontiguous" or _changed(sample, s)]


def _changed(a, b) -> bool:
    from torch.utils._pytree import tree_flatten

    la = tree_flatten((a.input, a.args, a.kwargs))[0]
    lb = tree_flatten((b.input, b.args, b.kwargs))[0]
    return any(x is not y for x, y in zip(la, lb) if isinstance(x, torch.Tensor))


def test_layouts(op_name, dtype_name, device, device_profile, conformance_record, sample_index):
    op, dtype, tol, policy, tally, samples = start_case(
        op_name, dtype_name, device, device_profile, conformance_record, sample_index, MAX_SAMPLES)
    cases = cpu_raised = 0
    first_cpu_exc = None
    for index, sample in samples:
        for layout, variant in _layouts(sample):
            cases += 1
            where = f"{op_name} {dtype_name} sample {index} ({layout} layout)"
            d_inp, d_args, d_kwargs = sample_to_device(variant, device, op.name, index=index)
            c_inp, c_args, c_kwargs = sample_to_device(variant, "cpu", op.name)
            reference64 = reference64_of(op, (c_inp, c_args, c_kwargs), dtype) if policy.arbitrate else None
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
                fold(tally, index, actual, expected, device=device, profile=device_profile, tol=tol,
                     where=where, values=policy, reference64=reference64)
            except ConformanceFailure as exc:
                exc.sample = index
                finish(conformance_record, tally, len(samples))
                raise
    finish(conformance_record, tally, len(samples), policy)
    require_reference(f"{op_name} {dtype_name} (layouts)", cpu_raised, cases, first_cpu_exc)
