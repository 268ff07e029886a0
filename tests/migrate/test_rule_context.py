"""What the rules read from the code around a CUDA name: type expressions, names imported or defined in the
file, how a value is used (compared, printed, iterated over), a module's own CUDA methods. Each case has
a near miss that is still reported or fixed."""

import io

from neuron_conformance.migrate.cli import main
from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import load, selection
from tests.migrate.snippets import codes, fixed, found, pairs, tier

ALL = selection(None, None)


def test_annotations_are_not_reported():
    src = (
        "import torch\nfrom typing import Optional\n"
        "def f(s: torch.cuda.Stream, e: Optional['torch.cuda.Event'] = None) -> torch.cuda.Event:\n"
        "    x: torch.cuda.FloatTensor = None\n    return torch.cuda.Event()\n"
    )
    assert pairs(src) == [(5, "NM207")]


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


def test_cudagraph_option_read_is_quiet_and_set_is_reported():
    """NM703: should not report reading whether a compile mode uses CUDA graphs; should report
    setting the option."""
    quiet = (
        "import torch\ndef uses(opts):\n    a = opts.get('triton.cudagraphs', False)\n"
        "    return a or opts['triton.cudagraphs']\n"
    )
    assert pairs(quiet) == []
    near = (
        "import torch\ndef f(m, opts):\n    opts['triton.cudagraphs'] = False\n"
        "    return torch.compile(m, options={'triton.cudagraphs': True})\n"
    )
    assert [c for _, c in pairs(near)] == ["NM703", "NM703"]


def test_rocm_version_checks_are_quiet_and_gpu_build_tests_are_reported():
    """NM808: should not report `torch.version.hip` asked only whether this is ROCm, nor the CUDA
    branch of a hip/cuda chain; should report a "GPU build" test, a version comparison and
    `version.parse` of it."""
    quiet = (
        "import torch\ndef check():\n    if not have_lib():\n        raise RuntimeError('x')\n"
        "    elif torch.version.hip:\n        raise RuntimeError('the library does not support ROCm')\n"
        "    is_amd = torch.version.hip is not None\n"
        "    if torch.version.hip:\n        k = 'rocm'\n    elif torch.version.cuda:\n        k = 'cuda'\n"
        "    return is_amd, k\n"
    )
    assert pairs(quiet) == []
    near = (
        "import torch\nfrom packaging import version\n"
        "gpu_build = torch.version.cuda or torch.version.hip\n"
        "new_rocm = torch.version.hip >= '6.0'\n"
        "v = version.parse(torch.version.hip)\n"
        "if torch.version.cuda is not None:\n    pass\n"
    )
    assert pairs(near) == [(3, "NM808"), (3, "NM808"), (4, "NM808"), (5, "NM808"), (6, "NM808")]


