"""Round trips of device models: ``save_pretrained``/``from_pretrained``, ``torch.save``/``torch.load``
with each ``map_location``, building under a ``torch.device(...)`` context, and backward with gradient
checkpointing.

Each check returns a :class:`~neuron_conformance.model_zoo.results.CheckResult` (variant :data:`CHECKS`). Saved and loaded
tensors must be bitwise equal to what was saved (serialisation moves bytes; nothing may round); a model
that went through a round trip must then give CPU's forward output (or gradients) under the zoo's usual
judgement (:func:`neuron_conformance.model_zoo.compare.judge_model_tensor`, CPU float64 arbitrating), since it runs on the
device like any other.

Sources: ``PreTrainedModel.save_pretrained``/``from_pretrained`` (transformers 5.24, safetensors files);
``torch.load(map_location=...)`` (None: the device each tensor was saved from; a string or
``torch.device``: that device); ``GradientCheckpointingLayer`` (transformers 5.24: layers recompute their
forward in backward when ``gradient_checkpointing_enable()`` was called and the model is in train mode).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping

import torch

from neuron_conformance.model_zoo.case import Case, reference
from neuron_conformance.model_zoo.compare import judge_model_tensor
from neuron_conformance.model_zoo.measure import _loss, measure_backward, measure_forward, primary_output, to_cpu
from neuron_conformance.model_zoo.results import CheckResult, combine

CHECKS = ("save_pretrained", "torch_save", "device_context", "checkpointing")
"""Round-trip checks, the ``variant`` of their records."""


def model_class(case: Case):
    """The transformers class of ``case``'s model (``ModelSpec.model_class``, e.g. ``LlamaForCausalLM``)."""
    import transformers  # deferred: optional dependency (the models extra)

    return getattr(transformers, case.spec.model_class)


def load_kwargs(case: Case) -> dict:
    """``from_pretrained``/``_from_config`` keywords that build ``case``'s model as the zoo does: its dtype and,
    when the entry pins one, its attention implementation."""
    kwargs = {"dtype": case.dtype}
    if case.spec.attn_implementation is not None:
        kwargs["attn_implementation"] = case.spec.attn_implementation
    return kwargs


def _state_mismatch(
    case: Case, check: str, what: str, saved: Mapping, loaded: Mapping, device_type: str | None
) -> CheckResult | None:
    """A ``metadata`` failure when ``loaded`` differs from ``saved`` in names, device type, dtype, shape or
    any bit; None when they are identical."""
    problem = None
    if set(saved) != set(loaded):
        problem = (
            f"tensor names differ: only saved {sorted(set(saved) - set(loaded))[:5]}, only loaded "
            f"{sorted(set(loaded) - set(saved))[:5]}"
        )
    else:
        for name, s in saved.items():
            t = loaded[name]
            if device_type is not None and t.device.type != device_type:
                problem = f"{name} loaded on {t.device}, expected a {device_type} tensor"
            elif t.dtype != s.dtype or t.shape != s.shape:
                problem = f"{name} loaded as {t.dtype} {tuple(t.shape)}, saved {s.dtype} {tuple(s.shape)}"
            elif not torch.equal(to_cpu(t), to_cpu(s)):
                problem = f"{name}: loaded values differ from the saved ones (max abs {(to_cpu(t).double() - to_cpu(s).double()).abs().max():.3g})"
            if problem:
                break
    if problem is None:
        return None
    return CheckResult(
        case.spec.id,
        check,
        case.dtype,
        False,
        None,
        "metadata",
        f"{what}: {problem}",
        len(saved),
        {"rule": "bitwise-state"},
    )


def forward_verdict(case: Case, model: torch.nn.Module, device, label: str):
    """``(label, verdict)``: ``model``'s primary forward output on ``case``'s inputs (placed on ``device``)
    judged against the cached CPU forward, float64 arbitrating (:func:`judge_model_tensor`)."""
    expected, ref64 = reference(case, "forward", measure_forward)
    with torch.no_grad():
        actual = to_cpu(primary_output(case.spec, model(**case.inputs(device))))
    return label, judge_model_tensor(actual, expected, ref64)


def check_save_pretrained(model, dtype, device, *, seed: int = 0) -> CheckResult:
    """``save_pretrained`` of the device model, ``from_pretrained`` and ``.to(device)``: the state dict
    bitwise equal to the saved one, on the device, and the forward output judged against CPU's."""
    case = Case.make(model, dtype, seed)
    dev_model = case.model(device)
    saved = dev_model.state_dict()
    with tempfile.TemporaryDirectory() as folder:
        dev_model.save_pretrained(folder)
        loaded = model_class(case).from_pretrained(folder, **load_kwargs(case)).eval().to(device)
    mismatch = _state_mismatch(
        case, "save_pretrained", "from_pretrained", saved, loaded.state_dict(), torch.device(device).type
    )
    if mismatch is not None:
        return mismatch
    return combine(
        case.spec.id,
        "save_pretrained",
        case.dtype,
        [forward_verdict(case, loaded, device, f"{case.spec.output} after from_pretrained")],
    )


