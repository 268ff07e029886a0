"""Move sample inputs between CPU and the device under test, keeping storage, offset and strides.

A plain ``tensor.to(device)`` copies only the elements a view can reach and makes a fresh contiguous
storage; samples such as ``as_strided.partial_views`` read bytes outside the view, and in-place or
``out=`` samples check aliasing between arguments. :func:`to_device_exact` therefore copies the whole
underlying storage once per storage and rebuilds every tensor over it with ``set_`` (same storage
offset, sizes and strides), so arguments that shared a storage on CPU share one on the device.

That path needs ``aten::set_.source_Storage_storage_offset`` on the device. :func:`preflight` checks once
per process (two tiny ops) whether it works there; when it does not, samples are moved the way the repro
scripts move them (:mod:`neuron_conformance.conformance.results.repro`): ``empty_strided`` + ``copy_`` (same sizes and strides, a
storage of its own, offset 0), contiguous ``.to(device)`` when even that fails (overlapping strides). Then
weaker checks (:data:`FALLBACK_WEAKENS`): the moved input's storage offset is 0, bytes outside a view are
not copied, arguments that shared a storage on the CPU no longer share one, overlapping (stride 0) inputs
become contiguous.

Errors while moving inputs (:func:`sample_to_device`) raise :class:`neuron_conformance.conformance.verdict.failures.TransferError`
naming the sample, so the record carries its ``--conformance-sample`` repro command.

Some arguments PyTorch requires on the CPU even when the op runs on an accelerator:
:data:`CPU_ARGUMENTS` lists them (op name -> positional indices / keyword names), with their source.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch.utils._pytree import tree_map

from neuron_conformance.conformance.verdict.failures import TransferError

EXACT_PATH = "set_"
FALLBACK_PATH = "empty_strided+copy_"
FALLBACK_WEAKENS = (
    "storage offset (0 on the device)",
    "bytes outside a view (not copied)",
    "storage shared between arguments (not shared)",
    "overlapping strides (made contiguous)",
)
"""What the layout, aliasing and view checks no longer see when inputs move by :data:`FALLBACK_PATH`."""

_PATHS: dict[str, str] = {}
"""Device type -> the transfer path :func:`preflight` chose for it in this process."""


def preflight(device: torch.device | str) -> str:
    """The path this process moves sample inputs to ``device`` by: :data:`EXACT_PATH` when
    ``set_(storage, offset, sizes, strides)`` builds a correct offset, strided view over a device storage
    (checked once per process and device type: a 6-element copy, one ``set_`` and one read back), else
    :data:`FALLBACK_PATH`. The CPU always gets the exact path. Never raises."""
    dt = torch.device(device).type
    path = _PATHS.get(dt)
    if path is not None:
        return path
    path = EXACT_PATH
    if dt != "cpu":
        try:
            src = torch.arange(6, dtype=torch.float32)
            dev_bytes = torch.empty(0, dtype=torch.uint8).set_(src.untyped_storage()).to(dt)
            view = torch.empty(0, dtype=torch.float32, device=dt)
            view.set_(dev_bytes.untyped_storage(), 1, (2, 2), (1, 2))
            if not torch.equal(view.cpu(), src.as_strided((2, 2), (1, 2), 1)):
                path = FALLBACK_PATH
        except Exception:  # noqa: BLE001 - any failure of the exact path means: use the fallback
            path = FALLBACK_PATH
    _PATHS[dt] = path
    return path


def _copy_fallback(t: torch.Tensor, device: torch.device, requires_grad: bool) -> torch.Tensor:
    """``t`` on ``device`` by ``empty_strided`` + ``copy_`` (the repro scripts' path); contiguous when the
    strides overlap (``copy_`` cannot write them)."""
    with torch.no_grad():
        if t.is_contiguous():
            out = t.clone() if t.device == device else t.to(device)
        else:
            try:
                out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device).copy_(t)
            except RuntimeError:
                out = t.contiguous().to(device)
    return out.requires_grad_(True) if requires_grad else out


CPU_ARGUMENTS: dict[str, set] = {
    # torch.tensor_split: "tensor_indices_or_sections ... must be a zero-dimensional or one-dimensional
    # long tensor on the CPU" (docstring of torch.tensor_split, torch/_torch_docs.py)
    "tensor_split": {0, "tensor_indices_or_sections"}
}
"""Arguments kept on the CPU, per OpInfo name: indices into ``sample.args`` and keyword names."""


def _row_major_strides(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _move_strided(t: torch.Tensor, device: torch.device, memo: dict, requires_grad: bool = False) -> torch.Tensor:
    if t.is_conj():
        return _move_strided(t.conj(), device, memo).conj().requires_grad_(requires_grad)
    if t.is_neg():
        return torch._neg_view(_move_strided(torch._neg_view(t), device, memo)).requires_grad_(requires_grad)
    if preflight(device) != EXACT_PATH:
        return _copy_fallback(t, device, requires_grad)
    storage = t.untyped_storage()
    key = (storage.data_ptr(), storage.nbytes(), storage.device.type)
    dev_bytes = memo.get(key)
    if (
        dev_bytes is None
        and t.storage_offset() == 0
        and storage.nbytes() == t.numel() * t.element_size()
        and t.stride() == _row_major_strides(t.shape)
    ):
        # the common case, a tensor that is its whole storage in row-major order: one copy op
        out = t.clone() if storage.device == device else t.to(device)
        memo[key] = out
        return out.requires_grad_(True) if requires_grad else out
    if dev_bytes is None:
        cpu_bytes = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
        # a copy even when the storage already lives on `device` (CPU self-check): never alias the input
        dev_bytes = cpu_bytes.clone() if storage.device == device else cpu_bytes.to(device)
        memo[key] = dev_bytes
    with torch.no_grad():
        out = torch.empty(0, dtype=t.dtype, device=device)
        out.set_(dev_bytes.untyped_storage(), t.storage_offset(), t.size(), t.stride())
    if requires_grad:
        out.requires_grad_(True)
    return out


def to_device_exact(t: torch.Tensor, device: torch.device | str, memo: dict | None = None) -> torch.Tensor:
    """Copy tensor ``t`` to ``device`` with its whole storage, storage offset, sizes and strides.

    Args:
        t: a strided tensor on any device (other layouts fall back to ``t.to(device)``).
        device: the target device.
        memo: shared between calls for tensors of one sample, so tensors that share a storage keep
            sharing one on ``device``.

    Returns:
        A leaf tensor on ``device`` with ``requires_grad`` copied from ``t``. Conjugate and negative
        bits are kept.
    """
    device = torch.device(device)
    if memo is None:
        memo = {}
    if t.layout != torch.strided or t.dtype in (torch.complex32,) or t.device.type == "meta":
        out = t.detach().to(device, copy=True)
        return out.requires_grad_(t.requires_grad) if t.requires_grad and out.is_floating_point() else out
    return _move_strided(t.detach(), device, memo, t.requires_grad)


def _swap_device(value, target: torch.device):
    if isinstance(value, torch.device) and value.type == "cpu":
        return target
    if isinstance(value, str) and value in ("cpu", "cpu:0"):
        return str(target)
    return value


def sample_to_device(sample, device: torch.device | str, op_name: str = "", *, index: int | None = None):
    """Return ``(input, args, kwargs)`` of an OpInfo ``SampleInput`` moved to ``device``.

    Tensors are moved with :func:`to_device_exact` (one memo for the sample); ``torch.device('cpu')``
    values and ``device='cpu'`` strings become ``device``; arguments listed in :data:`CPU_ARGUMENTS` for
    ``op_name`` stay on the CPU.

    Raises:
        neuron_conformance.conformance.verdict.failures.TransferError: moving a tensor failed; names ``op_name``, the sample
            ``index`` (when given) and the device, and carries the index for the record's repro command.
    """
    try:
        return _sample_to_device(sample, torch.device(device), op_name)
    except TransferError:
        raise
    except Exception as exc:  # noqa: BLE001 - the harness's own step failed: say so, with the sample
        what = f"{op_name} sample {index}" if index is not None else (op_name or "a sample")
        raise TransferError(
            f"{what}: moving the inputs to {device} ({preflight(device)} path) failed: {type(exc).__name__}: {exc}",
            cause=exc,
            sample=index,
        ) from exc


def _sample_to_device(sample, device: torch.device, op_name: str):
    memo: dict = {}
    keep = CPU_ARGUMENTS.get(op_name, set())

    def move(x):
        if isinstance(x, torch.Tensor):
            if x.device.type == "meta":
                return x  # placed on meta on purpose (an error input about mixed devices): has no data
            return to_device_exact(x, device, memo)
        return _swap_device(x, device)

    inp = tree_map(move, sample.input)
    args = tuple(a if i in keep else tree_map(move, a) for i, a in enumerate(sample.args))
    kwargs = {k: (v if k in keep else tree_map(move, v)) for k, v in sample.kwargs.items()}
    return inp, args, kwargs


def triple_to_device(triple, device: torch.device | str, op_name: str = "", *, index: int | None = None):
    """:func:`sample_to_device` for an ``(input, args, kwargs)`` triple (e.g. pristine copies of a sample)."""
    inp, args, kwargs = triple
    return sample_to_device(SimpleNamespace(input=inp, args=args, kwargs=kwargs), device, op_name, index=index)


def to_cpu(value):
    """Detach every tensor in a (nested) value and copy it to the CPU, keeping strides."""

    def mv(x):
        if isinstance(x, torch.Tensor):
            x = x.detach()
            return x if x.device.type == "cpu" else x.cpu()
        return x

    return tree_map(mv, value)


def to_float64(value, dtype: torch.dtype, *, clone_others: bool = False):
    """Copy of a (nested) value with every floating tensor of ``dtype`` cast to float64 (complex to
    complex128): the inputs of the fp64 reference run of the oracle.

    ``clone_others``: the other tensors are cloned too, so a run that mutates its inputs in place leaves
    the originals alone (the bug-class cases judge their inputs after the run); else they are shared.
    """

    def up(x):
        if isinstance(x, torch.Tensor) and x.dtype == dtype:
            if x.is_complex():
                return x.detach().to(torch.complex128)
            if x.is_floating_point():
                return x.detach().to(torch.float64)
        if clone_others and isinstance(x, torch.Tensor):
            return x.clone()
        return x

    return tree_map(up, value)
