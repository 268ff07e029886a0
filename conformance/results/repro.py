"""Repro files: one failing OpInfo sample saved so that it replays without the harness.

:func:`save_sample_repro` writes, under ``<report-dir>/repro/``:

* ``repro_<id>.pt``: the CPU sample (``input``, ``args``, ``kwargs`` with ``torch.save``) and what it is
  (OpInfo ``full_name``, dtype, sample index, node id);
* ``repro_<id>.py``: a script that imports the backend module (when the device needs one), loads the
  ``.pt``, runs the op on the CPU and on the device, and prints the largest difference of each output.
  ``python repro_<id>.py [--conformance-device TYPE]``. It needs torch (the op is looked up in torch's own OpInfo
  database, ``torch.testing._internal.common_methods_invocations.op_db``), not this harness; for the
  emulated device the backend module is ``neuron_conformance.emulator.backend``.

The one-line pytest command (``--conformance-sample N``) is in every failing record's ``repro`` field; the files'
paths go to its ``repro_files`` field and to ``summary.json``'s ``repro_files``.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

REPRO_DIR = "repro"
MAX_PT_BYTES = 20 * 1024 * 1024
"""A sample larger than this (bytes, as saved) gets no .pt/.py pair, only its pytest command."""

_SCRIPT = '''"""Replay of a failing sample: {nodeid}, sample {sample_index}.

Runs the OpInfo {op!r} ({dtype}) on the CPU and on the device and prints the largest difference of each
output. Written by the conformance harness; needs only torch{backend_note}.

    python {script_name} [--conformance-device TYPE]     (from the directory pytest ran in)
