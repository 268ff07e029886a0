"""Generation modes beyond greedy on the device vs CPU: sampling, beam search, beam sampling, continuing from a
returned cache, static and dynamic cache classes (record variants ``generate-<mode>``, :data:`MODES`).

What each mode compares (see docs/model_zoo.md, "Generation modes", for the reasons):

``sample``
    ``do_sample=True`` (:data:`neuron_conformance.model_zoo.decode.SAMPLING`) under ``torch.manual_seed`` on each side.
    The device's random stream may legitimately differ from CPU's, so tokens are not compared with CPU's in
    general; instead (:mod:`neuron_conformance.model_zoo.sampling`): the same seed twice gives bitwise the
    same tokens and scores; every draw has positive probability under the device's own scores; the draws
    pass the sampler test; the device's raw logits along its own path are CPU's (a CPU replay of that path,
    judged like a model tensor) and its top-k kept sets are CPU's up to boundary ties; and where the backend
    mirrors CPU (``DeviceProfile.mirrors_cpu``: CPU kernels on CPU's generator), the tokens are CPU's at
    every step whose inputs are bitwise CPU's.
``sample-generator``
    the same path with an explicit ``torch.Generator(device=<type>)`` given to ``torch.multinomial``: seeded
    twice with one seed it gives the same tokens whatever the default generator's state. Needs the
    ``generators`` capability (``not-claimed`` otherwise).
``beam``
    ``num_beams=3`` (all 3 beams returned): tokens equal to CPU's, where a difference is accepted only when
    CPU's smallest beam decision gap (last kept minus first pruned candidate, any step, or two returned beams'
    scores) is within the tie margin; ``sequences_scores`` judged against CPU's; every returned beam's score
    recomputed on CPU from a replay of its tokens.
``beam_sample``
    ``num_beams=2, do_sample=True``: determinism, the replayed scores, and CPU's tokens where the backend
    mirrors CPU and every step's scores were bitwise CPU's.
``continue``
    ``generate`` for 4 tokens, then again from the returned ``cache`` for 4 more, against CPU doing the same
    (greedy rule, logits judged), and against one 8-token call on the device (tie rule) where CPU's own
    continuation equals its one call (transformers 5.24's Mamba does not: 8e-3 apart on CPU itself).
``static`` / ``dynamic``
    ``cache_implementation="static"`` (eager: ``disable_compile=True``) against CPU's static-cache run, and an
    explicit ``DynamicCache(config=...)`` passed as ``cache`` against CPU's greedy run; the passed cache must
    come back holding every position.

Greedy-type token rule (as :mod:`neuron_conformance.model_zoo.generation`): exact in float32; in bfloat16/float16 a
row's first differing token is accepted where CPU's logit gap is within :func:`neuron_conformance.model_zoo.compare.tie_margin`.
Logits are judged over the steps whose inputs still agree (every step up to a row's first divergence).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from neuron_conformance.model_zoo import decode, sampling
from neuron_conformance.model_zoo.case import cpu_reference
from neuron_conformance.model_zoo.compare import judge_model_tensor, tie_margin, token_agreement
from neuron_conformance.model_zoo.results import CheckResult

MODES = ("sample", "sample-generator", "beam", "beam_sample", "continue", "static", "dynamic")
"""The generation modes; record variant ``generate-<mode>``."""

CAPABILITY = {"sample-generator": "generators"}
"""Mode -> the capability it needs (:mod:`neuron_conformance.conformance.backend.capabilities`)."""

SEED, OTHER_SEED, GEN_SEED = 1234, 4321, 99
SAMPLE_TOKENS = 16
"""New tokens per sampled row: 2 rows x 16 draws give the sampler test power against a sampler that returns
the most likely token (Bernstein bound 1e-10 on a random-weight model's spread-out distributions)."""
TOKENS = 8
"""New tokens of the deterministic modes (as the ``generate`` check)."""
BEAMS = 3
BEAM_SAMPLE_BEAMS = 2


def variant(mode: str) -> str:
    """Record variant of ``mode``: ``generate-<mode>``.

    Raises:
        ValueError: ``mode`` is not in :data:`MODES`.
    """
    if mode not in MODES:
        raise ValueError(f"generation mode {mode!r} is not one of {MODES}")
    return f"generate-{mode}"


class _Judge:
    """Collects problems and oracle verdicts of one mode run into a :class:`CheckResult`."""

    def __init__(self, model_id: str, mode: str, dtype: torch.dtype) -> None:
        self.model_id, self.mode, self.dtype = model_id, mode, dtype
        self.problems: list[str] = []
        self.verdict = None
        self.metrics: dict = {}
        self.compared = 0
        self.left_out: str | None = None

    def margin(self, logits: torch.Tensor) -> float | None:
        return None if self.dtype == torch.float32 else tie_margin(self.dtype, float(logits.abs().max()))

    def tokens(self, what: str, actual, expected, expected_logits, *, margin: float | None) -> dict:
        agreement = token_agreement(actual, expected, expected_logits, margin=margin)
        self.compared += agreement["rows"]
        if agreement["unexplained"]:
            row, step, exp, got, gap = agreement["first"][0]
            gap_s = "n/a" if gap is None else f"{gap:.3g}"
            self.problems.append(
                f"{what}: row {row} step {step}: expected token {exp}, got {got} "
                f"(reference logit gap {gap_s}, tie margin {margin})"
            )
        return agreement

    def logits(self, what: str, actual: torch.Tensor, expected: torch.Tensor, first_steps: list[int]) -> None:
        """Judge ``(rows, steps, vocab)`` logits over each row's steps ``<= first_steps[row]``."""
        keep = torch.zeros(actual.shape[:2], dtype=torch.bool)
        for row, last in enumerate(first_steps):
            keep[row, : last + 1] = True
        a, e = actual[keep].to(self.dtype), expected[keep].to(self.dtype)
        verdict = judge_model_tensor(a, e, None)
        self.compared += 1
        if self.verdict is None or (self.verdict.passed and not verdict.passed):
            self.verdict = verdict
        if not verdict.passed:
            self.problems.append(f"{what}: {verdict.message}")

    def result(self) -> CheckResult:
        passed = not self.problems
        cls = (
            None
            if passed
            else (self.verdict.failure_class if self.verdict is not None and not self.verdict.passed else "numeric")
        )
        self.metrics.setdefault("rule", "generate-" + self.mode)
        return CheckResult(
            self.model_id,
            variant(self.mode),
            self.dtype,
            passed,
            self.verdict,
            cls,
            "; ".join(self.problems),
            self.compared,
            self.metrics,
            left_out=self.left_out,
        )


def _first_steps(actual: torch.Tensor, expected: torch.Tensor) -> list[int]:
    """Per row, the first step where the tokens differ (the last step when they agree)."""
    out = []
    for row in range(actual.shape[0]):
        diff = (actual[row] != expected[row]).nonzero()
        out.append(int(diff[0]) if diff.numel() else actual.shape[1] - 1)
    return out


def _sampled(model, prompt, seed, **kw) -> decode.Decoded:
    return decode.run(model, prompt, SAMPLE_TOKENS, seed=seed, do_sample=True, **decode.SAMPLING, **kw)


def _judge_sampled_path(j: _Judge, run: decode.Decoded, cpu_model, prompt: torch.Tensor) -> None:
    """Support, the sampler test, the replayed logits and the top-k kept sets of one sampled device run."""
    violations = sampling.support_violations(run.scores, run.tokens)
    if violations:
        row, step, tok = violations[0]
        j.problems.append(
            f"drew token {tok} at row {row} step {step}, which the device's own scores exclude "
            f"({len(violations)} such draws)"
        )
    vocab = run.scores.shape[-1]
    stat = sampling.sampler_statistic(
        torch.softmax(run.scores.reshape(-1, vocab).double(), dim=1), run.tokens.reshape(-1)
    )
    j.metrics["sampler"] = stat
    if stat["p_bound"] < sampling.LEVEL:
        side = "the most likely tokens" if stat["deviation"] < 0 else "unlikely tokens"
        j.problems.append(
            f"the draws favour {side} beyond chance: probability-integral-transform deviation "
            f"{stat['deviation']:.3g} over {stat['draws']} draws, Bernstein bound "
            f"{stat['p_bound']:.2g} < {sampling.LEVEL:g}"
        )
    cpu_logits = decode.replay(cpu_model, prompt, run.tokens)
    j.logits(
        "raw logits along the device's sampled path vs a CPU replay",
        run.logits,
        cpu_logits,
        [run.tokens.shape[1] - 1] * run.tokens.shape[0],
    )
    tempered, cpu_scores = decode.warp(cpu_logits.reshape(-1, vocab))
    dev_tempered = run.logits.reshape(-1, vocab).float() / decode.SAMPLING["temperature"]
    error = (dev_tempered.double() - tempered.double()).abs().max(dim=1).values
    tie = tie_margin(j.dtype, float(tempered.abs().max()))
    kept = sampling.kept_set_agreement(run.scores.reshape(-1, vocab), cpu_scores, tempered, margin=2 * error + tie)
    j.metrics["kept_sets"] = {k: v for k, v in kept.items() if k != "first"}
    if kept["unexplained"]:
        pos, tok, gap = kept["first"]
        row, step = divmod(pos, run.tokens.shape[1])
        j.problems.append(
            f"top-k kept sets differ from CPU's at row {row} step {step}: token {tok} is "
            f"{gap:.3g} from CPU's k-th logit ({kept['unexplained']} tokens beyond the tie margin)"
        )


def check_sample(j: _Judge, build: Callable, prompt: torch.Tensor, device, key: tuple, *, mirrors_cpu: bool) -> None:
    cpu = cpu_reference(("generate-sample",) + key, lambda: _sampled(build("cpu"), prompt, SEED))
    model = build(device)
    dprompt = prompt.to(device)
    first, second = _sampled(model, dprompt, SEED), _sampled(model, dprompt, SEED)
    if not (torch.equal(first.tokens, second.tokens) and torch.equal(first.scores, second.scores)):
        j.problems.append(f"torch.manual_seed({SEED}) twice gave different sampled tokens or scores on the device")
    other = _sampled(model, dprompt, OTHER_SEED)
    j.metrics["other_seed_token_agreement"] = float((other.tokens == first.tokens).double().mean())
    j.metrics["cpu_token_agreement"] = float((first.tokens == cpu.tokens).double().mean())
    _judge_sampled_path(j, first, build("cpu"), prompt)
    if mirrors_cpu:
        same = sampling.same_stream_agreement(first.tokens, cpu.tokens, first.scores, cpu.scores)
        j.metrics["same_stream_steps"] = same["bound_steps"]
        if same["first_mismatch"] is not None:
            row, step, exp, got = same["first_mismatch"]
            j.problems.append(
                f"the backend mirrors CPU, yet at row {row} step {step}, with every input bitwise "
                f"CPU's, it drew token {got} where CPU drew {exp}"
            )


def check_sample_generator(j: _Judge, build: Callable, prompt: torch.Tensor, device, key: tuple, **_) -> None:
    try:
        gen = torch.Generator(device=torch.device(device).type)
    except Exception as exc:  # noqa: BLE001 - a backend claiming generators that cannot make one fails here
        j.problems.append(f"torch.Generator(device={torch.device(device).type!r}) raised {type(exc).__name__}: {exc}")
        return
    model = build(device)
    dprompt = prompt.to(device)
    runs = []
    for default_seed in (SEED, OTHER_SEED):  # the default generator's state must not matter
        gen.manual_seed(GEN_SEED)
        with decode.ExplicitGenerator(gen):
            runs.append(_sampled(model, dprompt, default_seed))
    if not torch.equal(runs[0].tokens, runs[1].tokens):
        j.problems.append(
            f"an explicit generator seeded {GEN_SEED} twice gave different tokens when the default "
            "generator's seed changed"
        )
    _judge_sampled_path(j, runs[0], build("cpu"), prompt)


def _replayed_beam_scores(cpu_model, prompt: torch.Tensor, run: decode.Decoded, beams: int, sampled: bool):
    """CPU's score of every returned beam: the mean over steps of its processed log-probabilities (beam search
    accumulates the processed ``log_softmax`` and divides by the new length, ``length_penalty`` 1)."""
    rows = prompt.repeat_interleave(beams, dim=0)
    logits = decode.replay(cpu_model, rows, run.tokens).double()
    logp = torch.log_softmax(logits, dim=-1)
    if sampled:
        logp = logp / decode.SAMPLING["temperature"]
    picked = logp.gather(2, run.tokens[..., None]).squeeze(2)
    return picked.sum(dim=1) / run.tokens.shape[1]


def check_beam(j: _Judge, build: Callable, prompt: torch.Tensor, device, key: tuple, **_) -> None:
    kw = dict(num_beams=BEAMS, num_return_sequences=BEAMS)
    cpu = cpu_reference(
        ("generate-beam",) + key, lambda: decode.run(build("cpu"), prompt, TOKENS, record_gaps=True, **kw)
    )
    dev = decode.run(build(device), prompt.to(device), TOKENS, **kw)
    gaps = torch.cat([cpu.beam_gaps, cpu.sequences_scores.double().reshape(-1, BEAMS).diff(dim=1).abs()], dim=1)
    margin = tie_margin(j.dtype, cpu.beam_scale)
    j.metrics.update(min_decision_gap=float(gaps.min()), tie_margin=margin)
    diverged = [r for r in range(dev.tokens.shape[0]) if not torch.equal(dev.tokens[r], cpu.tokens[r])]
    if diverged:
        row = diverged[0]
        step = int((dev.tokens[row] != cpu.tokens[row]).nonzero()[0])
        batch_gap = float(gaps[row // BEAMS].min())
        j.metrics.update(first_divergence=(row, step), divergence_margin=batch_gap)
        if batch_gap > margin:
            j.problems.append(
                f"beams differ from CPU's at row {row} step {step} (token {int(cpu.tokens[row, step])} "
                f"expected, {int(dev.tokens[row, step])} got) although CPU's smallest decision gap "
                f"{batch_gap:.3g} exceeds the tie margin {margin:.3g}"
            )
    else:
        verdict = judge_model_tensor(dev.sequences_scores.to(j.dtype), cpu.sequences_scores.to(j.dtype), None)
        j.verdict = verdict
        if not verdict.passed:
            j.problems.append(f"sequences_scores: {verdict.message}")
    j.compared += dev.tokens.shape[0]
    _judge_beam_scores(j, build("cpu"), prompt, dev, BEAMS, sampled=False)


def _judge_beam_scores(j: _Judge, cpu_model, prompt, dev: decode.Decoded, beams: int, *, sampled: bool) -> None:
    replayed = _replayed_beam_scores(cpu_model, prompt, dev, beams, sampled)
    if sampled:  # a beam kept a token outside CPU's top-k set: its CPU score is -inf
        replayed = torch.where(torch.isfinite(replayed), replayed, torch.full_like(replayed, -1e9))
    verdict = judge_model_tensor(dev.sequences_scores.to(j.dtype), replayed.to(j.dtype), None)
    j.compared += 1
    if not verdict.passed:
        j.verdict = verdict
        j.problems.append(f"returned beams' sequences_scores vs their CPU replay: {verdict.message}")


def check_beam_sample(
    j: _Judge, build: Callable, prompt: torch.Tensor, device, key: tuple, *, mirrors_cpu: bool
) -> None:
    kw = dict(num_beams=BEAM_SAMPLE_BEAMS, num_return_sequences=BEAM_SAMPLE_BEAMS, do_sample=True, **decode.SAMPLING)
    cpu = cpu_reference(
        ("generate-beam_sample",) + key, lambda: decode.run(build("cpu"), prompt, TOKENS, seed=SEED, **kw)
    )
    model = build(device)
    dprompt = prompt.to(device)
    first, second = (decode.run(model, dprompt, TOKENS, seed=SEED, **kw) for _ in range(2))
    if not torch.equal(first.tokens, second.tokens):
        j.problems.append(f"torch.manual_seed({SEED}) twice gave different beam-sample tokens on the device")
    j.metrics["cpu_token_agreement"] = float((first.tokens == cpu.tokens).double().mean())
    if mirrors_cpu and torch.equal(first.scores, cpu.scores):
        j.metrics["same_stream"] = True
        if not torch.equal(first.tokens, cpu.tokens):
            j.problems.append(
                "the backend mirrors CPU and every step's scores were bitwise CPU's, yet the sampled "
                "beams differ from CPU's"
            )
    j.compared += first.tokens.shape[0]
    _judge_beam_scores(j, build("cpu"), prompt, first, BEAM_SAMPLE_BEAMS, sampled=True)


def _greedy_reference(build, prompt, key) -> decode.Decoded:
    """CPU's 8-token greedy run (cached per process)."""
    return cpu_reference(("generate-greedy",) + key, lambda: decode.run(build("cpu"), prompt, TOKENS))


def _judge_greedy(j: _Judge, what: str, dev: decode.Decoded, ref: decode.Decoded) -> None:
    j.tokens(what, dev.tokens, ref.tokens, ref.logits, margin=j.margin(ref.logits))
    j.logits(what + " (logits)", dev.logits, ref.logits, _first_steps(dev.tokens, ref.tokens))
    j.metrics["token_agreement"] = float((dev.tokens == ref.tokens).double().mean())


def _continued(model, prompt: torch.Tensor, device) -> decode.Decoded | None:
    """4 tokens, then 4 more from the returned cache: the joined 8 tokens and logits (None without a cache)."""
    half = TOKENS // 2
    dprompt = prompt.to(device)
    head = decode.run(model, dprompt, half, keep_cache=True)
    if head.cache is None:
        return None
    sequences = torch.cat([dprompt, head.tokens.to(device)], dim=1)
    tail = decode.run(model, sequences, TOKENS - half, **{head.cache_field: head.cache})
    return decode.Decoded(torch.cat([head.tokens, tail.tokens], dim=1), torch.cat([head.logits, tail.logits], dim=1))


def check_continue(j: _Judge, build: Callable, prompt: torch.Tensor, device, key: tuple, **_) -> None:
    try:
        cpu = cpu_reference(("generate-continue",) + key, lambda: _continued(build("cpu"), prompt, "cpu"))
    except ValueError as exc:
        if "not used by the model" not in str(exc):
            raise
        import transformers  # deferred: optional dependency

        # transformers 5.17's Mamba returns its cache as `past_key_values` and refuses it back
        j.left_out = (
            f"transformers {transformers.__version__} cannot continue generate from the cache it returned, "
            f"on the CPU either: {str(exc).splitlines()[0][:160]}"
        )
        return
    model = build(device)
    joined = _continued(model, prompt, device)
    if joined is None or cpu is None:
        j.problems.append(
            "generate(return_dict_in_generate=True) returned no cache to continue from"
            + ("" if joined is None else " on CPU")
        )
        return
    _judge_greedy(j, "continued from the returned cache vs CPU continued the same way", joined, cpu)
    # "a second call from the cache equals one long call" is required of the device where CPU has it
    one_call = _greedy_reference(build, prompt, key)
    cpu_gap = float((cpu.logits - one_call.logits).abs().max())
    j.metrics["cpu_continue_vs_one_call"] = cpu_gap
    if torch.equal(cpu.tokens, one_call.tokens) and cpu_gap <= tie_margin(j.dtype, float(one_call.logits.abs().max())):
        whole = decode.run(model, prompt.to(device), TOKENS)
        j.tokens(
            "continued from the returned cache vs one call on the device",
            joined.tokens,
            whole.tokens,
            whole.logits,
            margin=j.margin(whole.logits),
        )


def check_static(j: _Judge, build: Callable, prompt: torch.Tensor, device, key: tuple, **_) -> None:
    kw = dict(cache_implementation="static", disable_compile=True)
    ref = cpu_reference(("generate-static",) + key, lambda: decode.run(build("cpu"), prompt, TOKENS, **kw))
    _judge_greedy(
        j, "static cache vs CPU's static cache", decode.run(build(device), prompt.to(device), TOKENS, **kw), ref
    )


def check_dynamic(j: _Judge, build: Callable, prompt: torch.Tensor, device, key: tuple, **_) -> None:
    from transformers import DynamicCache  # deferred: optional dependency

    model = build(device)
    cache = DynamicCache(config=model.config)
    dev = decode.run(model, prompt.to(device), TOKENS, **{decode.cache_argument(): cache})
    held = int(cache.get_seq_length())
    expected_len = prompt.shape[1] + TOKENS - 1  # the last token is generated, never fed back
    j.metrics["cache_length"] = held
    if held != expected_len:
        j.problems.append(
            f"the DynamicCache passed as cache holds {held} positions after generate, expected "
            f"{expected_len} (prompt {prompt.shape[1]} + {TOKENS} new - 1)"
        )
    _judge_greedy(j, "explicit DynamicCache vs CPU", dev, _greedy_reference(build, prompt, key))


CHECKS = {
    "sample": check_sample,
    "sample-generator": check_sample_generator,
    "beam": check_beam,
    "beam_sample": check_beam_sample,
    "continue": check_continue,
    "static": check_static,
    "dynamic": check_dynamic,
}


def compare_mode(
    mode: str,
    model_id: str,
    dtype: torch.dtype,
    build: Callable[[str], torch.nn.Module],
    prompt: torch.Tensor,
    device,
    *,
    cache_key: tuple,
    mirrors_cpu: bool,
) -> CheckResult:
    """Run generation ``mode`` for a model on ``device`` against CPU (see the module docstring).

    ``build(device)`` returns the model in ``dtype`` on that device; ``prompt`` is ``(batch, T)`` token ids on
    CPU; CPU results are cached per process under ``cache_key`` (model id, dtype name, seed);
    ``mirrors_cpu`` is the device profile's promise that it runs CPU's kernels on CPU's generator.

    Raises:
        ValueError: unknown ``mode``.
    """
    j = _Judge(model_id, mode, dtype)
    variant(mode)
    CHECKS[mode](j, build, prompt, device, cache_key, mirrors_cpu=mirrors_cpu)
    return j.result()


MODELS = ("llama", "gpt2", "mistral", "qwen3", "gemma2", "phi", "falcon", "mixtral", "mamba")
"""Random-weight zoo decoders the modes run on (a bounded set: GQA with rotary, learned positions with tied
embeddings, a sliding window, a hybrid sliding/global cache, partial rotary, multi-query, MoE, a state space
model); the trained fixture runs them too (``model_zoo/test_generation.py``)."""

CI = frozenset({("llama", "float32", "sample"), ("llama", "float32", "beam"), ("llama", "float32", "static")})
"""``(model, dtype, mode)`` in the ``model_zoo_ci`` subset."""

NO_CACHE_CLASSES = frozenset({"mamba"})
"""Models whose cache is not a transformers ``Cache`` of key/value layers (Mamba keeps convolution and SSM
states): no ``static`` or ``dynamic`` mode."""


def modes_of(model_id: str) -> tuple[str, ...]:
    """The modes :data:`MODELS` entry ``model_id`` runs, in :data:`MODES` order."""
    return tuple(m for m in MODES if not (model_id in NO_CACHE_CLASSES and m in ("static", "dynamic")))
