"""Run scripts one after another in this interpreter and write what each did as JSON (for test_migrate_proof).

Usage: ``python proof_runner.py EXPECT MANIFEST OUT``: EXPECT is ``cpu`` (the interpreter must see no
accelerator) or ``neuron`` (the emulated device must already be installed, e.g. by ``$CONFORMANCE_EMULATOR``
through the ``torch.backends`` entry point; this runner never installs it). MANIFEST is a JSON list of
``[name, script path]``; each script runs with :func:`runpy.run_path` as ``__main__``, in its own folder, with
``torch.manual_seed(0)``, a 60 s alarm and its stdout captured. OUT gets ``{name: {"ok", "error", "stdout",
"values"}}``: ``error`` is the exception's type name (None when it ran to the end), ``values`` the module's
plain results (numbers, strings, booleans, small tensors as ``[device type, dtype, values]``).
"""

import contextlib
import io
import json
import os
import runpy
import signal
import sys

import torch

PLAIN = (bool, int, float, str, type(None))


def summary(value):
    """A JSON-able summary of a plain module-level value, or None for anything else (functions, modules...)."""
    if isinstance(value, PLAIN):
        return value if not isinstance(value, float) else round(value, 6)
    if isinstance(value, torch.device):
        return ["device", value.type]
    if isinstance(value, torch.Tensor) and value.numel() <= 64 and value.layout == torch.strided:
        return [value.device.type, str(value.dtype), value.detach().cpu().double().flatten().tolist()]
    if isinstance(value, (list, tuple)) and len(value) <= 64:
        parts = [summary(v) for v in value]
        return parts if all(p is not None or v is None for p, v in zip(parts, value)) else None
    return None


def _alarm(signum, frame):
    raise TimeoutError("script ran past 60 s")


def run_one(path):
    """Run one script; returns its record (see the module docstring)."""
    out = io.StringIO()
    cwd = os.getcwd()
    argv = sys.argv
    error, message, values = None, "", {}
    os.chdir(os.path.dirname(path))
    sys.argv = [path]
    torch.manual_seed(0)
    signal.alarm(60)
    try:
        with contextlib.redirect_stdout(out):
            ns = runpy.run_path(path, run_name="__main__")
        values = {k: s for k, v in ns.items() if not k.startswith("_") and (s := summary(v)) is not None}
    except BaseException as exc:  # noqa: BLE001 - what the script raised is the observation
        error = type(exc).__name__
        message = (str(exc).splitlines() or [""])[0][:300]
    finally:
        signal.alarm(0)
        os.chdir(cwd)
        sys.argv = argv
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    return {"ok": error is None, "error": error, "message": message, "stdout": out.getvalue(), "values": values}


def main():
    expect, manifest, dest = sys.argv[1:4]
    acc = torch.accelerator.current_accelerator(check_available=True)  # a CUDA build without a GPU is the CPU
    seen = acc.type if acc is not None else "cpu"
    if seen != expect:
        sys.stderr.write(f"proof_runner: expected accelerator {expect!r}, this interpreter has {seen!r}\n")
        raise SystemExit(2)
    signal.signal(signal.SIGALRM, _alarm)
    with open(manifest) as fh:
        scripts = json.load(fh)
    records = {name: run_one(path) for name, path in scripts}
    with open(dest, "w") as fh:
        json.dump(records, fh)


if __name__ == "__main__":
    main()
