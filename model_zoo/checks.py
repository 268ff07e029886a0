"""Model checks: run a zoo model on the device under test and on CPU, and judge the difference.

Every check builds the same model three times from the same seed: on the device in the dtype
under test, on CPU in that dtype (the *expected* result) and on CPU in float64 from the weights
rounded to that dtype (the *reference64* that arbitrates, see :func:`conformance.oracle.judge`).
The CPU and float64 results depend only on the model, the dtype and the check, so they are computed
once per worker process and cached (:func:`reference`).

Checks (the ``variant`` field of a model record):

``forward``   the compared output (``ModelSpec.output``) through the oracle, plus top-1/top-5
              agreement when the output is logits over classes or a vocabulary.
``backward``  every parameter's gradient of a fixed loss through the oracle, and the set of
              parameters without a gradient must be the same.
``train``     ``TRAIN_STEPS`` AdamW steps: the loss curve and every final parameter through the
              oracle.
``generate``  greedy tokens on the device agree with CPU (exact in float32; in bfloat16/float16 a
              differing token is accepted only where CPU's top-2 logits are within a margin), and
              KV-cache and no-cache decoding agree on the device.
``router``    MoE top-k expert indices agree with CPU, token by token (ties within a margin are
              accepted), reported apart from the logits.
``compile``   ``torch.compile`` with the device's default backend vs eager on the device.

The model checks always use the tolerance + fp64 rule, also for backends that mirror CPU kernels:
transformers and ``torch.optim`` pick code paths by device type (``grouped_mm`` vs ``batched_mm``
experts during ``generate``, ``foreach`` AdamW on PrivateUse1 but a per-tensor loop on CPU), so a
correct device need not match CPU bit for bit.

When a ``forward``, ``backward`` or ``train`` check fails, the divergence localizer
(:mod:`model_zoo.localize`) runs and the failure message names the first submodule whose output
left tolerance.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch

from conformance.failures import ConformanceFailure, MetadataFailure, NonFiniteFailure, NumericFailure
from conformance.oracle import Verdict, arbitration_k

from . import inputs as zoo_inputs
from .compare import judge_model_tensor, router_agreement, tie_margin, token_agreement, topk_agreement
from .localize import Divergence, localize
from .registry import ModelSpec, build_model, get_spec

#: AdamW settings of the ``train`` check. ``eps`` is larger than AdamW's 1e-8 so that Adam's
#: ``m / sqrt(v)`` normalisation does not blow rounding noise in near-zero gradients (for example
#: attention key biases, whose true gradient is zero) up to full ``±lr`` steps, which differ between
#: any two correct kernels. float16 needs more: the second moment ``v = (1 - beta2) * g² = 1e-3 * g²``
#: underflows to zero for ``|g| < 7.7e-3`` (float16's smallest normal is 6.1e-5), turning the update
#: into ``lr * g / eps``; with ``eps = 1e-2`` that stays below ``lr``.
TRAIN_STEPS = 3
TRAIN_LR = 1e-3
TRAIN_EPS = {torch.float32: 1e-5, torch.bfloat16: 1e-5, torch.float16: 1e-2}
TRAIN_WEIGHT_DECAY = 0.01

#: Parameter drift budget of the ``train`` check, as a fraction of the largest distance AdamW can
#: move an element (about ``lr * steps``): a final parameter passes the tolerance rule when it is
#: within ``DRIFT_BUDGET[dtype] * lr * steps`` of CPU's (or within the tensor's own tolerance).
#: Parameters whose true gradient is zero (attention key biases) move by rounding noise alone, which
#: Adam normalises to a sizeable fraction of ``lr`` and which differs between two correct kernels
#: (``foreach`` vs per-tensor AdamW) in bfloat16/float16. A broken optimizer kernel moves elements
#: by whole ``lr`` steps, far beyond the budget; a wrong gradient is the ``backward`` check's job
#: (Adam's normalisation hides gradient scale). This project's choice.
DRIFT_BUDGET = {torch.float32: 1e-3, torch.bfloat16: 0.1, torch.float16: 0.1}

#: New tokens per greedy generation for random-weight zoo decoders (the trained fixture uses more).
GENERATE_TOKENS = 8


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """``torch.float32``/``"float32"``-style dtype to a ``torch.dtype``.

    Raises:
        ValueError: the dtype is not one of :data:`DTYPES`.
    """
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(f"model checks run in {tuple(DTYPES)}, got dtype={dtype!r}")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ------------------------------------------------------------------------------------------------
# results


@dataclasses.dataclass
class CheckResult:
    """Outcome of one model check.

    Attributes:
        model: model id.
        check: check name (``forward``, ``backward``, ...).
        dtype: dtype under test.
        passed: whether the device passed.
        verdict: the oracle verdict that decided (first failing comparison, else the one with the
            largest absolute error), or ``None`` for checks that compare tokens only.
        failure_class: ``numeric``, ``metadata`` or ``nonfinite`` when failed.
        message: failure explanation (empty when passed).
        compared: number of tensors compared.
        metrics: extra numbers for the record and report (agreement fractions, counts).
        divergence: the localizer's finding when the check failed and the localizer ran.
    """

    model: str
    check: str
    dtype: torch.dtype
    passed: bool
    verdict: Verdict | None = None
    failure_class: str | None = None
    message: str = ""
    compared: int = 0
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    divergence: Divergence | None = None

    def record_fields(self) -> dict[str, Any]:
        """Fields for the ``conformance_record`` fixture (schema 1, docs/architecture.md)."""
        fields: dict[str, Any] = dict(
            suite="model_zoo", kind="model", op=self.model, variant=self.check,
            dtype=dtype_name(self.dtype), samples=self.compared,
        )
        if self.verdict is not None:
            fields.update(self.verdict.record_fields())
        else:
            fields["rule"] = self.metrics.get("rule")
        return fields

    def full_message(self) -> str:
        msg = f"{self.model} {self.check} [{dtype_name(self.dtype)}]: {self.message}"
        if self.divergence is not None:
            msg += "\n" + self.divergence.describe()
        elif self.metrics.get("localizer") == "no-divergence":
            msg += "\nlocalizer: every submodule's forward output is within tolerance"
        return msg

    def raise_if_failed(self) -> None:
        """Raise the :class:`~conformance.failures.ConformanceFailure` subclass matching the failure."""
        if self.passed:
            return
        cls = {"numeric": NumericFailure, "metadata": MetadataFailure,
               "nonfinite": NonFiniteFailure}.get(self.failure_class or "", ConformanceFailure)
        raise cls(self.full_message())


def _combine(model: str, check: str, dtype: torch.dtype,
             verdicts: list[tuple[str, Verdict]], metrics: dict | None = None) -> CheckResult:
    """One result from many named verdicts: the first failure decides, else the largest error."""
    metrics = dict(metrics or {})
    failed = [(name, v) for name, v in verdicts if not v.passed]
    metrics["failed_tensors"] = len(failed)
    if failed:
        name, v = failed[0]
        more = f" ({len(failed)} of {len(verdicts)} tensors failed)" if len(failed) > 1 else ""
        return CheckResult(model, check, dtype, False, v, v.failure_class, f"{name}: {v.message}{more}",
                           len(verdicts), metrics)
    worst = max(verdicts, key=lambda nv: nv[1].max_abs or 0.0, default=(None, None))[1]
    return CheckResult(model, check, dtype, True, worst, None, "", len(verdicts), metrics)


# ------------------------------------------------------------------------------------------------
# building the three runs


@dataclasses.dataclass
class Case:
    """A model id, a dtype and the seed: everything needed to build the three runs."""

    spec: ModelSpec
    dtype: torch.dtype
    seed: int = 0

    @classmethod
    def make(cls, model: str | ModelSpec, dtype: torch.dtype | str, seed: int = 0) -> "Case":
        spec = get_spec(model) if isinstance(model, str) else model
        return cls(spec, as_dtype(dtype), seed)

    def raw_inputs(self) -> dict[str, Any]:
        key = (self.spec.id, self.seed)
        if key not in _INPUTS:
            config = self.spec.make_config()
            _INPUTS[key] = zoo_inputs.make_inputs(self.spec, config, seed=self.seed)
        return _INPUTS[key]

    def model(self, device: torch.device | str, *, fp64: bool = False) -> torch.nn.Module:
        """Build the model: in ``dtype`` on ``device``, or (``fp64``) the float64 reference on CPU.

        The float64 model holds the dtype-rounded weights and uses eager MoE experts
        (``torch._grouped_mm`` has no float64 kernel).
        """
        model = build_model(self.spec, seed=self.seed, dtype=self.dtype)
        if fp64:
            model = model.to(torch.float64)
            if self.spec.is_moe and hasattr(model, "set_experts_implementation"):
                model.set_experts_implementation("eager")
            return model
        return model.to(device)

    def inputs(self, device: torch.device | str, *, fp64: bool = False) -> dict[str, Any]:
        if fp64:
            return zoo_inputs.cast_inputs(self.raw_inputs(), dtype=torch.float64, via=self.dtype)
        return zoo_inputs.cast_inputs(self.raw_inputs(), dtype=self.dtype, device=device)

    def run_model(self, device, *, fp64: bool = False):
        return self.model(device, fp64=fp64), self.inputs(device, fp64=fp64)


_INPUTS: dict[tuple[str, int], dict[str, Any]] = {}
_REFERENCES: dict[tuple[str, str, int, str], tuple[Any, Any]] = {}


def reference(case: Case, what: str, compute: Callable[[Case, str, bool], Any]) -> tuple[Any, Any]:
    """``(cpu, fp64)`` results of ``compute`` for ``case``, computed once per process (for the
    :data:`KEPT_MODELS` most recent models).

    ``compute(case, device, fp64)`` runs the check's measurement; the cache key is the model id,
    dtype, seed and ``what``. Each pytest-xdist worker is its own process, so the cache is per
    worker; grouping a model's tests on one worker (``--dist loadgroup``) makes it hit.
    """
    key = (case.spec.id, dtype_name(case.dtype), case.seed, what)
    if key not in _REFERENCES:
        _forget_other_models(case.spec.id)
        _REFERENCES[key] = (compute(case, "cpu", False), compute(case, "cpu", True))
    return _REFERENCES[key]


KEPT_MODELS = 2
"""Models whose inputs and references stay cached; older ones are dropped. A model's tests run one after
the other on one worker (pytest order, and ``xdist_group`` per model), so this keeps every hit while a
whole-zoo process stays small: with every model kept, ``pytest model_zoo -n 0`` peaked at 2,052 MiB."""

_recent_models: list[str] = []


def _forget_other_models(model_id: str) -> None:
    if model_id in _recent_models:
        _recent_models.remove(model_id)
    _recent_models.append(model_id)
    if len(_recent_models) <= KEPT_MODELS:
        return
    keep = set(_recent_models[-KEPT_MODELS:])
    del _recent_models[:-KEPT_MODELS]
    for k in [k for k in _REFERENCES if k[0] not in keep]:
        del _REFERENCES[k]
    for k in [k for k in _INPUTS if k[0] not in keep]:
        del _INPUTS[k]


def clear_cache() -> None:
    """Drop every cached input and CPU/float64 reference (tests that patch kernels call this)."""
    _INPUTS.clear()
    _REFERENCES.clear()
    _recent_models.clear()


def primary_output(spec: ModelSpec, output: Any) -> torch.Tensor:
    """The tensor named by ``spec.output`` in a model output.

    Raises:
        KeyError: the output has no such field.
    """
    value = getattr(output, spec.output, None)
    if value is None and isinstance(output, Mapping):
        value = output.get(spec.output)
    if not isinstance(value, torch.Tensor):
        raise KeyError(f"model {spec.id!r}: output has no tensor field {spec.output!r}")
    return value


def _to_cpu(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", copy=True)


def _loss(spec: ModelSpec, y: torch.Tensor, fp64: bool) -> torch.Tensor:
    """Fixed MSE loss of the compared output against a seeded target (float32, float64 for the reference)."""
    gen = torch.Generator().manual_seed(1234)
    target = torch.randn(tuple(y.shape), generator=gen).to(y.device)
    acc = torch.float64 if fp64 else torch.float32
    return (y.to(acc) - target.to(acc)).square().mean()


# ------------------------------------------------------------------------------------------------
# measurements: each returns plain CPU tensors, for the device and for the two references


def measure_forward(case: Case, device, fp64: bool) -> torch.Tensor:
    model, inputs = case.run_model(device, fp64=fp64)
    with torch.no_grad():
        return _to_cpu(primary_output(case.spec, model(**inputs)))


def measure_backward(case: Case, device, fp64: bool) -> dict[str, torch.Tensor | None]:
    model, inputs = case.run_model(device, fp64=fp64)
    loss = _loss(case.spec, primary_output(case.spec, model(**inputs)), fp64)
    loss.backward()
    grads = {name: (None if p.grad is None else _to_cpu(p.grad)) for name, p in model.named_parameters()}
    grads["<loss>"] = _to_cpu(loss.detach().reshape(1))
    return grads


def measure_train(case: Case, device, fp64: bool, steps: int = TRAIN_STEPS) -> dict[str, torch.Tensor]:
    model, inputs = case.run_model(device, fp64=fp64)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=TRAIN_LR, eps=TRAIN_EPS[case.dtype], weight_decay=TRAIN_WEIGHT_DECAY)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = _loss(case.spec, primary_output(case.spec, model(**inputs)), fp64)
        loss.backward()
        opt.step()
        losses.append(_to_cpu(loss.detach()))
    out = {name: _to_cpu(p) for name, p in model.named_parameters()}
    out["<losses>"] = torch.stack(losses)
    return out


def _is_router(module: torch.nn.Module) -> bool:
    name = type(module).__name__
    return name.endswith("TopKRouter") or name.endswith("TopkRouter")


def measure_router(case: Case, device, fp64: bool) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Router logits ``(tokens, experts)`` and chosen expert indices ``(tokens, top_k)`` per router module.

    Routers are found by class name (``*TopKRouter``/``*TopkRouter``, transformers 5.x), which
    return ``(router_logits, routing_weights, expert_indices)``.
    """
    model, inputs = case.run_model(device, fp64=fp64)
    found: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    handles = []
    for name, module in model.named_modules():
        if _is_router(module):
            def hook(mod, args, output, name=name):
                found[name] = (_to_cpu(output[0]), _to_cpu(output[2]))
            handles.append(module.register_forward_hook(hook))
    if not handles:
        raise ValueError(f"model {case.spec.id!r} is marked is_moe but has no *TopKRouter module")
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in handles:
            h.remove()
    return found


