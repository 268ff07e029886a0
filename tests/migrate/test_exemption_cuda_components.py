"""Exemptions for CUDA-only components (``migrate/exemptions/cuda_components.py``): CUDA-only libraries, CUDA
implementations of an accelerator interface and CUDA specializations, CUDA types, tools, options and
builds. Each case has an example that is quiet and a near miss that is still reported (and still fixed where the
rule has a fix). The snippets are written for these tests."""

from tests.migrate.snippets import codes, fixed, found, pairs


def test_guard_of_a_cuda_only_import_is_quiet_but_a_plain_guard_is_still_fixed():
    """Should not report the CUDA guard of an import of NVIDIA's own bindings; should still widen
    the guard of device-generic code."""
    quiet = "import torch\nif torch.cuda.is_available():\n    from cuda import cudart\n"
    assert pairs(quiet) == []
    near = "import torch\nif torch.cuda.is_available():\n    import apex\n"
    assert [c for _, c in pairs(near)] == ["NM101"]
    assert "if torch.accelerator.is_available():" in fixed(near)


def test_cuda_only_option_is_quiet_but_a_cuda_placement_is_still_reported():
    """Should not report `driver=... if a.is_cuda else None`; should report the same shape for
    `device=`."""
    quiet = "import torch\ndef f(a):\n    return torch.linalg.svd(a, driver='gesvd' if a.is_cuda else None)\n"
    assert pairs(quiet) == []
    near = "import torch\ndef f(a):\n    return torch.ones(2, device='cuda' if a.is_cuda else None)\n"
    assert [c for _, c in pairs(near)] == ["NM110", "NM112"]


class TestCudaOnlyComponents:
    def test_cuda_branch_naming_a_cuda_build_is_quiet(self):
        """Should not report a CUDA test choosing a CUDA build of a package, or warning about NVML."""
        src = (
            "import torch\n"
            "def requirement(dev):\n"
            "    return 'somepkg-gpu>=1' if dev.type == 'cuda' else 'somepkg>=1'\n"
            "def on_error(e, log):\n"
            "    if torch.cuda.is_available():\n"
            "        log(f'NVML init failed: {e}')\n"
        )
        assert codes(src) == []
        near = (
            "import torch\n"
            "def batch(dev):\n"
            "    return 64 if dev.type == 'cuda' else 8\n"
            "def on_error(e, log):\n"
            "    if torch.cuda.is_available():\n"
            "        log(f'init failed: {e}')\n"
        )
        got = codes(near)
        assert (3, "NM111") in got and (5, "NM101") in got

    def test_value_stored_for_a_cuda_only_component_is_quiet(self):
        """Should not report the CUDA version stored for a TensorRT package name."""
        src = (
            "import torch\n"
            "def trt_ok(check):\n"
            "    major = (torch.version.cuda or '12').split('.')[0]\n"
            "    return check(f'tensorrt-cu{major}')\n"
        )
        assert codes(src) == []
        near = src.replace("f'tensorrt-cu{major}'", "major")
        assert (3, "NM808") in codes(near)

    def test_function_named_for_gpus_running_nvidia_smi_is_quiet(self):
        """Should not report CUDA calls in a function named for GPUs that runs nvidia-smi."""
        src = (
            "import subprocess\n"
            "import torch\n"
            "def gpu_count(jetson):\n"
            "    if jetson:\n"
            "        return torch.cuda.device_count()\n"
            "    out = subprocess.check_output(['nvidia-smi', '-L'])\n"
            "    return len(out.splitlines())\n"
        )
        assert codes(src) == []
        near = src.replace("def gpu_count", "def environment")
        assert (5, "NM103") in codes(near)

    def test_cuda_version_under_a_cuda_key_is_quiet(self):
        """Should not report `torch.version.cuda` stored under a key naming CUDA."""
        src = "import torch\ndef info():\n    return {'CUDA': torch.version.cuda}\n"
        assert codes(src) == []
        assert (3, "NM808") in codes(src.replace("'CUDA'", "'version'"))


