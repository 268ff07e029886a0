"""Index of where an OpInfo sample reaches each aten overload the schema-derived inputs cannot.

The aten replay suite (``opsuites/test_aten_replay.py``) tests overloads that the generated suite
cannot call: the CPU kernel rejects every schema-derived input (:func:`neuron_conformance.opsuites.generated_inputs.first_accepted`
gives None), or the kernel is unsafe on them (:data:`neuron_conformance.conformance.results.aten_audit.SCHEMA_UNSAFE`). These are the
:func:`targets`. Their inputs come from OpInfo samples instead: a sample run on the CPU under
:class:`neuron_conformance.opsuites.aten_capture.AtenCapture` calls the target itself, or a *related* overload from which
the target's call is derived (:func:`sources_of`):

============  =====================================================================================
relation      the target's call is
============  =====================================================================================
``same``      the captured call of the target (a ``*_backward`` kernel captured in the backward phase)
``out``       the target is the ``out=`` variant (``foo.out``, ``foo_backward.grad_input``) of the
              captured functional overload (:func:`neuron_conformance.conformance.results.coverage.functional_of_out`: same base
              name, same non-out arguments): its arguments plus out tensors of the functional result
``inplace``   the target ``foo_`` is the in-place form of the captured ``foo`` (same overload name and
              arguments): ``self`` cloned and written
``functional`` the target ``foo`` is the functional form of the captured in-place ``foo_``
``copy``      the target ``foo_copy`` is the copying form of the captured view op ``foo`` (the
              ``*_copy`` operators ``native_functions.yaml`` declares for functionalization)
``sibling``   the target ``foo`` and the captured ``_foo`` (or the reverse) take the same arguments: a
              public overload that is ``CompositeImplicitAutograd`` runs as its private twin, so only
              the twin shows under the capture (``adaptive_avg_pool2d`` as ``_adaptive_avg_pool2d``)
============  =====================================================================================

Relations chain (at most :data:`MAX_STEPS`): ``view_as_real_copy.out`` is the ``out`` variant of
``view_as_real_copy``, the ``copy`` form of ``view_as_real``.

The index (:data:`INDEX_FILE`, committed) maps each target reached to its first source:
``{"torch": version, "targets": n, "entries": {target: {"source", "path", "opinfo", "dtype",
"sample", "phase", "nested"}}}`` (``path``: :func:`paths_of`'s steps from the target to the captured
source; ``nested``: whether the capture followed nested calls, :class:`neuron_conformance.opsuites.aten_capture.AtenCapture`). Rebuild it after a torch upgrade with ``python -m neuron_conformance.opsuites.replay_index --write``
(7 minutes measured on 2 shared cores, 18 at a load average of 10: each OpInfo runs its first :data:`SAMPLES_PER_PHASE` samples per phase in
:data:`DTYPES` order, and stops once every source it could give is found).
"""

from __future__ import annotations

import functools
import json
import time
import warnings
from pathlib import Path

import torch

from neuron_conformance.conformance.results import aten_audit, coverage
from neuron_conformance.conformance.results.atomic import write_text_atomic
from neuron_conformance.opsuites.aten_capture import PHASES, AtenCapture, run_sample
from neuron_conformance.opsuites.samples import op_db, sample_inputs

INDEX_FILE = Path(__file__).with_name("aten_replay_index.json")
DTYPES = (torch.float32, torch.int64, torch.bool, torch.complex64)
"""Sample dtypes tried per OpInfo, in order: float first (most kernels and every backward), then integer,
logical and complex kernels (an integer-only overload such as ``gcd`` is reached in ``int64``)."""
SAMPLES_PER_PHASE = 40
"""Samples of one OpInfo, dtype and phase run while indexing: enough to reach the optional-argument
branches OpInfo samples vary (weights, ``reduction``), few enough for a build of a few minutes."""
RELATIONS = ("same", "out", "inplace", "functional", "copy", "sibling")
MAX_STEPS = 2
"""Derivations chained at most (``view_as_real_copy.out`` <- ``view_as_real_copy`` <- ``view_as_real``)."""


@functools.lru_cache(maxsize=1)
def targets() -> tuple[str, ...]:
    """Overloads with a CPU kernel, no :data:`neuron_conformance.conformance.results.aten_audit.EXCLUSIONS` rule, whose schema-derived
    inputs the CPU kernel rejects or which are :data:`neuron_conformance.conformance.results.aten_audit.SCHEMA_UNSAFE`; sorted."""
    from neuron_conformance.opsuites import (
        generated_inputs,
    )  # deferred: only the index build tries schema-derived inputs

    out = []
    for name in aten_audit.cpu_kernel_overloads():
        if aten_audit.exclusion(name) is not None:
            continue
        if name in aten_audit.SCHEMA_UNSAFE:
            out.append(name)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                accepted = generated_inputs.first_accepted(aten_audit.overload_of(name))
            except Exception:  # noqa: BLE001 - a candidate that breaks the builder is a rejection too
                accepted = None
        if accepted is None:
            out.append(name)
    return tuple(sorted(out))