# ------------------------------------------------------------------------------------------------
# the checks


def _localize_case(case: Case, device) -> Divergence | None:
    dev_model, dev_inputs = case.run_model(device)
    cpu_model, cpu_inputs = case.run_model("cpu")
    ref_model, ref_inputs = case.run_model("cpu", fp64=True)
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
    return CheckResult(case.spec.id, check, case.dtype, False, None, "metadata",
                       f"parameters differ after moving the model to the device: only on the device "
                       f"{only_dev[:5]}, only on CPU {only_cpu[:5]}{hint}", len(expected), {"rule": "param-set"})


def check_forward(model: str | ModelSpec, dtype, device, *, seed: int = 0, localize: bool = True) -> CheckResult:
    """Forward check: the compared output through the oracle, plus top-1/top-5 agreement for logits."""
    case = Case.make(model, dtype, seed)
    expected, ref64 = reference(case, "forward", measure_forward)
    actual = measure_forward(case, device, False)
    verdict = judge_model_tensor(actual, expected, ref64)
    result = _combine(case.spec.id, "forward", case.dtype, [(case.spec.output, verdict)])
    if case.spec.output == "logits" and expected.dim() >= 2 and expected.shape[-1] >= 5 and verdict.failure_class != "metadata":
        cpu_err = float((expected.double() - ref64).abs().nan_to_num(0.0).max())
        margin = arbitration_k(case.dtype) * cpu_err + tie_margin(case.dtype, 0.0)
        agreement = topk_agreement(actual, expected, k=5, margin=margin)
        result.metrics.update(agreement)
        result.metrics["tie_margin"] = margin
        if result.passed and agreement["top1_unexplained"]:
            result.passed = False
            result.failure_class = "numeric"
            result.message = (f"top-1 differs from CPU at {agreement['top1_unexplained']} of "
                              f"{agreement['positions']} positions where CPU's top-2 logits are more than "
                              f"{margin:.3g} apart (top-1 agreement {agreement['top1_agree']:.3f}, top-5 "
                              f"overlap {agreement['topk_overlap']:.3f})")
    return _with_localizer(result, case, device, localize)