"""

import argparse
import importlib
import os
import pathlib
import sys

OP = {op!r}
DEVICE = {device!r}
BACKEND_MODULE = {backend_module!r}
EMULATOR_MODE = {emulator_mode!r}
DATA = pathlib.Path(__file__).with_suffix(".pt")


def to_device(x, device):
    import torch

    if isinstance(x, torch.Tensor):
        if x.is_contiguous() or x.layout != torch.strided:
            return x.to(device)
        out = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=device)
        return out.copy_(x)
    if isinstance(x, (list, tuple)):
        return type(x)(to_device(v, device) for v in x)
    if isinstance(x, dict):
        return {{k: to_device(v, device) for k, v in x.items()}}
    return x


def flatten(x):
    if isinstance(x, (list, tuple)):
        return [leaf for v in x for leaf in flatten(v)]
    return [x]


def run(op, data, device):
    try:
        return op(to_device(data["input"], device), *to_device(data["args"], device),
                  **to_device(data["kwargs"], device)), None
    except Exception as exc:  # the exception is part of what is compared
        return None, exc


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", "--conformance-device", default=DEVICE, help="device type (default: %(default)s)")
    args = parser.parse_args()
    if EMULATOR_MODE:
        os.environ.setdefault("CONFORMANCE_EMULATOR_MODE", EMULATOR_MODE)
    if BACKEND_MODULE:
        sys.path.insert(0, os.getcwd())  # run from the directory pytest ran in, like the backend module was
        importlib.import_module(BACKEND_MODULE)
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    op = next(o for o in op_db if o.full_name == OP)
    expected, cpu_exc = run(op, torch.load(DATA, weights_only=False), "cpu")
    actual, dev_exc = run(op, torch.load(DATA, weights_only=False), args.device)
    print(f"{{OP}} sample {sample_index} ({dtype}) on {{args.device}} vs cpu")
    if cpu_exc is not None or dev_exc is not None:
        print(f"cpu raised: {{cpu_exc!r}}")
        print(f"device raised: {{dev_exc!r}}")
        return 1 if type(cpu_exc) is not type(dev_exc) else 0
    worst = 0.0
    for i, (e, a) in enumerate(zip(flatten(expected), flatten(actual))):
        if not isinstance(e, torch.Tensor):
            print(f"output {{i}}: cpu {{e!r}}, device {{a!r}}")
            continue
        a = a.cpu()
        if e.shape != a.shape or e.dtype != a.dtype:
            print(f"output {{i}}: cpu {{e.dtype}} {{tuple(e.shape)}}, device {{a.dtype}} {{tuple(a.shape)}}")
            worst = float("inf")
            continue
        if e.is_complex():
            e, a = torch.view_as_real(e), torch.view_as_real(a)
        diff = (e.double() - a.double()).abs()
        same_nan = torch.isnan(e.double()) & torch.isnan(a.double())
        diff = torch.where(same_nan, torch.zeros_like(diff), diff)
        d = float(diff.max()) if diff.numel() else 0.0
        worst = max(worst, d if d == d else float("inf"))
        print(f"output {{i}}: {{e.dtype}} {{tuple(e.shape)}}, max |cpu - device| = {{d:.6g}}")
    print(f"max difference: {{worst:.6g}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def repro_id(nodeid: str, sample_index: int | None) -> str:
    """A file-name-safe id for a failing sample: readable part of the node id plus an 8-digit hash."""
    tail = nodeid.split("::")[-1]
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", tail).strip("_")[:60]
    digest = hashlib.sha1(f"{nodeid}#{sample_index}".encode()).hexdigest()[:8]
    return f"{readable}_s{sample_index}_{digest}"


def save_sample_repro(
    report_dir: str | os.PathLike,
    nodeid: str,
    op_full_name: str,
    sample_index: int,
    dtype: str,
    sample,
    *,
    device_type: str,
    backend_module: str | None = None,
    emulator_mode: str | None = None,
) -> list[str]:
    """Save one CPU sample and a script that replays it; return the two paths relative to ``report_dir``.

    Args:
        report_dir: the run's report directory (files go to its ``repro/``).
        nodeid: the failing test; ``op_full_name``: its OpInfo ``full_name``; ``sample_index``: which sample;
        dtype: dtype name (``float32``); sample: the CPU ``SampleInput`` (``input``, ``args``, ``kwargs``).
        device_type: device the script runs on by default; backend_module: module the script imports first
            (None for built-in devices); emulator_mode: ``device`` to replay the emulator's device mode.

    Returns:
        ``["repro/repro_<id>.py", "repro/repro_<id>.pt"]``, or ``[]`` when the sample cannot be saved
        (an object ``torch.save`` cannot pickle) or is larger than :data:`MAX_PT_BYTES`. Never raises for
        such samples: a repro file is a convenience, the test's result stands without it.
    """
    import torch

    out = Path(report_dir) / REPRO_DIR
    out.mkdir(parents=True, exist_ok=True)
    rid = repro_id(nodeid, sample_index)
    pt, py = out / f"repro_{rid}.pt", out / f"repro_{rid}.py"
    payload = {
        "op": op_full_name,
        "dtype": dtype,
        "sample_index": sample_index,
        "nodeid": nodeid,
        "input": sample.input,
        "args": tuple(sample.args),
        "kwargs": dict(sample.kwargs),
    }
    tmp = pt.with_suffix(".pt.tmp")
    try:
        torch.save(payload, tmp)
        if tmp.stat().st_size > MAX_PT_BYTES:
            tmp.unlink()
            return []
        os.replace(tmp, pt)
    except Exception:  # noqa: BLE001 - unpicklable sample contents (callables, generators): no files
        tmp.unlink(missing_ok=True)
        return []
    note = f" and the backend module {backend_module}" if backend_module else ""
    text = _SCRIPT.format(
        nodeid=nodeid,
        sample_index=sample_index,
        op=op_full_name,
        dtype=dtype,
        device=device_type,
        backend_module=backend_module,
        emulator_mode=emulator_mode,
        backend_note=note,
        script_name=py.name,
    )
    py_tmp = py.with_suffix(".py.tmp")
    py_tmp.write_text(text, encoding="utf-8")
    os.replace(py_tmp, py)
    return [f"{REPRO_DIR}/{py.name}", f"{REPRO_DIR}/{pt.name}"]