def _inplace_name(name: str) -> str:
    """``aten::foo.X`` -> ``aten::foo_.X``."""
    base, _, overload = name.partition(".")
    return f"{base}_.{overload}" if overload else f"{base}_"


def _functional_name(name: str) -> str | None:
    """``aten::foo_.X`` -> ``aten::foo.X``; None when ``name`` is not in-place by its spelling."""
    base, _, overload = name.partition(".")
    if not base.endswith("_") or base.endswith("__"):
        return None
    return f"{base[:-1]}.{overload}" if overload else base[:-1]


def _same_arguments(a: str, b: str) -> bool:
    """True when overloads ``a`` and ``b`` (both bound) take the same argument names and types."""
    oa, ob = coverage._overload(a), coverage._overload(b)
    if oa is None or ob is None:
        return False
    return [(x.name, str(x.type)) for x in oa._schema.arguments] == [
        (x.name, str(x.type)) for x in ob._schema.arguments
    ]


def parents(target: str) -> list[tuple[str, str]]:
    """``[(overload, relation)]`` from whose call ``target``'s call is derived in one step (the module's
    table, without ``same``)."""
    out = []
    functional = coverage.functional_of_out().get(target)
    if functional is not None:
        out.append((functional, "out"))
    undone = _functional_name(target)
    if undone is not None and _same_arguments(target, undone):
        out.append((undone, "inplace"))
    if _same_arguments(target, _inplace_name(target)):
        out.append((_inplace_name(target), "functional"))
    base, dot, overload = target.partition(".")
    if base.endswith("_copy") and _same_arguments(target, base[:-5] + dot + overload):
        out.append((base[:-5] + dot + overload, "copy"))
    bare = base[len("aten::") :]
    sibling = "aten::" + (bare[1:] if bare.startswith("_") else "_" + bare) + dot + overload
    if _same_arguments(target, sibling):
        out.append((sibling, "sibling"))
    return out


def paths_of(target: str, depth: int = MAX_STEPS) -> list[list[list[str]]]:
    """Derivation paths of ``target``, shortest first: each a list of ``[overload, relation]`` steps from
    the overload to capture (last) to ``target`` (first, relation ``same``), at most ``depth`` derivations
    (``foo_copy.out`` <- ``foo_copy`` <- ``foo``)."""
    paths = [[[target, "same"]]]
    frontier = paths
    for _ in range(depth):
        longer = []
        for path in frontier:
            seen = {step[0] for step in path}
            longer.extend(path + [[p, rel]] for p, rel in parents(path[-1][0]) if p not in seen)
        paths = paths + longer
        frontier = longer
    return paths


def sources_of(target: str) -> list[str]:
    """The overloads whose captured call gives ``target``'s call (last step of each :func:`paths_of`)."""
    return list(dict.fromkeys(path[-1][0] for path in paths_of(target)))