def check_backward(model: str | ModelSpec, dtype, device, *, seed: int = 0, localize: bool = True) -> CheckResult:
    """Backward check: the loss and every parameter's gradient through the oracle; same no-grad set."""
    case = Case.make(model, dtype, seed)
    expected, ref64 = reference(case, "backward", measure_backward)
    actual = measure_backward(case, device, False)
    mismatch = _parameter_set_mismatch(case, "backward", actual, expected)
    if mismatch is not None:
        return mismatch
    none_dev = {n for n, g in actual.items() if g is None}
    none_cpu = {n for n, g in expected.items() if g is None}
    if none_dev != none_cpu:
        only_dev, only_cpu = sorted(none_dev - none_cpu), sorted(none_cpu - none_dev)
        return CheckResult(case.spec.id, "backward", case.dtype, False, None, "metadata",
                           f"parameters without a gradient differ: only on the device {only_dev[:5]}, only "
                           f"on CPU {only_cpu[:5]}", len(expected), {"rule": "grad-set"})
    verdicts = []
    # reverse registration order approximates the order autograd produces gradients (output layers
    # first), so the first failing gradient reported is the one closest to where backward diverged
    for name, e in reversed(list(expected.items())):
        if e is None:
            continue
        if name == "<loss>":  # a float32 number computed from dtype outputs: judged in the dtype
            verdicts.append(("loss", judge_model_tensor(actual[name].to(case.dtype), e.to(case.dtype),
                                                        ref64[name])))
        else:
            verdicts.append((f"grad of {name}", judge_model_tensor(actual[name], e, ref64[name])))
    result = _combine(case.spec.id, "backward", case.dtype, verdicts, {"params_without_grad": len(none_cpu)})
    return _with_localizer(result, case, device, localize)


