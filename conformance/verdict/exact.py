"""Exact classes: ops whose results are exactly specified, so the device must be bit-identical to CPU.

An op belongs to the exact class when every output element is one of the input elements (possibly moved,
selected, reordered or with its sign changed), a comparison, or a correctly rounded conversion: nothing is
accumulated or approximated, so IEEE 754 leaves no freedom to the implementation. The classes:

==================== ==========================================================================
``view``             the aten op returns an alias of its input (schema ``Tensor(a) -> Tensor(a)``)
``data-movement``    copies, concatenation, padding with a constant, repetition, flips, rolls
``indexing``         gather/scatter/index/take/masked ops *without* accumulation
``comparison``       eq/ne/lt/..., isnan/isinf/..., signbit (bool results)
``selection``        min/max/clamp/where, sorting and top-k (values are input elements)
``conversion``       dtype conversions: round-to-nearest-even (IEEE 754 §4.3.1) for float targets
``sign-magnitude``   abs, neg, sign, copysign, trunc/floor/ceil/round, frac (exact in IEEE 754)
``factory``          constant factories (zeros, ones, full, eye, arange with integer steps)
==================== ==========================================================================

Integer and bool *dtypes* are exact for every op (:func:`neuron_conformance.conformance.verdict.tolerances.is_exact_dtype`);
:func:`is_exact_op` is about floating results.

Decided in one place from two sources: the op's aten schema (an overload whose first return aliases an
input is a view, read from ``torch.ops.aten.<name>``) and the names below, taken from PyTorch's OpInfo
database (``torch/testing/_internal/common_methods_invocations.py``, torch 2.13). Ops that accumulate
(``scatter_add``, ``index_add``, ``index_put`` with ``accumulate=True``, ``scatter_reduce.sum/mean/prod``)
or round (``round.decimals_3``: ``x * 10**d`` is rounded twice) are left out on purpose.
"""

from __future__ import annotations

import functools

import torch

EXACT_OPS: dict[str, str] = {}
"""OpInfo ``full_name`` (or OpInfo ``name``) -> exact class, for ops not recognised from their schema."""


def _add(cls: str, names: str) -> None:
    for n in names.split():
        EXACT_OPS[n] = cls


_add(
    "data-movement",
    """
    clone contiguous cat stack hstack vstack dstack column_stack block_diag flip fliplr flipud roll rot90
    repeat tile repeat_interleave constant_pad_nd nn.functional.pad.constant nn.functional.pad.circular
    nn.functional.pad.reflect nn.functional.pad.replicate nn.functional.pad.replicate_negative tril triu
    diag diag_embed diagflat narrow_copy as_strided_copy as_strided_scatter alias_copy diagonal_copy
    diagonal_scatter expand_copy permute_copy select_scatter slice_scatter squeeze_copy t_copy
    transpose_copy unbind_copy unfold_copy unsqueeze_copy view_copy split_with_sizes_copy atleast_1d
    atleast_2d atleast_3d broadcast_tensors broadcast_to meshgrid.list_of_tensors
    meshgrid.variadic_tensors cartesian_prod combinations nn.functional.channel_shuffle
    nn.functional.pixel_shuffle nn.functional.pixel_unshuffle nn.functional.unfold movedim ravel flatten
    unsafe_chunk unsafe_split
    reshape reshape_as unflatten resolve_conj resolve_neg conj_physical positive fill zero_
    nn.functional.one_hot
    nn.functional.max_pool1d nn.functional.max_pool2d nn.functional.max_pool3d
    nn.functional.adaptive_max_pool1d nn.functional.adaptive_max_pool2d nn.functional.adaptive_max_pool3d
    masked_select nonzero nonzero_static argwhere unique unique_consecutive
""",
)
_add(
    "indexing",
    """
    __getitem__ gather index_select take take_along_dim index_copy index_fill masked_fill masked_scatter
    scatter scatter_reduce.amax scatter_reduce.amin index_reduce.amax index_reduce.amin put
    nn.functional.embedding select slice
""",
)
_add(
    "comparison",
    """
    eq ne lt le gt ge equal isnan isinf isfinite isposinf isneginf isreal signbit isin logical_and
    logical_or logical_xor logical_not
""",
)
_add(
    "selection",
    """
    max.binary max.reduction_no_dim max.reduction_with_dim min.binary min.reduction_no_dim
    min.reduction_with_dim maximum minimum fmax fmin amax amin aminmax clamp clamp_max clamp_min where
    sort msort argsort topk kthvalue median nanmedian mode cummax cummin argmax argmin masked.amax
    masked.amin nn.functional.relu nn.functional.relu6 nn.functional.hardtanh nn.functional.threshold
    nn.functional.hardshrink heaviside searchsorted bucketize
""",
)
_add(
    "conversion",
    """
    to bfloat16 bool byte char double float half int long short chalf cfloat cdouble
    view_as_real view_as_complex real imag
""",
)
_add(
    "sign-magnitude",
    """
    abs neg sign sgn copysign trunc floor ceil round round.decimals_0 frac nextafter ldexp frexp
""",
)
_add(
    "factory",
    """
    zeros zeros_like ones ones_like full full_like new_zeros new_ones new_full eye scalar_tensor
    tril_indices triu_indices
""",
)

