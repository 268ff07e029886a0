"""Meta-tests of session 12's second set of precision classes and fix limits (``migrate/cuda_arms.py``,
the value flow of ``migrate/reach.py``), read on the verdicts of a fresh judge on ultralytics 8.4.190 and
sentence-transformers 6.3.0 (``benchmarks/results/migrate_precision.md``, "Session 12: held-out
ultralytics and sentence-transformers"). Each wrong fix has an example whose fix is now withheld (issue
#17 rule 1: a fix never breaks code that ran) and a near miss that is still fixed; each false-positive
class has a quiet example and a near miss that is still reported. The snippets are ours, not copied
from those packages."""
from tests.migrate.snippets import codes, fixed, tier


# ====================================================================== wrong fixes: reports instead
class TestFixLimits:
    def test_stored_flag_reaching_a_gpu_helper_is_not_fixed(self):
        """Should not widen `cuda = torch.cuda.is_available()` when a later read of `cuda` reaches a
        helper named for GPUs (a CUDA-only `get_device_properties` behind it would raise elsewhere:
        ultralytics' `collect_system_info` -> `get_gpu_info`)."""
        src = ("import torch\n"
               "def report():\n"
               "    cuda = torch.cuda.is_available()\n"
               "    return {'GPU': describe_gpu(0) if cuda else None}\n")
        assert tier(src, 3, "NM101") == "report"
        assert "torch.cuda.is_available()" in fixed(src)

    def test_stored_flag_whose_reads_are_fixed_is_still_fixed(self):
        """Should still fix a stored flag (unsafe) whose reads are all fixed or device-generic."""
        src = ("import torch\n"
               "def report():\n"
               "    cuda = torch.cuda.is_available()\n"
               "    return {'count': torch.cuda.device_count() if cuda else 0}\n")
        assert tier(src, 3, "NM101") == "unsafe"
        assert "torch.accelerator.is_available()" in fixed(src)

    def test_guard_reaching_a_gpu_helper_is_not_fixed(self):
        """Should not widen a test whose body calls a helper named for GPUs (ultralytics' platform
        report: the GPU type would be silently lost)."""
        src = ("import torch\n"
               "def env(out):\n"
               "    if torch.cuda.is_available():\n"
               "        out['gpuType'] = gpu_name(0)\n")
        assert tier(src, 3, "NM101") == "report"
        near = src.replace("gpu_name(0)", "torch.cuda.device_count()")
        assert tier(near, 3, "NM101") == "safe"
        assert "torch.accelerator.is_available()" in fixed(near)

    def test_guard_reaching_text_naming_cuda_is_not_fixed(self):
        """Should not widen a test whose body prints text naming CUDA (false on other accelerators)."""
        src = ("import torch\n"
               "def pick(opts, log):\n"
               "    if opts.device is None and torch.cuda.is_available():\n"
               "        log('CUDA is available, exporting faster')\n"
               "        opts.fast = True\n")
        assert tier(src, 3, "NM101") == "report"
        near = src.replace("CUDA is available", "an accelerator is available")
        assert "torch.accelerator.is_available()" in fixed(near)

    def test_guard_storing_a_bare_index_as_device_is_not_fixed(self):
        """Should not widen a test whose body stores a digit string as a device (`"0"` is a CUDA index
        where `select_device("0")` means `cuda:0`: ultralytics' IMX export)."""
        src = ("import torch\n"
               "def pick(opts):\n"
               "    if opts.device is None and torch.cuda.is_available():\n"
               "        opts.device = '0'\n")
        assert tier(src, 3, "NM101") == "report"
        near = src.replace("'0'", "'auto'")
        assert "torch.accelerator.is_available()" in fixed(near)

    def test_stored_test_reaching_a_cuda_build_requirement_is_not_fixed(self):
        """Should not widen a stored test whose reads require a CUDA build of a package
        (`somepkg-gpu`: installed on an XPU host it would not run)."""
        src = ("import torch\n"
               "def load(dev, require):\n"
               "    use = dev.type != 'cpu' and torch.cuda.is_available()\n"
               "    if use:\n"
               "        require('somepkg-gpu>=1.0')\n"
               "    else:\n"
               "        require('somepkg>=1.0')\n")
        assert tier(src, 3, "NM101") == "report"
        near = src.replace("somepkg-gpu>=1.0", "somepkg-extra>=1.0")
        assert "torch.accelerator.is_available()" in fixed(near)

    def test_count_combined_with_visible_devices_is_not_fixed(self):
        """Should not fix a CUDA device count combined with the `CUDA_VISIBLE_DEVICES` list (another
        vendor's count would truncate CUDA's list); a count on its own is still fixed."""
        src = ("import os\n"
               "import torch\n"
               "def visible_ids():\n"
               "    cvd = os.environ.get('CUDA_VISIBLE_DEVICES', '')\n"
               "    ids = [x for x in cvd.split(',') if x][:torch.cuda.device_count()]\n"
               "    return ids\n")
        assert tier(src, 5, "NM103") == "report"
        near = ("import torch\n"
                "def count():\n"
                "    n = torch.cuda.device_count()\n"
                "    return n\n")
        assert tier(near, 3, "NM103") == "safe"

    def test_device_name_printed_under_a_cuda_label_is_not_fixed(self):
        """Should not fix `get_device_name` whose stored value is printed under a CUDA label."""
        src = ("import torch\n"
               "def banner(log):\n"
               "    name = torch.cuda.get_device_name(0)\n"
               "    log(f'CUDA device: {name}')\n")
        assert tier(src, 3, "NM115") == "report"
        near = src.replace("CUDA device", "device")
        assert tier(near, 3, "NM115") == "unsafe"


