"""ONNX Runtime devices: torch CUDA code that serves ONNX Runtime's CUDA execution provider, which has no
``torch.accelerator`` counterpart.

* **an ONNX Runtime module** (:func:`onnx_runtime_module`): a module that imports ``onnxruntime`` (also
  through a lazy re-export) and names an execution provider: its torch CUDA calls (streams, devices) serve
  ONNX Runtime's CUDA provider.
* **an ONNX Runtime device test** (:func:`onnx_runtime_nodes`): a test that also mentions an execution
  provider (``"cuda" if torch.cuda.is_available() and "CUDAExecutionProvider" in available else "cpu"``)
  picks the device for ONNX Runtime's CUDA provider; its CUDA parts are left alone (and the rule pass
  does not take the literals it chooses for torch devices).
"""

from __future__ import annotations

from typing import List

import libcst as cst

from neuron_conformance.migrate.exemptions.names import cuda_parts, names_in
from neuron_conformance.migrate.exemptions.registry import ANCESTOR, MODULE, exemption


def onnx_runtime_module(ctx) -> bool:
    """A module that imports ``onnxruntime`` and names an execution provider: its torch CUDA calls
    (streams, devices) serve ONNX Runtime's CUDA provider, which has no torch.accelerator counterpart."""
    return "ExecutionProvider" in ctx.source and any(
        v.split(".")[0] == "onnxruntime" or v.rsplit(".", 1)[-1] == "onnxruntime"  # a lazy re-export
        for v in ctx.aliases.values()
    )


def onnx_runtime_nodes(ctx, test: cst.CSTNode) -> List[cst.CSTNode]:
    """When ``test`` mentions an ONNX Runtime execution provider (``"CUDAExecutionProvider"``):
    its CUDA parts, which are not reported; else ``[]``."""
    if not any(n.endswith("ExecutionProvider") for n in names_in(test)):
        return []
    return cuda_parts(ctx, test)


# ----------------------------------------------------------------------------- registered exemptions
@exemption(
    "ONNX Runtime module",
    scope=MODULE,
    fact=onnx_runtime_module,
    code="NM203",
    quiet=(
        "import onnxruntime as ort\nimport torch\nPROVIDER = 'CUDAExecutionProvider'\n"
        "def run(device):\n    torch.cuda.current_stream(device).synchronize()\n"
    ),
    near_miss="import torch\ndef run(device):\n    torch.cuda.current_stream(device).synchronize()\n",
)
def _onnx_runtime_module(view, is_onnx_runtime: bool) -> bool:
    """Everything in a module that imports ``onnxruntime`` and names an execution provider
    (:func:`onnx_runtime_module`)."""
    return is_onnx_runtime


@exemption(
    "ONNX Runtime device test",
    scope=ANCESTOR,
    code="NM101",
    quiet=(
        "import torch\ndef f(available):\n"
        "    if torch.cuda.is_available() and 'CUDAExecutionProvider' in available:\n        pass\n"
    ),
    near_miss="import torch\ndef f(available):\n    if torch.cuda.is_available() and available:\n        pass\n",
)
def _onnx_runtime_nodes(view, i: int) -> bool:
    """The CUDA parts of a test that mentions an ONNX Runtime execution provider (:func:`onnx_runtime_nodes`)."""
    a = view.ancestors[i]
    if not isinstance(a, cst.BooleanOperation):
        return False
    parts = view.memo(("onnx runtime", id(a)), lambda: {id(n) for n in onnx_runtime_nodes(view.ctx, a)})
    return id(view.node) in parts