class TestRewritesInContext:
    def test_storage_in_map_location_moves_with_a_keyword_device(self):
        """Should rewrite `storage.cuda()` in a `map_location` lambda to `storage.to(device=...)`:
        `UntypedStorage.to` takes the device as a keyword only."""
        src = (
            "import io\nimport torch\n"
            "buf = io.BytesIO()\ntorch.save(torch.ones(2), buf)\nbuf.seek(0)\n"
            "t = torch.load(buf, map_location=lambda storage, loc: storage.cuda())\n"
        )
        out = fixed(src)
        assert "storage.to(device=DEVICE_TYPE)" in out
        ns = {}
        exec(compile(out, "<fixed>", "exec"), ns)  # the storage moves to the current accelerator (or the CPU)
        assert ns["t"].device.type == ns["DEVICE_TYPE"]

    def test_cuda_call_in_a_file_with_its_own_cuda_method_is_reported(self):
        """Should not rewrite `b.cuda()` when a class of the file defines `cuda` and no `to` (the receiver
        may be it); a file whose `cuda` method belongs to an `nn.Module` subclass is still fixed."""
        src = "class Buffer:\n    def cuda(self):\n        return self\ndef move(b):\n    return b.cuda()\n"
        v = found(src)[(5, "NM108")]
        assert v.fix_applicability == "report" and "own `cuda()`" in v.message
        near = (
            "import torch\nclass Net(torch.nn.Module):\n"
            "    def cuda(self, device=None):\n"
            "        return super().cuda(device)\n"
            "def move(b):\n"
            "    return b.cuda()\n"
        )
        assert tier(near, 6, "NM108") == "unsafe"

    def test_self_cuda_in_a_class_with_its_own_to_method_is_not_rewritten(self):
        """Should not rewrite `self.cuda()` (or an alias of `self`, or in a function nested in a method) in a
        class that defines its own `to()`: `self.to(...)` would call that method, and recurse inside it. An
        attribute's `.cuda()` there, a free function named `to` and a class without its own `to` are still
        fixed."""
        src = (
            "class Index:\n    def to(self, device):\n        if str(device) == 'cpu':\n            return self.cpu()\n"
            "        elif 'cuda' in str(device):\n            return self.cuda()\n        raise ValueError(device)\n"
            "    def move(self):\n        me = self\n        def go():\n            return me.cuda()\n        return go()\n"
        )
        for line in (6, 11):
            v = found(src)[(line, "NM108")]
            assert v.fix_applicability == "report" and "its own `to()`" in v.message
        near = (
            "import torch\nclass Holder:\n    def to(self, device):\n        self.t = self.t.cuda()\n        return self\n"
            "class Plain:\n    def move(self):\n        return self.cuda()\n"
            "def to(model, device):\n    return model.cuda()\n"
        )
        assert all(tier(near, line, "NM108") in ("safe", "unsafe") for line in (4, 8, 10))

    def test_raising_cuda_out_of_memory_error_is_the_generic_class(self):
        """Should rename `raise torch.cuda.OutOfMemoryError(...)` to `torch.OutOfMemoryError` (the same
        class), not say it has no equivalent."""
        src = "import torch\ndef f():\n    raise torch.cuda.OutOfMemoryError('oom')\n"
        assert codes(src) == [(3, "NM306")]
        assert "raise torch.OutOfMemoryError('oom')" in fixed(src)

    def test_cuda_default_compared_with_cuda_elsewhere_is_not_rewritten(self):
        """Should not rewrite a `device: str = "cuda"` field when the file compares `device` with "cuda"
        (a sanity check that also switches fp16 off): on a CPU-only host the rewritten default would skip
        that branch. The same field in a file without such a comparison is still fixed."""
        src = (
            "import dataclasses\nimport torch\n"
            "@dataclasses.dataclass\n"
            "class Config:\n"
            "    device: str = 'cuda'\n"
            "    fp16: bool = True\n"
            "def resolve(cfg):\n"
            "    if cfg.device.startswith('cuda') and not torch.cuda.is_available():\n"
            "        cfg.device, cfg.fp16 = 'cpu', False\n"
            "    return cfg\n"
        )
        v = found(src)[(5, "NM110")]
        assert v.fix_applicability == "report" and "compared with" in v.message
        assert tier(src.split("def resolve")[0], 5, "NM110") == "safe"

    def test_used_memory_statistic_keeps_its_cpu_only_value(self):
        """Should rewrite a used `torch.cuda.max_memory_allocated()` to the accelerator's value when one is
        available and 0 otherwise (what the CUDA function answers without CUDA), not to a call that raises
        on a CPU-only host."""
        src = "import torch\npeak = torch.cuda.max_memory_allocated() / 2**20\nstats = torch.cuda.memory_stats()\n"
        assert tier(src, 2, "NM302") == "safe"
        out = fixed(src)
        assert "(torch.accelerator.max_memory_allocated() if torch.accelerator.is_available() else 0)" in out
        ns = {}
        exec(compile(out, "<fixed>", "exec"), ns)
        assert isinstance(ns["peak"], float) and isinstance(ns["stats"], dict)

    def test_pin_memory_call_under_an_availability_check_is_reported(self):
        """Should report `x.pin_memory()` in the body of `if torch.cuda.is_available():` (advisory, as the
        `pin_memory=` keyword), but not outside a gate."""
        src = (
            "import torch\nx = torch.ones(4)\n"
            "if torch.cuda.is_available():\n"
            "    x = x.pin_memory()\n"
            "y = torch.ones(4).pin_memory()\n"
        )
        assert [c for c in codes(src) if c[1] == "NM308"] == [(4, "NM308")]

    def test_type_alias_union_is_a_type_expression(self):
        """Should not report a legacy CUDA tensor type inside `Union[...]` (a type alias is an annotation),
        but still report it in an `isinstance` check."""
        src = (
            "from typing import Union\nimport torch\n"
            "Mask = Union[torch.BoolTensor, torch.cuda.BoolTensor]\n"
            "def is_mask(x):\n"
            "    return isinstance(x, torch.cuda.BoolTensor)\n"
        )
        assert [c for c in codes(src) if c[1] == "NM113"] == [(5, "NM113")]

    def test_memory_snapshot_viewer_is_not_a_device_idiom(self):
        """Should not report `torch.cuda._memory_viz.trace_plot(snapshot)` (pure-Python rendering of a saved
        snapshot), but still `torch.cuda.memory._snapshot()`."""
        src = (
            "import torch\nimport torch.cuda._memory_viz as viz\n"
            "def dump(snap):\n    return viz.trace_plot(snap)\n"
            "def take():\n    return torch.cuda.memory._snapshot()\n"
        )
        assert [line for line, _ in codes(src)] == [6]


