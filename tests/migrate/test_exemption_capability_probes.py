"""Exemptions for capability probes (``migrate/exemptions/capability_probes.py``): questions only CUDA can
answer, and code reached only once CUDA was established. Each case has an example that is quiet and a near miss that is still reported (and still fixed where the
rule has a fix). The snippets are written for these tests."""

from tests.migrate.snippets import codes, fixed, pairs


def test_capability_query_under_a_cuda_guard_is_quiet():
    """Should not report capability queries reached only on CUDA: after `and`, in the body of a CUDA
    test, after an early exit that raises; nor the device test guarding the query."""
    src = (
        "import torch\n"
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
        "        return props.major\n"
    )
    assert pairs(src) == []


def test_capability_query_without_a_cuda_guard_is_still_reported():
    """Should report a capability query that also runs off CUDA (it raises there), and one or-ed
    with the CUDA probe."""
    src = (
        "import torch\n"
        "if torch.cuda.get_device_capability()[0] >= 8:\n"
        "    dt = torch.bfloat16\n"
        "ok = torch.cuda.is_available() or torch.cuda.is_bf16_supported()\n"
    )
    assert [c for _, c in pairs(src)] == ["NM116", "NM101", "NM116"]


def test_probe_that_answers_false_without_cuda_is_quiet():
    """Should not report a predicate opened by `if not torch.cuda.is_available(): return False`."""
    src = (
        "import torch\n"
        "def tf32_reduced_ok():\n"
        "    if not torch.cuda.is_available():\n"
        "        return False\n"
        "    x = torch.zeros(1, device='cuda')\n"
        "    return bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction) and x.is_cuda\n"
    )
    assert pairs(src) == []


def test_set_up_that_returns_without_cuda_is_still_reported_and_fixed():
    """Should report and fix a set-up function that merely returns without CUDA."""
    src = (
        "import torch\n"
        "def setup(rank):\n"
        "    if not torch.cuda.is_available():\n"
        "        return\n"
        "    torch.cuda.set_device(rank)\n"
    )
    assert [c for _, c in pairs(src)] == ["NM101", "NM105"]
    out = fixed(src)
    assert "torch.accelerator.set_device_index(rank)" in out and "torch.cuda" not in out


class TestStoredCudaFlags:
    def test_capability_under_a_stored_cuda_test_is_quiet(self):
        """Should not report a capability query under a flag that was assigned a CUDA test."""
        src = (
            "import torch\n"
            "def bf16_ok(device, new_torch):\n"
            "    ok = device == 'cuda' and new_torch\n"
            "    if ok:\n"
            "        ok = torch.cuda.is_bf16_supported()\n"
            "    if not ok:\n"
            "        raise RuntimeError('bfloat16 needs a CUDA GPU')\n"
        )
        assert codes(src) == []
        near = src.replace("device == 'cuda' and new_torch", "new_torch")
        assert (5, "NM116") in codes(near)


class TestCapabilityProbes:
    def test_capability_function_and_early_exit_before_a_query_are_quiet(self):
        """Should not report a function named for a CUDA capability, nor the early exit guarding a
        capability query."""
        src = (
            "import torch\n"
            "def cuda_compute_capability():\n"
            "    if torch.cuda.is_available():\n"
            "        dev = torch.device('cuda')\n"
            "        major, minor = torch.cuda.get_device_capability(dev)\n"
            "        return major + minor / 10\n"
            "    return None\n"
            "def chunk(device):\n"
            "    if device.type != 'cuda':\n"
            "        return None\n"
            "    return torch.cuda.get_device_properties(device).total_memory // 4\n"
        )
        assert pairs(src) == []

    def test_functions_merely_named_for_cuda_and_other_early_exits_are_still_reported(self):
        """Should still report a helper named for CUDA without a capability word, and an early exit
        followed by ordinary CUDA code (and still fix the helper)."""
        src = (
            "import torch\n"
            "def cuda_device():\n"
            "    return torch.device('cuda')\n"
            "def flush(device):\n"
            "    if device.type != 'cuda':\n"
            "        return None\n"
            "    torch.cuda.synchronize()\n"
        )
        got = pairs(src)
        assert (3, "NM110") in got and (5, "NM111") in got and (7, "NM201") in got
        assert "torch.device('cuda')" not in fixed(src)
