"""Temporary start-up workaround for the CI run against torch-opencl (see .ci/third_party_backend.sh).

torch-opencl 0.1.0.dev23 segfaults in ``torch.ones(1).pin_memory()`` (its PrivateUse1 hooks), and the
harness's device-API probe (``neuron_conformance.conformance.backend.device.probe_api_support``) calls that in the pytest process
at start-up, so every session, controller and xdist workers alike, dies with SIGSEGV before the first
test. Until the probe runs in a child process, ``.ci/third_party_backend.sh`` passes
``--conformance-backend-module opencl_startup_shim`` instead of ``torch_opencl`` *only when* a plain start-up
dies. This module imports torch_opencl, makes ``Tensor.pin_memory`` raise instead of crashing (the
probe then records ``pin_memory: missing``; no OpInfo test pins memory) and replaces itself in
``sys.modules`` with torch_opencl, so the harness sees the real module (name and version in run.json).
"""

import sys

import torch
import torch_opencl


def _pin_memory(self, *args, **kwargs):
    raise RuntimeError(
        "pin_memory disabled by .ci/opencl/opencl_startup_shim.py: torch-opencl 0.1.0.dev23 segfaults in it"
    )


torch.Tensor.pin_memory = _pin_memory
sys.modules[__name__] = torch_opencl