class TestTriton:
    KERNEL = (
        "import torch\n"
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
        "    return triton.next_power_of_2(x.numel())\n"
    )

    def test_triton_kernels_and_helpers_are_quiet(self):
        """Should not report Triton: it compiles for NVIDIA, AMD and Intel GPUs, and ``cdiv`` /
        ``next_power_of_2`` are integer arithmetic."""
        assert codes(self.KERNEL) == []

    def test_torch_cuda_kernel_apis_are_reported(self):
        """Should still report torch's CUDA kernel APIs (jiterator, tunable, ``_sleep``) as NM903."""
        src = self.KERNEL + (
            "fn = torch.cuda.jiterator._create_jit_fn('template <typename T> T f(T x) { return x; }')\n"
            "torch.cuda.tunable.enable(True)\n"
            "torch.cuda._sleep(10)\n"
        )
        assert [c for c in codes(src) if c[1] == "NM903"] == [(15, "NM903"), (16, "NM903"), (17, "NM903")]

    def test_rule_text_says_why_triton_is_not_reported(self):
        """Should document, in NM903's own text, that Triton is not reported and why."""
        doc = load()["NM903"].doc
        assert "Triton" in doc["what"] and "AMD" in doc["why"] and "XPU" in doc["why"]


class TestCheckedCurrentAccelerator:
    def test_current_accelerator_type_under_is_available_is_quiet(self):
        """Should not report `current_accelerator().type` where `torch.accelerator.is_available()`
        was established (an `if` body, after `and`, after an early exit)."""
        src = (
            "import torch\n"
            "def kind():\n"
            "    if torch.accelerator.is_available():\n"
            "        return torch.accelerator.current_accelerator().type\n"
            "    return 'cpu'\n"
            "def kind2():\n"
            "    return torch.accelerator.is_available() and torch.accelerator.current_accelerator().type\n"
            "def kind3():\n"
            "    if not torch.accelerator.is_available():\n"
            "        return 'cpu'\n"
            "    return torch.accelerator.current_accelerator().type\n"
        )
        assert pairs(src) == []

    def test_unchecked_and_negated_uses_are_still_reported(self):
        """Should still report (and fix) `.type` with no check, and under the negated test."""
        src = (
            "import torch\n"
            "def kind():\n"
            "    return torch.accelerator.current_accelerator().type\n"
            "def wrong():\n"
            "    if not torch.accelerator.is_available():\n"
            "        return torch.accelerator.current_accelerator().type\n"
        )
        assert pairs(src) == [(3, "NM004"), (6, "NM004")]
        assert 'or torch.device("cpu")).type' in fixed(src)
