"""Meta-tests of migrate/cuda_reach.py and the deliberate-code classes added with it (issue 17,
precision): each class has an example written for this file that is deliberately CUDA-only (quiet)
and a near miss that is a real CUDA-ism (still reported, and still fixed as before)."""
import pytest

from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection

ALL = selection(None, None)


def codes(src):
    return sorted((v.line, v.code) for v in check_source(src, Settings(ALL)).violations)


def fixed(src):
    return check_source(src, Settings(ALL, fix=True, unsafe_fixes=True)).new_source


def test_capability_query_under_a_cuda_guard_is_quiet():
    """Should not report capability queries reached only on CUDA: after `and`, in the body of a CUDA
    test, after an early exit that raises; nor the device test guarding the query."""
    src = ("import torch\n"
           "def pick_dtype(t):\n"
           "    if t.device.type == 'cuda' and torch.cuda.get_device_capability(t.device)[0] >= 8:\n"
           "        return torch.bfloat16\n"
           "    return torch.float16\n"
           "def fa3_ok():\n"
           "    if not torch.cuda.is_available():\n"
           "        raise RuntimeError('FlashAttention-3 needs an NVIDIA GPU')\n"
           "    major, _ = torch.cuda.get_device_capability()\n"
           "    return major == 9\n"
           "def sm():\n"
           "    if torch.cuda.is_available():\n"
           "        props = torch.cuda.get_device_properties(0)\n"
           "        return props.major\n")
    assert codes(src) == []


def test_capability_query_without_a_cuda_guard_is_still_reported():
    """Should report a capability query that also runs off CUDA (it raises there), and one or-ed
    with the CUDA probe."""
    src = ("import torch\n"
           "if torch.cuda.get_device_capability()[0] >= 8:\n"
           "    dt = torch.bfloat16\n"
           "ok = torch.cuda.is_available() or torch.cuda.is_bf16_supported()\n")
    assert [c for _, c in codes(src)] == ["NM116", "NM101", "NM116"]


def test_guard_of_a_cuda_only_import_is_quiet_but_a_plain_guard_is_still_fixed():
    """Should not report the CUDA guard of an import of NVIDIA's own bindings; should still widen
    the guard of device-generic code."""
    quiet = "import torch\nif torch.cuda.is_available():\n    from cuda import cudart\n"
    assert codes(quiet) == []
    near = "import torch\nif torch.cuda.is_available():\n    import apex\n"
    assert [c for _, c in codes(near)] == ["NM101"]
    assert "if torch.accelerator.is_available():" in fixed(near)


def test_probe_that_answers_false_without_cuda_is_quiet():
    """Should not report a predicate opened by `if not torch.cuda.is_available(): return False`."""
    src = ("import torch\n"
           "def tf32_reduced_ok():\n"
           "    if not torch.cuda.is_available():\n"
           "        return False\n"
           "    x = torch.zeros(1, device='cuda')\n"
           "    return bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction) and x.is_cuda\n")
    assert codes(src) == []


def test_set_up_that_returns_without_cuda_is_still_reported_and_fixed():
    """Should report and fix a set-up function that merely returns without CUDA."""
    src = ("import torch\n"
           "def setup(rank):\n"
           "    if not torch.cuda.is_available():\n"
           "        return\n"
           "    torch.cuda.set_device(rank)\n")
    assert [c for _, c in codes(src)] == ["NM101", "NM105"]
    out = fixed(src)
    assert "torch.accelerator.set_device_index(rank)" in out and "torch.cuda" not in out


KERNEL_MODULE = ("import torch\nfrom torch.utils.cpp_extension import load_inline\n"
                 "_ext = load_inline(name='fused', cpp_sources='', functions=['fwd'])\n"
                 "def fwd(q):\n"
                 "    if q.device.type == 'cuda':\n"
                 "        with torch.cuda.device(q.device):\n"
                 "            return _ext.fwd(q)\n"
                 "    return q\n")


