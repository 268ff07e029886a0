"""CUDA-only runtimes: code that runs only with NCCL, NVTX or XLA on GPUs, which are CUDA's.

* **the body of a test for a CUDA-only runtime** (:func:`cuda_runtime_body`): ``<x> == "nccl"`` (NCCL is
  NVIDIA's collective library; the other accelerators' backends, ``"xccl"``, ``"hccl"``, are tested by
  their own names), a name with an ``nvtx`` word (the NVIDIA Tools Extension, read by NVIDIA's profilers
  only), a test for XLA that names no CUDA (torch_xla runs on GPUs through CUDA, ``PJRT_DEVICE=CUDA``).
  The same code without such a test is still reported.
* **code gated on NCCL** (:func:`nccl_gated`): the branch taken when ``dist.get_backend() == "nccl"``
  (directly, or through a name assigned such a test in the same block). A test ``!= "nccl"`` is still
  reported.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.exemptions.blocks import value_in
from neuron_conformance.migrate.exemptions.names import bare_and_operands, key_vendor, names_cuda, names_in
from neuron_conformance.migrate.exemptions.registry import ANCESTOR, STEP, exemption
from neuron_conformance.migrate.traversal import and_operands

_NVTX = re.compile(r"(^|_)nvtx($|_)", re.I)
_XLA = re.compile(r"(^|[._])xla($|[._])", re.I)


def cuda_runtime_body(ctx, node: cst.If) -> Optional[str]:
    """The body of ``node`` runs only with a CUDA-only runtime, by one operand of its (``and``) test
    (the same code without such a test is still reported):

    * ``<x> == "nccl"``: the process group uses NCCL, NVIDIA's collective library (RCCL on ROCm,
      which also presents itself as CUDA); the body configures NCCL, and the other accelerators'
      backends (``"xccl"``, ``"hccl"``) are tested by their own names;
    * a name with an ``nvtx`` word (``if self._emit_nvtx:``): NVTX is the NVIDIA Tools Extension
      (``torch.cuda.nvtx``: "support for NVIDIA Tools Extension (NVTX) used in profiling"), read by
      NVIDIA's profilers only;
    * a test for XLA that names no CUDA (``if is_torch_xla_available(): return torch.cuda.device_count()``):
      torch_xla runs on GPUs through CUDA (``PJRT_DEVICE=CUDA``), so CUDA's functions there are
      chosen for XLA on GPUs.

    A negated operand (``not is_torch_xla_available()``) is none of these. Returns the runtime
    (``"nccl"``, ``"nvtx"``, ``"xla"``) or None."""
    test = node.test  # `if (a and b):` — the outer parentheses group the whole test
    ops = (
        bare_and_operands(test.left) + bare_and_operands(test.right)
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And)
        else [test]
    )
    for o in ops:
        if isinstance(o, cst.UnaryOperation):
            continue
        if isinstance(o, cst.Comparison):
            if len(o.comparisons) != 1 or not isinstance(o.comparisons[0].operator, cst.Equal):
                continue
            values = (string_value(o.left), string_value(o.comparisons[0].comparator))
            if "nccl" in values:
                return "nccl"
            if any(v is not None and _XLA.search(v) for v in values) and not names_cuda(ctx, node.test):
                return "xla"
            continue
        idents = [n for n in names_in(o) if n.isidentifier()]
        if any(_NVTX.search(n) for n in idents):
            return "nvtx"
        if (
            isinstance(o, (cst.Call, cst.Name, cst.Attribute))
            and any(_XLA.search(n) for n in idents)
            and not names_cuda(ctx, node.test)
        ):
            return "xla"
    return None


def stored_for_another_vendor(path: list, vendor: str) -> bool:
    """``path`` runs through an assignment to a per-device table entry keyed by an accelerator other
    than ``vendor`` (``SYNC["mps"] = ...`` under a test for XLA: chosen for MPS, not for XLA)."""
    assign = next((a for a in path if isinstance(a, cst.Assign)), None)
    return assign is not None and any(key_vendor(t.target).lower() not in ("", vendor) for t in assign.targets)


def _nccl_test(node) -> bool:
    return any(
        isinstance(o, cst.Comparison)
        and len(o.comparisons) == 1
        and isinstance(o.comparisons[0].operator, cst.Equal)
        and "nccl" in (string_value(o.left), string_value(o.comparisons[0].comparator))
        for o in and_operands(node)
    )


def nccl_gated(ctx, a, child, path: list, i: int) -> bool:
    """``child`` is the branch of ``a`` (``if``/conditional expression) taken when the backend is NCCL."""
    if not isinstance(a, (cst.If, cst.IfExp)) or child is not a.body:
        return False
    if _nccl_test(a.test):
        return True
    names = [o.value for o in and_operands(a.test) if isinstance(o, cst.Name)]
    for name in names:
        for j in range(i - 1, -1, -1):
            if isinstance(path[j], (cst.IndentedBlock, cst.Module)):
                value = value_in(ctx, path[j], a.test, name)
                if value is not None:
                    return _nccl_test(value)
    return False


# ----------------------------------------------------------------------------- registered exemptions
@exemption(
    "code gated on NCCL",
    scope=STEP,
    group="arms",
    code="NM104",
    quiet=(
        "import torch\nimport torch.distributed as dist\ndef barrier():\n"
        "    use_ids = dist.get_backend() == 'nccl'\n"
        "    return dist.barrier(device_ids=[torch.cuda.current_device()]) if use_ids else dist.barrier()\n"
    ),
    near_miss=(
        "import torch\nimport torch.distributed as dist\ndef barrier():\n"
        "    use_ids = dist.get_backend() != 'nccl'\n"
        "    return dist.barrier(device_ids=[torch.cuda.current_device()]) if use_ids else dist.barrier()\n"
    ),
)
def _nccl_gated(view, i: int) -> bool:
    """The branch of an ``if`` or conditional expression taken when the backend is NCCL
    (:func:`nccl_gated`): NCCL runs on CUDA only."""
    full = view.full
    return nccl_gated(view.ctx, full[i], full[i + 1], full, i)


@exemption(
    "body of a test for a CUDA-only runtime",
    scope=ANCESTOR,
    code="NM201",
    quiet="import torch\ndef step(emit_nvtx):\n    if emit_nvtx:\n        torch.cuda.synchronize()\n",
    near_miss="import torch\ndef step(emit_trace):\n    if emit_trace:\n        torch.cuda.synchronize()\n",
)
def _cuda_runtime_body(view, i: int) -> bool:
    """The body of an ``if`` whose test asks for NCCL, NVTX or XLA (:func:`cuda_runtime_body`); under a
    test for XLA, not an entry stored for another vendor (:func:`stored_for_another_vendor`)."""
    a = view.ancestors[i]
    if not isinstance(a, cst.If):
        return False
    runtime = view.memo(("runtime", id(a)), lambda: cuda_runtime_body(view.ctx, a))
    child = view.child(i)
    return (
        bool(runtime)
        and child is not None
        and child is a.body
        and not (runtime == "xla" and stored_for_another_vendor(view.path, "xla"))
    )
