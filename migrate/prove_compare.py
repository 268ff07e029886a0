"""How ``neuron-migrate prove`` compares two runs of a script: what they printed and the checkpoints they saved.

Printed text is compared line by line. Numbers are compared within a tolerance (``|a - b| <= atol + rtol *
|b|``), device names (``cpu``, ``cuda``, ``neuron``, ``mps``, ``xpu``, with an index, or as ``device(type=...)``)
are taken as equal, since the point of the fix is that the second run uses another device; durations (a
number followed by ``s``, ``ms``, ``sec``, ``seconds``, ``it/s``..., or after ``ms/batch``, ``s/it``...) and lines
matching a user's ``--ignore`` pattern are not compared. Checkpoints are files the run wrote with a checkpoint suffix (:data:`CHECKPOINT_SUFFIXES`);
they are loaded onto the CPU and their tensors and numbers compared (tensors with :func:`torch.allclose` and the
same tolerance, else as a whole, by their normwise relative difference within ``rtol``: :func:`_tensor_difference`;
containers element by element); strings and other objects, such as a saved configuration that names the
device, are not compared.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import List, Optional, Sequence

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".tar", ".safetensors")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_DURATION = re.compile(
    r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?\s*(?:ms|us|µs|ns|s|sec|secs|seconds|minutes|min|it/s|s/it)\b"
)
_DEVICE = re.compile(r"device\(type='\w+'(?:, index=\d+)?\)|\b(?:cpu|cuda|neuron|mps|xpu|privateuseone)(?::\d+)?\b")


#: A duration written after its unit (``ms/batch 71.47``, ``s/it: 0.5``).
_RATE = re.compile(r"\b(?:ms|us|s|sec|secs|seconds)/\w+\s*[:=]?\s*[-+]?(?:\d+\.\d*|\.\d+|\d+)")


def _normalise(line: str) -> str:
    return _DEVICE.sub("<device>", _DURATION.sub("<duration>", _RATE.sub("<duration>", line)))


def _numbers_close(a: str, b: str, rtol: float, atol: float) -> bool:
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return abs(x - y) <= atol + rtol * abs(y)


def compare_lines(a: str, b: str, rtol: float, atol: float) -> bool:
    """Whether two printed lines agree (see the module docstring)."""
    a, b = _normalise(a), _normalise(b)
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    return all(_numbers_close(x, y, rtol, atol) for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b)))


def _masked(text: str, ignore: Sequence[re.Pattern], mask: Sequence[re.Pattern]) -> List[str]:
    out = []
    for line in text.splitlines():
        if any(p.search(line) for p in ignore):
            continue
        for p in mask:
            line = p.sub("<masked>", line)
        out.append(line)
    return out


def compare_output(
    expected: str,
    actual: str,
    rtol: float,
    atol: float,
    ignore: Sequence[re.Pattern] = (),
    mask: Sequence[re.Pattern] = (),
) -> Optional[str]:
    """None when ``actual`` (the fixed run's output) agrees with ``expected`` (the original's), else where
    they first differ: ``"printed line 12: 'loss 0.52' != 'loss 0.61'"``. Lines matching an ``ignore`` pattern
    are left out, text matching a ``mask`` pattern is not compared."""
    ex = _masked(expected, ignore, mask)
    ac = _masked(actual, ignore, mask)
    for i, (x, y) in enumerate(zip(ex, ac), 1):
        if not compare_lines(x, y, rtol, atol):
            return f"printed line {i}: {x.strip()[:120]!r} != {y.strip()[:120]!r}"
    if len(ex) != len(ac):
        extra = ex[len(ac)] if len(ex) > len(ac) else ac[len(ex)]
        return f"printed line {min(len(ex), len(ac)) + 1}: {len(ex)} lines != {len(ac)} lines (first extra: {extra.strip()[:120]!r})"
    return None


def _tensor_difference(x, y, where: str, rtol: float) -> Optional[str]:
    """Where floating tensors ``x`` (the original's) and ``y`` that are not elementwise close differ, or None
    when they agree as a whole: the same non-finite entries, and a normwise relative difference
    ``||x - y|| <= rtol * ||x||`` over the finite ones. A training run's weights collect rounding differences
    (a fused kernel, another summation order) that an optimiser such as Adam can make large for a few
    elements; the normwise relative error (Higham, "Accuracy and Stability of Numerical Algorithms", ch. 1)
    still tells such a run from one that learned something else."""
    import torch

    xd, yd = (
        x.to(torch.complex128 if x.is_complex() else torch.float64),
        y.to(torch.complex128 if y.is_complex() else torch.float64),
    )
    finite = torch.isfinite(xd)
    if not torch.equal(finite, torch.isfinite(yd)) or not torch.equal(xd[~finite], yd[~finite]):
        return f"{where}: non-finite values differ"
    delta = xd[finite] - yd[finite]
    largest = delta.abs().max().item() if delta.numel() else 0.0
    scale = xd[finite].norm().item()
    relative = delta.norm().item() / scale if scale else float("inf")
    if relative <= rtol:
        return None
    return f"{where}: max abs difference {largest:.3g}, normwise relative difference {relative:.3g}"


def _compare_values(a, b, where: str, rtol: float, atol: float) -> Optional[str]:
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return (
                f"{where}: a tensor in one run, {type(b if isinstance(a, torch.Tensor) else a).__name__} in the other"
            )
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{where}: {tuple(a.shape)} {a.dtype} != {tuple(b.shape)} {b.dtype}"
        x, y = a.detach().cpu(), b.detach().cpu()
        if x.is_floating_point() or x.is_complex():
            if not torch.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True):
                return _tensor_difference(x, y, where, rtol)
        elif not torch.equal(x, y):
            return f"{where}: values differ"
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        only = [k for k in set(a) ^ set(b) if _holds_tensors(a.get(k, b.get(k)))]
        if only:
            return f"{where}: {sorted(map(str, only))[:5]} saved by one run only"
        for k in [k for k in a if k in b]:
            found = _compare_values(a[k], b[k], f"{where}[{k!r}]", rtol, atol)
            if found:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: {len(a)} items != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            found = _compare_values(x, y, f"{where}[{i}]", rtol, atol)
            if found:
                return found
        return None
    if isinstance(a, float) and isinstance(b, float):
        return None if _numbers_close(str(a), str(b), rtol, atol) else f"{where}: {a!r} != {b!r}"
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return None if _numbers_close(str(a), str(b), rtol, atol) else f"{where}: {a!r} != {b!r}"
    # strings, configuration and other objects are not the script's results (a saved configuration names the
    # device and dtype the run chose, which the fix changes on purpose)
    return None


def _holds_tensors(value) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, dict):
        return any(_holds_tensors(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_tensors(v) for v in value)
    return False


def load_checkpoint(path: Path):
    """A checkpoint's content with every tensor on the CPU."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path), device="cpu")
    import torch

    return torch.load(str(path), map_location="cpu", weights_only=False)


def _load_in(folder: Path, path: Path):
    """:func:`load_checkpoint` with the run's folder importable (a pickled model names the script's classes)."""
    sys.path.insert(0, str(folder))
    try:
        return load_checkpoint(path)
    finally:
        sys.path.remove(str(folder))


def compare_checkpoints(
    expected_dir: Path, actual_dir: Path, names: List[str], rtol: float, atol: float
) -> Optional[str]:
    """None when every checkpoint in ``names`` (paths relative to both folders) holds the same values in both,
    else where they first differ."""
    for name in names:
        a_path, b_path = expected_dir / name, actual_dir / name
        if not b_path.exists():
            return f"checkpoint {name}: written by the original only"
        try:
            a, b = _load_in(expected_dir, a_path), _load_in(actual_dir, b_path)
        except Exception as exc:  # noqa: BLE001 - an unreadable checkpoint is a difference to report
            return f"checkpoint {name}: cannot be loaded ({type(exc).__name__}: {str(exc)[:100]})"
        found = _compare_values(a, b, f"checkpoint {name}", rtol, atol)
        if found:
            return found
    return None
