"""CUDA-only components and runtimes (``migrate/exemptions/cuda_components.py``,
``migrate/exemptions/cuda_runtimes.py``), in the shapes accelerate, lightning and peft use: each case has an
example that serves CUDA only (quiet) and a near miss that is a real CUDA-ism (still reported, and still
fixed where the rule has a fix). The snippets are written for these tests."""

from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection

ALL = selection(None, None)


def codes(src):
    result = check_source(src, Settings(ALL))
    assert result.error is None, result.error
    return sorted((v.line, v.code) for v in result.violations)


def fixed(src):
    return check_source(src, Settings(ALL, fix=True, unsafe_fixes=True)).new_source


# ----------------------------------------------------------------- CUDA-only libraries
def test_module_importing_a_cuda_only_library_is_quiet():
    """Should not report a module that imports Megatron (under an availability test) or Transformer
    Engine at module level: the whole module serves the NVIDIA-only library."""
    src = (
        "import torch\n"
        "from .utils import has_megatron\n"
        "if has_megatron():\n"
        "    from megatron.core import parallel_state\n"
        "def batch_to_rank(batch):\n"
        "    return {k: v.to(torch.cuda.current_device()) for k, v in batch.items()}\n"
        "def drop_caches():\n"
        "    torch.cuda.empty_cache()\n"
    )
    assert codes(src) == []
    te = (
        "import torch\nimport transformer_engine.pytorch as tep\n"
        "def fp8_ctx(dtype):\n    return torch.autocast('cuda', dtype=dtype)\n"
    )
    assert codes(te) == []


def test_module_with_another_library_or_naming_another_vendor_is_still_reported():
    """Should still report (and fix) a module importing a library not known to be CUDA-only, and a
    module that imports a CUDA-only library but also names another accelerator (it dispatches)."""
    other = "import torch\nimport myquant\ndef drop_caches():\n    torch.cuda.empty_cache()\n"
    assert [c for _, c in codes(other)] == ["NM301"]
    assert "torch.accelerator.empty_cache()" in fixed(other)
    mixed = "import torch\nimport megatron\nSUPPORTED = ('xpu',)\ndef drop_caches():\n    torch.cuda.empty_cache()\n"
    assert [c for _, c in codes(mixed)] == ["NM301"]


def test_function_importing_a_cuda_only_library_is_quiet_but_its_neighbours_are_not():
    """Should not report a function that imports Torch-TensorRT or EETQ (its default device, its
    CUDA requirement); should still report and fix the function next to it."""
    src = (
        "import torch\n"
        "def export_trt(model, device='cuda'):\n"
        "    if not torch.cuda.is_available():\n"
        "        raise RuntimeError('no device')\n"
        "    import torch_tensorrt\n"
        "    return torch_tensorrt.compile(model.to(device))\n"
        "def place(model):\n"
        "    return model.to('cuda')\n"
    )
    assert codes(src) == [(8, "NM110")]
    out = fixed(src)
    assert "model.to('cuda')" not in out and "def export_trt(model, device='cuda'):" in out


# ------------------------------------------------------- per-vendor implementations
def test_cuda_implementation_of_an_accelerator_interface_is_quiet():
    """Should not report a module implementing an accelerator interface for CUDA, nor a method
    named `cuda` (an override of `nn.Module.cuda`)."""
    src = (
        "import torch\n"
        "from .base import DeviceBackend\n"
        "class CudaBackend(DeviceBackend):\n"
        "    def bind(self, index):\n"
        "        torch.cuda.set_device(index)\n"
        "    def devices(self):\n"
        "        return [torch.device('cuda', i) for i in range(torch.cuda.device_count())]\n"
        "def _free():\n"
        "    torch.cuda.empty_cache()\n"
    )
    assert codes(src) == []
    method = (
        "import torch\n"
        "class Mixin(torch.nn.Module):\n"
        "    def cuda(self, device=None):\n"
        "        self._dev = torch.device('cuda', torch.cuda.current_device() if device is None else device)\n"
        "        return super().cuda(device)\n"
    )
    assert codes(method) == []


def test_classes_and_functions_merely_named_for_cuda_are_still_reported():
    """Should still report a class named for CUDA whose base is no accelerator interface, a plain
    helper named for CUDA, and a method `to_cuda`; the helper is still fixed."""
    src = (
        "import torch\n"
        "class CudaNet(torch.nn.Module):\n"
        "    def to_cuda(self):\n"
        "        return self.to('cuda')\n"
        "def to_cuda(batch):\n"
        "    return batch.to('cuda')\n"
    )
    assert codes(src) == [(4, "NM110"), (6, "NM110")]
    assert "batch.to('cuda')" not in fixed(src)


