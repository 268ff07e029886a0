"""Exemptions for kernel modules and ONNX Runtime devices (``migrate/exemptions/kernel_modules.py``,
``migrate/exemptions/onnx_runtime.py``). Each case has an example that is quiet and a near miss that is still reported (and still fixed where the
rule has a fix). The snippets are written for these tests."""

from tests.migrate.snippets import codes, fixed, pairs

KERNEL_MODULE = (
    "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
    "_ext = load_inline(name='fused', cpp_sources='', functions=['fwd'])\n"
    "def fwd(q):\n"
    "    if q.device.type == 'cuda':\n"
    "        with torch.cuda.device(q.device):\n"
    "            return _ext.fwd(q)\n"
    "    return q\n"
)


def test_device_tests_in_a_module_that_loads_kernels_are_quiet():
    """Should not report the device test and device context that launch a compiled kernel."""
    assert pairs(KERNEL_MODULE) == []


def test_other_cuda_code_in_a_kernel_module_and_device_tests_elsewhere_are_still_reported():
    """Should still report and fix `.cuda()` and `torch.cuda.synchronize()` in a kernel module, and
    report the same device test in a module that loads no kernel."""
    src = KERNEL_MODULE + "def run(m, x):\n    torch.cuda.synchronize()\n    return m.cuda()(x)\n"
    assert [c for _, c in pairs(src)] == ["NM201", "NM108"]
    out = fixed(src)
    assert "torch.accelerator.synchronize()" in out and ".cuda()" not in out
    plain = "import torch\ndef fwd(q):\n    if q.device.type == 'cuda':\n        return q * 2\n    return q\n"
    assert [c for _, c in pairs(plain)] == ["NM111"]


def test_kernel_object_gate_and_cuda_feature_of_a_torch_version_are_quiet():
    """Should not report `x.is_cuda` next to a test that a CUDA kernel object exists, or next to a
    torch-version test."""
    src = (
        "import torch\n"
        "class Act(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        if self._fused_cuda_op is not None and x.is_cuda:\n"
        "            return self._fused_cuda_op(x)\n"
        "        if (x.is_cuda\n"
        "                and torch_version_at_least('2.9')):\n"
        "            return torch.mm(x, x, out_dtype=torch.float32)\n"
        "        return x\n"
    )
    assert pairs(src) == []


def test_device_test_next_to_other_conditions_is_still_reported():
    """Should report `x.is_cuda` next to a plain flag or a grad-mode test."""
    src = (
        "import torch\n"
        "def f(self, x):\n"
        "    if self.use_fast and x.is_cuda:\n"
        "        return x\n"
        "    if x.is_cuda and not torch.is_grad_enabled():\n"
        "        return x\n"
    )
    assert [c for _, c in pairs(src)] == ["NM112", "NM112"]


class TestKernelsAndOnnxRuntime:
    def test_device_context_around_kernelize_is_quiet(self):
        """Should not report the CUDA device context and test of a module that kernelizes layers
        (the `kernels` library's CUDA/ROCm capability lookups run under it)."""
        src = (
            "import torch\n"
            "from contextlib import nullcontext\n"
            "def prepare(model, device):\n"
            "    with torch.cuda.device(device) if device.type == 'cuda' else nullcontext():\n"
            "        kernelize(model)\n"
        )
        assert codes(src) == []
        near = src.replace("kernelize(model)", "model.prepare()")
        got = codes(near)
        assert (4, "NM106") in got and (4, "NM111") in got

    def test_onnx_runtime_module_through_a_lazy_re_export(self):
        """Should treat a module importing `onnxruntime` through a package's lazy re-export
        (`from pkg.external import onnxruntime as ort`) and naming an execution provider as an ONNX Runtime
        module; the same module without a provider name is still reported."""
        src = (
            "import torch\nfrom pkg.external import onnxruntime as ort\n"
            "def providers(device):\n"
            "    if device.type == 'cuda':\n"
            "        return ['CUDAExecutionProvider']\n"
            "    return ['CPUExecutionProvider']\n"
        )
        assert codes(src) == []
        assert codes(src.replace("ExecutionProvider", "Backend")) == [(4, "NM111")]
