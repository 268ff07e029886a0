"""Meta-tests of session 13's precision classes, read on a held-out judgement of DeepSpeed 0.19.8
(24 % precision on a sample of 50): a CUDA implementation of an accelerator interface and a CUDA
specialization of a generic class (``migrate/cuda_reach.py``, class 8), Triton (no longer NM903,
``migrate/rules/extensions.py``) and CUDA-specific sanity checks (``migrate/cuda_reach.py``, class 9).
Each class has a quiet example and a near miss that is still reported. The snippets are ours, not
copied from DeepSpeed."""
from neuron_conformance.migrate.registry import load
from tests.migrate.snippets import codes, found


# ====================================================== class 8: CUDA implementations and specializations
class TestCudaImplementation:
    IMPL = ("import torch\n"
            "from .interface import DeviceInterface\n"
            "\n"
            "class CudaDevice(DeviceInterface):\n"
            "    def count(self):\n"
            "        return torch.cuda.device_count()\n"
            "    def synchronize(self):\n"
            "        return torch.cuda.synchronize()\n"
            "    def on_amd(self):\n"
            "        return torch.version.hip is not None\n")

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

    BUILDERS = ("import torch\n"
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
                "    return torch.cuda.device_count()\n")

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
        src = self.BUILDERS.replace("\n\ndef devices",
                                    "\n    def other(self):\n        return torch.xpu.device_count()\n\ndef devices")
        assert (9, "NM103") in found(src) and (10, "NM116") in found(src)

    def test_interface_next_to_its_base_quiets_the_class_only(self):
        """Should quiet only the CUDA class when the module also defines the interface it implements."""
        src = ("import torch\n"
               "\n"
               "class Accelerator:\n"
               "    def count(self):\n"
               "        return torch.cuda.device_count()\n"
               "\n"
               "class CUDAAccelerator(Accelerator):\n"
               "    def count(self):\n"
               "        return torch.cuda.device_count()\n")
        got = codes(src)
        assert (5, "NM103") in got and (9, "NM103") not in got


# ====================================================================== Triton: not a CUDA idiom
class TestTriton:
    KERNEL = ("import torch\n"
              "import triton\n"
              "import triton.language as tl\n"
              "\n"
              "@triton.autotune(configs=[triton.Config({'B': 64}, num_warps=2)], key=['n'])\n"
              "@triton.heuristics({'EVEN': lambda a: a['n'] % a['B'] == 0})\n"
              "@triton.jit\n"
              "def scale(x_ptr, n, B: tl.constexpr, EVEN: tl.constexpr):\n"
              "    i = tl.program_id(0) * B + tl.arange(0, B)\n"
              "    tl.store(x_ptr + i, tl.load(x_ptr + i) * 2)\n"
              "\n"
              "def run(x):\n"
              "    scale[(triton.cdiv(x.numel(), 64),)](x, x.numel())\n"
              "    return triton.next_power_of_2(x.numel())\n")

    def test_triton_kernels_and_helpers_are_quiet(self):
        """Should not report Triton: it compiles for NVIDIA, AMD and Intel GPUs, and ``cdiv`` /
        ``next_power_of_2`` are integer arithmetic."""
        assert codes(self.KERNEL) == []

    def test_torch_cuda_kernel_apis_are_reported(self):
        """Should still report torch's CUDA kernel APIs (jiterator, tunable, ``_sleep``) as NM903."""
        src = self.KERNEL + ("fn = torch.cuda.jiterator._create_jit_fn('template <typename T> T f(T x) { return x; }')\n"
                             "torch.cuda.tunable.enable(True)\n"
                             "torch.cuda._sleep(10)\n")
        assert [c for c in codes(src) if c[1] == "NM903"] == [(15, "NM903"), (16, "NM903"), (17, "NM903")]

    def test_rule_text_says_why_triton_is_not_reported(self):
        """Should document, in NM903's own text, that Triton is not reported and why."""
        doc = load()["NM903"].doc
        assert "Triton" in doc["what"] and "AMD" in doc["why"] and "XPU" in doc["why"]


# ====================================================================== class 9: CUDA sanity checks
class TestCudaSanityCheck:
    GUARD = ("import torch\n"
             "def setup(cfg, accel):\n"
             "    if accel.device_name() == 'cuda' and cfg.graphs:\n"
             "        assert cfg.torch_is_new, 'CUDA graphs need torch 1.10 or newer'\n")
    ASSERT = ("import torch\n"
              "def check(cfg, accel):\n"
              "    if cfg.direct_storage:\n"
              "        assert accel.device_name() == 'cuda', 'direct storage is only supported on CUDA'\n")

    def test_guard_of_a_cuda_assert_is_quiet(self):
        """Should not report the CUDA test of an ``if`` whose body is one assert naming CUDA."""
        assert codes(self.GUARD) == []

    def test_guard_of_a_generic_assert_is_reported(self):
        """Should still report the test when the assert's message does not name CUDA, or when the
        body does something else as well."""
        assert (3, "NM111") in found(self.GUARD.replace("CUDA graphs need", "this feature needs"))
        assert (3, "NM111") in found(self.GUARD + "        cfg.graphs_on = True\n")

    def test_assert_of_cuda_with_a_cuda_message_is_quiet(self):
        """Should not report an assert that the device is CUDA whose message names CUDA (a feature
        the author supports on CUDA only)."""
        assert codes(self.ASSERT) == []

    def test_assert_of_cuda_without_a_cuda_message_is_reported(self):
        """Should still report the assert whose message does not name CUDA, or that has none."""
        assert (4, "NM111") in found(self.ASSERT.replace("only supported on CUDA", "not supported here"))
        assert (4, "NM111") in found(self.ASSERT.replace(", 'direct storage is only supported on CUDA'", ""))
