"""The ``neuron`` ``torch.compile`` backend: AOT autograd over the emulator's eager kernels.

Dynamo captures the Python frame, AOT autograd (``torch._dynamo.backends.common.aot_autograd``) traces
forward and backward ATen graphs with ``neuron:0`` example inputs, and both graphs run eagerly through the
emulator (``make_boxed_func`` of the graph module's ``forward``). Results match eager mode; the backend
exists so that code calling ``torch.compiler.set_default_backend("neuron")`` and ``model.compile()`` (or
``torch.compile(backend="neuron")``) runs on the emulated device. ``backend="inductor"`` cannot generate
code for a Python PrivateUse1 device and fails with ``BackendCompilerFailed``.
"""

from __future__ import annotations

import torch

BACKEND = "neuron"
"""Name the backend is registered under with ``torch._dynamo.register_backend``."""

_backend = None


def _compile_graph(gm: torch.fx.GraphModule, example_inputs):
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(gm.forward)


def make_backend():
    """Build the AOT-autograd backend callable ``(gm, example_inputs) -> compiled fn``."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=_compile_graph, bw_compiler=_compile_graph)


def register_backend() -> None:
    """Register the ``neuron`` backend with Dynamo (idempotent)."""
    global _backend
    if _backend is not None:
        return
    import torch._dynamo
    import torch._dynamo.trace_rules
    from torch._dynamo.backends.registry import _COMPILER_FNS

    # The fallback and kernels are Python functions called from C++; Dynamo must never trace them
    # (it would try to compile the emulator itself when a compiled region calls an op eagerly).
    torch._dynamo.trace_rules.add(__package__)
    _backend = make_backend()
    if BACKEND not in _COMPILER_FNS:
        torch._dynamo.register_backend(_backend, name=BACKEND)
