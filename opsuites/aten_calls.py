"""One aten overload call checked on the CPU and the device: the suites whose records name an aten overload
(``generated``, ``aten_replay``, ``shape_contracts``) call ``torch.ops.aten.<op>.<overload>`` with one set of
arguments and judge every output and written argument (:func:`check_aten_call`)."""

from __future__ import annotations

import torch

from neuron_conformance.conformance.backend.transfer import to_device_exact, to_float64
from neuron_conformance.conformance.verdict import index_semantics
from neuron_conformance.conformance.verdict.compare import ErrorTally, compare_outputs
from neuron_conformance.conformance.verdict.duplicates import UNDEFINED_WRITES, reconcile, write_pairs
from neuron_conformance.conformance.verdict.failures import ConformanceFailure
from neuron_conformance.conformance.verdict.index_semantics import DEVICE_CHOOSES_TIES
from neuron_conformance.conformance.verdict.output_dtypes import device_shape_allowed
from neuron_conformance.conformance.verdict.tolerances import Tolerance, tolerance_for
from neuron_conformance.opsuites.suite_helpers import annotate, tensor_leaves

UNDEFINED_VALUES = ("empty", "new_empty", "_empty_affine", "_empty_per_channel", "resize", "set_", "unfold_backward")
"""Name fragments of overloads whose result values are unspecified (``empty*`` allocates uninitialised
memory, ``torch.empty`` docs): only metadata is compared."""


CPU_NONDETERMINISTIC_OVERLOADS = {"linalg_lstsq"}
"""Base names of overloads whose CPU kernel is not reproducible call to call (``linalg_lstsq``'s gelsy
driver: :data:`neuron_conformance.conformance.verdict.tolerances.CPU_NONDETERMINISTIC`): judged with the dtype's tolerance, never
exactly, even for a backend that mirrors the CPU."""


PARTLY_UNDEFINED_OUTPUTS = {"_ctc_loss": (1,)}
"""Base name -> indices of outputs (and of ``out=`` arguments, in the same order) that hold memory the
kernel never writes, compared by metadata only: ``_ctc_loss``'s ``log_alpha`` is allocated with
``at::empty`` and filled for the time steps below each sequence's input length only
(``aten/src/ATen/native/LossCTC.cpp``, ``ctc_loss_cpu_template``)."""


def written_arguments(op) -> list[str]:
    """Names of the arguments ``op``'s schema marks as written (``Tensor(a!)``: in-place ``self``, ``out=``)."""
    return [a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write]


def aten_to_device(value, device, memo: dict | None = None):
    """``value`` (an aten call argument) with its tensors moved to ``device`` by
    :func:`neuron_conformance.conformance.backend.transfer.to_device_exact` (same sizes, strides and offset), lists and tuples walked,
    ``torch.device`` values replaced by ``device``, a ``torch.UntypedStorage`` moved as a whole (its bytes,
    through a ``uint8`` tensor over it), other values returned as they are.

    Without ``memo`` each tensor gets its own device storage. With ``memo`` (one dict shared across one
    call's arguments): the same tensor object given twice (``query is key is value``: kernels take a
    self-attention path on identity) becomes one device tensor, and tensors that share a non-empty storage
    (an ``out=`` view of ``self``) share one on the device. Empty storages (data pointer 0, such as
    ``torch.empty(0)`` outs) are never merged: resizing one out must not resize another.
    """
    if isinstance(value, torch.Tensor):
        if memo is None:
            return to_device_exact(value, device, {})
        hit = memo.get(("id", id(value)))
        if hit is None:
            shared = value.untyped_storage().data_ptr() != 0
            moved = to_device_exact(value, device, memo.setdefault("storages", {}) if shared else {})
            hit = memo[("id", id(value))] = (value, moved)  # keeps value alive: ids stay unique
        return hit[1]
    if isinstance(value, torch.UntypedStorage):  # Tensor.set_(source) arguments: the storage, moved whole
        holder = torch.empty(0, dtype=torch.uint8).set_(value)
        return aten_to_device(holder, device, memo).untyped_storage()
    if isinstance(value, (list, tuple)):
        return type(value)(aten_to_device(v, device, memo) for v in value)
    if isinstance(value, torch.device):
        return torch.device(device)
    return value


def bound_arguments(op, args, kwargs) -> dict:
    """Argument name -> value of one call of ``op`` (positional arguments by schema order)."""
    names = [a.name for a in op._schema.arguments]
    return {**dict(zip(names, args)), **kwargs}


def aten_values_defined(overload: str) -> bool:
    """False for overloads whose result values are unspecified (:data:`UNDEFINED_VALUES`)."""
    return not any(part in overload for part in UNDEFINED_VALUES)


