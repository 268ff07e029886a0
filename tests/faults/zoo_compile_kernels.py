"""Compile backends for the zoo compile fault tests: the emulator's ``neuron`` backend, wrong only in compiled code.

Both wrap :func:`neuron_conformance.emulator.compile.make_backend`'s pieces (AOT autograd over the
emulator's eager kernels), so eager mode on the device is untouched:

* :func:`add_to_sub`: an FX pass over Dynamo's graph turns the first floating-point addition (``a + b`` or
  ``torch.add``: in a transformer, the first residual connection) into a subtraction; a wrong lowering.
* :func:`backward_drops_grad`: the forward graph is right; the compiled backward graph returns zeros for its
  first floating-point gradient (a backward lowering that drops an output). Only a check that runs the
  compiled backward sees it.

Each counts the graphs it received in ``calls`` and the graphs it changed in ``changed``.
"""

from __future__ import annotations

import operator

import torch

from neuron_conformance.emulator import compile as emulator_compile


def _floating(node) -> bool:
    value = node.meta.get("example_value")
    return isinstance(value, torch.Tensor) and value.is_floating_point()


class _Counted:
    def __init__(self, name: str):
        self.__name__ = name
        self.calls = 0
        self.changed = 0


class AddToSub(_Counted):
    """Backend callable ``(gm, example_inputs)``: the first floating ``+`` of each Dynamo graph becomes ``-``."""

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.calls += 1
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target in (operator.add, torch.add) and _floating(node):
                node.target = operator.sub if node.target is operator.add else torch.sub
                self.changed += 1
                gm.recompile()
                break
        return emulator_compile.make_backend()(gm, example_inputs)


class BackwardDropsGrad(_Counted):
    """Backend callable: AOT autograd with the emulator's forward compiler and a backward whose first floating
    gradient output is replaced by zeros."""

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        from torch._dynamo.backends.common import aot_autograd  # deferred: only a compile reaches it

        self.calls += 1
        return aot_autograd(fw_compiler=emulator_compile._compile_graph, bw_compiler=self._backward)(gm, example_inputs)

    def _backward(self, gm, example_inputs):
        inner = emulator_compile._compile_graph(gm, example_inputs)
        backend = self

        def run(args):
            outs = list(inner(args))
            for i, g in enumerate(outs):
                if isinstance(g, torch.Tensor) and g.is_floating_point():
                    outs[i] = torch.zeros_like(g)
                    backend.changed += 1
                    break
            return outs

        run._boxed_call = True  # type: ignore[attr-defined]
        return run


def add_to_sub() -> AddToSub:
    """A fresh :class:`AddToSub` backend (its counters at zero)."""
    return AddToSub("add_to_sub")


def backward_drops_grad() -> BackwardDropsGrad:
    """A fresh :class:`BackwardDropsGrad` backend (its counters at zero)."""
    return BackwardDropsGrad("backward_drops_grad")
