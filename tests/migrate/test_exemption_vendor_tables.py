"""Exemptions for per-vendor tables, displays, flags and functions (``migrate/exemptions/vendor_tables.py``).
Each case has an example that is quiet and a near miss that is still reported (and still fixed where the
rule has a fix). The snippets are written for these tests."""

from tests.migrate.snippets import codes, pairs


def test_table_entry_under_a_test_for_its_own_vendor_is_quiet():
    """Should not report `SYNC["xla"] = torch.cuda.synchronize` under `if has_xla():`; should report
    it under another vendor's key or without the test."""
    quiet = "import torch\nSYNC = {}\nif has_xla():\n    SYNC['xla'] = torch.cuda.synchronize\n"
    assert pairs(quiet) == []
    near = "import torch\nSYNC = {}\nif has_xla():\n    SYNC['mps'] = torch.cuda.synchronize\n"
    assert [line for line, _ in pairs(near)] == [4]
    bare = "import torch\nSYNC = {}\ndef setup():\n    SYNC['xla'] = torch.cuda.synchronize\n"
    assert [line for line, _ in pairs(bare)] == [4]


class TestVendorTables:
    def test_default_of_a_vendor_table_is_quiet(self):
        """Should not report the default of a table keyed by other vendors (its CUDA entry)."""
        src = (
            "import torch.distributed as dist\n"
            "def backend(kind):\n"
            "    return {'npu': 'hccl', 'xpu': 'xccl'}.get(kind, 'nccl' if dist.is_nccl_available() else 'gloo')\n"
        )
        assert codes(src) == []
        near = src.replace("{'npu': 'hccl', 'xpu': 'xccl'}", "{'fast': 'x'}")
        assert (3, "NM602") in codes(near)

    def test_cuda_function_with_a_sibling_for_another_vendor_is_quiet(self):
        """Should not report inside `get_cuda_device()` when the module also defines `get_mps_device()`;
        a `to_cuda()` with no sibling is still reported."""
        src = (
            "import torch\n"
            "def get_cuda_device(index=0):\n"
            "    return torch.device(f'cuda:{index}') if torch.cuda.is_available() else torch.device('cpu')\n"
            "def get_mps_device():\n"
            "    return torch.device('mps') if torch.backends.mps.is_available() else torch.device('cpu')\n"
            "def to_cuda(x):\n"
            "    return x.cuda()\n"
        )
        assert [line for line, _ in codes(src)] == [7]

    def test_cuda_element_of_a_per_vendor_display_is_quiet(self):
        """Should not report `ProfilerActivity.CUDA` in a set that also lists `ProfilerActivity.XPU`, but
        should in a list naming no other vendor."""
        src = (
            "from torch.profiler import ProfilerActivity\n"
            "ALL = {ProfilerActivity.CPU, ProfilerActivity.CUDA, ProfilerActivity.XPU}\n"
            "SOME = [ProfilerActivity.CPU, ProfilerActivity.CUDA]\n"
        )
        assert codes(src) == [(3, "NM806")]

    def test_cuda_flag_next_to_another_vendors_flag_is_quiet(self):
        """Should not report the body of `if cuda:` next to `if xpu:`; a lone `if use_cuda:` is reported."""
        src = (
            "from torch.profiler import ProfilerActivity\n"
            "def activities(cpu, cuda, xpu):\n"
            "    out = []\n"
            "    if cuda:\n"
            "        out.append(ProfilerActivity.CUDA)\n"
            "    if xpu:\n"
            "        out.append(ProfilerActivity.XPU)\n"
            "    return out\n"
            "def gpu_only(use_cuda):\n"
            "    return [ProfilerActivity.CUDA] if use_cuda else []\n"
        )
        assert codes(src) == [(10, "NM806")]
