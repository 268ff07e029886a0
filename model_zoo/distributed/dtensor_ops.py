"""DTensor op sweep: OpInfo samples run on DTensors sharded over a mesh of the device's process group, each
output gathered (``full_tensor()``) and compared with the single-process CPU result of the same sample.

How PyTorch does it (``test/distributed/tensor/test_dtensor_ops.py`` with
``torch/testing/_internal/distributed/_tensor/common_dtensor.py``): every ``op_db`` OpInfo in float32, world
size 4, and per sample every combination of placements of its tensor arguments, where a tensor is either
``Replicate()`` or ``Shard(d)`` on a dimension ``d`` of size > 1 divisible by the mesh size (bool tensors are
only replicated, c10d has no bool collectives) - ``DTensorConverter.gen_sharding_choices_for_arg``; about 250
ops are expected failures there. This sweep keeps those placement rules and bounds the rest:

- ops: :data:`DEFAULT_OPS` (elementwise, reductions, matmuls, views, shape ops, normalisation, softmax), or
  every ``op_db`` entry with ``$CONFORMANCE_DTENSOR_OPS=all``, or a comma-separated list of OpInfo names;
- samples: :data:`MAX_SAMPLES` float32 samples of each op, those with a shardable tensor first (CPU
  ``sample_inputs`` under seed 0, so every rank and the reference see the same tensors);
- placements: not the full product but :data:`MAX_COMBOS` "diagonal" combinations: combination ``k`` gives
  every tensor argument its ``k``-th choice (or its last), so "all replicated", "all sharded on their first
  shardable dimension", ... are covered; on a 2-D mesh a choice is a pair of placements, one per mesh
  dimension (``(Shard(d), Replicate())``, ``(Replicate(), Shard(d))``, ``(Shard(d), Shard(d'))``).

Outcomes per op (:func:`judge_op`): ``passed`` (every combination within the oracle's float32 tolerance of the
CPU result, integer and bool outputs exactly; random and ``empty*`` ops by shape and dtype only,
:func:`values_undefined`), ``failed`` (a wrong value, or an error the CPU did not raise),
``expected`` / ``unexpected`` / ``unexpected-pass`` for ops listed in :func:`expected_failures` (DTensor's own
refusals, each tied to its failure text; strict both ways, :mod:`~neuron_conformance.model_zoo.distributed.dtensor_expected`).
"""

from __future__ import annotations

import functools
import itertools
import os

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from neuron_conformance.model_zoo.distributed import dtensor_expected

ENV_OPS = "CONFORMANCE_DTENSOR_OPS"
"""Environment variable choosing the ops: unset for :data:`DEFAULT_OPS`, ``all`` for every ``op_db`` entry, or
a comma-separated list of OpInfo names (``name`` or ``name.variant``)."""

DEFAULT_OPS = (
    "add",
    "sub",
    "mul",
    "div.no_rounding_mode",
    "neg",
    "abs",
    "exp",
    "tanh",
    "sigmoid",
    "pow",
    "where",
    "clone",
    "sum",
    "mean",
    "amax",
    "prod",
    "var",
    "mm",
    "bmm",
    "matmul",
    "addmm",
    "t",
    "transpose",
    "permute",
    "reshape",
    "view",
    "cat",
    "stack",
    "split",
    "softmax",
    "nn.functional.gelu",
    "nn.functional.layer_norm",
    "nn.functional.embedding",
    "ones_like",
    "argmax",
)
"""The default op list: what transformer training and the DTensor parallel styles run."""

MAX_SAMPLES = 4
MAX_COMBOS = 3

OPS_PER_WORLD = 16
"""Ops swept by one launch of a mesh's ranks. A launch that runs past its time limit is killed and its ops
fail with the timeout; batching keeps the results of every other launch (one launch for all 702 ``op_db``
entries, about 55 minutes, lost everything when its limit killed it), and lets pytest-xdist run the
launches of one mesh on different workers. 16 ops took under a minute per mesh on the emulated device in the
first 20 ops of ``all`` (95 s for 20 ops on both meshes, 2 cores)."""


def batches(names: list[str], size: int = OPS_PER_WORLD) -> list[list[str]]:
    """``names`` cut in order into lists of at most ``size`` (one launch each).

    Raises:
        ValueError: ``size`` is below 1.
    """
    if size < 1:
        raise ValueError(f"batch size {size} must be >= 1")
    return [names[i : i + size] for i in range(0, len(names), size)]


