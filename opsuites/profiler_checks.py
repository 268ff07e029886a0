"""The profiler checks of the device-API suite (``opsuites/test_device_api.py``): ``torch.profiler`` on the
device.

What each check demands, and where torch defines it:

* **op events** (:func:`check_op_events`): a ``torch.profiler.profile(activities=[ProfilerActivity.CPU],
  record_shapes=True)`` around ops on the device records an event for each aten op the dispatcher ran
  (the dispatcher's ``RecordFunction`` callbacks, ``aten/src/ATen/record_function.h``), whatever the
  backend; each event's recorded inputs (the Kineto result's event tree, ``_ExtraFields_TorchOp.inputs``)
  are tensors on the device. A backend that switches ``RecordFunction`` off, or runs its ops outside the
  dispatcher, shows none.
* **Chrome trace** (:func:`check_chrome_trace`): ``prof.export_chrome_trace(path)`` writes JSON whose
  ``traceEvents`` hold the same op events as complete events (``"ph": "X"``, numeric ``ts`` and ``dur``,
  the Trace Event Format of https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).
* **nested ranges** (:func:`check_nesting`): ``torch.profiler.record_function`` ranges appear as events, a
  range opened inside another lies inside its parent's time span, and the device ops run inside a range
  lie inside that range's span.
* **device activity** (:func:`check_device_activity`): where the backend registers a device-side profiler
  for ``ProfilerActivity.PrivateUse1``, a profile with that activity records well-formed events whose
  ``device_type`` is ``DeviceType.PrivateUse1``. torch 2.13 lists that activity in
  ``torch._C._autograd._supported_activities()`` for any renamed PrivateUse1 backend (measured with the
  emulated device: ``{CPU, NEURON}``), and such a profile then holds host events only; so the device API
  probe calls the activity ``missing`` when it records no device event, and the check is skipped there.

Each raises :class:`neuron_conformance.conformance.verdict.failures.MetadataFailure` naming what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from neuron_conformance.conformance.backend.profiler_probe import device_activity_supported
from neuron_conformance.conformance.verdict.failures import MetadataFailure

OPS = ("aten::mm", "aten::add", "aten::sum")
"""The aten ops :func:`workload` runs on the device, each of which a profile must show."""

OUTER, INNER = "conformance.outer", "conformance.inner"
"""Names of the two nested ``record_function`` ranges of :func:`profile_workload`."""


def workload(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``(x @ y + x).sum()`` with the inner part in a nested range: aten ``mm``, ``add``, ``sum``."""
    from torch.profiler import record_function

    with record_function(OUTER):
        z = torch.mm(x, y)
        with record_function(INNER):
            w = torch.add(z, x)
        return w.sum()