# --------------------------------------------------------------- CUDA-only runtimes
def test_bodies_of_nccl_nvtx_and_xla_tests_are_quiet():
    """Should not report what runs only with NCCL, under an NVTX flag, or under a test for XLA
    (which runs on GPUs through CUDA)."""
    src = (
        "import torch\n"
        "def setup(pg_backend, fsdp):\n"
        "    if (pg_backend == 'nccl' and fsdp):\n"
        "        pg_backend = 'cuda:nccl,cpu:gloo'\n"
        "    return pg_backend\n"
        "def prof(use_nvtx):\n"
        "    if use_nvtx:\n"
        "        return torch.cuda.profiler.profile()\n"
        "def counters(xla_ok):\n"
        "    if xla_ok():\n"
        "        return torch.cuda.device_count()\n"
        "    return 0\n"
        "def counters2(helpers):\n"
        "    if helpers.is_torch_xla_available():\n"
        "        return 'xla', torch.cuda.memory_allocated\n"
    )
    assert codes(src) == []


def test_near_misses_of_the_runtime_tests_are_still_reported():
    """Should still report the same code under a negated or an unrelated test, and a CUDA call
    under an XLA test that also names CUDA."""
    src = (
        "import torch\n"
        "def setup(pg_backend):\n"
        "    if pg_backend != 'nccl':\n"
        "        pg_backend = 'cuda:nccl,cpu:gloo'\n"
        "def counters(helpers):\n"
        "    if not helpers.is_torch_xla_available():\n"
        "        return torch.cuda.device_count()\n"
        "def both(helpers):\n"
        "    if helpers.is_torch_xla_available() and torch.cuda.is_available():\n"
        "        torch.cuda.synchronize()\n"
    )
    got = [c for _, c in codes(src)]
    assert "NM605" in got and "NM103" in got and "NM201" in got
    assert "torch.accelerator.device_count()" in fixed(src)


# ------------------------------------------------------------ chains and requests
def test_tpu_branch_makes_a_vendor_chain():
    """Should not report the CUDA branch of a chain whose other branch is for TPUs; the same
    branch without the TPU test is still reported and fixed."""
    quiet = (
        "import os, torch\n"
        "def launch(fn):\n"
        "    if os.environ.get('ACCEL') == 'TPU':\n"
        "        spawn_tpu(fn)\n"
        "    elif not torch.cuda.is_available():\n"
        "        fn()\n"
    )
    assert codes(quiet) == []
    near = "import torch\ndef launch(fn):\n    if not torch.cuda.is_available():\n        fn()\n"
    assert [c for _, c in codes(near)] == ["NM101"]


def test_gpu_request_normalised_in_a_vendor_chain_default_is_quiet():
    """Should not report `"gpu"` renamed `"cuda"` in the default branch of a chain naming the other
    accelerators; the same renaming on its own is still reported (there "gpu" may be any GPU)."""
    quiet = (
        "import torch\n"
        "def pick(device):\n"
        "    if device == 'npu':\n"
        "        dev = torch.device('npu', 0)\n"
        "    else:\n"
        "        if device == 'gpu':\n"
        "            device = 'cuda'\n"
        "        dev = torch.device(device, 0)\n"
        "    return dev\n"
    )
    assert codes(quiet) == []
    near = "def pick(device):\n    if device == 'gpu':\n        device = 'cuda'\n    return device\n"
    assert [c for _, c in codes(near)] == ["NM110"]
    assert "device = 'cuda'" not in fixed(near)


def test_cuda_device_completed_with_its_index_is_quiet_but_a_bare_one_is_reported():
    """Should not report `if d.type == "cuda" and d.index is None: return torch.device(f"cuda:{i}")`;
    a body returning a CUDA device without an index is still reported and fixed."""
    quiet = (
        "import torch\n"
        "def full(d):\n"
        "    if d.type == 'cuda' and d.index is None:\n"
        "        return torch.device(f'cuda:{torch.cuda.current_device()}')\n"
        "    return d\n"
    )
    assert codes(quiet) == []
    near = "import torch\ndef full(d):\n    if d.type == 'cuda':\n        return torch.device('cuda')\n    return d\n"
    got = [c for _, c in codes(near)]
    assert "NM111" in got and "NM110" in got
    assert "torch.device('cuda')" not in fixed(near)


def test_on_gpu_predicate_and_fstring_requirement_are_quiet():
    """Should not report a property `on_gpu` asking about CUDA, nor a requirement whose f-string
    message names CUDA; a property with another name and an unexplained f-string raise are still
    reported."""
    quiet = (
        "import torch\n"
        "class M:\n"
        "    @property\n"
        "    def on_gpu(self):\n"
        "        return self.device.type == 'cuda'\n"
        "def check(x):\n"
        "    if x.device.type != 'cuda':\n"
        "        raise ValueError(f'this kernel needs CUDA tensors, got {x.device}')\n"
    )
    assert codes(quiet) == []
    near = (
        "import torch\n"
        "class M:\n"
        "    @property\n"
        "    def fast(self):\n"
        "        return self.device.type == 'cuda'\n"
        "def check(x):\n"
        "    if x.device.type != 'cuda':\n"
        "        raise ValueError(f'unexpected device {x.device}')\n"
    )
    assert [c for _, c in codes(near)] == ["NM111", "NM111"]