def check_torch_save(model, dtype, device, *, seed: int = 0) -> CheckResult:
    """``torch.save`` of the device model's state dict, then ``torch.load`` with ``map_location`` None
    (back on the device), ``"cpu"`` and the device: every load bitwise equal to the saved tensors on the
    expected device; the device load put into a fresh device model gives CPU's forward output."""
    case = Case.make(model, dtype, seed)
    dev_model = case.model(device)
    saved = dev_model.state_dict()
    kind = torch.device(device).type
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "state.pt")
        torch.save(saved, path)
        loads = {
            location: torch.load(path, map_location=location, weights_only=True)
            for location in (None, "cpu", str(device))
        }
    for location, state in loads.items():
        mismatch = _state_mismatch(
            case,
            "torch_save",
            f"torch.load(map_location={location!r})",
            saved,
            state,
            "cpu" if location == "cpu" else kind,
        )
        if mismatch is not None:
            return mismatch
    fresh = case.model(device)
    fresh.load_state_dict(loads[str(device)])
    return combine(
        case.spec.id,
        "torch_save",
        case.dtype,
        [forward_verdict(case, fresh, device, f"{case.spec.output} after torch.load")],
        {"map_locations": len(loads)},
    )


def check_device_context(model, dtype, device, *, seed: int = 0) -> CheckResult:
    """The model class built under ``with torch.device(device):`` holds every parameter and buffer on the
    device; given the CPU model's weights, it gives CPU's forward output (buffers computed at
    construction, e.g. rotary frequencies, are computed on the device)."""
    case = Case.make(model, dtype, seed)
    kwargs = load_kwargs(case)
    with torch.device(device):
        built = model_class(case)._from_config(case.spec.make_config(), **kwargs).eval()
    kind = torch.device(device).type
    elsewhere = [n for n, t in list(built.named_parameters()) + list(built.named_buffers()) if t.device.type != kind]
    if elsewhere:
        return CheckResult(
            case.spec.id,
            "device_context",
            case.dtype,
            False,
            None,
            "metadata",
            f"built under torch.device({str(device)!r}) but not on it: {elsewhere[:5]}",
            len(elsewhere),
            {"rule": "device-placement"},
        )
    built.load_state_dict(case.model("cpu").state_dict())
    return combine(
        case.spec.id,
        "device_context",
        case.dtype,
        [forward_verdict(case, built, device, f"{case.spec.output} of the model built on the device")],
    )


def check_checkpointing(model, dtype, device, *, seed: int = 0) -> CheckResult:
    """Backward with gradient checkpointing (non-reentrant) on the device in train mode (every zoo config
    has dropout off, so train mode computes what eval mode does): the loss and every gradient judged
    against CPU's ordinary backward (recomputing a forward must not change a gradient)."""
    case = Case.make(model, dtype, seed)
    expected, ref64 = reference(case, "backward", measure_backward)
    dev_model = case.model(device)
    if not getattr(dev_model, "supports_gradient_checkpointing", False):
        raise ValueError(f"model {case.spec.id!r} does not support gradient checkpointing")
    dev_model.train()
    dev_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    loss = _loss(case.spec, primary_output(case.spec, dev_model(**case.inputs(device))), False)
    loss.backward()
    verdicts = [
        (
            "loss",
            judge_model_tensor(
                to_cpu(loss).reshape(1).to(case.dtype), expected["<loss>"].to(case.dtype), ref64["<loss>"]
            ),
        )
    ]
    for name, p in reversed(list(dev_model.named_parameters())):
        e = expected.get(name)
        if (p.grad is None) != (e is None):
            return CheckResult(
                case.spec.id,
                "checkpointing",
                case.dtype,
                False,
                None,
                "metadata",
                f"grad of {name} is {'missing' if p.grad is None else 'present'} with checkpointing only",
                len(expected),
                {"rule": "grad-set"},
            )
        if e is not None:
            verdicts.append((f"grad of {name}", judge_model_tensor(to_cpu(p.grad), e, ref64[name])))
    return combine(
        case.spec.id,
        "checkpointing",
        case.dtype,
        verdicts,
        {"checkpointing": bool(dev_model.is_gradient_checkpointing)},
    )


CHECK_FUNCTIONS = {
    "save_pretrained": check_save_pretrained,
    "torch_save": check_torch_save,
    "device_context": check_device_context,
    "checkpointing": check_checkpointing,
}
"""Round-trip check name -> function ``(model id, dtype, device) -> CheckResult``."""