class TestCudaImplementation:
    IMPL = (
        "import torch\n"
        "from .interface import DeviceInterface\n"
        "\n"
        "class CudaDevice(DeviceInterface):\n"
        "    def count(self):\n"
        "        return torch.cuda.device_count()\n"
        "    def synchronize(self):\n"
        "        return torch.cuda.synchronize()\n"
        "    def on_amd(self):\n"
        "        return torch.version.hip is not None\n"
    )

    def test_interface_implementation_naming_rocm_is_quiet(self):
        """Should not report a CUDA implementation of an accelerator interface that mentions ROCm/HIP
        (``torch.version.hip``): ROCm presents itself as CUDA and runs through this implementation."""
        assert codes(self.IMPL) == []
        assert codes(self.IMPL.replace("torch.version.hip is not None", "'rocm' in torch.__version__")) == []

    def test_interface_implementation_naming_another_vendor_is_reported(self):
        """Should still report a module that also names another accelerator (``torch.xpu``): it
        dispatches among vendors."""
        src = self.IMPL + "    def other(self):\n        return torch.xpu.device_count()\n"
        assert (6, "NM103") in found(src) and (8, "NM201") in found(src)

    BUILDERS = (
        "import torch\n"
        "\n"
        "class KernelBuilder:\n"
        "    def usable(self):\n"
        "        return torch.cuda.is_available()\n"
        "\n"
        "class CUDAKernelBuilder(KernelBuilder):\n"
        "    def archs(self):\n"
        "        n = torch.cuda.device_count()\n"
        "        return [torch.cuda.get_device_capability(i) for i in range(n)]\n"
        "\n"
        "def devices():\n"
        "    return torch.cuda.device_count()\n"
    )

    def test_cuda_specialization_body_is_quiet(self):
        """Should not report the body of a CUDA specialization (a class named as its base plus
        ``cuda``, defined next to that base); the generic base and module-level code stay reported."""
        got = codes(self.BUILDERS)
        assert (5, "NM101") in got  # the generic base
        assert (13, "NM103") in got  # a module-level function
        assert not [c for c in got if 8 <= c[0] <= 10]

    def test_class_with_another_word_is_reported(self):
        """Should still report a class named for CUDA with a word its base lacks (not a specialization)."""
        src = self.BUILDERS.replace("class CUDAKernelBuilder(", "class CUDAFusedKernelBuilder(")
        assert (9, "NM103") in found(src)

    def test_specialization_naming_another_vendor_is_reported(self):
        """Should still report a CUDA specialization whose body names another accelerator."""
        src = self.BUILDERS.replace(
            "\n\ndef devices", "\n    def other(self):\n        return torch.xpu.device_count()\n\ndef devices"
        )
        assert (9, "NM103") in found(src) and (10, "NM116") in found(src)

    def test_interface_next_to_its_base_quiets_the_class_only(self):
        """Should quiet only the CUDA class when the module also defines the interface it implements."""
        src = (
            "import torch\n"
            "\n"
            "class Accelerator:\n"
            "    def count(self):\n"
            "        return torch.cuda.device_count()\n"
            "\n"
            "class CUDAAccelerator(Accelerator):\n"
            "    def count(self):\n"
            "        return torch.cuda.device_count()\n"
        )
        got = codes(src)
        assert (5, "NM103") in got and (9, "NM103") not in got


class TestCudaClasses:
    def test_branch_of_an_isinstance_test_for_a_cuda_class_is_quiet(self):
        """Should not report the body of `if isinstance(self, CUDAOpBuilder) and ...:`, but should report
        the same body under `isinstance(self, OpBuilder)`."""
        src = (
            "import torch\n"
            "class OpBuilder:\n"
            "    def load(self):\n"
            "        if isinstance(self, CUDAOpBuilder) and not self.rocm:\n"
            "            self.cpu_only = not torch.cuda.is_available()\n"
            "class CUDAOpBuilder(OpBuilder):\n"
            "    rocm = False\n"
        )
        assert codes(src) == []
        assert codes(src.replace("isinstance(self, CUDAOpBuilder)", "isinstance(self, OpBuilder)")) == [(5, "NM101")]

    def test_gpu_class_of_a_device_interface_using_torch_cuda_is_quiet(self):
        """Should not report inside `class DeviceGPU(Device)` whose body uses `torch.cuda` (the CUDA class of
        per-vendor device classes); a `DeviceGPU(Device)` that uses no `torch.cuda` is still reported."""
        src = (
            "import torch\nclass Device: pass\n"
            "class DeviceGPU(Device):\n"
            "    backend = 'nccl'\n"
            "    def __init__(self):\n"
            "        torch.cuda.set_device(0)\n"
            "        self.device = torch.device('cuda:0')\n"
        )
        assert codes(src) == []
        near = src.replace("torch.cuda.set_device(0)", "pass")
        assert codes(near) == [(4, "NM601"), (7, "NM110")]


def test_a_guard_of_cuda_only_apis_is_quiet_and_one_that_also_moves_a_model_is_reported():
    """Should leave `if torch.cuda.is_available():` alone when its body only calls CUDA functions with no
    device-generic equivalent (memory history, NVTX), and still report it when the body also moves a model
    (widening it would be right for the model, and the CUDA-only calls keep it from being fixed)."""
    quiet = (
        "import torch\ndef record(model):\n    if torch.cuda.is_available():\n"
        "        torch.cuda.memory._record_memory_history()\n        torch.cuda.nvtx.range_push('step')\n"
    )
    assert pairs(quiet) == []
    near = (
        "import torch\ndef record(model):\n    if torch.cuda.is_available():\n"
        "        torch.cuda.memory._record_memory_history()\n        model = model.cuda()\n    return model\n"
    )
    assert (3, "NM101") in pairs(near) and (5, "NM108") in pairs(near)