def test_device_tests_in_a_module_that_loads_kernels_are_quiet():
    """Should not report the device test and device context that launch a compiled kernel."""
    assert codes(KERNEL_MODULE) == []


def test_other_cuda_code_in_a_kernel_module_and_device_tests_elsewhere_are_still_reported():
    """Should still report and fix `.cuda()` and `torch.cuda.synchronize()` in a kernel module, and
    report the same device test in a module that loads no kernel."""
    src = KERNEL_MODULE + "def run(m, x):\n    torch.cuda.synchronize()\n    return m.cuda()(x)\n"
    assert [c for _, c in codes(src)] == ["NM201", "NM108"]
    out = fixed(src)
    assert "torch.accelerator.synchronize()" in out and ".cuda()" not in out
    plain = "import torch\ndef fwd(q):\n    if q.device.type == 'cuda':\n        return q * 2\n    return q\n"
    assert [c for _, c in codes(plain)] == ["NM111"]


def test_kernel_object_gate_and_cuda_feature_of_a_torch_version_are_quiet():
    """Should not report `x.is_cuda` next to a test that a CUDA kernel object exists, or next to a
    torch-version test."""
    src = ("import torch\n"
           "class Act(torch.nn.Module):\n"
           "    def forward(self, x):\n"
           "        if self._fused_cuda_op is not None and x.is_cuda:\n"
           "            return self._fused_cuda_op(x)\n"
           "        if (x.is_cuda\n"
           "                and torch_version_at_least('2.9')):\n"
           "            return torch.mm(x, x, out_dtype=torch.float32)\n"
           "        return x\n")
    assert codes(src) == []


def test_device_test_next_to_other_conditions_is_still_reported():
    """Should report `x.is_cuda` next to a plain flag or a grad-mode test."""
    src = ("import torch\n"
           "def f(self, x):\n"
           "    if self.use_fast and x.is_cuda:\n"
           "        return x\n"
           "    if x.is_cuda and not torch.is_grad_enabled():\n"
           "        return x\n")
    assert [c for _, c in codes(src)] == ["NM112", "NM112"]


def test_cuda_only_option_is_quiet_but_a_cuda_placement_is_still_reported():
    """Should not report `driver=... if a.is_cuda else None`; should report the same shape for
    `device=`."""
    quiet = "import torch\ndef f(a):\n    return torch.linalg.svd(a, driver='gesvd' if a.is_cuda else None)\n"
    assert codes(quiet) == []
    near = "import torch\ndef f(a):\n    return torch.ones(2, device='cuda' if a.is_cuda else None)\n"
    assert [c for _, c in codes(near)] == ["NM110", "NM112"]


@pytest.mark.parametrize("src, expect", [
    # old-torch fallback: the newer torch's branch names no CUDA at all
    ("import torch\ndef f(s):\n    with s if _TORCH_2_7 else torch.cuda.stream(s):\n        pass\n", []),
    # the same with a constant in the other branch is no evidence
    ("import torch\ndef f(s):\n    return None if _TORCH_2_7 else torch.cuda.stream(s)\n", ["NM206"]),
    # the generic torch.backends.fp32_precision beside its pre-2.9 fallback
    ("import torch\nif torch_version >= (2, 9):\n    torch.backends.fp32_precision = 'tf32'\n"
     "else:\n    torch.backends.cuda.matmul.allow_tf32 = True\n", []),
    # the same without a version test
    ("import torch\nif fast:\n    torch.backends.fp32_precision = 'tf32'\n"
     "else:\n    torch.backends.cuda.matmul.allow_tf32 = True\n", ["NM802"]),
])
def test_old_torch_fallbacks(src, expect):
    """Should treat the CUDA branch of a torch-version test as a fallback only when the other
    branch is device-generic code."""
    assert [c for _, c in codes(src)] == expect