def profile_workload(x: torch.Tensor, y: torch.Tensor, activities=None):
    """The ``torch.profiler.profile`` object of :func:`workload` on ``x``, ``y`` (device tensors ``(n, n)``),
    with ``record_shapes=True``, ``activities`` defaulting to ``[ProfilerActivity.CPU]``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=activities or [ProfilerActivity.CPU], record_shapes=True) as prof:
        workload(x, y)
        if x.device.type != "cpu":
            torch.accelerator.synchronize()
    return prof


def _tree_devices(prof) -> dict[str, set[str]]:
    """Aten op name -> the device types of its recorded tensor inputs (Kineto event tree)."""
    out: dict[str, set[str]] = {}
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        inputs = getattr(node.extra_fields, "inputs", None)
        if not node.name.startswith("aten::") or inputs is None:
            continue
        kinds = out.setdefault(node.name, set())
        for item in inputs:
            device = getattr(item, "device", None)
            if isinstance(device, torch.device):
                kinds.add(device.type)
    return out


def check_op_events(prof, device: torch.device) -> dict[str, int]:
    """Every op of :data:`OPS` has an event, with inputs on ``device``; returns op -> event count."""
    counts = {name: 0 for name in OPS}
    for evt in prof.events():
        if evt.name in counts:
            counts[evt.name] += 1
    absent = [name for name, n in counts.items() if n == 0]
    if absent:
        raise MetadataFailure(
            f"torch.profiler on {device.type}: no event for {', '.join(absent)} although the "
            f"ops ran on the device ({len(prof.events())} events recorded in all)"
        )
    devices = _tree_devices(prof)
    wrong = {name: sorted(devices.get(name, set())) for name in OPS if device.type not in devices.get(name, set())}
    if wrong:
        raise MetadataFailure(
            f"torch.profiler on {device.type}: the recorded inputs of "
            + "; ".join(f"{n} are on {d or 'no device'}" for n, d in wrong.items())
            + f", not {device.type}"
        )
    return counts


def check_chrome_trace(prof, path: Path) -> int:
    """``export_chrome_trace(path)`` writes JSON holding each op of :data:`OPS` as a complete event;
    returns the number of trace events.

    Raises:
        MetadataFailure: the file is not JSON, has no ``traceEvents`` list, or lacks an op.
    """
    prof.export_chrome_trace(str(path))
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MetadataFailure(f"export_chrome_trace wrote {path}, which does not parse as JSON: {exc}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise MetadataFailure(f"export_chrome_trace's {path} has no traceEvents list")
    complete = {
        e.get("name")
        for e in events
        if isinstance(e, dict)
        and e.get("ph") == "X"
        and isinstance(e.get("ts"), (int, float))
        and isinstance(e.get("dur"), (int, float))
    }
    absent = [name for name in OPS if name not in complete]
    if absent:
        raise MetadataFailure(
            f"export_chrome_trace's {path} ({len(events)} events) has no complete event for {', '.join(absent)}"
        )
    return len(events)


def _span(prof, name: str):
    spans = [e.time_range for e in prof.events() if e.name == name]
    if len(spans) != 1:
        raise MetadataFailure(
            f"torch.profiler: {len(spans)} events named {name!r}, expected 1 (record_function ranges are not recorded)"
        )
    return spans[0]


def check_nesting(prof) -> None:
    """:data:`INNER` lies within :data:`OUTER`, ``aten::add`` within :data:`INNER`, ``aten::mm`` within
    :data:`OUTER` (time spans in microseconds, ends included)."""
    outer, inner = _span(prof, OUTER), _span(prof, INNER)
    pairs = [(INNER, inner, OUTER, outer)]
    for op, parent, pspan in (("aten::add", INNER, inner), ("aten::mm", OUTER, outer)):
        spans = [e.time_range for e in prof.events() if e.name == op]
        if not spans:
            raise MetadataFailure(f"torch.profiler: no {op} event inside the range {parent!r}")
        pairs.append((op, spans[0], parent, pspan))
    for child, cspan, parent, pspan in pairs:
        if cspan.start < pspan.start or cspan.end > pspan.end:
            raise MetadataFailure(
                f"torch.profiler: {child!r} spans [{cspan.start}, {cspan.end}] us, outside its "
                f"parent range {parent!r} [{pspan.start}, {pspan.end}] us"
            )


def check_device_activity(prof, device: torch.device) -> int:
    """A profile taken with ``ProfilerActivity.PrivateUse1`` holds device-side events, each named, with
    ``start <= end`` and a ``device_index`` of an existing device; returns their count."""
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    if not events:
        raise MetadataFailure(
            f"torch.profiler with ProfilerActivity.PrivateUse1 on {device.type}: no event has "
            f"device_type PrivateUse1 ({len(prof.events())} events in all)"
        )
    count = torch.accelerator.device_count()
    for e in events:
        span = e.time_range
        if not e.name or not span.start <= span.end or not 0 <= e.device_index < count:
            raise MetadataFailure(
                f"torch.profiler device event {e.name!r} on {device.type}: span "
                f"[{span.start}, {span.end}] us, device_index {e.device_index} "
                f"(devices: {count})"
            )
    return len(events)


__all__ = [
    "INNER",
    "OPS",
    "OUTER",
    "check_chrome_trace",
    "check_device_activity",
    "check_nesting",
    "check_op_events",
    "device_activity_supported",
    "profile_workload",
    "workload",
]
