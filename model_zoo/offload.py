"""Loading with ``device_map`` through accelerate: the whole model on the device, one layer offloaded to CPU
or to disk, and ``device_map="auto"``, each forward judged against CPU.

Each check saves the CPU model of a :class:`~neuron_conformance.model_zoo.case.Case` with ``save_pretrained``,
loads it with ``from_pretrained(device_map=..., offload_folder=...)`` and returns a
:class:`~neuron_conformance.model_zoo.results.CheckResult` (variant :data:`CHECKS`):

========================  ========================================================================================
``device_map``            ``device_map={"": device}``: every weight on the device
``cpu_offload``           the last layer of the model's layer list (``model.layers.1``, ``bert.encoder.layer.1``)
                          mapped to ``"cpu"``, everything else to the device
``disk_offload``          the same layer mapped to ``"disk"`` (``offload_folder``)
``device_map_auto``       ``device_map="auto"``: accelerate chooses
========================  ========================================================================================

What must hold: ``hf_device_map`` is the map asked for; every weight of a module mapped to the device is a
device tensor, every weight of an offloaded module is on ``meta`` (accelerate keeps the real tensor on the
host or in ``offload_folder`` and its ``AlignDevicesHook`` moves it to the execution device, the device, for
the module's forward); the output is a device tensor with CPU's values under the zoo's judgement
(:func:`~neuron_conformance.model_zoo.roundtrip.forward_verdict`).

Where accelerate or safetensors cannot serve the device, the check raises :class:`Refused` (a sentence
starting ``unsupported:`` naming the file and function that refuse); the test records it as not claimed
and skips. Measured with accelerate 1.15.0 and safetensors 0.8.0 on the emulated ``neuron`` device:

* ``disk_offload``: accelerate's ``OffloadedWeightsLoader.__getitem__`` (``accelerate/utils/offload.py``) reads
  an offloaded weight with ``safe_open(file, framework="pt", device=<execution device>)``; safetensors accepts
  a fixed list of device names (cpu, cuda, mps, npu, xpu, hpu, ...) and raises ``SafetensorError: device
  neuron is invalid`` for any other, which accelerate's CPU-first retry (``except TypeError``) does not
  catch. :func:`disk_refusal` probes ``safe_open`` with the device's name before the check runs.
* ``device_map_auto``: ``get_max_memory`` (``accelerate/utils/modeling.py``) counts the memory of npu, mlu,
  sdaa, musa, xpu, hpu and cuda devices only (else the host's), so ``"auto"`` places every weight on CPU
  for a PrivateUse1 device; the check refuses when no weight landed on the device.

Sources: ``PreTrainedModel.from_pretrained`` (transformers 5.24: ``device_map``, ``offload_folder``,
``hf_device_map``); accelerate 1.15.0 ``dispatch_model``/``AlignDevicesHook`` (offloaded weights stay on
``meta`` between forwards).
"""

from __future__ import annotations

import os
import tempfile

import torch

from neuron_conformance.model_zoo.case import Case
from neuron_conformance.model_zoo.measure import primary_output
from neuron_conformance.model_zoo.results import CheckResult, combine
from neuron_conformance.model_zoo.roundtrip import forward_verdict, load_kwargs, model_class

CHECKS = ("device_map", "cpu_offload", "disk_offload", "device_map_auto")
"""``device_map`` checks, the ``variant`` of their records."""

OFFLOAD_TARGET = {"cpu_offload": "cpu", "disk_offload": "disk"}
"""Offload check -> the ``device_map`` value its offloaded layer gets."""


class Refused(Exception):
    """accelerate or safetensors cannot serve the device for this check; the message starts ``unsupported:``
    and names where it refuses. Not a failure of the device."""


def _kind(device) -> str:
    return torch.device(device).type


def layer_list(model: torch.nn.Module) -> tuple[str, int]:
    """``(qualified name, length)`` of the model's repeated-layer list: the ``nn.ModuleList`` holding the most
    parameters (``model.layers`` of a decoder, ``bert.encoder.layer`` of BERT).

    Raises:
        ValueError: the model has no non-empty ``nn.ModuleList``.
    """
    lists = [
        (sum(p.numel() for p in m.parameters()), name, len(m))
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.ModuleList) and len(m) > 0
    ]
    if not lists:
        raise ValueError(f"{type(model).__name__} has no nn.ModuleList of layers to offload")
    _, name, length = max(lists, key=lambda t: t[0])
    return name, length


def split_map(model: torch.nn.Module, device, target: str) -> dict[str, str]:
    """A ``device_map`` that puts the last layer of :func:`layer_list` on ``target`` (``"cpu"`` or ``"disk"``)
    and every other module on ``device``: the list's siblings along its path, then each layer by index.

    Raises:
        ValueError: no layer list, or a parameter or buffer the map does not cover (one held directly by a
            module on the path to the list).
    """
    list_name, length = layer_list(model)
    entries: dict[str, str] = {}
    module, prefix = model, ""
    for part in list_name.split("."):
        for child, _ in module.named_children():
            if child != part:
                entries[prefix + child] = str(device)
        module, prefix = getattr(module, part), f"{prefix}{part}."
    for i in range(length):
        entries[f"{list_name}.{i}"] = target if i == length - 1 else str(device)
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    uncovered = [n for n in names if not any(n == k or n.startswith(k + ".") for k in entries)]
    if uncovered:
        raise ValueError(f"device_map for {type(model).__name__} leaves {uncovered[:5]} unmapped")
    return entries


