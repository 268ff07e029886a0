"""Which calls of the asynchronous mode run on the calling thread because their CPU kernel decides from
something no meta kernel sees (values, dtype support, empty inputs, memory format); see
:mod:`.async_ops` for the queue itself.

Each rule was found by the op suites' sync/async comparison (``python -m neuron_conformance.conformance.backend.modes
--setting CONFORMANCE_EMULATOR_ASYNC``): queued, the call returned where the synchronous mode raised (the error
came from the stream worker at a later call, in the next test), or its output took the meta kernel's layout
where the CPU kernel chose another. The emulator's contract is that its asynchronous mode gives the
synchronous outcome test by test, so that a difference between its modes is an ordering bug.
"""

from __future__ import annotations

import math

import torch

from . import fallback

HOST_CHECKED = frozenset(
    {
        "aten::cholesky",
        "aten::linalg_cholesky_ex",
        "aten::inverse",
        "aten::linalg_inv_ex",
        "aten::_linalg_solve_ex",
        "aten::linalg_solve_ex",
        "aten::linalg_lu_factor_ex",
        "aten::linalg_ldl_factor_ex",
        "aten::_linalg_eigh",
        "aten::linalg_eig",
        "aten::_linalg_svd",
        "aten::linalg_lstsq",
        "aten::cholesky_inverse",
    }
)
"""Linear-algebra ops whose kernels raise from the values (LAPACK's ``info``: "not positive-definite",
"singular") through ``at::_linalg_check_errors`` (aten/src/ATen/native/BatchLinearAlgebra.cpp), which on
CUDA copies ``info`` to the host, a synchronisation: the error belongs to the call. Queued, ``cholesky`` of
a matrix that is not positive-definite raised at a later call, in the layouts suite's next case. They run
on the calling thread after a drain."""

VALUE_CHECKED = frozenset(
    {
        "aten::binary_cross_entropy",
        "aten::binary_cross_entropy_backward",
        "aten::multinomial",
        "aten::bernoulli",
        "aten::bernoulli_",
        "aten::poisson",
        "aten::normal",
        "aten::normal_",
        "aten::_assert_async",
        "aten::masked_scatter",
        "aten::masked_scatter_",
    }
)
"""Ops whose CPU kernels check the values of floating arguments and raise from them (measured on torch
2.13's CPU: ``binary_cross_entropy`` "all elements of input should be between 0 and 1", ``multinomial``
"probability tensor contains either inf, nan or element < 0", ``bernoulli`` with a tensor ``p`` outside
[0, 1], ``poisson`` with a negative rate, ``normal`` with a negative ``std`` tensor, ``_assert_async`` of a
zero, ``masked_scatter`` with fewer ``source`` elements than ones in the mask). They run on the calling
thread after a drain, as the index-taking ops (:data:`INDEX_ARGUMENTS`)."""

INDEX_ARGUMENTS = frozenset({"index", "indices", "offsets", "target", "sorter", "lengths", "boundaries"})
"""Schema argument names of index tensors. A CPU kernel bounds-checks every index it reads and raises from
the values (``take`` "out of range", ``gather``/``scatter*`` "index ... is out of bounds", ``nll_loss``
"Target ... is out of bounds", ``embedding_bag`` offsets, ``max_unpool`` indices); no meta kernel can make
that check, because it sees no values. Queued, the error came from the stream worker at a later call: the
call itself returned a result where the synchronous mode raised (the stress, variants and properties
suites' ``wrong-error`` in the op suites' sync/async comparison, 146 differences with their
cascades), and the late error then failed the next test's canary. CUDA makes most of these checks in the
kernel (``CUDA_KERNEL_ASSERT``, a sticky asynchronous error), so a queued device is not wrong to raise late,
but the emulator's contract is that its asynchronous mode gives the synchronous outcome test by test
An op with an integral tensor in one of these (read, not written) arguments runs on the calling
thread after a drain. Floating ``target`` arguments (``mse_loss``) are not index tensors and stay queued."""

META_DIVERGES = frozenset(
    {
        "aten::native_batch_norm",
        "aten::_native_batch_norm_legit",
        "aten::_native_batch_norm_legit_no_training",
        "aten::_batch_norm_no_update",
        "aten::searchsorted",
        "aten::bucketize",
    }
)
"""Ops whose meta kernel does not describe what the CPU kernel does (measured on torch 2.13): in eval mode
the CPU's batch-norm kernels return 0-element ``save_mean``/``save_invstd`` where the meta kernels give one
element per channel (queued, the worker's copy into the meta-shaped output failed at the next read), and
``searchsorted``/``bucketize`` meta kernels accept a 0-dim ``boundaries`` that the CPU kernel refuses
("boundaries tensor must be 1 dimension"). They run on the calling thread after a drain."""

