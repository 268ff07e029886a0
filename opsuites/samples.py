"""OpInfo selection and sample iteration shared by the op suites.

Uses PyTorch's own OpInfo database (``torch.testing._internal.common_methods_invocations.op_db``);
nothing here copies it. Sample inputs are generated on the CPU (deterministic for a seed, independent of
the device under test) and moved to the device with :func:`neuron_conformance.conformance.backend.transfer.sample_to_device`.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import random
import unittest

import pytest
import torch
from torch.utils._pytree import tree_flatten

from neuron_conformance.conformance.pytest_plugin.seeding import frozen_rng_state, manual_seed

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy is a dependency
    _np = None


@functools.lru_cache(maxsize=1)
def op_db() -> tuple:
    """PyTorch's OpInfo database (702 entries in torch 2.13), imported once per process.

    The database's random ops (dropout, ``nn.functional.*`` with random parts) call
    ``wrapper_set_seed`` on every call, which calls ``torch.manual_seed(42)``; with CUDA, XPU and MTIA
    not initialised each such call formats the Python stack three times to queue lazy seeds (about 2 ms
    under pytest). The database's ``wrapper_set_seed`` is replaced by :func:`_wrapper_set_seed`, which
    seeds the same generators through :func:`neuron_conformance.conformance.pytest_plugin.seeding.manual_seed`.
    """
    from torch.testing._internal import common_methods_invocations as cmi

    if getattr(cmi, "wrapper_set_seed", None) is not _wrapper_set_seed:
        cmi.wrapper_set_seed = _wrapper_set_seed
    return tuple(cmi.op_db)


def _wrapper_set_seed(op, *args, **kwargs):
    """``torch.testing._utils.wrapper_set_seed`` with :func:`neuron_conformance.conformance.pytest_plugin.seeding.manual_seed`: run ``op``
    with every initialised generator seeded with 42, restoring the RNG states after.

    A call on the CPU (no tensor argument off the CPU, no ``device=`` argument, the default device the CPU)
    is a CPU reference: it seeds and restores the CPU generator only, so it never depends on the device
    under test. A call on the device seeds the device too and freezes its RNG state where the device
    module has one (:func:`neuron_conformance.conformance.pytest_plugin.seeding.frozen_rng_state`: a backend
    without ``get_rng_state`` is charged once, by the device-API check, not on every random op).
    """
    if _on_cpu_only(args, kwargs):
        state = torch.random.default_generator.get_state()
        try:
            torch.random.default_generator.manual_seed(42)
            return op(*args, **kwargs)
        finally:
            torch.random.default_generator.set_state(state)
    with frozen_rng_state():
        manual_seed(42)
        output = op(*args, **kwargs)
        if isinstance(output, torch.Tensor) and output.device.type == "lazy":
            torch._lazy.mark_step()  # type: ignore[attr-defined]
        return output


def _on_cpu_only(args, kwargs) -> bool:
    """True when a call's tensors and ``device=`` arguments are all on the CPU and the default device is
    the CPU (a factory call under ``with torch.device(dev)`` runs on ``dev``)."""
    if torch.get_default_device().type != "cpu":
        return False
    leaves, _ = tree_flatten((args, kwargs))
    for x in leaves:
        if isinstance(x, torch.Tensor) and x.device.type != "cpu":
            return False
        if isinstance(x, torch.device) and x.type != "cpu":
            return False
    dev = kwargs.get("device")
    return dev is None or torch.device(dev).type == "cpu"


@functools.lru_cache(maxsize=None)
def opinfo_by_name() -> dict:
    """OpInfo ``full_name`` -> OpInfo."""
    return {op.full_name: op for op in op_db()}


def _aten_tags(name: str) -> set:
    packet = getattr(torch.ops.aten, name, None)
    tags: set = set()
    if packet is None:
        return tags
    try:
        for ov in packet.overloads():
            tags.update(getattr(packet, ov).tags)
    except (AttributeError, RuntimeError):
        pass
    return tags


# Seeded-tagged ops that are deterministic in their OpInfo samples (dropout_p = 0 / no RNG use).
_SEEDED_BUT_DETERMINISTIC = {
    "nn.functional.scaled_dot_product_attention",
    "torch.ops.aten._flash_attention_forward",
    "torch.ops.aten._efficient_attention_forward",
    "signal.windows.exponential",
    "nn.functional.feature_alpha_dropout.without_train",
}


@functools.lru_cache(maxsize=None)
def is_random(full_name: str) -> bool:
    """True for ops whose output depends on the RNG stream: values are not compared with CPU.

    Decided from the ``nondeterministic_seeded`` tag of the op's aten overloads (torch's own
    native_functions.yaml tags) and, for Python-level ops with no aten name, from ``dropout`` in the name.
    """
    if full_name in _SEEDED_BUT_DETERMINISTIC:
        return False
    op = opinfo_by_name()[full_name]
    names = {op.aten_name, op.name.split(".")[-1]}
    if any(torch.Tag.nondeterministic_seeded in _aten_tags(n) for n in names if n):
        return True
    return "dropout" in op.name and "without_train" not in full_name


DEFINED_UP_TO_GAUGE = frozenset({"svd", "linalg.svd", "svd_lowrank", "pca_lowrank", "linalg.eig", "linalg.eigh"})
"""OpInfos whose outputs are defined only up to a sign or a phase: ``torch.linalg.svd`` ("the singular vectors
are unique up to a sign" for real inputs, "up to multiplication by a complex number of absolute value 1"
otherwise), ``torch.linalg.eig``/``eigh`` (eigenvectors likewise), and the low-rank SVD/PCA built on them.
On a backend that does not mirror the CPU their outputs are compared through each sample's
``output_process_fn_grad`` (``abs()`` of the vectors, ``U @ Vh``), as PyTorch's own ``test_compare_cpu`` and
gradient checks compare them (:func:`gauge_free`)."""


def gauge_free(op, sample, result):
    """``result`` as the sample's ``output_process_fn_grad`` makes it for an op of :data:`DEFINED_UP_TO_GAUGE`
    (unchanged for other ops, or when the processing raises: the raw outputs are then compared)."""
    if op.full_name not in DEFINED_UP_TO_GAUGE:
        return result
    try:
        return sample.output_process_fn_grad(result)
    except Exception:  # noqa: BLE001 - a processing that does not apply to this result: compare it raw
        return result


def random_sample_reason(op, sample) -> str | None:
    """Why one sample input's values depend on the RNG stream although the op's do not always, or None.

    * ``dropout_p > 0`` while training (``scaled_dot_product_attention``: "if greater than 0.0, dropout is
      applied"; ``multi_head_attention_forward`` with ``training=True``): the mask is drawn from the
      device's generator, whose stream is not the CPU's (PyTorch's "Reproducibility" notes: results are
      not reproducible between CPU and GPU executions, even with identical seeds);
    * ``fractional_max_pool2d/3d`` without ``_random_samples``: the pooling regions are drawn the same way.

    Such a sample's outputs are compared in shape, dtype and device only (rule ``random``); the random_ops
    suite judges the distributions.
    """
    bound = _bound_arguments(op, sample)
    p = bound.get("dropout_p")
    if isinstance(p, (int, float)) and not isinstance(p, bool) and p > 0 and bound.get("training", True):
        return f"dropout_p={p}"
    if "fractional_max_pool" in op.name and bound.get("_random_samples") is None:
        return "pooling regions drawn from the generator (no _random_samples)"
    return None


def _bound_arguments(op, sample) -> dict:
    """The sample's arguments by parameter name, from the signature of the function the OpInfo calls (or of
    ``torch.nn.functional.<name>`` when the OpInfo wraps it in a ``lambda *args, **kwargs``), else its
    keyword arguments."""
    candidates = [op.op]
    if op.name.startswith("nn.functional."):
        candidates.append(getattr(torch.nn.functional, op.name.removeprefix("nn.functional."), None))
    for fn in candidates:
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            continue
        kinds = {p.kind for p in signature.parameters.values()}
        if inspect.Parameter.VAR_POSITIONAL in kinds:
            continue
        try:
            bound = signature.bind_partial(sample.input, *sample.args, **sample.kwargs)
        except TypeError:
            continue
        defaults = {k: p.default for k, p in signature.parameters.items() if p.default is not inspect.Parameter.empty}
        return {**defaults, **bound.arguments}
    return dict(sample.kwargs)


@functools.lru_cache(maxsize=None)
def has_undefined_values(full_name: str) -> bool:
    """True for ops whose output values are undefined (``empty*``): only metadata is compared.

    Source: ``OpInfo.has_nondeterministic_output`` is not set consistently, so the ``empty`` family is
    also recognised by name.
    """
    op = opinfo_by_name()[full_name]
    return bool(getattr(op, "has_nondeterministic_output", False)) or op.name.startswith(("empty", "new_empty"))


@functools.lru_cache(maxsize=None)
def reference_skipped_upstream(full_name: str, test_name: str = "test_compare_cpu") -> bool:
    """True when PyTorch's OpInfo skips (or expects to fail) its own ``test_name`` for the op on every
    device and dtype (a ``DecorateInfo`` with no ``device_type`` and no ``dtypes``).

    For ``test_compare_cpu``: the op has implementation-defined results (e.g. shifts past the bit width);
    its values are then compared only when the backend mirrors the CPU kernels. For ``test_out``: the op's
    ``out=`` does not follow the standard contract on any device (e.g. ``torch.lu`` copies into ``out``
    in Python, so an ``out`` on another device does not raise).
    """
    from torch.testing._internal.opinfo.core import DecorateInfo

    op = opinfo_by_name()[full_name]
    for info in list(op.decorators) + list(op.skips):
        if (
            isinstance(info, DecorateInfo)
            and info.test_name == test_name
            and info.device_type is None
            and info.dtypes is None
        ):
            for deco in info.decorators:
                if getattr(deco, "__qualname__", "").startswith("skip") or deco is unittest.expectedFailure:
                    return True
    return False


def opinfo_dtypes(op, selected: tuple[str, ...]) -> list[str]:
    """Names of the ``selected`` dtypes that ``op`` supports on the CPU (the reference device)."""
    supported = op.supported_dtypes("cpu")
    return [name for name in selected if getattr(torch, name) in supported]


def opinfo_pairs(selected: tuple[str, ...], *, predicate=None) -> list[tuple[str, str]]:
    """``(full_name, dtype name)`` for every OpInfo (database order) x selected dtype it supports on the
    CPU, keeping OpInfos for which ``predicate(op)`` is true. Imports the OpInfo database."""
    pairs = []
    for op in op_db():
        if predicate is not None and not predicate(op):
            continue
        pairs.extend((op.full_name, dt) for dt in opinfo_dtypes(op, selected))
    return pairs


@functools.lru_cache(maxsize=1)
def _database_fingerprint() -> str:
    """What the OpInfo database depends on: torch version and build, and the size and modification time
    of ``common_methods_invocations.py`` and every file of ``torch/testing/_internal/opinfo/``. Read with
    ``stat`` only (the database is not imported)."""
    import importlib.util

    parts = [torch.__version__, str(getattr(torch.version, "git_version", ""))]
    spec = importlib.util.find_spec("torch.testing._internal")
    base = list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None
    if base:
        paths = [os.path.join(base, "common_methods_invocations.py")]
        for root, _dirs, files in os.walk(os.path.join(base, "opinfo")):
            paths += [os.path.join(root, f) for f in files if f.endswith(".py")]
        for path in sorted(paths):
            try:
                st = os.stat(path)
            except OSError:
                continue
            parts.append(f"{os.path.relpath(path, base)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _file_digest(path: str | None) -> str:
    if not path:
        return ""
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return ""


def cached_rows(cache, token: str, compute, *, sources=(), selected: tuple[str, ...] = ()) -> list:
    """``compute()`` (a JSON-able list of ``[full_name, dtype name or None]`` rows computed from the OpInfo
    database), kept in pytest's cache (``config.cache``) so that collection does not import the database
    (about 6 s of the 10 s budget of ``pytest --collect-only``).

    Args:
        cache: ``config.cache``, or None (no cache, e.g. ``-p no:cacheprovider``): computed every time.
        token: everything else the rows depend on (suite, variant, options).
        compute: builds the rows; called on a cache miss.
        sources: files whose content the rows depend on (the modules defining the filters); callables
            are accepted and stand for the file that defines them.
        selected: dtype names (``--conformance-dtypes``).

    The key hashes ``token``, ``selected``, the content of this module and of ``sources``, and
    :func:`_database_fingerprint` (torch version and the OpInfo source files), so any change of what
    decides the rows recomputes them. ``pytest --cache-clear`` drops them too. A corrupt or foreign
    value is ignored and recomputed.
    """
    if cache is None:
        return compute()
    files = sorted({_source_file(x) or "" for x in sources} - {""})
    key_src = json.dumps(
        [list(selected), token, _file_digest(__file__), [_file_digest(f) for f in files], _database_fingerprint()]
    )
    key = "conformance/opinfo-params/" + hashlib.sha256(key_src.encode()).hexdigest()[:32]
    stored = cache.get(key, None)
    if isinstance(stored, list) and all(isinstance(r, list) and len(r) == 2 and isinstance(r[0], str) for r in stored):
        return stored
    rows = [list(r) for r in compute()]
    try:
        cache.set(key, rows)
    except OSError:  # read-only checkout: the cache is an optimisation only
        pass
    return rows


def _source_file(x) -> str | None:
    if x is None:
        return None
    if isinstance(x, (str, os.PathLike)):
        return os.fspath(x)
    code = getattr(x, "__code__", None)
    return code.co_filename if code is not None else getattr(x, "__file__", None)


def cached_opinfo_pairs(
    selected: tuple[str, ...], *, predicate=None, cache=None, token: str = "", module_file: str | None = None
) -> list[tuple[str, str]]:
    """:func:`opinfo_pairs` through :func:`cached_rows` (``module_file``: the test module defining
    ``predicate``; the file that defines ``predicate`` itself is hashed too)."""
    rows = cached_rows(
        cache,
        token,
        lambda: opinfo_pairs(selected, predicate=predicate),
        sources=(module_file, predicate),
        selected=selected,
    )
    return [(r[0], r[1]) for r in rows]


DEVICE_RESTRICTIONS = {"onlyCUDA": "cuda", "onlyCPU": "cpu"}
"""``common_device_type`` decorators that restrict every test of an OpInfo to one device type -> that type."""


def device_restriction(op) -> str | None:
    """The one device type ``op``'s OpInfo is meant for, where a comparison with the CPU has no meaning,
    or None.

    PyTorch's device-generic tests run an OpInfo decorated with ``onlyCUDA`` or ``onlyCPU`` on that device
    type only (``torch/testing/_internal/common_device_type.py``: the decorator skips every other device
    type); a decorator inside a ``DecorateInfo`` counts when it applies to every test (``test_name`` None)
    and every device type. Two cases follow: ``onlyCPU`` (``sparse.mm.reduce``) is not meant for an
    accelerator; ``onlyCUDA`` whose function is defined by ``torch.cuda`` (the jiterator ops: a kernel
    compiled for CUDA at run time) has no CPU reference, so the CPU raises and a device that computes it
    would be judged a ``wrong-error``. Other ``onlyCUDA`` OpInfos (``_scaled_mm_v2``,
    ``batch_norm.without_cudnn``) call ops with CPU kernels and are compared as usual.
    """
    for info in getattr(op, "decorators", ()) or ():
        inner = getattr(info, "decorators", None)
        if inner is not None and (getattr(info, "test_name", None) is not None or info.device_type is not None):
            continue
        for deco in inner if inner is not None else (info,):
            restricted = DEVICE_RESTRICTIONS.get(getattr(deco, "__name__", ""))
            if restricted == "cpu" or (restricted == "cuda" and _defined_by_torch_cuda(getattr(op, "op", None))):
                return restricted
    return None


def _defined_by_torch_cuda(fn) -> bool:
    module = getattr(fn, "__module__", None) or type(fn).__module__ or ""
    return module == "torch.cuda" or module.startswith("torch.cuda.")


@functools.lru_cache(maxsize=None)
def restriction_marks(name: str) -> tuple:
    """The marks of OpInfo ``name``'s tests from its device restriction (:func:`device_restriction`): a skip
    naming it, or none."""
    restricted = device_restriction(opinfo_by_name().get(name))
    if restricted is None:
        return ()
    return (pytest.mark.skip(reason=f"OpInfo {name} is restricted to {restricted} (PyTorch runs it there only)"),)


def opinfo_params(
    selected: tuple[str, ...],
    suite: str,
    *,
    variant: str = "function",
    predicate=None,
    cache=None,
    module_file: str | None = None,
) -> list:
    """``pytest.param(full_name, dtype)`` for every OpInfo x selected dtype, with readable ids
    (``add-float32``), the ``conformance`` marker and an ``xdist_group`` per op (so ``--dist loadgroup``
    keeps an op's tests on one worker).

    ``cache`` and ``module_file``: see :func:`cached_opinfo_pairs` (None: no cache).
    """
    mark_conf, mark_group, param = pytest.mark.conformance, pytest.mark.xdist_group, pytest.param
    groups: dict = {}
    params = []
    for name, dt in cached_opinfo_pairs(
        selected, predicate=predicate, cache=cache, token=f"{suite}|{variant}", module_file=module_file
    ):
        group = groups.get(name)
        if group is None:
            group = groups[name] = mark_group(name)
        marks = [mark_conf(op=name, dtype=dt, variant=variant, suite=suite), group, *restriction_marks(name)]
        params.append(param(name, dt, id=f"{name}-{dt}", marks=marks))
    return params


def _reseed_cpu(seed: int) -> None:
    """What ``common_utils.set_rng_seed`` does for the CPU: seed torch's default CPU generator, ``random``
    and NumPy; without ``torch.manual_seed``'s per-device work (CUDA/XPU/MTIA lazy seeding formats the
    whole Python stack on every call when those devices are not initialised)."""
    torch.random.default_generator.manual_seed(seed)
    random.seed(seed)
    if _np is not None:
        _np.random.seed(seed)


def _seed_devices(seed: int) -> None:
    """Seed every device generator except the CPU's with ``seed`` (``torch.manual_seed`` without touching
    the CPU generator's state).

    Sample generation is CPU work and must not depend on the device under test: a device whose seeding
    raises is left unseeded here (its RNG is exercised, and fails, in the device-side calls).
    """
    state = torch.random.default_generator.get_state()
    try:
        manual_seed(seed)
    except Exception:  # noqa: BLE001 - a device RNG failure is reported by the device-side call
        pass
    finally:
        torch.random.default_generator.set_state(state)


def sample_inputs(op, device, dtype: torch.dtype, requires_grad: bool = False, **kwargs):
    """Iterate ``op.sample_inputs(device, dtype, requires_grad, **kwargs)`` with the same samples, the same
    random values and the same generator states, at a fraction of the cost.

    ``OpInfo.sample_inputs`` wraps the samples in ``TrackedInputIter`` (torch/testing/_internal/
    common_utils.py), which (1) calls ``inspect.stack()`` twice per call to find a ``unittest`` test
    (none under pytest, so the seed is ``common_utils.SEED``), reading the source of every frame of
    pytest's deep stack, and (2) calls ``set_rng_seed(SEED)`` -> ``torch.manual_seed`` before every
    sample, which formats the Python stack three times (lazy CUDA/XPU/MTIA seeding). Here the CPU
    generators are reseeded before every sample exactly as ``set_rng_seed`` does, and the other devices'
    generators are seeded once when iteration stops (their state then matches the original's: seeded
    with ``SEED``; sample generation runs on ``device`` = CPU and does not draw from them).

    Falls back to ``op.sample_inputs`` for what this does not reproduce: ``device`` not the CPU,
    ``use_subtests``, ``include_conjugated_inputs``, ``set_seed=False``, or
    ``PYTORCH_OPINFO_SAMPLE_INPUT_INDEX`` set.
    """
    from torch.testing._internal import common_utils

    special = {"use_subtests", "include_conjugated_inputs", "set_seed"} & set(kwargs)
    if special or str(device) != "cpu" or common_utils.OPINFO_SAMPLE_INPUT_INDEX is not None:
        yield from op.sample_inputs(device, dtype, requires_grad=requires_grad, **kwargs)
        return
    seed = common_utils.SEED
    it = iter(op.sample_inputs_func(op, device, dtype, requires_grad, **kwargs))
    try:
        while True:
            _reseed_cpu(seed)
            try:
                sample = next(it)
            except StopIteration:
                return
            yield sample
    finally:
        _seed_devices(seed)


def cpu_samples(op, dtype: torch.dtype, *, requires_grad: bool = False, only: int | None = None) -> list:
    """``[(index, SampleInput)]`` of ``op`` on the CPU for ``dtype``; ``only`` keeps one index.

    Samples come from :func:`sample_inputs` (same samples as ``op.sample_inputs("cpu", dtype)``).

    Raises:
        ValueError: ``only`` is not the index of a sample (``--conformance-sample`` past the last one, or negative):
            a replay of a sample that does not exist must not read as a pass.
    """
    samples = sample_inputs(op, "cpu", dtype, requires_grad=requires_grad)
    out, seen = [], 0
    for i, s in enumerate(samples):
        seen = i + 1
        if only is None or i == only:
            out.append((i, s))
        if only is not None and i >= only:
            break
    samples.close()
    if only is not None and not out:
        raise ValueError(
            f"--conformance-sample {only}: {op.name} has {seen} sample input(s) in "
            f"{str(dtype).removeprefix('torch.')} (indices 0 to {seen - 1})"
        )
    return out