@functools.lru_cache(maxsize=1)
def expected_failures() -> dtensor_expected.ExpectedFailures:
    """The shipped expected failures (:mod:`~neuron_conformance.model_zoo.distributed.dtensor_expected`: DTensor's own
    refusals, measured on ``cpu`` with gloo, each tied to its failure text), read once.

    Raises:
        dtensor_expected.ExpectedFailuresError: the shipped file is unreadable or malformed.
    """
    return dtensor_expected.load()


def selected_ops(value: str | None = None) -> list[str]:
    """The OpInfo names to sweep: ``value`` (default ``$CONFORMANCE_DTENSOR_OPS``) as described at :data:`ENV_OPS`.

    Raises:
        ValueError: a listed name is no ``op_db`` entry; the message names it.
    """
    from torch.testing._internal.common_methods_invocations import op_db  # deferred: slow import

    raw = (os.environ.get(ENV_OPS, "") if value is None else value).strip()
    known = {_opinfo_name(o) for o in op_db}
    if not raw:
        return [n for n in DEFAULT_OPS if n in known]
    if raw == "all":
        return sorted(known)
    names = [n.strip() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"{ENV_OPS}: {', '.join(unknown)} not in torch's op_db (OpInfo names, e.g. 'add', "
            "'nn.functional.gelu', 'norm.fro')"
        )
    return names


def _opinfo_name(opinfo) -> str:
    return opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")


def _opinfo(name: str):
    from torch.testing._internal.common_methods_invocations import op_db  # deferred: slow import

    for o in op_db:
        if _opinfo_name(o) == name:
            return o
    raise ValueError(f"no OpInfo named {name!r}")


MAX_PROBLEMS = 16
"""Distinct failure texts of one op and mesh kept in its verdict (``problems``)."""

SCANNED_SAMPLES = 32
"""Samples of an op looked at when choosing :data:`MAX_SAMPLES` (OpInfo sample generators can be long)."""


def _shardable(sample) -> bool:
    leaves, _ = tree_flatten(((sample.input, *sample.args), sample.kwargs))
    return any(
        isinstance(x, torch.Tensor) and x.dtype != torch.bool and any(s > 1 and s % 2 == 0 for s in x.shape)
        for x in leaves
    )


def samples(name: str) -> list:
    """:data:`MAX_SAMPLES` float32 CPU sample inputs of OpInfo ``name``, drawn under seed 0: of its first
    :data:`SCANNED_SAMPLES`, those with a tensor that can be sharded (a dimension of even size > 1) first,
    in OpInfo order (``sum``'s first samples are 0-dim, which only replicate)."""
    opinfo = _opinfo(name)
    if torch.float32 not in opinfo.supported_dtypes("cpu"):
        return []
    torch.manual_seed(0)
    scanned = list(itertools.islice(opinfo.sample_inputs("cpu", torch.float32, requires_grad=False), SCANNED_SAMPLES))
    return sorted(scanned, key=lambda s: not _shardable(s))[:MAX_SAMPLES]


def _choices(t: torch.Tensor, mesh_shape: tuple[int, ...]) -> list[tuple]:
    """Placements of one tensor argument (PyTorch's rule: Replicate, or Shard on an evenly divisible dim)."""
    from torch.distributed.tensor import Replicate, Shard

    if t.dtype == torch.bool or t.dim() == 0:
        return [(Replicate(),) * len(mesh_shape)]
    size = 1
    for s in mesh_shape:
        size *= s
    if len(mesh_shape) == 1:
        return [(Replicate(),)] + [(Shard(d),) for d, s in enumerate(t.shape) if s > 1 and s % size == 0]
    a, b = mesh_shape
    first = [d for d, s in enumerate(t.shape) if s > 1 and s % a == 0]
    second = [d for d, s in enumerate(t.shape) if s > 1 and s % b == 0]
    out = [(Replicate(), Replicate())]
    out += [(Shard(d), Replicate()) for d in first[:1]] + [(Replicate(), Shard(d)) for d in second[:1]]
    out += [(Shard(d), Shard(e)) for d in first[:1] for e in second if e != d][:1]
    out += [(Shard(d), Shard(d)) for d in range(t.dim()) if t.shape[d] > 1 and t.shape[d] % (a * b) == 0][:1]
    return out