def aten_call_tolerance(overload: str, expected, dtype: torch.dtype, profile, reproducible: bool = True) -> Tolerance:
    """Tolerance of one aten call's results: that of the dtype of its first output tensor (``dtype`` when
    it has none), exact when the backend mirrors the CPU and the CPU kernel is reproducible (not in
    :data:`CPU_NONDETERMINISTIC_OVERLOADS`, and ``reproducible``); :func:`neuron_conformance.conformance.verdict.tolerances.tolerance_for`."""
    out_dtype = next((t.dtype for t in tensor_leaves(expected)), dtype)
    reproducible = reproducible and overload[len("aten::") :].split(".")[0] not in CPU_NONDETERMINISTIC_OVERLOADS
    return tolerance_for(out_dtype, mirrors_cpu=profile.mirrors_cpu and reproducible)


def _filled_by_device(op, index: int, dev, cpu) -> bool:
    """Whether written argument ``index`` (an ``out=`` tensor, in output order) is one the CPU leaves empty
    and the device may fill: eval-mode batch-norm statistics (output_dtypes rule 2); it has no CPU values."""
    return (
        isinstance(dev, torch.Tensor)
        and isinstance(cpu, torch.Tensor)
        and dev.shape != cpu.shape
        and device_shape_allowed(op._schema.name, index, dev.shape, cpu.shape)
    )


def fold_aten_call(
    tally: ErrorTally,
    index: int,
    op,
    cpu_call,
    dev_call,
    expected,
    actual,
    *,
    device,
    profile,
    tol: Tolerance,
    values: bool,
    where: str,
    on_cpu: tuple[str, ...] = (),
    cpu_outputs: tuple[int, ...] = (),
    reference64=None,
) -> None:
    """Compare one aten call on the device with its CPU call and add the verdicts to ``tally``: every output,
    then every argument the schema marks as written (:func:`written_arguments`), after the call. Outputs of
    :data:`PARTLY_UNDEFINED_OUTPUTS` are compared by metadata only.

    Args:
        cpu_call, dev_call: ``(args, kwargs)`` the CPU and the device call ran with (after the calls).
        expected, actual: the CPU and the device results.
        on_cpu: names of arguments the device call was given as CPU tensors (documented as CPU tensors on
            every device, like ``_pack_padded_sequence``'s ``lengths``); written ones are compared as CPU
            tensors.
        cpu_outputs: indices of outputs that are CPU tensors on every device (``_pack_padded_sequence``'s
            ``batch_sizes``, PackedSequence.cpp): the device's must be on the CPU too.
        reference64: callable giving the call's float64 outputs, for the fp64 rule on the outputs (the
            written arguments are judged by the tolerance alone), or None.

    Raises:
        ConformanceFailure: the first mismatch (:func:`neuron_conformance.conformance.verdict.compare.compare_outputs`), its
            ``sample`` set to ``index``.
    """
    cpu_bound, dev_bound = bound_arguments(op, *cpu_call), bound_arguments(op, *dev_call)
    base = op._schema.name.removeprefix("aten::")
    # the index among ties is the device's choice (index_semantics.DEVICE_CHOOSES_TIES): integer outputs of
    # those overloads are not compared on a backend that does not mirror the CPU, unless stable=True
    ties_free = not profile.mirrors_cpu and base in DEVICE_CHOOSES_TIES and not cpu_bound.get("stable")
    semantics = None
    if ties_free and values:  # the indices judged by what they point at, as in the OpInfo suites
        cpu_args, cpu_kwargs = cpu_call
        if cpu_args and isinstance(cpu_args[0], torch.Tensor):
            semantics = index_semantics.checker(base, (cpu_args[0], tuple(cpu_args[1:]), dict(cpu_kwargs)))
    # which of several writes to one position lands is the device's choice (verdict/duplicates.py)
    writes = None if profile.mirrors_cpu or base not in UNDEFINED_WRITES else write_pairs(base, cpu_bound)
    undefined = PARTLY_UNDEFINED_OUTPUTS.get(base, ())
    pairs = [(actual, expected, where, values, device.type, reference64)]
    if (
        (undefined or cpu_outputs)
        and isinstance(expected, tuple)
        and isinstance(actual, tuple)
        and len(actual) == len(expected)
    ):  # compared one by one
        pairs = [
            (
                a,
                e,
                f"{where}, output {i}",
                values and i not in undefined,
                "cpu" if i in cpu_outputs else device.type,
                None,
            )
            for i, (a, e) in enumerate(zip(actual, expected))
        ]
    pairs += [
        (
            dev_bound.get(n),
            cpu_bound.get(n),
            f"{where}, written argument {n!r}",
            values and i not in undefined,
            "cpu" if n in on_cpu else device.type,
            None,
        )
        for i, n in enumerate(written_arguments(op))
        if not _filled_by_device(op, i, dev_bound.get(n), cpu_bound.get(n))
    ]
    try:
        for a, e, w, judged, device_type, r64 in pairs:
            if writes is not None and isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and judged:
                a = reconcile(a, e, writes, w)
            for v in compare_outputs(
                a,
                e,
                device_type=device_type,
                tolerance=tol,
                check_strides=profile.mirrors_cpu,
                values=judged,
                where=w,
                op=op._schema.name,
                reference64=r64,
                integer_values=judged and not ties_free,
            ):
                tally.add(v, index)
        if semantics is not None:
            for v in semantics(actual, expected, tol, where):
                tally.add(v, index)
    except ConformanceFailure as exc:
        exc.sample = index
        raise


