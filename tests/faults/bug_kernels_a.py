"""Wrong kernels for the bug-class fault tests (classes duplicate-indices, masked-rows, ties, integer-edges,
nonblocking-copies, aliasing-inplace), each the way real backends have shipped them.

Each factory returns what :mod:`fault_backend` installs: one :class:`neuron_conformance.emulator.faults.Fault`,
or a tuple of them when the op reaches the device as
different aten overloads in mirror mode (``aten::_softmax``) and device mode (``aten::_softmax.out``, the
structured op's out= kernel). The kernels receive neuron tensors; they compute on zero-copy CPU aliases
(:func:`neuron_conformance.emulator.storage.cpu_alias`) and write the wrong answer into the device result.
"""

from __future__ import annotations

import torch

from neuron_conformance.emulator import fallback, faults, registrations, storage

aten = torch.ops.aten


def _cpu(t):
    """A zero-copy CPU alias of a neuron tensor; other values unchanged."""
    return storage.cpu_alias(t) if isinstance(t, torch.Tensor) and t.device.type != "cpu" else t


def _last_writer_index_put(self, indices, values, accumulate=False, unsafe=False):
    """``index_put_(accumulate=True)`` as read-modify-write without atomics: one write per duplicate wins."""
    if not accumulate:
        return fallback.run(aten._index_put_impl_.default, (self, indices, values, accumulate, unsafe), {})
    base, idx = _cpu(self), [None if i is None else _cpu(i) for i in indices]
    aten.index_put_.default(base, idx, aten.index.Tensor(base, idx) + _cpu(values), False)
    return self


def last_writer_index_put():
    """index_put_(accumulate=True) on the device keeps one write per duplicate index (both modes)."""
    return faults.override("aten::_index_put_impl_", _last_writer_index_put, receives="args")


def _nan_to_zero(result, *args, **kwargs):
    """Softmax that guards 0/0 of an all -inf row and returns 0 there (the math gives NaN)."""
    _cpu(result).nan_to_num_(nan=0.0)
    return result


def softmax_masked_row_zero():
    """softmax returns 0, not NaN, for an all -inf row (``_softmax`` and ``_softmax.out``)."""
    return (faults.override("aten::_softmax", _nan_to_zero), faults.override("aten::_softmax.out", _nan_to_zero))


def _last_tie_argmax(result, self, dim=None, keepdim=False, **kwargs):
    """argmax whose parallel reduction keeps the last of tied maxima (the docs say the first)."""
    x = _cpu(self)
    if dim is None:
        wrong = x.numel() - 1 - x.flatten().flip(0).argmax()
        wrong = wrong.reshape([1] * x.dim()) if keepdim else wrong
    else:
        wrong = x.size(dim) - 1 - x.flip(dim).argmax(dim, keepdim=keepdim)
    _cpu(result).copy_(wrong)
    return result


def argmax_last_tie():
    """argmax returns the last of tied maxima (``argmax`` and ``argmax.out``)."""
    return (faults.override("aten::argmax", _last_tie_argmax), faults.override("aten::argmax.out", _last_tie_argmax))


def _c_remainder(result, self, other, **kwargs):
    """Integer remainder computed with C's ``%`` (sign of the dividend): that is fmod, not remainder."""
    if not result.is_floating_point():
        _cpu(result).copy_(torch.fmod(_cpu(self), _cpu(other)))
    return result


def remainder_c_sign():
    """integer remainder takes the dividend's sign (``remainder.Tensor`` and ``remainder.Tensor_out``)."""
    return (
        faults.override("aten::remainder.Tensor", _c_remainder),
        faults.override("aten::remainder.Tensor_out", _c_remainder),
    )


def _early_read_to_copy(self, **kwargs):
    """A non_blocking copy between host and device returned before the bytes landed: the buffer is zeros."""
    r = registrations._to_copy(self, **kwargs)
    if kwargs.get("non_blocking") and r.device.type != self.device.type:
        _cpu(r).zero_()
    return r


def nonblocking_read_early():
    """a non_blocking host<->device ``_to_copy`` is read before it landed (zeros)."""
    return faults.override("aten::_to_copy", _early_read_to_copy, receives="args")


def _contiguous_mul_(self, other):
    """In-place mul_ that makes a non-contiguous self contiguous, computes into that copy, never writes back."""
    target = self if self.is_contiguous() else fallback.run(aten.clone.default, (self,), {})
    fallback.run(aten.mul_.Tensor, (target, other), {})
    return self


def _contiguous_mul_out(self, other, *, out):
    """mul.out that computes into a contiguous temporary when ``out`` is not contiguous and drops it."""
    if out.is_contiguous():
        return fallback.run(aten.mul.out, (self, other), {"out": out})
    torch.mul(_cpu(self), _cpu(other))
    return out


def inplace_view_not_written():
    """mul_ on a non-contiguous view leaves the view unchanged (``mul_.Tensor``, ``mul.out``)."""
    return (
        faults.override("aten::mul_.Tensor", _contiguous_mul_, receives="args"),
        faults.override("aten::mul.out", _contiguous_mul_out, receives="args"),
    )


def _unaliased(t, written):
    """``t``, or a clone of it when it shares storage with ``written`` (hides the overlap from the CPU kernel)."""
    if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() == written.untyped_storage().data_ptr():
        return fallback.run(aten.clone.default, (t,), {})
    return t


def _unchecked_add_(self, other, alpha=1):
    """add_ without TensorIterator's overlap check: a partially overlapping ``other`` is read from a copy."""
    return fallback.run(aten.add_.Tensor, (self, _unaliased(other, self)), {"alpha": alpha})


def _unchecked_add_out(self, other, *, alpha=1, out):
    """add.out without the overlap check between the inputs and ``out``."""
    return fallback.run(aten.add.out, (_unaliased(self, out), _unaliased(other, out)), {"alpha": alpha, "out": out})


def overlap_unchecked_add():
    """add returns a result where PyTorch refuses overlapping input and output (``add_.Tensor``, ``add.out``)."""
    return (
        faults.override("aten::add_.Tensor", _unchecked_add_, receives="args"),
        faults.override("aten::add.out", _unchecked_add_out, receives="args"),
    )
