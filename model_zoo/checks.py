"""Model checks: run a zoo model on the device under test and on CPU, and judge the difference.

Every check builds the same model three times from the same seed (:class:`neuron_conformance.model_zoo.case.Case`): on
the device in the dtype under test, on CPU in that dtype (the *expected* result) and on CPU in float64
from the weights rounded to that dtype (the *reference64* that arbitrates, see
:func:`neuron_conformance.conformance.verdict.oracle.judge`). The CPU and float64 results depend only on the model, the dtype and
the check, so they are computed once per worker process and cached (:func:`neuron_conformance.model_zoo.case.reference`).
What each check measures is in :mod:`neuron_conformance.model_zoo.measure`.

Checks (the ``variant`` field of a model record):

``forward``   the compared output (``ModelSpec.output``) through the oracle, plus top-1/top-5
              agreement when the output is logits over classes or a vocabulary.
``backward``  every parameter's gradient of a fixed loss through the oracle, and the set of
              parameters without a gradient must be the same.
``train``     ``TRAIN_STEPS`` AdamW steps: the loss curve and every final parameter through the
              oracle.
``generate``  greedy tokens on the device agree with CPU (exact in float32; in bfloat16/float16 a
              differing token is accepted only where CPU's top-2 logits are within a margin), and
              KV-cache and no-cache decoding agree on the device (:mod:`neuron_conformance.model_zoo.generation`).
``router``    MoE top-k expert indices agree with CPU, token by token (ties within a margin are
              accepted), reported apart from the logits.
``compile``   the model compiled through ``set_default_backend`` + ``model.compile()`` vs eager on the
              device and vs CPU (:mod:`neuron_conformance.model_zoo.compile_checks`).
``compile_train`` the ``train`` steps with the model compiled, vs the eager steps on the device and vs CPU.

The model checks always use the tolerance + fp64 rule, also for backends that mirror CPU kernels:
transformers and ``torch.optim`` pick code paths by device type (``grouped_mm`` vs ``batched_mm``
experts during ``generate``, ``foreach`` AdamW on PrivateUse1 but a per-tensor loop on CPU), so a
correct device need not match CPU bit for bit.

When a ``forward``, ``backward`` or ``train`` check fails, the divergence localizer
(:mod:`neuron_conformance.model_zoo.localize`) runs and the failure message names the first submodule whose output
left tolerance.

:func:`run_check` dispatches by check name (:data:`CHECK_FUNCTIONS`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from neuron_conformance.conformance.verdict.oracle import Verdict, arbitration_k
from neuron_conformance.model_zoo import attention
from neuron_conformance.model_zoo.case import Case, reference
from neuron_conformance.model_zoo.compare import (
    judge_model_tensor,
    router_agreement,
    tie_margin,
    topk_agreement,
    train_verdicts,
)
from neuron_conformance.model_zoo.compile_checks import check_compile, check_compile_train
from neuron_conformance.model_zoo.compile_path import default_compile_backend  # noqa: F401 - re-exported: the compile_backend fixture's rule
from neuron_conformance.model_zoo.generation import check_generate
from neuron_conformance.model_zoo.localize import Divergence, localize
from neuron_conformance.model_zoo.measure import (
    DRIFT_BUDGET,
    TRAIN_LR,
    TRAIN_STEPS,
    measure_backward,
    measure_forward,
    measure_router,
    measure_train,
)
from neuron_conformance.model_zoo.registry import ModelSpec, get_spec
from neuron_conformance.model_zoo.results import CheckResult, combine


def _localize_case(case: Case, device) -> Divergence | None:
    dev_model, dev_inputs = case.model_and_inputs(device)
    cpu_model, cpu_inputs = case.model_and_inputs("cpu")
    ref_model, ref_inputs = case.model_and_inputs("cpu", fp64=True)
    return localize(dev_model, dev_inputs, cpu_model, cpu_inputs, ref_model, ref_inputs)


def _with_localizer(result: CheckResult, case: Case, device, enabled: bool) -> CheckResult:
    if result.passed or not enabled:
        return result
    result.divergence = _localize_case(case, device)
    if result.divergence is None:
        result.metrics["localizer"] = "no-divergence"
    return result


def _parameter_set_mismatch(case: Case, check: str, actual: Mapping, expected: Mapping) -> CheckResult | None:
    """A ``metadata`` failure when the device model's parameter names differ from CPU's.

    ``named_parameters`` lists a shared (tied) parameter once; a parameter that appears only on the
    device usually means ``Module.to(device)`` replaced a tied parameter by two separate copies
    (``torch.nn.Module._apply`` does so when the device tensor cannot take the CPU tensor's
    storage in place), after which training updates the copies independently.
    """
    only_dev = sorted(set(actual) - set(expected))
    only_cpu = sorted(set(expected) - set(actual))
    if not only_dev and not only_cpu:
        return None
    hint = " (a tied parameter was untied by Module.to(device)?)" if only_dev and not only_cpu else ""
    return CheckResult(
        case.spec.id,
        check,
        case.dtype,
        False,
        None,
        "metadata",
        f"parameters differ after moving the model to the device: only on the device "
        f"{only_dev[:5]}, only on CPU {only_cpu[:5]}{hint}",
        len(expected),
        {"rule": "param-set"},
    )


def _case(model: str | ModelSpec, dtype, seed: int, attn: str | None) -> Case:
    spec = get_spec(model) if isinstance(model, str) else model
    return Case.make(attention.with_implementation(spec, attn), dtype, seed)


def _versus_eager(case: Case, check: str, measure, actual, cpu, ref, label=str) -> list:
    """Verdicts of the device run of ``case``'s implementation against CPU eager, within
    :func:`neuron_conformance.model_zoo.attention.versus_eager_atol` (empty for eager itself).

    ``actual``/``cpu``/``ref``: the device, CPU and float64 results of the implementation, as ``measure``
    returns them (a tensor, or a mapping of names to tensors or None); ``label(name)`` names a verdict.
    """
    if attention.reference_key(check, case.spec) == check:
        return []
    eager = Case(attention.with_implementation(case.spec, attention.DEFAULT), case.dtype, case.seed)
    e_cpu, e_ref = reference(eager, check, measure)
    if not isinstance(actual, Mapping):
        actual, cpu, ref, e_cpu, e_ref = ({case.spec.output: r} for r in (actual, cpu, ref, e_cpu, e_ref))
    out = []
    for name, a in actual.items():
        if a is None or name == "<loss>" or cpu.get(name) is None or e_cpu.get(name) is None:
            continue
        atol = attention.versus_eager_atol(cpu[name], ref[name], e_cpu[name], e_ref[name], case.dtype)
        out.append((f"{label(name)} vs eager", judge_model_tensor(a, e_cpu[name], e_ref[name], min_atol=atol)))
    return out


def check_forward(
    model: str | ModelSpec, dtype, device, *, seed: int = 0, localize: bool = True, attn: str | None = None
) -> CheckResult:
    """Forward check: the compared output through the oracle, plus top-1/top-5 agreement for logits.

    ``attn`` (an implementation the model supports, :mod:`neuron_conformance.model_zoo.attention`; None: the registry's
    eager) builds device and references with it, and then also judges the device output against CPU eager.
    """
    case = _case(model, dtype, seed, attn)
    expected, ref64 = reference(case, attention.reference_key("forward", case.spec), measure_forward)
    actual = measure_forward(case, device, False)
    verdict = judge_model_tensor(actual, expected, ref64)
    out = case.spec.output
    verdicts = [(out, verdict)] + _versus_eager(case, "forward", measure_forward, actual, expected, ref64)
    result = combine(case.spec.id, "forward", case.dtype, verdicts)
    if (
        case.spec.output == "logits"
        and expected.dim() >= 2
        and expected.shape[-1] >= 5
        and verdict.failure_class != "metadata"
    ):
        cpu_err = float((expected.double() - ref64).abs().nan_to_num(0.0).max())
        margin = arbitration_k(case.dtype) * cpu_err + tie_margin(case.dtype, 0.0)
        agreement = topk_agreement(actual, expected, k=5, margin=margin)
        result.metrics.update(agreement)
        result.metrics["tie_margin"] = margin
        if result.passed and agreement["top1_unexplained"]:
            result.passed = False
            result.failure_class = "numeric"
            result.message = (
                f"top-1 differs from CPU at {agreement['top1_unexplained']} of "
                f"{agreement['positions']} positions where CPU's top-2 logits are more than "
                f"{margin:.3g} apart (top-1 agreement {agreement['top1_agree']:.3f}, top-5 "
                f"overlap {agreement['topk_overlap']:.3f})"
            )
    return _with_localizer(result, case, device, localize)


def check_backward(
    model: str | ModelSpec, dtype, device, *, seed: int = 0, localize: bool = True, attn: str | None = None
) -> CheckResult:
    """Backward check: the loss and every parameter's gradient through the oracle; same no-grad set.

    ``attn`` as in :func:`check_forward` (gradients also judged against CPU eager's).
    """
    case = _case(model, dtype, seed, attn)
    expected, ref64 = reference(case, attention.reference_key("backward", case.spec), measure_backward)
    actual = measure_backward(case, device, False)
    mismatch = _parameter_set_mismatch(case, "backward", actual, expected)
    if mismatch is not None:
        return mismatch
    none_dev = {n for n, g in actual.items() if g is None}
    none_cpu = {n for n, g in expected.items() if g is None}
    if none_dev != none_cpu:
        only_dev, only_cpu = sorted(none_dev - none_cpu), sorted(none_cpu - none_dev)
        return CheckResult(
            case.spec.id,
            "backward",
            case.dtype,
            False,
            None,
            "metadata",
            f"parameters without a gradient differ: only on the device {only_dev[:5]}, only on CPU {only_cpu[:5]}",
            len(expected),
            {"rule": "grad-set"},
        )
    verdicts = []
    # reverse registration order approximates the order autograd produces gradients (output layers
    # first), so the first failing gradient reported is the one closest to where backward diverged
    for name, e in reversed(list(expected.items())):
        if e is None:
            continue
        if name == "<loss>":  # a float32 number computed from dtype outputs: judged in the dtype
            verdicts.append(("loss", judge_model_tensor(actual[name].to(case.dtype), e.to(case.dtype), ref64[name])))
        else:
            verdicts.append((f"grad of {name}", judge_model_tensor(actual[name], e, ref64[name])))
    verdicts += _versus_eager(
        case, "backward", measure_backward, actual, expected, ref64, label=lambda n: f"grad of {n}"
    )
    result = combine(case.spec.id, "backward", case.dtype, verdicts, {"params_without_grad": len(none_cpu)})
    return _with_localizer(result, case, device, localize)


def check_train(
    model: str | ModelSpec, dtype, device, *, seed: int = 0, steps: int = TRAIN_STEPS, localize: bool = True
) -> CheckResult:
    """Training check: ``steps`` AdamW steps; loss curve and every final parameter through the oracle.

    Losses are computed in float32 and judged in the dtype under test (so the loss curve gets the
    dtype's tolerance, with the fp64 training run as arbiter).
    """
    case = Case.make(model, dtype, seed)
    what = f"train{steps}"
    expected, ref64 = reference(case, what, lambda c, d, f: measure_train(c, d, f, steps))
    actual = measure_train(case, device, False, steps)
    mismatch = _parameter_set_mismatch(case, "train", actual, expected)
    if mismatch is not None:
        return mismatch
    dt = case.dtype
    drift = DRIFT_BUDGET[dt] * TRAIN_LR * steps
    verdicts = train_verdicts(actual, expected, ref64, dt, steps, drift)
    metrics = {
        "steps": steps,
        "drift_budget": drift,
        "loss_first": float(expected["<losses>"][0]),
        "loss_last": float(expected["<losses>"][-1]),
    }
    result = combine(case.spec.id, "train", dt, verdicts, metrics)
    return _with_localizer(result, case, device, localize)


def check_router(model: str | ModelSpec, dtype, device, *, seed: int = 0) -> CheckResult:
    """Router check: per MoE layer, top-k expert indices agree with CPU token by token."""
    case = Case.make(model, dtype, seed)
    expected, ref64 = reference(case, "router", measure_router)
    actual = measure_router(case, device, False)
    if set(actual) != set(expected):
        return CheckResult(
            case.spec.id,
            "router",
            case.dtype,
            False,
            None,
            "metadata",
            f"router modules differ: device {sorted(actual)}, CPU {sorted(expected)}",
            0,
            {"rule": "router-set"},
        )
    tokens = unexplained = 0
    agree_sum = 0.0
    worst: Verdict | None = None
    bad: list[str] = []
    for name, (e_logits, e_idx) in expected.items():
        a_logits, a_idx = actual[name]
        r_logits = ref64[name][0]
        v = judge_model_tensor(a_logits, e_logits, r_logits)
        if worst is None or (v.max_abs or 0.0) > (worst.max_abs or 0.0):
            worst = v
        cpu_err = float((e_logits.double() - r_logits).abs().max())
        margin = arbitration_k(case.dtype) * cpu_err + tie_margin(case.dtype, float(e_logits.abs().max()))
        stats = router_agreement(a_idx, e_idx, e_logits, margin=margin)
        tokens += stats["tokens"]
        unexplained += stats["unexplained"]
        agree_sum += stats["agree"] * stats["tokens"]
        if stats["unexplained"]:
            bad.append(f"{name}: {stats['unexplained']} of {stats['tokens']} tokens")
    metrics = {
        "rule": "router-topk",
        "tokens": tokens,
        "router_agree": agree_sum / max(tokens, 1),
        "router_unexplained": unexplained,
        "routers": len(expected),
    }
    result = CheckResult(case.spec.id, "router", case.dtype, not bad, worst, None, "", len(expected), metrics)
    if worst is not None:
        # the record's rule says how experts were compared, the errors are those of the router logits
        worst = dataclasses.replace(worst, rule="router-topk")
        result.verdict = worst
    if bad:
        result.failure_class = "numeric"
        result.message = (
            "top-k expert choice differs from CPU beyond ties ("
            + "; ".join(bad)
            + f"); router logits max abs error {worst.max_abs if worst else float('nan'):.3g}"
        )
    return result


CHECK_FUNCTIONS: dict[str, Callable[..., CheckResult]] = {
    "forward": check_forward,
    "backward": check_backward,
    "train": check_train,
    "generate": check_generate,
    "router": check_router,
    "compile": check_compile,
    "compile_train": check_compile_train,
}


def run_check(check: str, model: str | ModelSpec, dtype, device, **kwargs) -> CheckResult:
    """Dispatch to ``check_<check>``.

    Raises:
        ValueError: unknown check name, or a check that does not apply to the model.
    """
    if check not in CHECK_FUNCTIONS:
        raise ValueError(f"unknown model check {check!r}; known: {tuple(CHECK_FUNCTIONS)}")
    spec = get_spec(model) if isinstance(model, str) else model
    if check not in spec.checks():
        raise ValueError(f"check {check!r} does not apply to model {spec.id!r} (its checks: {spec.checks()})")
    return CHECK_FUNCTIONS[check](spec, dtype, device, **kwargs)