NOT_EXACT: frozenset = frozenset(
    {
        # accumulate, or round more than once: implementation order changes the bits
        "round.decimals_3",
        "round.decimals_neg_3",
        "scatter_add",
        "index_add",
        "index_put",
        "scatter_reduce.sum",
        "scatter_reduce.mean",
        "scatter_reduce.prod",
        "index_reduce.mean",
        "index_reduce.prod",
        "_unsafe_masked_index_put_accumulate",
        # arange/linspace with float steps: the k-th element is start + k*step, rounding differs by method
        "arange",
        "linspace",
        "logspace",
        "linspace.tensor_overload",
        "logspace.tensor_overload",
    }
)
"""Names never exact, even when their aten schema looks like a view or a name above would match."""


@functools.lru_cache(maxsize=None)
def is_view_aten(name: str) -> bool:
    """True when some overload of ``torch.ops.aten.<name>`` returns an alias of an input (a view op).

    Read from the schema: the first return has ``alias_info`` that is not a write (``Tensor(a)``), which
    is how native_functions.yaml declares views; in-place and out= ops (``Tensor(a!)``) are not views.
    """
    packet = getattr(torch.ops.aten, name, None) if name else None
    if packet is None or not hasattr(packet, "overloads"):
        return False
    for ov in packet.overloads():
        schema = getattr(packet, ov)._schema
        if schema.returns and schema.returns[0].alias_info is not None and not schema.returns[0].alias_info.is_write:
            return True
    return False


def exact_class(op) -> str | None:
    """The exact class of ``op`` (an OpInfo or an OpInfo ``full_name``), or None when not exact.

    Raises:
        TypeError: ``op`` is neither a str nor an object with ``full_name``/``name``.
    """
    if isinstance(op, str):
        full, name, aten = op, op, op.split(".")[-1]
    elif hasattr(op, "name"):
        full = getattr(op, "full_name", op.name)
        name = op.name
        aten = getattr(op, "aten_name", None) or name.split(".")[-1]
    else:
        raise TypeError(f"exact_class: op must be an OpInfo or an OpInfo full_name str, got {op!r}")
    if full in NOT_EXACT or name in NOT_EXACT:
        return None
    if full in EXACT_OPS:
        return EXACT_OPS[full]
    if name in EXACT_OPS and name == full:
        return EXACT_OPS[name]
    if "." not in name and is_view_aten(aten):
        return "view"
    return None


def is_exact_op(op) -> bool:
    """True when ``op``'s results are exactly specified (see the module docstring): compare bitwise.

    ``op`` is an OpInfo or an OpInfo ``full_name``. Pass the result to
    :func:`neuron_conformance.conformance.verdict.tolerances.tolerance_for` as ``exact=``.
    """
    return exact_class(op) is not None


__all__ = ["EXACT_OPS", "NOT_EXACT", "exact_class", "is_exact_op", "is_view_aten"]
