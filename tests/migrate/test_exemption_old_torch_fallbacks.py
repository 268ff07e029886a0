"""Exemptions for old-torch fallbacks (``migrate/exemptions/old_torch_fallbacks.py``): CUDA code kept for a
torch older than the device-generic API beside it. Each case has an example that is quiet and a near miss that is still reported (and still fixed where the
rule has a fix). The snippets are written for these tests."""

import pytest

from tests.migrate.snippets import codes, fixed, pairs


@pytest.mark.parametrize(
    "src, expect",
    [
        # old-torch fallback: the newer torch's branch names no CUDA at all
        ("import torch\ndef f(s):\n    with s if _TORCH_2_7 else torch.cuda.stream(s):\n        pass\n", []),
        # the same with a constant in the other branch is no evidence
        ("import torch\ndef f(s):\n    return None if _TORCH_2_7 else torch.cuda.stream(s)\n", ["NM206"]),
        # the generic torch.backends.fp32_precision beside its pre-2.9 fallback
        (
            "import torch\nif torch_version >= (2, 9):\n    torch.backends.fp32_precision = 'tf32'\n"
            "else:\n    torch.backends.cuda.matmul.allow_tf32 = True\n",
            [],
        ),
        # the same without a version test
        (
            "import torch\nif fast:\n    torch.backends.fp32_precision = 'tf32'\n"
            "else:\n    torch.backends.cuda.matmul.allow_tf32 = True\n",
            ["NM802"],
        ),
    ],
)
def test_old_torch_fallbacks(src, expect):
    """Should treat the CUDA branch of a torch-version test as a fallback only when the other
    branch is device-generic code."""
    assert [c for _, c in pairs(src)] == expect


def test_old_torch_fallbacks_onnx_runtime_modules_and_gpu_predicates_are_skipped():
    src = (
        "import torch\nTORCH_2_7 = True\n"
        "s = torch.Stream() if TORCH_2_7 else torch.cuda.Stream()\n"
        "t = torch.Stream() if flag else torch.cuda.Stream()\n"
        "def require_torch_multi_gpu(case):\n    return torch.cuda.device_count() > 1\n"
        "def check(q):\n"
        "    if q.device.type != 'cuda' or torch.cuda.get_device_capability()[0] < 9:\n"
        "        raise RuntimeError('needs a CUDA GPU with compute capability 9.0')\n"
    )
    assert pairs(src) == [(4, "NM202")]
    ort = (
        "import onnxruntime as ort\nimport torch\nPROVIDER = 'CUDAExecutionProvider'\n"
        "def run(device):\n    torch.cuda.current_stream(device).synchronize()\n"
    )
    assert pairs(ort) == []


@pytest.mark.parametrize(
    "flag_test, reported",
    [
        ("torch_geometric.typing.WITH_PT24", False),  # the else side: torch < 2.4
        ("not TORCH_2_4", True),  # negated: the else side runs on the newer torch
        ("_TORCH_LESS_THAN_2_4", True),  # true on the older torch: the else side is the newer one
        ("WITH_PT28", True),  # a release that has torch.accelerator
        ("use_device_field", True),  # not a version flag
    ],
)
def test_a_version_flag_side_taken_only_before_torch_accelerator_is_quiet(flag_test, reported):
    """Should leave `'device' if WITH_PT24 else 'cuda'` alone (the profiler's field prefix on a torch
    without `torch.accelerator`, torch_geometric 2.8.1): the rewrite cannot run on the torches that branch
    serves. The side a newer torch takes, a later release and a flag naming no release are still reported."""
    src = f"import torch\ndef f(events):\n    device_str = 'device' if {flag_test} else 'cuda'\n    return device_str\n"
    assert (codes(src) == [(3, "NM110")]) is reported
    less = "import torch\ndef f(events):\n    device_str = 'cuda' if _TORCH_LESS_THAN_2_4 else 'device'\n    return device_str\n"
    assert codes(less) == []


class TestOldTorchFallbacks:
    def test_handler_after_a_generic_call_is_quiet(self):
        """Should not report the CUDA code of an `except (AttributeError, TypeError)` handler after
        a device-generic torch call."""
        src = (
            "import torch\n"
            "def make_scaler(device):\n"
            "    try:\n"
            "        return torch.amp.GradScaler(device=device)\n"
            "    except (AttributeError, TypeError):\n"
            "        return torch.cuda.amp.GradScaler()\n"
            "def amp_dtype(device):\n"
            "    try:\n"
            "        return torch.get_autocast_dtype(device)\n"
            "    except TypeError:\n"
            "        assert device == 'cuda'\n"
            "        return torch.get_autocast_gpu_dtype()\n"
        )
        assert pairs(src) == []

    def test_optional_torch_import_fallback_is_quiet(self):
        """Should not report the old-torch side of a name imported from torch that may be None."""
        src = (
            "import torch\n"
            "try:\n"
            "    from torch.optim.optimizer import _pick_impl\n"
            "except ImportError:\n"
            "    _pick_impl = None\n"
            "def use_foreach(params):\n"
            "    if _pick_impl is not None:\n"
            "        return _pick_impl(params)\n"
            "    return all(p.is_cuda for p in params)\n"
            "def other(params):\n"
            "    if _pick_impl is None:\n"
            "        return params[0].is_cuda\n"
            "    return _pick_impl(params)\n"
        )
        assert pairs(src) == []

    def test_runtime_handlers_cuda_try_bodies_and_other_imports_are_still_reported(self):
        """Should still report (and fix) a handler for a run-time failure, a fallback whose `try`
        names CUDA itself, a `try` that calls no torch API, and the fallback of a non-torch import."""
        src = (
            "import torch\n"
            "try:\n"
            "    from fastops import pick\n"
            "except ImportError:\n"
            "    pick = None\n"
            "def step(model, x):\n"
            "    try:\n"
            "        return model(x)\n"
            "    except RuntimeError:\n"
            "        torch.cuda.empty_cache()\n"
            "def scaler():\n"
            "    try:\n"
            "        return torch.cuda.amp.GradScaler(init_scale=2.0)\n"
            "    except TypeError:\n"
            "        return torch.cuda.amp.GradScaler()\n"
            "def place(model, device):\n"
            "    try:\n"
            "        return model.to(device)\n"
            "    except TypeError:\n"
            "        return model.cuda()\n"
            "def use(params):\n"
            "    if pick is not None:\n"
            "        return pick(params)\n"
            "    return all(p.is_cuda for p in params)\n"
        )
        got = pairs(src)
        assert (10, "NM301") in got and (13, "NM503") in got and (15, "NM503") in got
        assert (20, "NM108") in got and (24, "NM112") in got
        assert "torch.accelerator.empty_cache()" in fixed(src)


class TestTorchAmpImports:
    def test_name_imported_from_torch_amp_with_a_cuda_fallback_is_torch_amp(self):
        """Should read `GradScaler` as `torch.amp.GradScaler` when the file imports it from `torch.amp` with
        `torch.cuda.amp` as the old-torch fallback (in either order): its call is then device-generic, not
        rewritten with CUDA's signature (which passed the device type as `init_scale`)."""
        src = (
            "try:\n    from torch.amp import GradScaler\nexcept ImportError:\n"
            "    from torch.cuda.amp import GradScaler\n"
            "def make(device_type):\n    return GradScaler(device_type, enabled=True)\n"
        )
        assert [c for c in codes(src) if c[0] == 6] == []
        assert "GradScaler(device_type, enabled=True)" in fixed(src)
