"""Kernel modules: device tests that gate or launch a compiled CUDA kernel.

* **a module that loads compiled kernels** (:func:`kernel_module`): a call of a kernel loader
  (``get_kernel(...)``, ``lazy_load_kernel(...)``, ``load_*kernel*(...)``,
  ``torch.utils.cpp_extension.load``/``load_inline``) or an import of a non-torch module with a ``cuda``
  path part: there the device tests (NM111, NM112), device contexts (NM106) and capability queries gate
  or launch the kernel. Everything else in such a module (``.cuda()``, ``torch.cuda.synchronize()``) is
  still reported. Known limit: a module that calls an unrelated ``get_kernel(...)`` (a convolution
  kernel) is taken for a kernel module and loses those findings.
* **a kernel-object gate** (:func:`kernel_gate_nodes`): ``self._kernel_cuda is not None and x.is_cuda``: a
  CUDA device test ``and``-ed with a test that an object named for CUDA or a kernel exists, or with a call
  of a CUDA check (``self.device.type == "cuda" and not check_cuda_p2p_ib_support()``); and **a CUDA
  feature of a torch version**: ``x.is_cuda and ... and is_torch_greater_or_equal("2.8")`` (the path uses
  what that torch release added for CUDA).
"""

from __future__ import annotations

import re
from typing import List

import libcst as cst

from neuron_conformance.migrate.exemptions.cuda_tests import capability_node, device_test
from neuron_conformance.migrate.exemptions.names import (
    CUDA_PROBE_NAME,
    callee,
    cuda_only_module,
    identifier,
    operands,
    word_set,
)
from neuron_conformance.migrate.exemptions.registry import ANCESTOR, MODULE, exemption

_KERNEL_LOADER = re.compile(
    r"^[^#\n]*\b(get_kernel|lazy_load_kernel|load_\w*kernels?\w*|cpp_extension\.load|cpp_extension\.load_inline|"
    r"load_inline|kernelize)\s*\(",
    re.M,
)
_KERNEL_WORD = frozenset({"cuda", "kernel", "kernels"})
_VERSION = re.compile(r"version|greater|_than_|torch_\d", re.I)
#: Codes that gate or launch a kernel in a kernel module (device tests, device contexts).
KERNEL_GATE_CODES = frozenset({"NM106", "NM111", "NM112"})


def kernel_module(ctx) -> bool:
    """The module loads compiled kernels: a kernel-loader call outside comments (``get_kernel(``,
    ``lazy_load_kernel(``, ``load_<...>kernel<...>(``, ``cpp_extension.load(``/``load_inline(``), or an
    import of a CUDA-only module (see :func:`guards_cuda_only_body`)."""
    if any(cuda_only_module(v) for v in ctx.aliases.values()):
        return True
    return bool(_KERNEL_LOADER.search(ctx.source))


def _kernel_object_test(node) -> bool:
    """``<name> is not None`` / ``<name> is None`` where the name has a ``cuda`` or ``kernel`` word."""
    if (
        not isinstance(node, cst.Comparison)
        or len(node.comparisons) != 1
        or not isinstance(node.comparisons[0].operator, (cst.Is, cst.IsNot))
        or not (isinstance(node.comparisons[0].comparator, cst.Name) and node.comparisons[0].comparator.value == "None")
    ):
        return False
    ident = identifier(node.left)
    return ident is not None and bool(word_set(ident) & _KERNEL_WORD)


def _cuda_check_call(node) -> bool:
    """A call of a function named for a CUDA check (``check_cuda_p2p_ib_support()``), under ``not``
    or not; a library probe (``is_torch_cuda_available()``) is not one."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        node = node.expression
    if not isinstance(node, cst.Call):
        return False
    name = callee(node)
    return "cuda" in word_set(name) and not CUDA_PROBE_NAME.match(name)


def _version_test(node) -> bool:
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    target = node.func if isinstance(node, cst.Call) else node
    ident = identifier(target)
    return ident is not None and bool(_VERSION.search(ident))


def kernel_gate_nodes(ctx, node: cst.BooleanOperation) -> List[cst.CSTNode]:
    """For an ``and``/``or`` chain holding a CUDA device test and either a kernel-object test
    (:func:`_kernel_object_test`), a CUDA check (:func:`_cuda_check_call`) or, in an ``and`` chain, a
    torch-version test (a name or call with a
    ``version``/``greater``/``_than_`` word): the device tests (and ``.is_cuda`` attributes), which are
    not reported; else ``[]``."""
    ops = operands(node, type(node.operator))
    tests = [o for o in ops if device_test(ctx, o)]
    if not tests:
        return []
    if not any(_kernel_object_test(o) or _cuda_check_call(o) for o in ops) and not (
        isinstance(node.operator, cst.And) and any(_version_test(o) for o in ops)
    ):
        return []
    out = []
    for t in tests:
        t = t.expression if isinstance(t, cst.UnaryOperation) else t
        out.append(t)
        if isinstance(t, cst.Comparison):
            out.append(t.left)
    return out


# ----------------------------------------------------------------------------- registered exemptions
@exemption(
    "kernel module",
    scope=MODULE,
    fact=kernel_module,
    code="NM111",
    quiet=(
        "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
        "_ext = load_inline(name='fused', cpp_sources='', functions=['fwd'])\n"
        "def fwd(q):\n    if q.device.type == 'cuda':\n        return _ext.fwd(q)\n    return q\n"
    ),
    near_miss="import torch\ndef fwd(q):\n    if q.device.type == 'cuda':\n        return q * 2\n    return q\n",
)
def _kernel_module(view, loads_kernels: bool) -> bool:
    """In a module that loads compiled kernels (:func:`kernel_module`): its device tests and device
    contexts (:data:`KERNEL_GATE_CODES`) and capability queries, which gate or launch the kernel."""
    return loads_kernels and (view.code in KERNEL_GATE_CODES or capability_node(view.ctx, view.node))


@exemption(
    "kernel-object gate",
    scope=ANCESTOR,
    code="NM112",
    quiet=(
        "import torch\ndef f(self, x):\n    if self._fused_cuda_op is not None and x.is_cuda:\n"
        "        return self._fused_cuda_op(x)\n    return x\n"
    ),
    near_miss=("import torch\ndef f(self, x):\n    if self.use_fast and x.is_cuda:\n        return x\n    return x\n"),
)
def _kernel_gate_nodes(view, i: int) -> bool:
    """The CUDA device tests of a chain that also tests a kernel object, a CUDA check or the torch version
    (:func:`kernel_gate_nodes`)."""
    a = view.ancestors[i]
    if not isinstance(a, cst.BooleanOperation):
        return False
    parts = view.memo(("kernel gate", id(a)), lambda: {id(n) for n in kernel_gate_nodes(view.ctx, a)})
    return id(view.node) in parts
