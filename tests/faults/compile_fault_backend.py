"""Backend module for the compile-suite fault tests: the emulated device, right in eager mode, wrong only
where ``torch.compile`` goes.

Importing it installs the emulator (mode ``$CONFORMANCE_EMULATOR_MODE``) and registers the ``torch.compile``
backend :data:`FAULTY_BACKEND` (pass ``--conformance-compile-backend=neuron_faulty``): the emulator's
``neuron`` backend (AOT autograd over the eager kernels) behind three faults, each touching only the graphs
that call one function, so the other ops of the same run are its control:

* ``torch.add`` -> ``torch.sub``: an FX pass over Dynamo's graph swaps the target (a wrong lowering);
  ``a + b`` (``operator.add``) is left alone;
* ``torch.mul``: the backend compiler raises (``compile-error``);
* ``torch.sin``: the backward graph raises when it runs (``compiled-run-error``, stage ``backward``).

With ``$CONFORMANCE_COMPILE_PY_FAULT=1`` it also replaces ``torch.nn.functional.softsign`` (before the
OpInfo database is imported, so OpInfo ``nn.functional.softsign`` calls it) by a Python override that, for a
``neuron`` input, checks its values are finite before calling the original: what a backend's Python-level
input check looks like. Eager results are unchanged; Dynamo cannot trace a branch on tensor values, so the
device's compiled function breaks the graph where the CPU's does not (``graph-break``).
"""

from __future__ import annotations

import os
import warnings

import torch

import neuron_conformance.emulator.backend as emulator_backend
from neuron_conformance.emulator import compile as emulator_compile

CONFORMANCE_MIRRORS_CPU = emulator_backend.CONFORMANCE_MIRRORS_CPU
"""As the emulator's backend module: bitwise comparisons in mirror mode."""
CONFORMANCE_CAPABILITIES = emulator_backend.CONFORMANCE_CAPABILITIES
"""As the emulator's: ``compile`` and ``compile_dynamic`` claimed, ``inductor`` not."""
CONFORMANCE_COUNT_OPS = emulator_backend.CONFORMANCE_COUNT_OPS
"""The emulator's op counter (aten coverage without a dispatch mode)."""

FAULTY_BACKEND = "neuron_faulty"
PY_FAULT_ENV = "CONFORMANCE_COMPILE_PY_FAULT"


def _raising_backward(gm, example_inputs):
    def run(args):
        raise RuntimeError("neuron_faulty: the compiled backward of a graph calling torch.sin failed on the device")

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def _calls(gm) -> set:
    return {n.target for n in gm.graph.nodes if n.op == "call_function"}


def faulty_backend(gm: torch.fx.GraphModule, example_inputs):
    """The ``neuron_faulty`` backend (module docstring)."""
    from torch._dynamo.backends.common import aot_autograd  # deferred: only a compile reaches it

    calls = _calls(gm)
    if torch.mul in calls:
        raise RuntimeError("neuron_faulty: no lowering for torch.mul")
    if torch.add in calls:
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target is torch.add:
                node.target = torch.sub
        gm.recompile()
    if torch.sin in calls:
        return aot_autograd(fw_compiler=emulator_compile._compile_graph, bw_compiler=_raising_backward)(
            gm, example_inputs
        )
    return emulator_compile.make_backend()(gm, example_inputs)


def _register() -> None:
    import torch._dynamo  # deferred: importing torch._dynamo costs ~1 s
    from torch._dynamo.backends.registry import _COMPILER_FNS

    if FAULTY_BACKEND not in _COMPILER_FNS:
        torch._dynamo.register_backend(faulty_backend, name=FAULTY_BACKEND)


def _checked(original):
    def softsign(input, *args, **kwargs):
        if input.device.type == "neuron" and not bool(torch.isfinite(input).all()):
            warnings.warn("softsign: non-finite input on neuron", RuntimeWarning, stacklevel=2)
        return original(input, *args, **kwargs)

    softsign.__doc__ = original.__doc__
    return softsign


_register()
if os.environ.get(PY_FAULT_ENV) == "1":
    torch.nn.functional.softsign = _checked(torch.nn.functional.softsign)