def check_train(model: str | ModelSpec, dtype, device, *, seed: int = 0, steps: int = TRAIN_STEPS,
                localize: bool = True) -> CheckResult:
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
    verdicts = [("loss curve", judge_model_tensor(actual["<losses>"].to(dt), expected["<losses>"].to(dt),
                                                   ref64["<losses>"]))]
    for name, e in expected.items():
        if name != "<losses>":
            verdicts.append((f"parameter {name} after {steps} steps",
                             judge_model_tensor(actual[name], e, ref64[name], min_atol=drift)))
    metrics = {"steps": steps, "drift_budget": drift, "loss_first": float(expected["<losses>"][0]),
               "loss_last": float(expected["<losses>"][-1])}
    result = _combine(case.spec.id, "train", dt, verdicts, metrics)
    return _with_localizer(result, case, device, localize)


def check_router(model: str | ModelSpec, dtype, device, *, seed: int = 0) -> CheckResult:
    """Router check: per MoE layer, top-k expert indices agree with CPU token by token."""
    case = Case.make(model, dtype, seed)
    expected, ref64 = reference(case, "router", measure_router)
    actual = measure_router(case, device, False)
    if set(actual) != set(expected):
        return CheckResult(case.spec.id, "router", case.dtype, False, None, "metadata",
                           f"router modules differ: device {sorted(actual)}, CPU {sorted(expected)}", 0,
                           {"rule": "router-set"})
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
    metrics = {"rule": "router-topk", "tokens": tokens, "router_agree": agree_sum / max(tokens, 1),
               "router_unexplained": unexplained, "routers": len(expected)}
    result = CheckResult(case.spec.id, "router", case.dtype, not bad, worst, None, "", len(expected), metrics)
    if worst is not None:
        # the record's rule says how experts were compared, the errors are those of the router logits
        worst = dataclasses.replace(worst, rule="router-topk")
        result.verdict = worst
    if bad:
        result.failure_class = "numeric"
        result.message = ("top-k expert choice differs from CPU beyond ties (" + "; ".join(bad) +
                          f"); router logits max abs error {worst.max_abs if worst else float('nan'):.3g}")
    return result


