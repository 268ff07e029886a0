"""What ``neuron-migrate prove`` runs inside the script's processes.

* ``python -m neuron_conformance.migrate.prove_probe SCRIPT [ARGS...]`` runs ``SCRIPT`` as ``__main__`` with
  ``sys.argv = [SCRIPT, *ARGS]``, after fixing the seeds a script does not fix itself (``random``, NumPy when
  installed, ``torch``), as :mod:`runpy` would run it from the command line.
* Imported by the ``sitecustomize`` that ``prove`` puts on ``PYTHONPATH`` (so in every Python process the
  script starts: ``mp.spawn`` and ``torchrun`` workers too), it records at exit, in the folder named by
  ``$NEURON_MIGRATE_PROVE_REPORT``, which accelerator the process saw and the peak bytes it allocated there
  (``torch.accelerator.max_memory_allocated()``): that is how ``prove`` tells that the fixed script reached
  the device. It never imports torch itself; a process that did not import torch reports nothing. A process
  that ends with ``os._exit`` (a forked worker) runs no exit handler and reports nothing.
* With ``$NEURON_MIGRATE_PROVE_CPU`` set (the original's run on the CPU, where no CUDA device exists), the
  CUDA calls that change no value, only when the host waits or what the caching allocator holds
  (:data:`NO_EFFECT`: ``torch.cuda.synchronize``, ``empty_cache``, ...), are no-ops in the script's own
  process, counted in the report: a benchmark that calls ``torch.cuda.synchronize()`` unconditionally can
  then be compared at all. Nothing else of ``torch.cuda`` is touched, so a script that needs CUDA for a
  value still fails there.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import runpy
import sys

REPORT_ENV = "NEURON_MIGRATE_PROVE_REPORT"
CPU_ENV = "NEURON_MIGRATE_PROVE_CPU"
SEED = 0
NO_EFFECT = ("synchronize", "empty_cache", "reset_peak_memory_stats", "reset_accumulated_memory_stats", "ipc_collect")
"""``torch.cuda`` functions that return nothing and change no tensor's value: no-ops in the CPU run."""

_no_ops: dict = {}
"""``torch.cuda.<name>`` -> how many times the script called it while it was a no-op."""


def report() -> None:
    """Write ``{"pid", "device", "bytes"}`` for this process into the report folder (see the module docstring)."""
    folder = os.environ.get(REPORT_ENV)
    torch = sys.modules.get("torch")
    if not folder or torch is None or not hasattr(torch, "accelerator"):
        return
    device, used = None, 0
    try:
        acc = torch.accelerator.current_accelerator(check_available=True)
        if acc is not None:
            device = acc.type
            used = int(torch.accelerator.max_memory_allocated())
    except Exception as exc:  # noqa: BLE001 - a probe must never change how the script ends
        device = f"error: {type(exc).__name__}"
    try:
        with open(os.path.join(folder, f"{os.getpid()}.json"), "w") as fh:
            json.dump({"pid": os.getpid(), "device": device, "bytes": used, "no_ops": _no_ops}, fh)
    except OSError:
        pass


def seed_all(seed: int = SEED) -> None:
    """Seed ``random``, NumPy (when installed) and torch."""
    random.seed(seed)
    try:
        import numpy
    except ImportError:
        numpy = None
    if numpy is not None:
        numpy.random.seed(seed)
    import torch

    torch.manual_seed(seed)


def cuda_calls_without_effect_as_no_ops() -> None:
    """Make the :data:`NO_EFFECT` functions of ``torch.cuda`` no-ops, counted in :data:`_no_ops`, when no CUDA
    device is available (a host with one keeps them)."""
    import torch

    if torch.cuda.is_available():
        return
    for name in NO_EFFECT:
        if not callable(getattr(torch.cuda, name, None)):
            continue

        def no_op(*args, _name=f"torch.cuda.{name}", **kwargs):
            _no_ops[_name] = _no_ops.get(_name, 0) + 1

        setattr(torch.cuda, name, no_op)


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        sys.stderr.write("usage: python -m neuron_conformance.migrate.prove_probe SCRIPT [ARGS...]\n")
        raise SystemExit(2)
    script = argv[0]
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    seed_all()
    if os.environ.get(CPU_ENV):
        cuda_calls_without_effect_as_no_ops()
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    # run through the package module, the one sitecustomize imported: one report, one no-op count
    from neuron_conformance.migrate import prove_probe

    prove_probe.main()
elif os.environ.get(REPORT_ENV):
    atexit.register(report)