def _index_opinfo(op, wanted: dict[str, list[str]], entries: dict, fallback: dict) -> None:
    """Run ``op``'s first samples under a capture and add an entry for each target a captured name gives.

    ``wanted``: source name -> the targets it can give and that have no entry yet (updated in place).
    A source called only with some zero-element tensor gives a ``fallback`` entry, used when no sample
    calls it with elements (a zero-element call leaves the values unchecked)."""
    for dtype in DTYPES:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        for phase in PHASES:
            if phase == "backward" and not (op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")):
                continue
            samples = sample_inputs(op, "cpu", dtype, requires_grad=phase == "backward")
            try:
                for index, sample in enumerate(samples):
                    if index >= SAMPLES_PER_PHASE or not wanted:
                        break
                    capture = _captured(op, sample, phase)
                    if capture is None:
                        continue
                    for name, full in capture.seen.items():
                        entry = {
                            "source": name,
                            "opinfo": op.full_name,
                            "dtype": str(dtype).removeprefix("torch."),
                            "sample": index,
                            "phase": phase,
                            "nested": capture.nested,
                        }
                        for target in wanted.get(name, ()) if full else ():
                            entries[target] = dict(entry, path=_path(target, name))
                        for target in wanted.get(name, ()) if not full else ():
                            fallback.setdefault(target, dict(entry, path=_path(target, name)))
                        if full:
                            wanted.pop(name, None)
            finally:
                samples.close()


def _captured(op, sample, phase: str):
    """The :class:`AtenCapture` of one sample: nested calls followed, or, when the sample raises that way
    (a kernel that does not tolerate being entered below the Python key), top-level calls only; None when
    the CPU refuses the sample either way."""
    for nested in (True, False):
        capture = AtenCapture(nested=nested)
        try:
            run_sample(op, sample, phase, capture)
        except Exception:  # noqa: BLE001 - a sample the CPU refuses reaches nothing
            continue
        return capture
    return None


def _path(target: str, source: str) -> list:
    return next(path for path in paths_of(target) if path[-1][0] == source)


def build(names=None, *, progress=None) -> dict:
    """The index of ``names`` (default :func:`targets`) from :func:`neuron_conformance.opsuites.samples.op_db`, database order.

    Returns the index document (see the module docstring); ``progress(message)`` is called per OpInfo.
    """
    names = tuple(targets() if names is None else names)
    wanted: dict[str, list[str]] = {}
    for target in names:
        for source in sources_of(target):
            wanted.setdefault(source, []).append(target)
    entries: dict = {}
    fallback: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in op_db():
            if not wanted:
                break
            _index_opinfo(op, wanted, entries, fallback)
            wanted = {s: [t for t in ts if t not in entries] for s, ts in wanted.items()}
            wanted = {s: ts for s, ts in wanted.items() if ts}
            if progress is not None:
                progress(f"{op.full_name}: {len(entries)} of {len(names)} targets indexed")
    for target, entry in fallback.items():
        entries.setdefault(target, entry)
    return {
        "torch": torch.__version__.split("+")[0],
        "targets": len(names),
        "entries": {k: entries[k] for k in sorted(entries)},
    }


def built_on(path: str | Path = INDEX_FILE) -> str | None:
    """The torch release the index was built on (its ``torch`` field), or None when it cannot be read."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("torch") if isinstance(data, dict) else None


def load(path: str | Path = INDEX_FILE) -> dict:
    """The committed index's ``entries`` (target -> entry).

    Raises:
        ValueError: the file is missing, not JSON, or an entry lacks a field or names an unknown relation
            or phase (the message names the file and the target).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"aten replay index {str(path)!r} cannot be read: {exc} (rebuild it with "
            "`python -m neuron_conformance.opsuites.replay_index --write`)"
        ) from None
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ValueError(f"aten replay index {str(path)!r}: no 'entries' object")
    for target, e in entries.items():
        missing = {"source", "path", "opinfo", "dtype", "sample", "phase"} - set(e)
        relations = [step[1] for step in e.get("path") or []] if not missing else []
        if missing or not relations or any(r not in RELATIONS for r in relations) or e["phase"] not in PHASES:
            raise ValueError(
                f"aten replay index {str(path)!r}: entry {target!r} is malformed "
                f"(missing {sorted(missing)}, path {e.get('path')!r}, phase {e.get('phase')!r})"
            )
    return entries


def main(argv: list[str] | None = None) -> int:
    """``python -m neuron_conformance.opsuites.replay_index [--write]``: build the index; print its counts (and write it)."""
    import argparse  # deferred: only the command line needs it

    parser = argparse.ArgumentParser(
        prog="python -m neuron_conformance.opsuites.replay_index", description=main.__doc__
    )
    parser.add_argument("--write", action="store_true", help=f"write {INDEX_FILE.name} beside this module")
    parser.add_argument("--verbose", action="store_true", help="print progress per OpInfo")
    ns = parser.parse_args(argv)
    start = time.monotonic()
    data = build(progress=print if ns.verbose else None)
    by_rel: dict[str, int] = {}
    for e in data["entries"].values():
        key = "<".join(step[1] for step in e["path"][1:]) or "same"
        by_rel[key] = by_rel.get(key, 0) + 1
    print(
        f"{len(data['entries'])} of {data['targets']} targets indexed in {time.monotonic() - start:.0f} s "
        f"(by relation: {by_rel})"
    )
    if ns.write:
        write_text_atomic(INDEX_FILE, json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {INDEX_FILE}")
    return 0


__all__ = [
    "DTYPES",
    "INDEX_FILE",
    "MAX_STEPS",
    "RELATIONS",
    "SAMPLES_PER_PHASE",
    "build",
    "load",
    "main",
    "parents",
    "paths_of",
    "sources_of",
    "targets",
]


if __name__ == "__main__":
    raise SystemExit(main())
