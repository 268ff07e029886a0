"""Exemptions for per-vendor dispatch (``migrate/exemptions/vendor_dispatch.py``): the CUDA branch of a
per-vendor chain, tests and statements that name other accelerators, a CUDA fallback where no accelerator
exists, and the default branch of a closed vendor chain. Each case has an example that is quiet and a near miss that is still reported (and still fixed where the
rule has a fix). The snippets are written for these tests."""

from tests.migrate.snippets import codes, fixed, pairs


def test_cuda_branch_of_a_vendor_chain_is_skipped_but_other_branches_are_checked():
    src = (
        "import torch\ndef pick():\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
        "    elif torch.xpu.is_available():\n        torch.cuda.empty_cache()\n"
    )
    assert pairs(src) == [(6, "NM301")]


def test_cuda_branch_reached_through_elif_is_skipped():
    src = (
        "import torch\ndef pick(is_torch_npu_available):\n    if is_torch_npu_available():\n        d = 'npu'\n"
        "    elif torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
    )
    assert pairs(src) == []


def test_plain_cuda_if_else_is_still_reported():
    src = "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\nelse:\n    pass\n"
    assert [c for _, c in pairs(src)] == ["NM101", "NM201"]


def test_tests_naming_other_accelerators_and_onnx_runtime_devices_are_skipped():
    src = (
        "import torch\ndef f(t, available, device, is_torch_xpu_available, req):\n"
        "    mode = 'pointwise' if t.device.type in ('cuda', 'xpu') else 'generic'\n"
        "    if not torch.cuda.is_available() and not is_torch_xpu_available():\n        raise RuntimeError\n"
        "    dev = 'cuda' if torch.cuda.is_available() and 'CUDAExecutionProvider' in available else 'cpu'\n"
        "    if device.type == 'cuda' and 'CUDAExecutionProvider' in available:\n        pass\n"
        "    if req not in ('cpu', 'cuda'):\n        raise ValueError(req)\n"
    )
    assert pairs(src) == [(9, "NM111")]  # only the whitelist that names no other accelerator


def test_statements_next_to_statements_for_other_vendors_are_skipped():
    """Per-vendor statements (sampled on transformers: trainer RNG states, env flags, availability
    reports): the CUDA one is quiet; a statement that names CUDA and another vendor is no evidence."""
    src = (
        "import os, torch\ndef report(dev, is_torch_npu_available):\n"
        "    has_cuda = torch.cuda.is_available()\n"
        "    has_npu = is_torch_npu_available()\n"
        "    os.environ['CUDA_LAUNCH_BLOCKING'] = '1'\n"
        "    os.environ['ASCEND_LAUNCH_BLOCKING'] = '1'\n"
        "    if dev == 'cuda':\n        return torch.cuda.device_count()\n"
        "    if dev == 'xpu':\n        return 1\n"
        "def pick():\n"
        "    a = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "    b = 'cuda' if torch.cuda.is_available() else 'mps'\n"
        "    return a, b\n"
    )
    assert [line for line, _ in pairs(src)] == [12, 13]  # only the selections in pick()


def test_library_cuda_probes_in_vendor_chains_and_returned_requirements_are_skipped():
    src = (
        "import torch\ndef pick(d, is_torch_cuda_available, is_torch_npu_available, err):\n"
        "    if is_torch_npu_available():\n        return torch.device(f'npu:{d}')\n"
        "    elif is_torch_cuda_available():\n        return torch.device(f'cuda:{d}')\n"
        "def check(err):\n"
        "    if not torch.cuda.is_available():\n        return err('this kernel requires CUDA')\n"
        "    if not torch.cuda.is_available():\n        return 'cpu'\n"
    )
    assert pairs(src) == [(10, "NM101")]


def test_cuda_fallback_when_no_accelerator_exists_is_quiet():
    """Should not report `torch.device("cuda")` after `current_accelerator() or`; should report and
    fix it after another value."""
    quiet = "import torch\nkind = (torch.accelerator.current_accelerator() or torch.device('cuda')).type\n"
    assert pairs(quiet) == []
    near = "import torch\ndef f(args):\n    return (args.device or torch.device('cuda')).type\n"
    assert [c for _, c in pairs(near)] == ["NM110"]
    assert "torch.device('cuda')" not in fixed(near)


def test_rocm_tests_and_named_vendor_chains_are_quiet():
    """Should not report a CUDA test and-ed with a ROCm/HIP test, nor the CUDA branch of a chain
    tested through variables (`have_cuda` / `have_xpu`); should report the same without them."""
    quiet = (
        "import torch\ndef f(dev, have_cuda, have_xpu):\n"
        "    triton_flash = dev.type == 'cuda' and not IS_HIP_BUILD\n"
        "    if have_cuda:\n        name = torch.cuda.get_device_name()\n"
        "    elif have_xpu:\n        name = torch.xpu.get_device_name()\n    return triton_flash, name\n"
    )
    assert pairs(quiet) == []
    near = (
        "import torch\ndef f(dev, have_cuda):\n"
        "    fast = dev.type == 'cuda' and not IS_DEBUG\n"
        "    if have_cuda:\n        name = torch.cuda.get_device_name()\n"
        "    else:\n        name = 'cpu'\n    return fast, name\n"
    )
    assert [c for _, c in pairs(near)] == ["NM111", "NM115"]
    assert "torch.get_device_module().get_device_name()" in fixed(near)


