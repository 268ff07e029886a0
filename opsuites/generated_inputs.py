"""Inputs for an aten overload that no OpInfo reaches, derived from its schema.

:func:`candidates` yields, for one ``OpOverload``, a short list of argument sets built from its schema
(``torch._C.FunctionSchema``, the ``native_functions.yaml`` signature): every argument without a default
gets a value of its declared type, arguments with a default keep it. The CPU kernel is the judge of which
candidate is valid: the generated suite uses the first candidate the CPU kernel accepts
(:func:`first_accepted`), so no rule here has to know an op's shape contract.

Values by schema type (``c10/core/ScalarType.h`` and ``aten/src/ATen/native/README.md`` name the types):

=====================  ==================================================================================
``Tensor``             ``randn`` of the candidate shape and dtype; ``int64`` indices in ``[0, 2)`` for
                       arguments named like indices (``index``, ``indices``, ``offsets``, ``target``...),
                       ``bool`` for ``mask``
``Tensor?``            None (optional weights, biases and running statistics left out)
``Tensor[]``           two tensors of the candidate shape (``_foreach_*``, ``cat``, ``stack``)
``Tensor?[]``          one ``int64`` index tensor (``index``, ``index_put``)
``Scalar`` / ``float``  2 / 0.5; ``int`` / ``SymInt`` 3 then 1 (:data:`INTS`; 0 for a ``dim``); ``bool`` False
``int[]`` / ``SymInt[]``  the candidate shape for ``size``-like arguments, its row-major strides for
                       ``stride``, ``[0]`` for ``dim``, else ``[1]``
``Device``             the device the call runs on; other types (``str``, ``Storage``...) None
=====================  ==================================================================================

``out=`` arguments (kwarg-only, written: ``Tensor(a!)``) get empty tensors of the candidate dtype, which
the kernel resizes (``at::native::resize_output``); a ``Tensor(a!)[]`` out (``_foreach_*.out``) gets two
tensors of the candidate shape, since foreach kernels write into their outs without resizing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

SHAPES = ((2, 3), (4,), (2, 3, 4), (1, 2, 3, 4), (2, 3, 4, 5), ())
"""Candidate shapes, tried in order: 2-D first (most ops), then 1-D, 3-D, 4-D (conv/pool), 5-D... 0-dim."""

DTYPES = (torch.float32, torch.int64, torch.bool)
"""Candidate dtypes, tried in order for each shape (float ops first, then integer and logical ops)."""

INTS = (3, 1)
"""Candidate values of ``int`` arguments that are not dims (window lengths, kernel sizes, counts), tried in
order: 3 first, so a length-dependent kernel runs more than its trivial length-1 branch."""

_INDEX_NAMES = (
    "index",
    "indices",
    "offsets",
    "target",
    "targets",
    "idx",
    "lengths",
    "batch_sizes",
    "input_lengths",
    "target_lengths",
    "sorted_sequence_idx",
    "repeats",
)
_MASK_NAMES = ("mask",)
_SIZE_NAMES = ("size", "sizes", "shape", "output_size", "self_sizes", "input_size", "input_sizes")


def _is_out(arg) -> bool:
    return bool(arg.kwarg_only and arg.alias_info is not None and arg.alias_info.is_write)


def _tensor(name: str, shape, dtype, gen: torch.Generator) -> torch.Tensor:
    lname = name.lower()
    if any(k in lname for k in _INDEX_NAMES):
        return torch.randint(0, 2, shape, generator=gen, dtype=torch.int64)
    if any(k in lname for k in _MASK_NAMES):
        return torch.rand(shape, generator=gen) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    return torch.randint(-3, 4, shape, generator=gen, dtype=dtype)


_SKIP = object()


def _value(arg, shape, dtype, gen, device, int_value=1):
    """A value for schema argument ``arg`` (see the module's table), or ``_SKIP`` to leave it out.

    ``str(arg.type)`` is TorchScript's spelling of the schema type: ``number`` for ``Scalar``,
    ``List[int]`` for ``int[]``/``SymInt[]``, ``Optional[Tensor]`` for ``Tensor?``.
    """
    t = str(arg.type)
    name = arg.name
    if _is_out(arg):
        if t == "List[Tensor]":  # _foreach_*.out: one out tensor per input, sized (foreach kernels do not resize)
            return [torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=dtype)]
        return torch.empty(0, dtype=dtype)
    if arg.has_default_value():
        return _SKIP
    if t == "Tensor":
        return _tensor(name, shape, dtype, gen)
    if t == "Optional[Tensor]":
        return None
    if t == "List[Optional[Tensor]]" or (t == "List[Tensor]" and "indices" in name):
        return [torch.randint(0, 2, shape[:1] or (1,), generator=gen, dtype=torch.int64)]
    if t == "List[Tensor]":
        return [_tensor(name, shape, dtype, gen), _tensor(name, shape, dtype, gen)]
    if t in ("number", "Optional[number]"):
        return 2
    if t in ("float", "Optional[float]"):
        return 0.5
    if t in ("int", "Optional[int]"):
        return 0 if "dim" in name else int_value
    if t in ("bool", "Optional[bool]"):
        return False
    if t in ("List[int]", "Optional[List[int]]"):
        if name == "stride":  # row-major strides of the shape: a view inside its storage
            return [math.prod(shape[i + 1 :]) for i in range(len(shape))]
        if name in _SIZE_NAMES or "size" in name:
            return list(shape)
        return [0] if "dim" in name else [1]
    if t in ("List[float]", "Optional[List[float]]"):
        return [0.5]
    if t == "List[number]":
        return [2, 2]
    if t == "List[bool]":
        return [False, False, False]
    if t == "Device":
        return torch.device(device)
    if t == "Optional[Generator]":
        return None
    return _SKIP if arg.kwarg_only else None


def build(op: torch._ops.OpOverload, shape, dtype, int_value: int = 1, seed: int = 0, device: str = "cpu"):
    """One candidate ``(args, kwargs)`` of ``op`` (CPU tensors) for ``shape``, ``dtype`` and ``int_value``
    (the value of non-dim ``int`` arguments); seeded, so the same call builds the same tensors.

    Raises:
        ValueError: an argument without a default has a schema type this module gives no value for.
    """
    gen = torch.Generator().manual_seed(seed)
    args: list = []
    kwargs: dict = {}
    positional = True
    for arg in op._schema.arguments:
        v = _value(arg, shape, dtype, gen, device, int_value)
        if v is _SKIP:  # left at its default: later arguments go by name
            positional = False
            continue
        if arg.kwarg_only or not positional:
            kwargs[arg.name] = v
        else:
            args.append(v)
    return args, kwargs


def candidates(op: torch._ops.OpOverload) -> Iterator[tuple[tuple, torch.dtype, int, list, dict]]:
    """``(shape, dtype, int_value, args, kwargs)`` candidates of ``op`` in the order :data:`SHAPES` x
    :data:`DTYPES` x :data:`INTS`."""
    for shape in SHAPES:
        for dtype in DTYPES:
            for int_value in INTS:
                args, kwargs = build(op, shape, dtype, int_value)
                yield shape, dtype, int_value, args, kwargs


def first_accepted(op: torch._ops.OpOverload):
    """The first candidate the CPU kernel accepts: ``(shape, dtype, args, kwargs, result)`` with fresh
    (unmutated) CPU ``args``/``kwargs``, or None when the CPU kernel raises for every candidate.

    A candidate whose result holds no tensor and no number (``None``) is accepted too: in-place and
    ``out=`` overloads are judged by their written arguments.
    """
    for shape, dtype, int_value, args, kwargs in candidates(op):
        try:
            result = op(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the CPU kernel refusing a candidate is how candidates are chosen
            continue
        fresh_args, fresh_kwargs = build(op, shape, dtype, int_value)
        return shape, dtype, fresh_args, fresh_kwargs, result
    return None


__all__ = ["DTYPES", "INTS", "SHAPES", "build", "candidates", "first_accepted"]