# ====================================================================== false-positive classes
class TestVendorArms:
    def test_default_of_a_vendor_table_is_quiet(self):
        """Should not report the default of a table keyed by other vendors (its CUDA entry)."""
        src = ("import torch.distributed as dist\n"
               "def backend(kind):\n"
               "    return {'npu': 'hccl', 'xpu': 'xccl'}.get(kind, 'nccl' if dist.is_nccl_available() else 'gloo')\n")
        assert codes(src) == []
        near = src.replace("{'npu': 'hccl', 'xpu': 'xccl'}", "{'fast': 'x'}")
        assert (3, "NM602") in codes(near)

    def test_code_gated_on_nccl_is_quiet(self):
        """Should not report CUDA code taken only when the process group's backend is NCCL."""
        src = ("import torch\n"
               "import torch.distributed as dist\n"
               "def wait(ready):\n"
               "    use_ids = ready and dist.get_backend() == 'nccl'\n"
               "    dist.barrier(device_ids=[torch.cuda.current_device()]) if use_ids else dist.barrier()\n")
        assert codes(src) == []
        near = src.replace("== 'nccl'", "!= 'nccl'")
        assert (5, "NM104") in codes(near)

    def test_capability_under_a_stored_cuda_test_is_quiet(self):
        """Should not report a capability query under a flag that was assigned a CUDA test."""
        src = ("import torch\n"
               "def bf16_ok(device, new_torch):\n"
               "    ok = device == 'cuda' and new_torch\n"
               "    if ok:\n"
               "        ok = torch.cuda.is_bf16_supported()\n"
               "    if not ok:\n"
               "        raise RuntimeError('bfloat16 needs a CUDA GPU')\n")
        assert codes(src) == []
        near = src.replace("device == 'cuda' and new_torch", "new_torch")
        assert (5, "NM116") in codes(near)

    def test_requirement_of_several_statements_is_quiet(self):
        """Should not report a CUDA requirement whose body builds the error over several statements,
        nor a value stored only for it."""
        src = ("import torch\n"
               "def check(req, log):\n"
               "    valid = all(int(x) < torch.cuda.device_count() for x in req.split(','))\n"
               "    if not (torch.cuda.is_available() and valid):\n"
               "        log(req)\n"
               "        hint = 'install a CUDA build' if torch.cuda.device_count() == 0 else ''\n"
               "        raise ValueError(f'Invalid CUDA device {req}. {hint}')\n")
        assert codes(src) == []
        near = src.replace("        raise ValueError(f'Invalid CUDA device {req}. {hint}')\n",
                           "        req = 'cpu'\n    return valid\n")
        got = codes(near)
        assert (3, "NM103") in got and (4, "NM101") in got

    def test_for_loop_over_other_vendors_is_a_vendor_sibling(self):
        """Should not report a CUDA test next to a loop over other vendors' device types."""
        src = ("def parse(device):\n"
               "    if device == 'cuda':\n"
               "        device = '0'\n"
               "    for backend in ('npu', 'xpu'):\n"
               "        if device.startswith(backend):\n"
               "            return backend\n"
               "    return device\n")
        assert codes(src) == []
        near = src.replace("('npu', 'xpu')", "('fast', 'slow')")
        assert (2, "NM111") in codes(near)

    def test_device_context_around_kernelize_is_quiet(self):
        """Should not report the CUDA device context and test of a module that kernelizes layers
        (the `kernels` library's CUDA/ROCm capability lookups run under it)."""
        src = ("import torch\n"
               "from contextlib import nullcontext\n"
               "def prepare(model, device):\n"
               "    with torch.cuda.device(device) if device.type == 'cuda' else nullcontext():\n"
               "        kernelize(model)\n")
        assert codes(src) == []
        near = src.replace("kernelize(model)", "model.prepare()")
        got = codes(near)
        assert (4, "NM106") in got and (4, "NM111") in got