def greedy(model: torch.nn.Module, input_ids: torch.Tensor, new_tokens: int, *, use_cache: bool
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy-decode exactly ``new_tokens`` tokens; return ``(tokens (B, new), logits (B, new, V))`` on CPU."""
    attention_mask = torch.ones_like(input_ids)
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=attention_mask, do_sample=False,
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens, use_cache=use_cache,
                             output_logits=True, return_dict_in_generate=True, num_beams=1,
                             pad_token_id=0, eos_token_id=None)
    tokens = out.sequences[:, input_ids.shape[1]:]
    logits = torch.stack(out.logits, dim=1)
    return _to_cpu(tokens), _to_cpu(logits)


def compare_generation(model_id: str, dtype: torch.dtype, build: Callable[[str], torch.nn.Module],
                       prompt: torch.Tensor, device, *, new_tokens: int,
                       cache_key: tuple | None = None) -> CheckResult:
    """Greedy generation on the device vs CPU, and KV-cache vs no-cache on the device.

    ``build(device)`` returns the model (in ``dtype``) on that device; ``prompt`` is ``(B, T)``
    token ids on CPU. CPU greedy tokens are cached under ``cache_key`` when given.
    """
    margin_for = lambda logits: None if dtype == torch.float32 else tie_margin(  # noqa: E731
        dtype, float(logits.abs().max()))
    key = ("generate", cache_key, new_tokens)
    if cache_key is None or key not in _REFERENCES:
        cpu_model = build("cpu")
        cpu_out = greedy(cpu_model, prompt, new_tokens, use_cache=True)
        if cache_key is not None:
            _REFERENCES[key] = (cpu_out, None)
    else:
        cpu_out = _REFERENCES[key][0]
    cpu_tokens, cpu_logits = cpu_out
    dev_model = build(device)
    dev_prompt = prompt.to(device)
    dev_tokens, dev_logits = greedy(dev_model, dev_prompt, new_tokens, use_cache=True)
    nocache_tokens, _ = greedy(dev_model, dev_prompt, new_tokens, use_cache=False)
    vs_cpu = token_agreement(dev_tokens, cpu_tokens, cpu_logits, margin=margin_for(cpu_logits))
    vs_cache = token_agreement(nocache_tokens, dev_tokens, dev_logits, margin=margin_for(dev_logits))
    metrics = {
        "rule": "greedy-margin" if dtype != torch.float32 else "greedy-exact",
        "new_tokens": new_tokens, "rows": vs_cpu["rows"],
        "agreeing_rows": vs_cpu["agreeing_rows"], "accepted_divergences": vs_cpu["accepted"],
        "cache_agreeing_rows": vs_cache["agreeing_rows"], "cache_accepted": vs_cache["accepted"],
        "token_agreement": float((dev_tokens == cpu_tokens).double().mean()),
    }
    problems = []
    if vs_cpu["unexplained"]:
        problems.append("greedy tokens differ from CPU: " + _describe_first(vs_cpu["first"]))
    if vs_cache["unexplained"]:
        problems.append("KV-cache and no-cache decoding differ on the device: " + _describe_first(vs_cache["first"]))
    passed = not problems
    return CheckResult(model_id, "generate", dtype, passed, None, None if passed else "numeric",
                       "; ".join(problems), 2 * vs_cpu["rows"], metrics)


def _describe_first(first: list[tuple[int, int, int, int, float | None]]) -> str:
    row, step, exp, got, gap = first[0]
    gap_s = "n/a" if gap is None else f"{gap:.3g}"
    return f"row {row} step {step}: expected token {exp}, got {got} (reference logit gap {gap_s})"


def check_generate(model: str | ModelSpec, dtype, device, *, seed: int = 0,
                   new_tokens: int = GENERATE_TOKENS) -> CheckResult:
    """Generation check for a random-weight zoo decoder (see :func:`compare_generation`)."""
    case = Case.make(model, dtype, seed)
    if not case.spec.supports_generate:
        raise ValueError(f"model {case.spec.id!r} does not support generate (supports_generate=False)")
    prompt = case.raw_inputs()["input_ids"][:, :8]
    return compare_generation(case.spec.id, case.dtype, lambda d: case.model(d), prompt, device,
                              new_tokens=new_tokens, cache_key=(case.spec.id, dtype_name(case.dtype), seed))


def default_compile_backend(device_type: str) -> str:
    """The ``torch.compile`` backend used for ``device_type``.

    A dynamo backend registered under the device type's name (e.g. ``"neuron"``) wins; CPU, CUDA
    and XPU use ``"inductor"`` (torch.compile's default); any other device falls back to
    ``"aot_eager"`` (AOTAutograd decompositions run with the device's eager kernels).
    """
    from torch._dynamo import list_backends

    if device_type in list_backends(exclude_tags=()):
        return device_type
    if device_type in ("cpu", "cuda", "xpu"):
        return "inductor"
    return "aot_eager"


def check_compile(model: str | ModelSpec, dtype, device, *, seed: int = 0, backend: str | None = None
                  ) -> CheckResult:
    """``torch.compile(model, backend=...)`` vs eager, both on the device; CPU float64 arbitrates."""
    case = Case.make(model, dtype, seed)
    _, ref64 = reference(case, "forward", measure_forward)
    device = torch.device(device)
    backend = backend or default_compile_backend(device.type)
    model_obj, inputs = case.run_model(device)
    graphs: list[int] = []
    backend_fn = torch._dynamo.lookup_backend(backend)

    def counting_backend(gm, example_inputs):
        graphs.append(len(gm.graph.nodes))
        return backend_fn(gm, example_inputs)

    # Dynamo runs a frame eagerly while a TorchDispatchMode is active (the harness's aten coverage
    # counter is one), which would leave nothing compiled; the modes are lifted for this check only.
    from torch.utils._python_dispatch import _disable_current_modes

    with torch.no_grad(), _disable_current_modes():
        eager = _to_cpu(primary_output(case.spec, model_obj(**inputs)))
        torch._dynamo.reset()
        compiled = torch.compile(model_obj, backend=counting_backend, fullgraph=False, dynamic=False)
        got = _to_cpu(primary_output(case.spec, compiled(**inputs)))
    torch._dynamo.reset()
    metrics = {"backend": backend, "graphs": len(graphs), "graph_nodes": sum(graphs)}
    if not graphs:
        return CheckResult(case.spec.id, "compile", case.dtype, False, None, "error",
                           f"torch.compile(backend={backend!r}) compiled no graph: Dynamo ran the model eagerly "
                           f"(disabled, or every frame was skipped), so nothing was compared", 0,
                           {**metrics, "rule": "compiled-graphs"})
    verdict = judge_model_tensor(got, eager, ref64)
    return _combine(case.spec.id, "compile", case.dtype, [(f"compiled ({backend}) {case.spec.output}", verdict)],
                    metrics)


CHECK_FUNCTIONS: dict[str, Callable[..., CheckResult]] = {
    "forward": check_forward,
    "backward": check_backward,
    "train": check_train,
    "generate": check_generate,
    "router": check_router,
    "compile": check_compile,
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