def aten_reference64(op, args, kwargs, dtype: torch.dtype, profile):
    """A callable giving ``op``'s float64 result on copies of ``args``/``kwargs`` (tensors of ``dtype`` widened,
    the others cloned: made now, before an in-place CPU call mutates them), for the fp64 rule as in the OpInfo
    suites; None for a backend that mirrors the CPU or a dtype that is not floating or complex."""
    if profile.mirrors_cpu or not (dtype.is_floating_point or dtype.is_complex):
        return None
    if any(isinstance(a, (torch.UntypedStorage, torch.TypedStorage)) for a in [*args, *kwargs.values()]):
        return None  # raw storage holds the dtype's bytes: a widened call would read them as float64
    args64 = to_float64(list(args), dtype, clone_others=True)
    kwargs64 = to_float64(dict(kwargs), dtype, clone_others=True)

    def reference64():
        return op(*args64, **kwargs64)

    return reference64


def check_aten_call(
    op,
    args: list,
    kwargs: dict,
    *,
    device,
    profile,
    record,
    where: str,
    dtype: torch.dtype,
    index: int = 0,
    tally: ErrorTally | None = None,
    values: bool = True,
    reproducible: bool = True,
    on_cpu: tuple[str, ...] = (),
    cpu_outputs: tuple[int, ...] = (),
) -> ErrorTally:
    """Run ``op`` (an aten ``OpOverload``) on CPU ``args``/``kwargs`` and on their device copies, compare.

    The inputs are moved first (:func:`aten_to_device` with one memo: same sizes, strides and offset,
    identity and storage sharing kept), so an in-place CPU call cannot change what the device gets; a
    factory overload (a ``device`` argument the call does not give) gets ``device=`` the device under
    test. Compared by :func:`fold_aten_call`, with :func:`aten_call_tolerance`; strides are checked when
    the backend mirrors the CPU. The record gets ``atol``/``rtol``.

    Args:
        where: names the call in failure messages (overload, shapes, dtype).
        index: the sample index the verdicts and failures carry.
        tally: the tally to add the passing verdicts to (a fresh one when None); returned.
        values: False for results whose values are unspecified (``empty*``): metadata only.
        reproducible: False for a CPU kernel that is not reproducible call to call (never exact).
        on_cpu, cpu_outputs: see :func:`fold_aten_call` (``on_cpu`` arguments are not moved).

    Raises:
        neuron_conformance.conformance.verdict.failures.ConformanceFailure: an output or written argument differs (``sample`` set;
            the record gets the tally's fields first).
        Exception: the device call raised (the CPU accepted the inputs): the same type, the message
            naming ``where`` (:func:`annotate`). The CPU call's own exception propagates unchanged.
    """
    names = [a.name for a in op._schema.arguments]
    memo: dict = {}
    dev_args = [a if names[i] in on_cpu else aten_to_device(a, device, memo) for i, a in enumerate(args)]
    dev_kwargs = {k: v if k in on_cpu else aten_to_device(v, device, memo) for k, v in kwargs.items()}
    if any(a.name == "device" for a in op._schema.arguments) and "device" not in dev_kwargs:
        dev_kwargs["device"] = torch.device(device)  # a factory creates its result on the device under test
    reference64 = aten_reference64(op, args, kwargs, dtype, profile)
    expected = op(*args, **kwargs)
    try:
        actual = op(*dev_args, **dev_kwargs)
    except ConformanceFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - the CPU kernel accepted these inputs: the device must too
        raise annotate(exc, where, index) from None
    tally = ErrorTally() if tally is None else tally
    tol = aten_call_tolerance(op.name(), expected, dtype, profile, reproducible)
    record.update(atol=tol.atol, rtol=tol.rtol)
    try:
        fold_aten_call(
            tally,
            index,
            op,
            (args, kwargs),
            (dev_args, dev_kwargs),
            expected,
            actual,
            device=device,
            profile=profile,
            tol=tol,
            values=values,
            where=where,
            on_cpu=on_cpu,
            cpu_outputs=cpu_outputs,
            reference64=reference64,
        )
    except ConformanceFailure:
        record.update(sample=index, **tally.record_fields())
        raise
    return tally