def combinations(leaves: list, mesh_shape: tuple[int, ...]) -> list[list]:
    """Up to :data:`MAX_COMBOS` diagonal placement combinations for the tensor ``leaves``
    (``[[placements per tensor leaf]]``; non-tensor leaves get None)."""
    per = [_choices(x, mesh_shape) if isinstance(x, torch.Tensor) else None for x in leaves]
    widest = max((len(c) for c in per if c), default=1)
    combos = []
    for k in range(min(widest, MAX_COMBOS)):
        combos.append([None if c is None else c[min(k, len(c) - 1)] for c in per])
    return combos


def kept_on_cpu(name: str, sample) -> list[bool]:
    """Per leaf of ``tree_flatten(((sample.input, *sample.args), sample.kwargs))``: True for the arguments the op
    takes on the CPU whatever the device (:data:`neuron_conformance.conformance.backend.transfer.CPU_ARGUMENTS`, e.g.
    ``tensor_split``'s index tensor); those stay plain CPU tensors, neither moved nor distributed."""
    from neuron_conformance.conformance.backend.transfer import CPU_ARGUMENTS  # deferred: keeps the rank side light

    keep = CPU_ARGUMENTS.get(name, set())
    flags = (
        (
            tree_map(lambda _: False, sample.input),
            *(tree_map(lambda _, i=i: i in keep, a) for i, a in enumerate(sample.args)),
        ),
        {k: tree_map(lambda _, k=k: k in keep, v) for k, v in sample.kwargs.items()},
    )
    return tree_flatten(flags)[0]


def _describe(placements: list) -> str:
    return ",".join("-" if p is None else "".join(str(x) for x in p) for p in placements)


def sweep(rank: int, world_size: int, device: torch.device, ops: list[str], mesh_shape: list[int]) -> dict:
    """Rank side: every sample x combination of ``ops`` on DTensors over a ``mesh_shape`` mesh of ``device``.

    Returns on rank 0 ``{op: [(sample index, placements text, output leaves on CPU | error text)]}``, on other
    ranks ``{"rank": r}`` (the gathered outputs are the same on every rank by construction).
    """
    from torch.distributed.tensor import DTensor, distribute_tensor, init_device_mesh  # deferred: start-up

    mesh = init_device_mesh(device.type, tuple(mesh_shape))
    out: dict = {}
    for name in ops:
        opinfo = _opinfo(name)
        rows = []
        for index, sample in enumerate(samples(name)):
            leaves, spec = tree_flatten(((sample.input, *sample.args), sample.kwargs))
            host = kept_on_cpu(name, sample)
            for combo in combinations([None if h else x for x, h in zip(leaves, host)], tuple(mesh_shape)):
                try:
                    placed = [
                        x if p is None else distribute_tensor(x.to(device), mesh, list(p))
                        for x, p in zip(leaves, combo)
                    ]
                    args, kwargs = tree_unflatten(placed, spec)
                    result = opinfo.op(*args, **kwargs)
                    flat, _ = tree_flatten(result)
                    value = [
                        x.full_tensor().cpu()
                        if isinstance(x, DTensor)
                        else x.cpu()
                        if isinstance(x, torch.Tensor)
                        else x
                        for x in flat
                    ]
                except Exception as exc:  # noqa: BLE001 - recorded per sample, judged in the parent
                    value = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
                rows.append((index, _describe(combo), value))
        out[name] = rows
    return out if rank == 0 else {"rank": rank}


def reference(name: str) -> list:
    """CPU results of OpInfo ``name``'s samples: per sample the output leaves, or the error text."""
    opinfo = _opinfo(name)
    rows = []
    for sample in samples(name):
        try:
            flat, _ = tree_flatten(opinfo.op(sample.input, *sample.args, **sample.kwargs))
            rows.append([x.detach().clone() if isinstance(x, torch.Tensor) else x for x in flat])
        except Exception as exc:  # noqa: BLE001 - an error on CPU too: the sample is not judged
            rows.append(f"{type(exc).__name__}: {exc}")
    return rows