def test_tensor_requirement_naming_cuda_is_quiet_and_an_unexplained_one_is_reported():
    """Should not report `x.device.type != "cuda"` tests that raise naming CUDA; should report one
    whose message does not."""
    quiet = ("import torch\ndef fused(a, b):\n"
             "    if a.device.type != 'cuda' or b.device.type != 'cuda':\n"
             "        raise ValueError('the fused CUDA kernel needs CUDA tensors')\n")
    assert codes(quiet) == []
    near = "import torch\ndef f(a):\n    if a.device.type != 'cuda':\n        raise ValueError('bad input')\n"
    assert [c for _, c in codes(near)] == ["NM111"]


def test_completed_cuda_request_is_quiet_but_other_code_under_it_is_reported():
    """Should not report `if opts.device == "cuda": opts.device = f"cuda:{rank}"`; should report a
    `.cuda()` under the same test."""
    quiet = ("import torch\ndef f(opts):\n    if opts.device == 'cuda':\n"
             "        opts.device = f'cuda:{opts.local_rank}'\n    return torch.device(opts.device)\n")
    assert codes(quiet) == []
    near = "import torch\ndef f(opts, model):\n    if opts.device == 'cuda':\n        model = model.cuda()\n"
    assert [c for _, c in codes(near)] == ["NM111", "NM108"]


def test_table_entry_under_a_test_for_its_own_vendor_is_quiet():
    """Should not report `SYNC["xla"] = torch.cuda.synchronize` under `if has_xla():`; should report
    it under another vendor's key or without the test."""
    quiet = "import torch\nSYNC = {}\nif has_xla():\n    SYNC['xla'] = torch.cuda.synchronize\n"
    assert codes(quiet) == []
    near = "import torch\nSYNC = {}\nif has_xla():\n    SYNC['mps'] = torch.cuda.synchronize\n"
    assert [line for line, _ in codes(near)] == [4]
    bare = "import torch\nSYNC = {}\ndef setup():\n    SYNC['xla'] = torch.cuda.synchronize\n"
    assert [line for line, _ in codes(bare)] == [4]


def test_cuda_fallback_when_no_accelerator_exists_is_quiet():
    """Should not report `torch.device("cuda")` after `current_accelerator() or`; should report and
    fix it after another value."""
    quiet = "import torch\nkind = (torch.accelerator.current_accelerator() or torch.device('cuda')).type\n"
    assert codes(quiet) == []
    near = "import torch\ndef f(args):\n    return (args.device or torch.device('cuda')).type\n"
    assert [c for _, c in codes(near)] == ["NM110"]
    assert "torch.device('cuda')" not in fixed(near)


def test_rocm_tests_and_named_vendor_chains_are_quiet():
    """Should not report a CUDA test and-ed with a ROCm/HIP test, nor the CUDA branch of a chain
    tested through variables (`have_cuda` / `have_xpu`); should report the same without them."""
    quiet = ("import torch\ndef f(dev, have_cuda, have_xpu):\n"
             "    triton_flash = dev.type == 'cuda' and not IS_HIP_BUILD\n"
             "    if have_cuda:\n        name = torch.cuda.get_device_name()\n"
             "    elif have_xpu:\n        name = torch.xpu.get_device_name()\n    return triton_flash, name\n")
    assert codes(quiet) == []
    near = ("import torch\ndef f(dev, have_cuda):\n"
            "    fast = dev.type == 'cuda' and not IS_DEBUG\n"
            "    if have_cuda:\n        name = torch.cuda.get_device_name()\n"
            "    else:\n        name = 'cpu'\n    return fast, name\n")
    assert [c for _, c in codes(near)] == ["NM111", "NM115"]
    assert "torch.get_device_module().get_device_name()" in fixed(near)


def test_cudagraph_option_read_is_quiet_and_set_is_reported():
    """NM703: should not report reading whether a compile mode uses CUDA graphs; should report
    setting the option."""
    quiet = ("import torch\ndef uses(opts):\n    a = opts.get('triton.cudagraphs', False)\n"
             "    return a or opts['triton.cudagraphs']\n")
    assert codes(quiet) == []
    near = ("import torch\ndef f(m, opts):\n    opts['triton.cudagraphs'] = False\n"
            "    return torch.compile(m, options={'triton.cudagraphs': True})\n")
    assert [c for _, c in codes(near)] == ["NM703", "NM703"]


