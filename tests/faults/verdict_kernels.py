"""Kernels for the verdict-policy tests: a correct kernel that computes differently from the CPU, and a
wrong one, for the same op (``asinh``; ``sum``, through which the gradient of ``expand`` is reduced).

``asinh`` of an integer tensor returns float32 (its result dtype is the default float dtype). A device
whose float32 ``asinh`` is 1 ULP from the CPU's is correct (PyTorch's docs, "Numerical accuracy": results
of transcendental functions may differ by a few ULP between backends); one 1e-3 off is wrong.
"""

from __future__ import annotations

import torch

from neuron_conformance.emulator import faults, storage


def _one_ulp_up(result, *args, **kwargs):
    """The CPU's result moved to the next representable value toward +inf, element by element."""
    if isinstance(result, torch.Tensor) and result.is_floating_point():
        host = storage.cpu_alias(result)
        host.copy_(torch.nextafter(host, torch.full_like(host, float("inf"))))
    return result


def asinh_one_ulp():
    """``asinh`` 1 ULP above the CPU's for every element: correct, and not bitwise the CPU."""
    return faults.override("aten::asinh", _one_ulp_up)


def asinh_relative_1e3():
    """``asinh`` 1e-3 off: wrong."""
    return faults.scale_output("aten::asinh", rel=1e-3)


_SUM_OVERLOADS = ("aten::sum.dim_IntList", "aten::sum.IntList_out")
"""The overload mirror mode runs, and the ``out=`` overload device mode runs (empty + op.out)."""


def sum_one_ulp():
    """``sum`` over dims 1 ULP above the CPU's, as another order of summation gives: correct. The backward
    of ``expand`` (and of every broadcast) reduces its gradient with it."""
    return tuple(faults.override(name, _one_ulp_up) for name in _SUM_OVERLOADS)


def sum_relative_1e3():
    """``sum`` over dims 1e-3 off: wrong."""
    return tuple(faults.scale_output(name, rel=1e-3) for name in _SUM_OVERLOADS)


_TOPK_OVERLOADS = ("aten::topk", "aten::topk.values")


def _topk_args(args, kwargs):
    names = ("k", "dim", "largest", "sorted")
    bound = {**dict(zip(names, (None, -1, True, True))), **dict(zip(names, args[1:])), **kwargs}
    return args[0], bound["k"], bound["dim"], bool(bound["largest"]), bool(bound["sorted"])


def _topk_last_tie(result, *args, **kwargs):
    """``topk`` that returns the last of tied elements (the CPU's topk of the input flipped along ``dim``,
    indices mapped back): the same values, another valid index among ties."""
    x, k, dim, largest, sorted_ = _topk_args(args, kwargs)
    host = storage.cpu_alias(x)
    if host.dim() == 0:
        return result
    d = dim % host.dim()
    values, indices = torch.topk(host.flip(d), k, d, largest, sorted_)
    storage.cpu_alias(result[0]).copy_(values)
    storage.cpu_alias(result[1]).copy_((host.shape[d] - 1) - indices)
    return result


def _topk_index_shifted(result, *args, **kwargs):
    """``topk`` whose indices point one element further along ``dim`` (wrapping): wrong."""
    x, _k, dim, _largest, _sorted = _topk_args(args, kwargs)
    host = storage.cpu_alias(x)
    if host.dim() == 0:
        return result
    out = storage.cpu_alias(result[1])
    out.copy_((out + 1) % host.shape[dim % host.dim()])
    return result


def topk_last_tie():
    """Correct: another valid index among ties (``torch.topk`` names none)."""
    return tuple(faults.override(name, _topk_last_tie) for name in _TOPK_OVERLOADS)


def topk_index_shifted():
    """Wrong: the indices do not point at the returned values."""
    return tuple(faults.override(name, _topk_index_shifted) for name in _TOPK_OVERLOADS)


def _no_integer(*args, **kwargs):
    """``mv`` with no integer kernel, as CUDA's (``addmv_impl_cuda`` has none): raises for integer inputs."""
    if not args[0].is_floating_point() and not args[0].is_complex():
        raise RuntimeError(f"addmv_impl_neuron not implemented for '{args[0].dtype}'")
    return faults.correct("aten::mv", *args, **kwargs)


def mv_no_integer():
    """``mv`` raising for integer dtypes: correct on a device that does not claim them."""
    return faults.override("aten::mv", _no_integer, receives="args")


def softmax_relative_1e2():
    """``softmax`` 1e-2 off (the kernel and its ``out=`` overload): wrong, in every attention that uses it."""
    return tuple(faults.scale_output(name, rel=1e-2) for name in ("aten::_softmax", "aten::_softmax.out"))


def _scatter_first_writer(self, dim, index, src):
    """``scatter`` that writes in the reverse order: where indices repeat, the first write lands (a valid
    order: "the order in which the elements are written is undefined")."""
    host = storage.cpu_alias
    index = host(index)
    region = host(src)[tuple(slice(0, n) for n in index.shape)]
    targets = torch.arange(self.numel()).reshape(self.shape).gather(dim, index).reshape(-1)
    out = host(self).clone()
    flat = out.view(-1)
    for position, value in reversed(list(zip(targets.tolist(), region.reshape(-1).tolist()))):
        flat[position] = value
    return out.to(self.device)


def _scatter_sums_repeats(self, dim, index, src):
    """``scatter`` that adds repeated writes: a value none of the writes wrote (wrong)."""
    host = storage.cpu_alias
    region = host(src)[tuple(slice(0, n) for n in index.shape)]
    out = host(self).clone().scatter_(dim, host(index), torch.zeros_like(region)).scatter_add_(dim, host(index), region)
    return out.to(self.device)


def _svd_signs_flipped(result, *args, **kwargs):
    """``_linalg_svd`` with every singular pair's sign flipped (``U[..., :, k]`` and ``Vh[..., k, :]`` negated
    together): still a valid SVD ("unique up to a sign"), not the CPU's."""
    u, s, vh = result
    if u.numel() and vh.numel():
        storage.cpu_alias(u).neg_()
        storage.cpu_alias(vh).neg_()
    return result


VERDICT_FAULTS = {
    "svd-signs-flipped": lambda: faults.override("aten::_linalg_svd", _svd_signs_flipped),
    "svd-values-1e-3": lambda: faults.scale_output("aten::_linalg_svd", rel=1e-3),
    "scatter-first-writer": lambda: faults.override("aten::scatter.src", _scatter_first_writer, receives="args"),
    "scatter-sums-repeats": lambda: faults.override("aten::scatter.src", _scatter_sums_repeats, receives="args"),
    "softmax-backward-refuses": lambda: faults.make_raise(
        "aten::_softmax_backward_data", RuntimeError, "expected input and grad types to match"
    ),
    "trace-refuses": lambda: faults.make_raise("aten::trace", RuntimeError, "trace: expected a matrix"),
    "mm-1e-2": lambda: tuple(faults.scale_output(name, rel=1e-2) for name in ("aten::mm", "aten::mm.out")),
    "softmax-1e-2": softmax_relative_1e2,
    "mv-no-integer": mv_no_integer,
    "topk-last-tie": topk_last_tie,
    "topk-index-shifted": topk_index_shifted,
    "asinh-one-ulp": asinh_one_ulp,
    "asinh-1e-3": asinh_relative_1e3,
    "sum-one-ulp": sum_one_ulp,
    "sum-1e-3": sum_relative_1e3,
}
"""Fault name -> factory, merged into :data:`tests.faults.fault_backend.FAULTS`."""
