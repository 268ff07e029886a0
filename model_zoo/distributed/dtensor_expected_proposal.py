"""Propose the DTensor sweep's expected-failure file from a run on ``--conformance-device cpu`` (gloo).

On ``cpu`` no device backend is involved, so every op that fails there fails because of DTensor (or of the sweep's
placements): those failures are what :mod:`~neuron_conformance.model_zoo.distributed.dtensor_expected` lists. After a
torch upgrade, regenerate the list::

    CONFORMANCE_DTENSOR_OPS=all python -m pytest model_zoo/distributed/test_dtensor_ops.py -n 2 --dist loadgroup \\
        --conformance-device cpu --conformance-report-dir=/tmp/dtensor-cpu
    python -m neuron_conformance.model_zoo.distributed.dtensor_expected_proposal /tmp/dtensor-cpu > proposed.toml

Each entry's ``match`` is built from the failure texts recorded for the op (the verdict's ``problems``): the texts
with their numbers made wildcards and anchored at both ends, so a device that fails the op with another text, or
with a wrong value where DTensor refuses, is not covered by the entry. ``reason`` comes from the kind of refusal
(:data:`KINDS`); review it before committing the file.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict

import torch

from neuron_conformance.conformance.results.records import read_records
from neuron_conformance.model_zoo.distributed import dtensor_expected

NUMBER = r"[-+0-9.e]+"
"""What a number of a failure text becomes in ``match`` (sizes, shapes, values and counts differ between runs)."""

KINDS = (
    ("does not have a sharding strategy registered", "DTensor has no sharding strategy for the aten op"),
    ("got mixed torch.Tensor and DTensor", "a composite builds a plain tensor and mixes it with DTensors"),
    (
        "Cannot unflatten unevenly sharded tensor",
        "DTensor refuses to view a sharded dimension whose output size the mesh does not divide",
    ),
    (
        "in-place operations that require placement changes",
        "DTensor refuses an in-place op on a Partial placement inside the composite",
    ),
    ("as_strided not supported with DTensor", "DTensor does not support as_strided"),
    (
        "is invalid for input of size",
        "DTensor builds a view of an invalid shape over a sharded dimension (argmax/argmin with keepdim, view_copy)",
    ),
    (
        "differs from the reference's",
        "DTensor runs the op on local shards: the gathered output has another shape than the unsharded op's",
    ),
    (
        "element(s) outside atol",
        "DTensor runs the op on local shards: the gathered values differ from the unsharded op's",
    ),
)
"""(text found in a failure, reason) for the kinds of DTensor refusal met on torch 2.13; the first that matches wins."""

OTHER = "DTensor rejects the sharded arguments (the same on every device; the text is DTensor's or the op's own check)"
ONLY_OP = "sharding propagation fails with an exception that names only the op (data-dependent output shape)"


def _escape(text: str) -> str:
    """``text`` with the characters that are special in a regular expression escaped (spaces left readable)."""
    return re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", text)


def pattern(problem: str) -> str:
    """A regular expression matching ``problem`` with any numbers in place of its numbers, anchored both ends."""
    out, last = [], 0
    for m in re.finditer(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", problem):
        out.append(_escape(problem[last : m.start()]))
        out.append(NUMBER)
        last = m.end()
    out.append(_escape(problem[last:]))
    return "^" + "".join(out) + "$"


def reason(problems: list[str]) -> str:
    """The reason for an op failing with ``problems``: the :data:`KINDS` found in them, in order, joined by '; '."""
    found = []
    for text in problems:
        kind = next((r for needle, r in KINDS if needle in text), None)
        if kind is None:
            kind = ONLY_OP if re.fullmatch(r"raised \w+: aten\.\w+\.\w+", text) else OTHER
        if kind not in found:
            found.append(kind)
    return "; ".join(found)


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def propose(records: list[dict]) -> str:
    """The expected-failure file (TOML text) for the failing DTensor sweep records of a ``cpu`` run.

    Records of other suites and passing ops are ignored; an op that failed on a mesh without recorded
    ``problems`` (a launch that crashed or timed out) is left out, since that is no DTensor refusal.
    """
    texts: dict = defaultdict(dict)
    for rec in records:
        variant = rec.get("variant") or ""
        if rec.get("suite") != "distributed" or not variant.startswith("dtensor-"):
            continue
        problems = (rec.get("metrics") or {}).get("problems") or []
        if rec.get("outcome") in ("failed", "xfailed") and problems:
            texts[rec["op"]][variant.removeprefix("dtensor-")] = problems
    release = dtensor_expected.release(torch.__version__)
    lines = [
        "# Expected failures of the DTensor op sweep (model_zoo/distributed/dtensor_ops.py): DTensor's own refusals,",
        f"# read from a run on --conformance-device cpu with gloo (torch {torch.__version__}); format and rules in",
        "# model_zoo/distributed/dtensor_expected.py, regenerated by dtensor_expected_proposal.py.",
        f'torch = "{release}"',
        "",
    ]
    for op in sorted(texts):
        problems = [p for mesh in sorted(texts[op]) for p in texts[op][mesh]]
        alternatives = list(dict.fromkeys(pattern(p) for p in problems))
        lines += [
            "[[expected]]",
            f"ops = [{_toml_string(op)}]",
            f"meshes = [{', '.join(_toml_string(m) for m in sorted(texts[op]))}]",
            f"match = {_toml_string('|'.join(alternatives))}",
            f"reason = {_toml_string(reason(problems))}",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m neuron_conformance.model_zoo.distributed.dtensor_expected_proposal REPORT_DIR`` prints the file."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(
            "usage: python -m neuron_conformance.model_zoo.distributed.dtensor_expected_proposal REPORT_DIR",
            file=sys.stderr,
        )
        return 2
    try:
        records = read_records(args[0])
    except Exception as exc:  # noqa: BLE001 - a missing or broken report dir is one line, exit 2
        print(f"{args[0]}: cannot read the run's records: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(propose(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