class TestCudaOnlyComponents:
    def test_cuda_branch_naming_a_cuda_build_is_quiet(self):
        """Should not report a CUDA test choosing a CUDA build of a package, or warning about NVML."""
        src = ("import torch\n"
               "def requirement(dev):\n"
               "    return 'somepkg-gpu>=1' if dev.type == 'cuda' else 'somepkg>=1'\n"
               "def on_error(e, log):\n"
               "    if torch.cuda.is_available():\n"
               "        log(f'NVML init failed: {e}')\n")
        assert codes(src) == []
        near = ("import torch\n"
                "def batch(dev):\n"
                "    return 64 if dev.type == 'cuda' else 8\n"
                "def on_error(e, log):\n"
                "    if torch.cuda.is_available():\n"
                "        log(f'init failed: {e}')\n")
        got = codes(near)
        assert (3, "NM111") in got and (5, "NM101") in got

    def test_value_stored_for_a_cuda_only_component_is_quiet(self):
        """Should not report the CUDA version stored for a TensorRT package name."""
        src = ("import torch\n"
               "def trt_ok(check):\n"
               "    major = (torch.version.cuda or '12').split('.')[0]\n"
               "    return check(f'tensorrt-cu{major}')\n")
        assert codes(src) == []
        near = src.replace("f'tensorrt-cu{major}'", "major")
        assert (3, "NM808") in codes(near)

    def test_function_named_for_gpus_running_nvidia_smi_is_quiet(self):
        """Should not report CUDA calls in a function named for GPUs that runs nvidia-smi."""
        src = ("import subprocess\n"
               "import torch\n"
               "def gpu_count(jetson):\n"
               "    if jetson:\n"
               "        return torch.cuda.device_count()\n"
               "    out = subprocess.check_output(['nvidia-smi', '-L'])\n"
               "    return len(out.splitlines())\n")
        assert codes(src) == []
        near = src.replace("def gpu_count", "def environment")
        assert (5, "NM103") in codes(near)

    def test_cuda_version_under_a_cuda_key_is_quiet(self):
        """Should not report `torch.version.cuda` stored under a key naming CUDA."""
        src = ("import torch\n"
               "def info():\n"
               "    return {'CUDA': torch.version.cuda}\n")
        assert codes(src) == []
        assert (3, "NM808") in codes(src.replace("'CUDA'", "'version'"))
