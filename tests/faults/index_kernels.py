"""Wrong index kernels for the verdict-gap fault tests (``tests/faults/test_verdict_faults.py``).

Each factory returns the :class:`neuron_conformance.emulator.faults.Fault` tuple it installs on the PrivateUse1
key: the functional overload mirror mode runs and the ``out=`` overload device mode decomposes into.
The kernels compute the correct result on the CPU, then break it in place through a CPU alias of the
device memory (:func:`neuron_conformance.emulator.storage.cpu_alias`).
"""

from __future__ import annotations

from neuron_conformance.emulator import faults, storage


def _shift_inverse(result, n: int):
    inverse = result[1]
    if n > 1 and inverse.numel():
        alias = storage.cpu_alias(inverse)
        alias.copy_((alias + 1) % n)
    return result


def _unique2_inverse_off_by_one(result, *args, **kwargs):
    """``torch.unique`` (dim None) whose inverse points at the next distinct value: values[inverse] != x."""
    return _shift_inverse(result, result[0].numel())


def _unique_dim_inverse_off_by_one(result, self, dim, *args, **kwargs):
    """``torch.unique(dim=d)`` whose inverse points at the next distinct slice."""
    return _shift_inverse(result, result[0].shape[dim] if result[0].dim() else 0)


def unique_inverse_off_by_one():
    """unique's inverse indices shifted by one (mod the number of distinct values)."""
    return (
        faults.override("aten::_unique2", _unique2_inverse_off_by_one),
        faults.override("aten::_unique2.out", _unique2_inverse_off_by_one),
        faults.override("aten::unique_dim", _unique_dim_inverse_off_by_one),
        faults.override("aten::unique_dim.out", _unique_dim_inverse_off_by_one),
    )


def _first_index_everywhere(result, self, *args, **kwargs):
    """Sort indices replaced by each row's first index: not a permutation (the values stay right)."""
    indices = result[1]
    dim = kwargs.get("dim", -1)
    for a in args:
        if isinstance(a, int) and not isinstance(a, bool):
            dim = a
            break
    if indices.dim() and indices.shape[dim % indices.dim()] > 1:
        alias = storage.cpu_alias(indices)
        d = dim % indices.dim()
        alias.copy_(alias.narrow(d, 0, 1).expand_as(alias).clone())
    return result


def sort_indices_not_a_permutation():
    """sort's indices all equal to the row's first one."""
    return tuple(
        faults.override(f"aten::sort.{o}", _first_index_everywhere)
        for o in ("default", "stable", "values", "values_stable")
    )