SCHEMA_RULES = HOST_CHECKED | VALUE_CHECKED | META_DIVERGES
"""Op names that always run on the calling thread (after a drain)."""


def tensor_leaves(v):
    """Every tensor in ``v``, walking tuples, lists and dict values (an op's ``(args, kwargs)`` included)."""
    if isinstance(v, torch.Tensor):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from tensor_leaves(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from tensor_leaves(x)


def has_numbers(plan, args) -> bool:
    for i, kind, _n, _c, _w in plan.pos:
        if i < len(args) and kind in (fallback._K_TENSOR, fallback._K_OPT_TENSOR):
            v = args[i]
            if v is not None and not isinstance(v, torch.Tensor):
                return True
    return False


_index_positions: dict = {}


def reads_integral_index(op, args, kwargs) -> bool:
    """True when an argument named in :data:`INDEX_ARGUMENTS` that the op reads (its schema marks no write)
    holds an integral tensor (or a list with one, as ``index``'s ``indices``)."""
    where = _index_positions.get(op)
    if where is None:
        where = tuple(
            (i, a.name)
            for i, a in enumerate(op._schema.arguments)
            if a.name in INDEX_ARGUMENTS
            and "Tensor" in str(a.type)
            and not (a.alias_info is not None and a.alias_info.is_write)
        )
        _index_positions[op] = where
    for i, name in where:
        v = args[i] if i < len(args) else kwargs.get(name)
        for t in tensor_leaves(v):
            if not (t.dtype.is_floating_point or t.dtype.is_complex):
                return True
    return False


INTEGER_DIVISIONS = frozenset(
    {
        "aten::floor_divide",
        "aten::floor_divide_",
        "aten::fmod",
        "aten::fmod_",
        "aten::remainder",
        "aten::remainder_",
        "aten::div",
        "aten::div_",
    }
)
"""Ops whose CPU kernels raise "ZeroDivisionError" for an integral tensor divided by a zero scalar."""


def scalar_refused(op, args, kwargs, leaves: list | None = None) -> bool:
    """True when a Python-number argument is one the CPU kernel refuses for the dtype of the first tensor
    argument, a check the meta kernels skip: a value outside the dtype's range (``fill.Scalar`` of a uint8
    tensor with -1.5: "value cannot be converted to type uint8_t without overflow"; a finite value beyond a
    floating dtype's largest), or a zero divisor of an integral tensor (:data:`INTEGER_DIVISIONS`:
    "ZeroDivisionError"). Found by the properties suite's scalar-overload cases in the sync/async
    comparison; such calls run on the calling thread."""
    numbers = [v for v in (*args, *kwargs.values()) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers:
        return False
    leaves = list(tensor_leaves((args, kwargs))) if leaves is None else leaves
    first = leaves[0] if leaves else None
    if first is None or first.dtype.is_complex or first.dtype == torch.bool:
        return False
    if first.dtype.is_floating_point:
        big = torch.finfo(first.dtype).max
        return any((isinstance(v, int) or math.isfinite(v)) and abs(v) > big for v in numbers)  # ints: no inf/nan
    info = torch.iinfo(first.dtype)
    if any(v < info.min or v > info.max for v in numbers):
        return True
    return op._schema.name in INTEGER_DIVISIONS and any(v == 0 for v in numbers)


def has_empty_tensor(leaves) -> bool:
    """True when a tensor argument has no elements. Such a call has nothing to compute, and CPU kernels make
    empty-input checks that their meta kernels skip: ``max``/``min`` without ``dim`` of an empty tensor
    ("Expected reduction dim to be specified for input.numel() == 0"), ``mode`` over a zero-size dimension
    ("Expected reduction dim 2 to have non-zero size"). Queued, the call returned and the error came at the
    next test's canary (the stress suite's ``zero_size`` cases in the sync/async comparison);
    such calls run on the calling thread."""
    return any(t.numel() == 0 for t in leaves)


def channels_last_input(leaves) -> bool:
    """True when a 4-D or 5-D tensor argument is laid out channels-last (and not also contiguous).

    CPU kernels choose their output's memory format from ``suggest_memory_format`` of the input and
    restride an ``out=`` tensor to it (``reflection_pad3d.out`` on a channels-last input gives strides
    ``(245, 1, 35, 5)`` to an out of size ``(3, 5, 7, 7)`` allocated contiguous), which the Python meta
    kernels do not all do (its meta kernel keeps ``(245, 49, 7, 1)``). Queued, the output kept the meta
    strides while the worker's kernel wrote the restrided layout into its bytes: wrong values (the layouts
    suite's ``channels_last`` case of ``nn.functional.pad`` reflect/replicate in device mode).
    Such calls run on the calling thread, where the fallback restrides the output as the CPU kernel did."""
    for t in leaves:
        if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
            return True
        if t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d) and not t.is_contiguous():
            return True
    return False


_refused: dict = {}
"""``(op, dtypes of its tensor arguments)`` -> whether the CPU kernel refused a probe of that signature."""

PROBE_MAX_ELEMENTS = 1 << 20
"""Largest argument (elements) :func:`cpu_refuses` builds a probe for; a larger call is queued unprobed."""


def cpu_refuses(plan, args, kwargs, leaves: list | None = None) -> bool:
    """True when the CPU kernel refuses this call's signature (the overload and the dtype of every tensor
    argument), judged once per signature with a host probe.

    No meta kernel knows which dtypes a CPU kernel implements: ``round.decimals`` of int8 raises
    "round_vml_cpu not implemented for 'Char'" and ``logit_`` of an int16 tensor raises "result type Float
    can't be cast to the desired output type Short", ``bitwise_and.Scalar`` of a float32 tensor raises
    "bitwise_and_cpu not implemented for 'Float'" on the CPU, while their meta kernels accept them.
    Queued, those errors came from the worker at a later call (the variants suite's ``wrong-error`` in the
    sync/async comparison). The probe runs the CPU kernel on the calling thread over zero-filled host
    tensors of the arguments' shapes and dtypes (no device memory, so no wait for the stream), with the CPU
    generator's state saved and restored; a refused signature runs on the calling thread after a drain, so
    its error is the call's. A probe that fails for another reason (zeros as divisors) only makes the
    signature run on the calling thread. Calls with an argument over :data:`PROBE_MAX_ELEMENTS` elements are
    not probed (they are queued)."""
    leaves = list(tensor_leaves((args, kwargs))) if leaves is None else leaves
    dtypes = tuple(t.dtype for t in leaves)
    if not dtypes or any(t.numel() > PROBE_MAX_ELEMENTS for t in leaves):
        return False
    key = (plan.op, dtypes)
    refused = _refused.get(key)
    if refused is None:
        refused = _refused[key] = not _probe_runs(plan, args, kwargs)
    return refused


def map_arguments(plan, args, kwargs, fn) -> tuple[list, dict]:
    """``(args, kwargs)`` with every planned argument ``v`` replaced by ``fn(kind, v)`` (``kind`` the
    fallback's argument kind); the arguments the plan does not list are kept. Used for the meta call of a
    queued op (:mod:`.async_ops`) and for the host probe (:func:`cpu_refuses`)."""
    margs = list(args)
    for i, kind, _name, _cpu_ok, _w in plan.pos:
        if i < len(margs):
            margs[i] = fn(kind, margs[i])
    mkw = dict(kwargs)
    for name, (kind, _c, _w, _o) in plan.kw.items():
        if name in mkw:
            mkw[name] = fn(kind, mkw[name])
    return margs, mkw


def _probe_value(kind, v):
    if kind == fallback._K_DEVICE:
        return torch.device("cpu") if v is not None else v
    if kind == fallback._K_GENERATOR:
        return None
    return _zeros_like_host(v)


def _zeros_like_host(v):
    if isinstance(v, torch.Tensor):
        return torch.zeros(v.size(), dtype=v.dtype)
    if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
        return [_zeros_like_host(x) for x in v]
    return v


def _probe_runs(plan, args, kwargs) -> bool:
    """Whether the CPU kernel of ``plan`` runs over zero-filled host copies of the arguments' geometry."""
    pargs, pkw = map_arguments(plan, args, kwargs, _probe_value)
    try:
        with torch.random.fork_rng(devices=[]):
            (plan.packet if has_numbers(plan, args) else plan.call)(*pargs, **pkw)
    except Exception:  # noqa: BLE001 - any refusal: the signature runs on the calling thread
        return False
    return True


def runs_at_the_call(plan, args, kwargs) -> bool:
    """True when this call must run on the calling thread (after a drain) by one of the call-time rules:
    an integral index argument, a refused Python number, a zero-element or channels-last tensor argument,
    a random op drawing from the CPU's default generator, or a signature the CPU kernel refuses."""
    if plan.default_rng or reads_integral_index(plan.op, args, kwargs):
        return True
    leaves = list(tensor_leaves((args, kwargs)))  # walked once for the rules below (every queued op)
    return (
        channels_last_input(leaves)
        or has_empty_tensor(leaves)
        or scalar_refused(plan.op, args, kwargs, leaves)
        or cpu_refuses(plan, args, kwargs, leaves)
    )
