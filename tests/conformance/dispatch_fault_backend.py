"""Backend module for the triage tests: the emulated device with kernels that fail like a real backend's.

``--conformance-backend-module dispatch_fault_backend`` (this folder on ``PYTHONPATH``) installs the emulator in mirror
mode, then, through :mod:`neuron_conformance.emulator.faults`: ``aten::mul.Tensor`` and ``aten::div.Tensor`` raise
``NotImplementedError`` with the dispatcher's long ``Could not run ...`` message (the registered backends
and kernel files, as a real backend without the kernel prints it), and ``aten::sub.Tensor`` is off by 1e-3.
So a run over a handful of ops gives many failures of three causes.
"""

from __future__ import annotations

import neuron_conformance.emulator.backend  # noqa: F401 - installs the emulated device
from neuron_conformance.emulator import faults

CONFORMANCE_MIRRORS_CPU = True
"""Judge as the mirror emulator (bitwise CPU), so the 1e-3 error is a numeric failure."""

BACKENDS = (
    "CPU, Meta, QuantizedCPU, QuantizedMeta, MkldnnCPU, SparseCPU, SparseMeta, SparseCsrCPU, "
    "SparseCsrMeta, BackendSelect, Python, FuncTorchDynamicLayerBackMode, Functionalize, Named, Conjugate, "
    "Negative, ZeroTensor, ADInplaceOrView, AutogradOther, AutogradCPU, AutogradCUDA, AutogradHIP, "
    "AutogradXLA, AutogradMPS, AutogradIPU, AutogradXPU, AutogradHPU, AutogradVE, AutogradLazy, "
    "AutogradMTIA, AutogradMeta, Tracer, AutocastCPU, AutocastCUDA, FuncTorchBatched, BatchedNestedTensor, "
    "FuncTorchVmapMode, Batched, VmapMode, FuncTorchGradWrapper, PythonTLSSnapshot, "
    "FuncTorchDynamicLayerFrontMode, PreDispatch, PythonDispatcher"
)


def dispatcher_message(op: str) -> str:
    """A message shaped like the dispatcher's for an operator without a PrivateUse1 kernel."""
    head = (
        f"Could not run '{op}' with arguments from the 'PrivateUse1' backend. This could be because the "
        f"operator doesn't exist for this backend, or was omitted during the selective/custom build process "
        f"(if using custom build). If you are a Facebook employee using PyTorch on mobile, please visit "
        f"the dispatcher docs for possible resolutions. '{op}' is only available for these backends: "
        f"[{BACKENDS}].\n\n"
    )
    body = "".join(
        f"{key.strip()}: registered at /pytorch/build/aten/src/ATen/Register{key.strip()}.cpp:{31000 + i} [kernel]\n"
        for i, key in enumerate(BACKENDS.split(","))
    )
    return head + body


for _op in ("aten::mul.Tensor", "aten::div.Tensor"):
    faults.make_raise(_op, NotImplementedError, dispatcher_message(_op)).install()
faults.scale_output("aten::sub.Tensor", rel=1e-3).install()
