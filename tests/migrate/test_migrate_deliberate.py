"""Precision (issue 17, part 4): annotations, the CUDA branch of an explicit per-vendor chain and
CUDA sanity checks are not reported; the other branches and ordinary CUDA code still are; after
--diff the findings left carry the fixed text's lines and snippets."""
import io

from neuron_conformance.migrate.cli import main
from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection

ALL = selection(None, None)


def codes(src):
    return sorted((v.line, v.code) for v in check_source(src, Settings(ALL)).violations)


def test_annotations_are_not_reported():
    src = ("import torch\nfrom typing import Optional\n"
           "def f(s: torch.cuda.Stream, e: Optional['torch.cuda.Event'] = None) -> torch.cuda.Event:\n"
           "    x: torch.cuda.FloatTensor = None\n    return torch.cuda.Event()\n")
    assert codes(src) == [(5, "NM207")]


def test_cuda_branch_of_a_vendor_chain_is_skipped_but_other_branches_are_checked():
    src = ("import torch\ndef pick():\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
           "    elif torch.xpu.is_available():\n        torch.cuda.empty_cache()\n")
    assert codes(src) == [(6, "NM301")]


def test_cuda_branch_reached_through_elif_is_skipped():
    src = ("import torch\ndef pick(is_torch_npu_available):\n    if is_torch_npu_available():\n        d = 'npu'\n"
           "    elif torch.cuda.is_available():\n        torch.cuda.synchronize()\n")
    assert codes(src) == []


def test_plain_cuda_if_else_is_still_reported():
    src = "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\nelse:\n    pass\n"
    assert [c for _, c in codes(src)] == ["NM101", "NM201"]


def test_remaining_findings_after_diff_use_the_fixed_lines_and_snippets(tmp_path):
    path = tmp_path / "t.py"
    path.write_text("import torch\nx = torch.ones(2).cuda()\ntorch.backends.cudnn.benchmark = True\n")
    fixed = check_source(path.read_text(), Settings(ALL, fix=True)).new_source
    line = fixed.splitlines().index("torch.backends.cudnn.benchmark = True") + 1
    assert line != 3  # the fix added lines above it
    for fmt, expect in (("concise", f"t.py:{line}:1: NM801"), ("github", f"line={line},col=1")):
        out = io.StringIO()
        main(["check", str(path), "--diff", "--no-config", "--output-format", fmt], stdout=out, stderr=io.StringIO())
        assert expect in out.getvalue()
    out = io.StringIO()
    main(["check", str(path), "--diff", "--no-config"], stdout=out, stderr=io.StringIO())
    report = out.getvalue().split("NM801", 1)[1]
    assert f"{line} | torch.backends.cudnn.benchmark = True" in report


def test_tests_naming_other_accelerators_and_onnx_runtime_devices_are_skipped():
    src = ("import torch\ndef f(t, available, device, is_torch_xpu_available, req):\n"
           "    mode = 'pointwise' if t.device.type in ('cuda', 'xpu') else 'generic'\n"
           "    if not torch.cuda.is_available() and not is_torch_xpu_available():\n        raise RuntimeError\n"
           "    dev = 'cuda' if torch.cuda.is_available() and 'CUDAExecutionProvider' in available else 'cpu'\n"
           "    if device.type == 'cuda' and 'CUDAExecutionProvider' in available:\n        pass\n"
           "    if req not in ('cpu', 'cuda'):\n        raise ValueError(req)\n")
    assert codes(src) == [(9, "NM111")]  # only the whitelist that names no other accelerator


def test_cuda_requirements_and_cuda_predicates_are_skipped():
    src = ("import torch\ndef load():\n    if not torch.cuda.is_available():\n"
           "        raise ImportError('HIGGS requires a CUDA GPU')\n"
           "    if not torch.cuda.is_available():\n        raise ValueError('no device')\n"
           "def is_torch_cuda_available():\n    return torch.cuda.is_available()\n"
           "def to_cuda(x):\n    return torch.cuda.is_available()\n")
    assert codes(src) == [(5, "NM101"), (10, "NM101")]


def test_statements_next_to_statements_for_other_vendors_are_skipped():
    """Per-vendor statements (sampled on transformers: trainer RNG states, env flags, availability
    reports): the CUDA one is quiet; a statement that names CUDA and another vendor is no evidence."""
    src = ("import os, torch\ndef report(dev, is_torch_npu_available):\n"
           "    has_cuda = torch.cuda.is_available()\n"
           "    has_npu = is_torch_npu_available()\n"
           "    os.environ['CUDA_LAUNCH_BLOCKING'] = '1'\n"
           "    os.environ['ASCEND_LAUNCH_BLOCKING'] = '1'\n"
           "    if dev == 'cuda':\n        return torch.cuda.device_count()\n"
           "    if dev == 'xpu':\n        return 1\n"
           "def pick():\n"
           "    a = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
           "    b = 'cuda' if torch.cuda.is_available() else 'mps'\n"
           "    return a, b\n")
    assert [line for line, _ in codes(src)] == [12, 13]  # only the selections in pick()


def test_old_torch_fallbacks_onnx_runtime_modules_and_gpu_predicates_are_skipped():
    src = ("import torch\nTORCH_2_7 = True\n"
           "s = torch.Stream() if TORCH_2_7 else torch.cuda.Stream()\n"
           "t = torch.Stream() if flag else torch.cuda.Stream()\n"
           "def require_torch_multi_gpu(case):\n    return torch.cuda.device_count() > 1\n"
           "def check(q):\n"
           "    if q.device.type != 'cuda' or torch.cuda.get_device_capability()[0] < 9:\n"
           "        raise RuntimeError('needs a CUDA GPU with compute capability 9.0')\n")
    assert codes(src) == [(4, "NM202")]
    ort = ("import onnxruntime as ort\nimport torch\nPROVIDER = 'CUDAExecutionProvider'\n"
           "def run(device):\n    torch.cuda.current_stream(device).synchronize()\n")
    assert codes(ort) == []


def test_library_cuda_probes_in_vendor_chains_and_returned_requirements_are_skipped():
    src = ("import torch\ndef pick(d, is_torch_cuda_available, is_torch_npu_available, err):\n"
           "    if is_torch_npu_available():\n        return torch.device(f'npu:{d}')\n"
           "    elif is_torch_cuda_available():\n        return torch.device(f'cuda:{d}')\n"
           "def check(err):\n"
           "    if not torch.cuda.is_available():\n        return err('this kernel requires CUDA')\n"
           "    if not torch.cuda.is_available():\n        return 'cpu'\n")
    assert codes(src) == [(10, "NM101")]
