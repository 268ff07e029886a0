"""Exemptions for CUDA requirements and CUDA-only runtimes (``migrate/exemptions/cuda_requirements.py``,
``migrate/exemptions/cuda_runtimes.py``): checks stating that the code after them needs CUDA itself, and code
gated on NCCL. Each case has an example that is quiet and a near miss that is still reported (and still fixed where the
rule has a fix). The snippets are written for these tests."""

from tests.migrate.snippets import codes, pairs


def test_cuda_requirements_and_cuda_predicates_are_skipped():
    src = (
        "import torch\ndef load():\n    if not torch.cuda.is_available():\n"
        "        raise ImportError('HIGGS requires a CUDA GPU')\n"
        "    if not torch.cuda.is_available():\n        raise ValueError('no device')\n"
        "def is_torch_cuda_available():\n    return torch.cuda.is_available()\n"
        "def to_cuda(x):\n    return torch.cuda.is_available()\n"
    )
    assert pairs(src) == [(5, "NM101"), (10, "NM101")]


def test_tensor_requirement_naming_cuda_is_quiet_and_an_unexplained_one_is_reported():
    """Should not report `x.device.type != "cuda"` tests that raise naming CUDA; should report one
    whose message does not."""
    quiet = (
        "import torch\ndef fused(a, b):\n"
        "    if a.device.type != 'cuda' or b.device.type != 'cuda':\n"
        "        raise ValueError('the fused CUDA kernel needs CUDA tensors')\n"
    )
    assert pairs(quiet) == []
    near = "import torch\ndef f(a):\n    if a.device.type != 'cuda':\n        raise ValueError('bad input')\n"
    assert [c for _, c in pairs(near)] == ["NM111"]


class TestRequirementsAndRuntimes:
    def test_requirement_of_several_statements_is_quiet(self):
        """Should not report a CUDA requirement whose body builds the error over several statements,
        nor a value stored only for it."""
        src = (
            "import torch\n"
            "def check(req, log):\n"
            "    valid = all(int(x) < torch.cuda.device_count() for x in req.split(','))\n"
            "    if not (torch.cuda.is_available() and valid):\n"
            "        log(req)\n"
            "        hint = 'install a CUDA build' if torch.cuda.device_count() == 0 else ''\n"
            "        raise ValueError(f'Invalid CUDA device {req}. {hint}')\n"
        )
        assert codes(src) == []
        near = src.replace(
            "        raise ValueError(f'Invalid CUDA device {req}. {hint}')\n",
            "        req = 'cpu'\n    return valid\n",
        )
        got = codes(near)
        assert (3, "NM103") in got and (4, "NM101") in got

    def test_code_gated_on_nccl_is_quiet(self):
        """Should not report CUDA code taken only when the process group's backend is NCCL."""
        src = (
            "import torch\n"
            "import torch.distributed as dist\n"
            "def wait(ready):\n"
            "    use_ids = ready and dist.get_backend() == 'nccl'\n"
            "    dist.barrier(device_ids=[torch.cuda.current_device()]) if use_ids else dist.barrier()\n"
        )
        assert codes(src) == []
        near = src.replace("== 'nccl'", "!= 'nccl'")
        assert (5, "NM104") in codes(near)


class TestLibraryRequirements:
    def test_else_of_a_library_requirement_and_a_stored_probe_are_quiet(self):
        """Should not report the library's own check after a CUDA requirement that names the
        library, nor a CUDA probe stored only for a CUDA requirement."""
        src = (
            "import torch\n"
            "from .utils import is_fastattn_available\n"
            "def enable(op):\n"
            "    if not is_fastattn_available():\n"
            "        raise ImportError('pip install fastattn')\n"
            "    elif not torch.cuda.is_available():\n"
            "        raise ValueError('fastattn kernels need a GPU')\n"
            "    else:\n"
            "        q = torch.ones(1, 4, device='cuda')\n"
            "        op(q)\n"
            "def validate():\n"
            "    ok = torch.cuda.is_available()\n"
            "    if not ok:\n"
            "        raise ValueError('these checkpoints require an NVIDIA CUDA GPU')\n"
        )
        assert pairs(src) == []

    def test_requirements_not_naming_the_library_and_device_flags_are_still_reported(self):
        """Should still report the `else` of a requirement whose message names no library of the
        chain, and a stored probe that also picks the device (and still fix the probe)."""
        src = (
            "import torch\n"
            "from .utils import is_wandb_available\n"
            "def train(model):\n"
            "    if not is_wandb_available():\n"
            "        raise ImportError('pip install wandb')\n"
            "    elif not torch.cuda.is_available():\n"
            "        raise RuntimeError('training needs a GPU')\n"
            "    else:\n"
            "        model.to('cuda')\n"
            "def pick():\n"
            "    ok = torch.cuda.is_available()\n"
            "    if not ok:\n"
            "        raise ValueError('needs a CUDA GPU')\n"
            "    return torch.device('cuda' if ok else 'cpu')\n"
        )
        got = pairs(src)
        assert (9, "NM110") in got and (11, "NM101") in got