def disk_refusal(device) -> str | None:
    """Why disk offload cannot run with ``device`` as execution device (a sentence starting ``unsupported:``),
    or None: safetensors' ``safe_open`` is asked to open a one-tensor file on ``str(device)``, as
    accelerate's ``OffloadedWeightsLoader.__getitem__`` does for every offloaded weight."""
    from safetensors import SafetensorError, safe_open  # deferred: optional dependency (transformers pulls it)
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "probe.safetensors")
        save_file({"probe": torch.zeros(1)}, path)
        try:
            with safe_open(path, framework="pt", device=str(device)):
                pass
        except SafetensorError as exc:
            import safetensors

            return (
                f"unsupported: disk offload reads weights through safetensors' safe_open(device="
                f"{str(device)!r}) in accelerate's OffloadedWeightsLoader.__getitem__ "
                f"(accelerate/utils/offload.py), and safetensors {safetensors.__version__} refuses: {exc}"
            )
    return None


def _placement_problem(model: torch.nn.Module, asked: dict[str, str], device) -> str | None:
    """Where the loaded model differs from ``asked``: its ``hf_device_map``, or a weight on the wrong device."""
    got = getattr(model, "hf_device_map", None)
    if got is not None and {k: str(v) for k, v in got.items()} != asked:
        return f"hf_device_map is {got}, asked for {asked}"
    buffers = {name for name, _ in model.named_buffers()}
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        where = next((v for k, v in asked.items() if k == "" or name == k or name.startswith(k + ".")), None)
        if where != str(device) and name in buffers:
            continue  # accelerate puts an offloaded module's buffers on the execution device (offload_buffers=False)
        want = _kind(device) if where == str(device) else "meta"
        if where is not None and t.device.type != want:
            return f"{name} is on {t.device} with device_map {where!r}, expected {want}"
    return None


def _judged(case: Case, check: str, model: torch.nn.Module, device, metrics: dict) -> CheckResult:
    with torch.no_grad():
        out = primary_output(case.spec, model(**case.inputs(device)))
    if out.device.type != _kind(device):
        return CheckResult(
            case.spec.id,
            check,
            case.dtype,
            False,
            None,
            "metadata",
            f"output on {out.device}, expected a {_kind(device)} tensor",
            1,
            dict(metrics, rule="device-placement"),
        )
    return combine(
        case.spec.id,
        check,
        case.dtype,
        [forward_verdict(case, model, device, f"{case.spec.output} with {check}")],
        metrics,
    )


def check_device_map(model, dtype, device, check: str = "device_map", *, seed: int = 0) -> CheckResult:
    """Run ``check`` (one of :data:`CHECKS`) for a zoo model in ``dtype`` on ``device``.

    Raises:
        ValueError: ``check`` is not in :data:`CHECKS`.
        Refused: accelerate or safetensors cannot serve ``device`` for ``check`` (see the module docstring).
    """
    if check not in CHECKS:
        raise ValueError(f"device_map check must be one of {CHECKS}, got {check!r}")
    if check == "disk_offload" and (why := disk_refusal(device)) is not None:
        raise Refused(why)
    case = Case.make(model, dtype, seed)
    cpu_model = case.model("cpu")
    if check in OFFLOAD_TARGET:
        asked = split_map(cpu_model, device, OFFLOAD_TARGET[check])
    else:
        asked = {"": str(device)} if check == "device_map" else "auto"
    with tempfile.TemporaryDirectory() as folder:
        cpu_model.save_pretrained(os.path.join(folder, "model"))
        loaded = (
            model_class(case)
            .from_pretrained(
                os.path.join(folder, "model"),
                device_map=asked,
                offload_folder=os.path.join(folder, "offload"),
                **load_kwargs(case),
            )
            .eval()
        )
        metrics = {
            "device_map": asked,
            "offloaded": sorted(k for k, v in (asked if asked != "auto" else {}).items() if v != str(device)),
        }
        if asked == "auto":
            kinds = {t.device.type for t in loaded.parameters()}
            if _kind(device) not in kinds:
                import accelerate

                raise Refused(
                    f"unsupported: device_map='auto' placed every weight on {sorted(kinds)}: "
                    f"get_max_memory (accelerate/utils/modeling.py, accelerate {accelerate.__version__}) "
                    f"counts npu, mlu, sdaa, musa, xpu, hpu and cuda devices only, not {_kind(device)}"
                )
            metrics["device_map"] = {k: str(v) for k, v in getattr(loaded, "hf_device_map", {}).items()}
        else:
            problem = _placement_problem(loaded, asked, device)
            if problem is not None:
                return CheckResult(
                    case.spec.id,
                    check,
                    case.dtype,
                    False,
                    None,
                    "metadata",
                    problem,
                    0,
                    dict(metrics, rule="device-placement"),
                )
        return _judged(case, check, loaded, device, metrics)
