"""The aten calls the replay suite compares for one target overload, from its replay-index entry.

:func:`replay_calls` re-runs the entry's OpInfo sample on the CPU under
:class:`neuron_conformance.opsuites.aten_capture.AtenCapture`, takes the captured call of the entry's source overload and
derives the target's call along the entry's path (:func:`neuron_conformance.opsuites.replay_index.paths_of`), one relation
a step:

* ``same``, ``inplace``, ``functional``, ``copy``, ``sibling``: the child overload takes the same arguments
  (same names and types, checked when the index was built), so the call is the parent's arguments with
  the child's ``OpOverload``; an in-place child writes its (copied) ``self``.
* ``out``: the parent (functional) call runs on CPU copies; each ``out=`` argument of the child, in schema
  order, gets an empty tensor of the shape and dtype of the matching output (a ``Tensor(a!)[]`` out gets
  one per output tensor). When the target itself is the ``out=`` overload a second call is made with
  zero-element outs (non-list outs only), which the kernel must resize to the result's shape: the
  documented ``out=`` contract (``aten/src/ATen/native/Resize.h``, ``resize_output``; a zero-element out
  is resized without a warning).

Every call's tensors are fresh copies (:func:`neuron_conformance.opsuites.aten_capture.snapshot`), so the CPU and device
runs of one call start from the same values.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from neuron_conformance.conformance.results import aten_audit
from neuron_conformance.opsuites.aten_capture import AtenCapture, run_sample, snapshot
from neuron_conformance.opsuites.samples import cpu_samples, opinfo_by_name
from neuron_conformance.opsuites.suite_helpers import tensor_leaves


class StaleReplayEntry(RuntimeError):
    """The index entry no longer reproduces: its OpInfo, sample or captured overload is gone (a torch
    upgrade); rebuild the index with ``python -m neuron_conformance.opsuites.replay_index --write``."""


@dataclass(frozen=True)
class ReplayCall:
    """One call to compare: ``op`` (the target ``OpOverload``) with CPU ``args``/``kwargs`` and a ``label``
    (``captured``, ``out sized``, ``out resized from 0 elements``)."""

    label: str
    op: object
    args: tuple
    kwargs: dict

    def fresh(self) -> tuple[tuple, dict]:
        """Copies of ``(args, kwargs)``: tensors on cloned storages, aliasing kept."""
        memo: dict = {}
        return snapshot(self.args, memo), snapshot(self.kwargs, memo)


def capture(entry: dict):
    """The :class:`neuron_conformance.opsuites.aten_capture.Captured` call of ``entry["source"]`` from its OpInfo sample.

    Raises:
        StaleReplayEntry: the OpInfo, the sample or the captured call is missing (the message names them).
        Exception: the sample raised on the CPU (also a stale entry in practice, raised as it is).
    """
    op = opinfo_by_name().get(entry["opinfo"])
    where = f"OpInfo {entry['opinfo']!r} {entry['dtype']} sample {entry['sample']} ({entry['phase']})"
    if op is None:
        raise StaleReplayEntry(f"{where}: no such OpInfo in this torch")
    try:
        samples = cpu_samples(
            op, getattr(torch, entry["dtype"]), requires_grad=entry["phase"] == "backward", only=entry["sample"]
        )
    except ValueError as exc:  # no sample of that index
        raise StaleReplayEntry(f"{where}: the OpInfo has no such sample ({exc})") from None
    cap = AtenCapture(keep={entry["source"]}, nested=entry.get("nested", True))
    run_sample(op, samples[0][1], entry["phase"], cap)
    if entry["source"] not in cap.calls:
        raise StaleReplayEntry(
            f"{where}: no call of {entry['source']} was captured; rebuild the index "
            "(python -m neuron_conformance.opsuites.replay_index --write)"
        )
    return cap.calls[entry["source"]]


def _out_arguments(op) -> list:
    return [a for a in op._schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


def _with_outs(parent: ReplayCall, child_op, *, zero: bool) -> ReplayCall:
    """``child_op`` (the ``out=`` variant of ``parent.op``) called with ``parent``'s arguments and outs
    allocated from the parent's CPU result (zero-element ones when ``zero``)."""
    args, kwargs = parent.fresh()
    results = list(tensor_leaves(parent.op(*args, **kwargs)))
    outs = _out_arguments(child_op)
    extra: dict = {}
    if len(outs) == 1 and str(outs[0].type) == "List[Tensor]":
        extra[outs[0].name] = [torch.empty(t.shape, dtype=t.dtype) for t in results]
    elif len(outs) == len(results):
        for arg, t in zip(outs, results):
            extra[arg.name] = torch.empty(0 if zero else t.shape, dtype=t.dtype)
    else:
        raise StaleReplayEntry(f"{child_op}: {len(outs)} out argument(s) for {len(results)} output(s) of {parent.op}")
    label = "out resized from 0 elements" if zero else "out sized"
    return ReplayCall(label, child_op, parent.args, {**parent.kwargs, **extra})


def replay_calls(target: str, entry: dict) -> list[ReplayCall]:
    """The calls of overload ``target`` to compare, derived from the capture of ``entry`` (see the module).

    Raises:
        StaleReplayEntry: see :func:`capture`; or an ``out`` step whose out arguments do not match the
            functional's outputs.
    """
    captured = capture(entry)
    path = entry["path"]
    calls = [ReplayCall("captured", captured.op, captured.args, captured.kwargs)]
    for step in range(len(path) - 1, 0, -1):  # from the captured source back to the target
        child_op = aten_audit.overload_of(path[step - 1][0])
        relation = path[step][1]
        parent = calls[0]
        if relation == "out":
            calls = [_with_outs(parent, child_op, zero=False)]
            if step == 1 and not any(str(a.type) == "List[Tensor]" for a in _out_arguments(child_op)):
                calls.append(_with_outs(parent, child_op, zero=True))
        else:
            calls = [ReplayCall(relation, child_op, parent.args, parent.kwargs)]
    return calls


__all__ = ["ReplayCall", "StaleReplayEntry", "capture", "replay_calls"]