def values_undefined(name: str) -> bool:
    """True for OpInfo ``name`` when its output values are not the CPU's to compare: random ops
    (:func:`neuron_conformance.opsuites.samples.is_random`, from the ``nondeterministic_seeded`` tag; DTensor
    draws a sharded random op from its own offset-based generator, so the values differ from a single-process
    CPU draw by design) and ops with undefined values (``empty*``,
    :func:`~neuron_conformance.opsuites.samples.has_undefined_values`). Their outputs are judged by shape and
    dtype only: an error, a wrong shape or a wrong dtype still fails."""
    from neuron_conformance.opsuites import samples as opinfo_samples  # deferred: the OpInfo database

    return opinfo_samples.is_random(name) or opinfo_samples.has_undefined_values(name)


def judge_op(
    name: str, mesh_id: str, rows: list, expected: list, listed: dtensor_expected.ExpectedFailures | None = None
) -> dict:
    """Judge one op's sweep rows against its CPU :func:`reference` results.

    ``listed``: the expected failures to apply (default: the shipped ones, :func:`expected_failures`).

    Returns:
        ``{"outcome", "combinations", "passed", "failed", "raised" (failed by an exception CPU did not raise),
        "cpu_errors", "first", "problems" (up to :data:`MAX_PROBLEMS` distinct failure texts), "expected_reason",
        "unexplained" (the first failing combination the expected failure's text does not match), "stale_entry"}``:
        ``outcome`` is ``passed``, ``failed``, ``expected``, ``unexpected`` (listed, but a combination failed with
        another text) or ``unexpected-pass`` (listed, and passed on the torch release the list was measured on);
        ``first`` describes the first failing combination (sample index, placements, what differed).
    """
    from neuron_conformance.conformance.verdict.oracle import judge  # deferred: keeps the rank side light
    from neuron_conformance.conformance.verdict.output_dtypes import device_shape_allowed  # deferred: rank side light

    listed = expected_failures() if listed is None else listed
    entry = listed.get(name, mesh_id)
    passed = failed = raised = cpu_errors = 0
    first = unexplained = None
    problems: list[str] = []
    metadata_only = values_undefined(name)
    for index, placements, value in rows:
        ref = expected[index]
        if isinstance(ref, str):
            cpu_errors += 1
            continue
        problem = None
        if isinstance(value, str):
            problem = f"raised {value}"
            raised += 1
        elif len(value) != len(ref):
            problem = f"{len(value)} outputs, CPU gave {len(ref)}"
        else:
            for i, (a, e) in enumerate(zip(value, ref)):
                if isinstance(e, torch.Tensor) and metadata_only:
                    if not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype:
                        got = f"{tuple(a.shape)} {a.dtype}" if isinstance(a, torch.Tensor) else repr(a)
                        problem = f"output {i}: {got}, CPU gave {tuple(e.shape)} {e.dtype} (values not compared)"
                        break
                elif (
                    isinstance(e, torch.Tensor)
                    and isinstance(a, torch.Tensor)
                    and a.shape != e.shape
                    and device_shape_allowed(name, i, a.shape, e.shape)
                ):
                    continue  # output_dtypes rule 2: the CPU leaves it empty (eval-mode batch-norm statistics)
                elif isinstance(e, torch.Tensor):
                    v = judge(a, e)
                    if not v.passed:
                        problem = f"output {i}: {v.message}"
                        break
                elif a != e:
                    problem = f"output {i}: {a!r}, CPU gave {e!r}"
                    break
        if problem is None:
            passed += 1
        else:
            failed += 1
            first = first or f"sample {index}, placements {placements}: {problem}"
            if problem not in problems and len(problems) < MAX_PROBLEMS:
                problems.append(problem)
            if entry is not None and unexplained is None and not entry.explains(problem):
                unexplained = f"sample {index}, placements {placements}: {problem}"
    stale = False
    if entry is None:
        outcome = "failed" if failed else "passed"
    elif failed:
        outcome = "unexpected" if unexplained else "expected"
    else:
        stale = True
        outcome = "unexpected-pass" if listed.strict_passes() else "passed"
    return {
        "outcome": outcome,
        "combinations": passed + failed,
        "passed": passed,
        "failed": failed,
        "raised": raised,
        "cpu_errors": cpu_errors,
        "first": first,
        "problems": problems,
        "expected_reason": entry.reason if entry else None,
        "unexplained": unexplained,
        "stale_entry": stale,
    }