def test_library_probe_siblings_gpu_named_chains_and_cuda_checks_are_quiet():
    """Should not report (read on accelerate, which the classes were not designed on): a statement
    under `if is_cuda_available():` among statements for other vendors; the CUDA branch of a chain
    over `Mode.MULTI_GPU` / `Mode.MULTI_XPU`; a device test next to a CUDA check call; a capability
    query in `check_cuda_*`; an assertion that CUDA is required; the guard of torch's private CUDA
    bindings."""
    src = (
        "import torch\n"
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
        "def child():\n    if torch.cuda.is_available():\n        assert not torch._C._cuda_isInBadFork()\n"
    )
    assert pairs(src) == []


def test_near_misses_of_the_accelerate_classes_are_still_reported_and_fixed():
    """Should report: a lone `if is_cuda_available():` statement, a GPU-named test without another
    vendor, a device test next to a non-CUDA call, a capability query in a function not named for
    CUDA, an assertion without a message naming CUDA."""
    src = (
        "import torch\n"
        "def save(states):\n"
        "    if is_cuda_available():\n        states['gpu'] = torch.cuda.get_rng_state_all()\n"
        "def sync(kind):\n"
        "    if kind == Mode.MULTI_GPU:\n        torch.cuda.synchronize()\n"
        "def p2p(self):\n"
        "    if self.device.type == 'cuda' and not peer_access():\n        raise RuntimeError('x')\n"
        "def bf16_speed():\n    return torch.cuda.get_device_capability() >= (8, 0)\n"
        "def init():\n    assert torch.cuda.is_available(), 'no device'\n"
    )
    assert [c for _, c in pairs(src)] == ["NM403", "NM201", "NM111", "NM116", "NM101"]
    out = fixed(src)
    assert "torch.accelerator.synchronize()" in out and "assert torch.accelerator.is_available()" in out


class TestVendorLoops:
    def test_for_loop_over_other_vendors_is_a_vendor_sibling(self):
        """Should not report a CUDA test next to a loop over other vendors' device types."""
        src = (
            "def parse(device):\n"
            "    if device == 'cuda':\n"
            "        device = '0'\n"
            "    for backend in ('npu', 'xpu'):\n"
            "        if device.startswith(backend):\n"
            "            return backend\n"
            "    return device\n"
        )
        assert codes(src) == []
        near = src.replace("('npu', 'xpu')", "('fast', 'slow')")
        assert (2, "NM111") in codes(near)


class TestClosedVendorChains:
    def test_default_of_a_chain_closed_by_an_early_exit_or_a_class_check_is_quiet(self):
        """Should not report the CUDA default of a vendor chain where the function or its class
        admits only CUDA and the vendors the chain names."""
        src = (
            "import torch\n"
            "def big_memory():\n"
            "    if not (torch.cuda.is_available() or torch.xpu.is_available()):\n"
            "        return None\n"
            "    if torch.xpu.is_available():\n"
            "        props = torch.xpu.get_device_properties(0)\n"
            "    else:\n"
            "        props = torch.cuda.get_device_properties(0)\n"
            "    return props.total_memory\n"
            "class Loader:\n"
            "    def check(self):\n"
            "        if not torch.cuda.is_available() and not torch.xpu.is_available():\n"
            "            raise RuntimeError('no GPU')\n"
            "    def target(self):\n"
            "        dev = f'xpu:{torch.xpu.current_device()}' if torch.xpu.is_available() \\\n"
            "            else f'cuda:{torch.cuda.current_device()}'\n"
            "        return dev\n"
        )
        assert pairs(src) == []

    def test_open_chains_and_plain_else_branches_are_still_reported(self):
        """Should still report the default of a chain with no closing check (it serves every
        unnamed accelerator), of a chain that leaves an admitted vendor out, and an `else` that is
        no vendor chain at all (and still fix it)."""
        src = (
            "import torch\n"
            "def count():\n"
            "    if torch.xpu.is_available():\n"
            "        return torch.xpu.device_count()\n"
            "    else:\n"
            "        return torch.cuda.device_count()\n"
            "def back(model):\n"
            "    if not (torch.cuda.is_available() or torch.xpu.is_available() or torch.mps.is_available()):\n"
            "        raise RuntimeError('no GPU')\n"
            "    if torch.xpu.is_available():\n"
            "        model.to(torch.xpu.current_device())\n"
            "    else:\n"
            "        model.to(torch.cuda.current_device())\n"
            "class Loader:\n"
            "    def check(self):\n"
            "        if not torch.cuda.is_available() and not torch.xpu.is_available():\n"
            "            raise RuntimeError('no GPU')\n"
            "    def target(self):\n"
            "        return 'mps' if torch.mps.is_available() else f'cuda:{torch.cuda.current_device()}'\n"
            "def place(x, on_cpu):\n"
            "    if on_cpu:\n"
            "        return x\n"
            "    else:\n"
            "        return x.to(torch.cuda.current_device())\n"
        )
        got = pairs(src)
        assert (6, "NM103") in got and (13, "NM104") in got and (19, "NM104") in got and (24, "NM104") in got
        # alone (the file's other availability checks stay CUDA-specific and hold every device choice back)
        assert "torch.accelerator.device_count()" in fixed(src.split("def back")[0])