def test_rocm_version_checks_are_quiet_and_gpu_build_tests_are_reported():
    """NM808: should not report `torch.version.hip` asked only whether this is ROCm, nor the CUDA
    branch of a hip/cuda chain; should report a "GPU build" test, a version comparison and
    `version.parse` of it."""
    quiet = ("import torch\ndef check():\n    if not have_lib():\n        raise RuntimeError('x')\n"
             "    elif torch.version.hip:\n        raise RuntimeError('the library does not support ROCm')\n"
             "    is_amd = torch.version.hip is not None\n"
             "    if torch.version.hip:\n        k = 'rocm'\n    elif torch.version.cuda:\n        k = 'cuda'\n"
             "    return is_amd, k\n")
    assert codes(quiet) == []
    near = ("import torch\nfrom packaging import version\n"
            "gpu_build = torch.version.cuda or torch.version.hip\n"
            "new_rocm = torch.version.hip >= '6.0'\n"
            "v = version.parse(torch.version.hip)\n"
            "if torch.version.cuda is not None:\n    pass\n")
    assert codes(near) == [(3, "NM808"), (3, "NM808"), (4, "NM808"), (5, "NM808"), (6, "NM808")]


def test_library_probe_siblings_gpu_named_chains_and_cuda_checks_are_quiet():
    """Should not report (read on accelerate, which the classes were not designed on): a statement
    under `if is_cuda_available():` among statements for other vendors; the CUDA branch of a chain
    over `Mode.MULTI_GPU` / `Mode.MULTI_XPU`; a device test next to a CUDA check call; a capability
    query in `check_cuda_*`; an assertion that CUDA is required; the guard of torch's private CUDA
    bindings."""
    src = ("import torch\n"
           "def save(states):\n"
           "    if is_npu_available():\n        states['npu'] = torch.npu.get_rng_state_all()\n"
           "    if is_cuda_available():\n        states['gpu'] = torch.cuda.get_rng_state_all()\n"
           "def sync(kind):\n"
           "    if kind == Mode.MULTI_GPU:\n        return torch.cuda.get_rng_state()\n"
           "    elif kind == Mode.MULTI_XPU:\n        return torch.xpu.get_rng_state()\n"
           "def p2p(self):\n"
           "    if self.device.type == 'cuda' and not check_cuda_peer_access():\n        raise RuntimeError('x')\n"
           "def check_cuda_bf16_speed():\n    return torch.cuda.get_device_capability() >= (8, 0)\n"
           "def init():\n    assert torch.cuda.is_available(), 'this trainer requires CUDA'\n"
           "def child():\n    if torch.cuda.is_available():\n        assert not torch._C._cuda_isInBadFork()\n")
    assert codes(src) == []


def test_near_misses_of_the_accelerate_classes_are_still_reported_and_fixed():
    """Should report: a lone `if is_cuda_available():` statement, a GPU-named test without another
    vendor, a device test next to a non-CUDA call, a capability query in a function not named for
    CUDA, an assertion without a message naming CUDA."""
    src = ("import torch\n"
           "def save(states):\n"
           "    if is_cuda_available():\n        states['gpu'] = torch.cuda.get_rng_state_all()\n"
           "def sync(kind):\n"
           "    if kind == Mode.MULTI_GPU:\n        torch.cuda.synchronize()\n"
           "def p2p(self):\n"
           "    if self.device.type == 'cuda' and not peer_access():\n        raise RuntimeError('x')\n"
           "def bf16_speed():\n    return torch.cuda.get_device_capability() >= (8, 0)\n"
           "def init():\n    assert torch.cuda.is_available(), 'no device'\n")
    assert [c for _, c in codes(src)] == ["NM403", "NM201", "NM111", "NM116", "NM101"]
    out = fixed(src)
    assert "torch.accelerator.synchronize()" in out and "assert torch.accelerator.is_available()" in out
