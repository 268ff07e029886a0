"""Meta-tests of session 13's precision classes and fix limits, read on the verdicts of a fresh judge on
kornia 0.9.0, torchtune 0.6.1, mmengine 0.10.7 and torchmetrics 1.9.0
(``benchmarks/results/migrate_precision.md``, "Session 13"). Each wrong fix has an example whose fix is now
withheld (issue #17 rule 1: a fix never breaks code that ran) and a near miss that is still fixed; each
false-positive class has a quiet example and a near miss that is still reported. The snippets are ours,
not copied from those packages."""
from tests.migrate.snippets import codes, fixed, found, tier


# ====================================================================== wrong fixes: reports instead
class TestFixLimits:
    def test_negated_early_exit_reaches_the_rest_of_its_block(self):
        """Should not widen `if not torch.cuda.is_available(): return rank` when the code after it reads
        `CUDA_VISIBLE_DEVICES`: widened, every accelerator would index CUDA's visible-device list."""
        src = ("import os\nimport torch\n"
               "def device_id(rank):\n"
               "    if not torch.cuda.is_available():\n"
               "        return rank\n"
               "    visible = os.environ.get('CUDA_VISIBLE_DEVICES', '0').split(',')\n"
               "    return int(visible[rank])\n")
        v = found(src)[(4, "NM101")]
        assert v.fix_applicability == "report" and "CUDA_VISIBLE_DEVICES" in v.message
        assert "torch.cuda.is_available()" in fixed(src)

    def test_negated_early_exit_over_generic_code_is_still_fixed(self):
        """Near miss: the code after the exit is device-generic, so widening is safe."""
        src = ("import torch\n"
               "def sync(rank):\n"
               "    if not torch.cuda.is_available():\n"
               "        return rank\n"
               "    torch.cuda.synchronize()\n"
               "    return rank\n")
        assert tier(src, 3, "NM101") == "safe"
        assert "torch.cuda" not in fixed(src)

    def test_exit_taken_when_cuda_is_there_reaches_nothing_after_it(self):
        """Near miss: `if torch.cuda.is_available(): return ...` makes the code after it unreached on
        the widened accelerators, not reached: it does not limit the fix."""
        src = ("import os\nimport torch\n"
               "def device_id(rank):\n"
               "    if torch.cuda.is_available():\n"
               "        return rank\n"
               "    return os.environ.get('CUDA_VISIBLE_DEVICES')\n")
        assert tier(src, 4, "NM101") == "safe"

    def test_nccl_default_parameter_is_reported_with_the_import_reason(self):
        """Should not rewrite `def setup(self, backend="nccl")`: the default is evaluated at import, where
        `get_default_backend_for_device` raises for an accelerator without a registered backend."""
        src = ("import torch.distributed as dist\n"
               "class Strategy:\n"
               "    def setup(self, backend='nccl'):\n"
               "        dist.init_process_group(backend)\n")
        v = found(src)[(3, "NM601")]
        assert v.fix_applicability == "report" and "at import" in v.message
        assert fixed(src) == src

    def test_module_level_backend_in_a_script_is_still_fixed(self):
        """Near miss: a script that creates its process group at module level evaluates the variable
        then anyway, so the rewrite fails no earlier than "nccl"."""
        src = ("import torch.distributed as dist\n"
               "BACKEND = 'nccl'\n"
               "if __name__ == '__main__':\n"
               "    dist.init_process_group(BACKEND)\n")
        assert tier(src, 2, "NM601") == "unsafe"
        assert "get_default_backend_for_device" in fixed(src)


# ============================================== wrong fixes a new user's scripts found (session 13)
class TestNewUserScripts:
    def test_fallback_correcting_a_cuda_default_is_not_widened(self):
        """Should not widen `if not torch.cuda.is_available(): cfg["accel"] = "cpu"` when the value it
        corrects is a `"cuda"` no rule rewrites (a dict entry not named for a device, an argparse default
        restricted by `choices=`): widened, other accelerators would keep "cuda"."""
        src = ("import argparse\nimport torch\n"
               "cfg = {'accel': 'cuda'}\n"
               "if not torch.cuda.is_available():\n"
               "    cfg['accel'] = 'cpu'\n"
               "p = argparse.ArgumentParser()\n"
               "p.add_argument('--device', default='cuda', choices=['cuda', 'cpu'])\n"
               "args = p.parse_args([])\n"
               "if not torch.cuda.is_available():\n"
               "    args.device = 'cpu'\n")
        assert tier(src, 4, "NM101") == "report" and tier(src, 9, "NM101") == "report"
        assert "choices" in found(src)[(7, "NM110")].message

    def test_fallback_is_widened_in_the_tier_of_the_default_it_corrects(self):
        """Near miss: a `"device"` dict entry (safe) and an argparse `--device` default without `choices=`
        (unsafe) are rewritten themselves, so the fallback is widened in their tier."""
        src = ("import argparse\nimport torch\n"
               "cfg = {'device': 'cuda'}\n"
               "if not torch.cuda.is_available():\n"
               "    cfg['device'] = 'cpu'\n"
               "p = argparse.ArgumentParser()\n"
               "p.add_argument('--device', default='cuda')\n"
               "args = p.parse_args([])\n"
               "if not torch.cuda.is_available():\n"
               "    args.device = 'cpu'\n")
        # each alone: in one file the two checks are widened together, in the less fixable tier
        head, tail = src.split("p = argparse")
        assert tier(head, 4, "NM101") == "safe" and tier(src, 9, "NM101") == "unsafe"
        assert tier(src, 4, "NM101") == "unsafe"
        assert "'cuda'" not in fixed(src)

    def test_fallback_correcting_a_generic_default_is_still_fixed(self):
        """Near miss: the value corrected is already device-generic."""
        src = ("import torch\n"
               "device = torch.accelerator.current_accelerator()\n"
               "if not torch.cuda.is_available():\n"
               "    device = 'cpu'\n")
        assert tier(src, 3, "NM101") == "safe"

    def test_widened_guard_reaches_the_body_of_a_helper_it_calls(self):
        """Should not widen a guard whose body calls a helper of this file that runs `nvidia-smi`, nor
        change a count passed to a helper that builds `"cuda:0"`; a generic helper does not limit."""
        src = ("import subprocess\nimport torch\n"
               "def driver():\n"
               "    return subprocess.run(['nvidia-smi'], capture_output=True).stdout\n"
               "def pick(n):\n"
               "    return 'cuda:0' if n > 0 else 'cpu'\n"
               "def count(n):\n"
               "    return n + 1\n"
               "if torch.cuda.is_available():\n"
               "    print(driver())\n"
               "dev = pick(torch.cuda.device_count())\n"
               "total = count(torch.cuda.device_count())\n")
        assert tier(src, 9, "NM101") == "report" and tier(src, 11, "NM103") == "report"
        alone = "import torch\ndef count(n):\n    return n + 1\ntotal = count(torch.cuda.device_count())\n"
        assert tier(alone, 4, "NM103") == "safe"

    def test_storage_in_map_location_moves_with_a_keyword_device(self):
        """Should rewrite `storage.cuda()` in a `map_location` lambda to `storage.to(device=...)`:
        `UntypedStorage.to` takes the device as a keyword only."""
        src = ("import io\nimport torch\n"
               "buf = io.BytesIO()\ntorch.save(torch.ones(2), buf)\nbuf.seek(0)\n"
               "t = torch.load(buf, map_location=lambda storage, loc: storage.cuda())\n")
        out = fixed(src)
        assert "storage.to(device=DEVICE_TYPE)" in out
        ns = {}
        exec(compile(out, "<fixed>", "exec"), ns)  # the storage moves to the current accelerator (or the CPU)
        assert ns["t"].device.type == ns["DEVICE_TYPE"]

    def test_cuda_call_in_a_file_with_its_own_cuda_method_is_reported(self):
        """Should not rewrite `b.cuda()` when a class of the file defines `cuda` and no `to` (the receiver
        may be it); a file whose `cuda` method belongs to an `nn.Module` subclass is still fixed."""
        src = ("class Buffer:\n"
               "    def cuda(self):\n"
               "        return self\n"
               "def move(b):\n"
               "    return b.cuda()\n")
        v = found(src)[(5, "NM108")]
        assert v.fix_applicability == "report" and "own `cuda()`" in v.message
        near = ("import torch\nclass Net(torch.nn.Module):\n"
                "    def cuda(self, device=None):\n"
                "        return super().cuda(device)\n"
                "def move(b):\n"
                "    return b.cuda()\n")
        assert tier(near, 6, "NM108") == "unsafe"

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
        src = ("import dataclasses\nimport torch\n"
               "@dataclasses.dataclass\n"
               "class Config:\n"
               "    device: str = 'cuda'\n"
               "    fp16: bool = True\n"
               "def resolve(cfg):\n"
               "    if cfg.device.startswith('cuda') and not torch.cuda.is_available():\n"
               "        cfg.device, cfg.fp16 = 'cpu', False\n"
               "    return cfg\n")
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
        src = ("import torch\nx = torch.ones(4)\n"
               "if torch.cuda.is_available():\n"
               "    x = x.pin_memory()\n"
               "y = torch.ones(4).pin_memory()\n")
        assert [c for c in codes(src) if c[1] == "NM308"] == [(4, "NM308")]


# ====================================================================== false-positive classes
class TestQuietClasses:
    def test_type_alias_union_is_a_type_expression(self):
        """Should not report a legacy CUDA tensor type inside `Union[...]` (a type alias is an annotation),
        but still report it in an `isinstance` check."""
        src = ("from typing import Union\nimport torch\n"
               "Mask = Union[torch.BoolTensor, torch.cuda.BoolTensor]\n"
               "def is_mask(x):\n"
               "    return isinstance(x, torch.cuda.BoolTensor)\n")
        assert [c for c in codes(src) if c[1] == "NM113"] == [(5, "NM113")]

    def test_cuda_function_with_a_sibling_for_another_vendor_is_quiet(self):
        """Should not report inside `get_cuda_device()` when the module also defines `get_mps_device()`;
        a `to_cuda()` with no sibling is still reported."""
        src = ("import torch\n"
               "def get_cuda_device(index=0):\n"
               "    return torch.device(f'cuda:{index}') if torch.cuda.is_available() else torch.device('cpu')\n"
               "def get_mps_device():\n"
               "    return torch.device('mps') if torch.backends.mps.is_available() else torch.device('cpu')\n"
               "def to_cuda(x):\n"
               "    return x.cuda()\n")
        assert [line for line, _ in codes(src)] == [7]

    def test_cuda_element_of_a_per_vendor_display_is_quiet(self):
        """Should not report `ProfilerActivity.CUDA` in a set that also lists `ProfilerActivity.XPU`, but
        should in a list naming no other vendor."""
        src = ("from torch.profiler import ProfilerActivity\n"
               "ALL = {ProfilerActivity.CPU, ProfilerActivity.CUDA, ProfilerActivity.XPU}\n"
               "SOME = [ProfilerActivity.CPU, ProfilerActivity.CUDA]\n")
        assert codes(src) == [(3, "NM806")]

    def test_cuda_flag_next_to_another_vendors_flag_is_quiet(self):
        """Should not report the body of `if cuda:` next to `if xpu:`; a lone `if use_cuda:` is reported."""
        src = ("from torch.profiler import ProfilerActivity\n"
               "def activities(cpu, cuda, xpu):\n"
               "    out = []\n"
               "    if cuda:\n"
               "        out.append(ProfilerActivity.CUDA)\n"
               "    if xpu:\n"
               "        out.append(ProfilerActivity.XPU)\n"
               "    return out\n"
               "def gpu_only(use_cuda):\n"
               "    return [ProfilerActivity.CUDA] if use_cuda else []\n")
        assert codes(src) == [(10, "NM806")]

    def test_onnx_runtime_module_through_a_lazy_re_export(self):
        """Should treat a module importing `onnxruntime` through a package's lazy re-export
        (`from pkg.external import onnxruntime as ort`) and naming an execution provider as an ONNX Runtime
        module; the same module without a provider name is still reported."""
        src = ("import torch\nfrom pkg.external import onnxruntime as ort\n"
               "def providers(device):\n"
               "    if device.type == 'cuda':\n"
               "        return ['CUDAExecutionProvider']\n"
               "    return ['CPUExecutionProvider']\n")
        assert codes(src) == []
        assert codes(src.replace("ExecutionProvider", "Backend")) == [(4, "NM111")]

    def test_branch_of_an_isinstance_test_for_a_cuda_class_is_quiet(self):
        """Should not report the body of `if isinstance(self, CUDAOpBuilder) and ...:`, but should report
        the same body under `isinstance(self, OpBuilder)`."""
        src = ("import torch\n"
               "class OpBuilder:\n"
               "    def load(self):\n"
               "        if isinstance(self, CUDAOpBuilder) and not self.rocm:\n"
               "            self.cpu_only = not torch.cuda.is_available()\n"
               "class CUDAOpBuilder(OpBuilder):\n"
               "    rocm = False\n")
        assert codes(src) == []
        assert codes(src.replace("isinstance(self, CUDAOpBuilder)", "isinstance(self, OpBuilder)")) == [(5, "NM101")]

    def test_name_imported_from_torch_amp_with_a_cuda_fallback_is_torch_amp(self):
        """Should read `GradScaler` as `torch.amp.GradScaler` when the file imports it from `torch.amp` with
        `torch.cuda.amp` as the old-torch fallback (in either order): its call is then device-generic, not
        rewritten with CUDA's signature (which passed the device type as `init_scale`)."""
        src = ("try:\n    from torch.amp import GradScaler\nexcept ImportError:\n"
               "    from torch.cuda.amp import GradScaler\n"
               "def make(device_type):\n    return GradScaler(device_type, enabled=True)\n")
        assert [c for c in codes(src) if c[0] == 6] == []
        assert "GradScaler(device_type, enabled=True)" in fixed(src)

    def test_guard_choosing_a_class_named_for_gpus_is_not_widened(self):
        """Should not widen `DeviceGPU() if torch.cuda.is_available() else DeviceCPU()` (a CamelCase name with
        the word GPU: a CUDA device class elsewhere would raise), but still widen over `Device()`."""
        src = ("import torch\nclass DeviceGPU: pass\nclass Device: pass\n"
               "a = DeviceGPU() if torch.cuda.is_available() else None\n"
               "b = Device() if torch.cuda.is_available() else None\n")
        assert tier(src, 4, "NM101") == "report"
        assert tier(src.replace("a = DeviceGPU() if torch.cuda.is_available() else None\n", ""), 4, "NM101") == "safe"

    def test_gpu_class_of_a_device_interface_using_torch_cuda_is_quiet(self):
        """Should not report inside `class DeviceGPU(Device)` whose body uses `torch.cuda` (the CUDA class of
        per-vendor device classes); a `DeviceGPU(Device)` that uses no `torch.cuda` is still reported."""
        src = ("import torch\nclass Device: pass\n"
               "class DeviceGPU(Device):\n"
               "    backend = 'nccl'\n"
               "    def __init__(self):\n"
               "        torch.cuda.set_device(0)\n"
               "        self.device = torch.device('cuda:0')\n")
        assert codes(src) == []
        near = src.replace("torch.cuda.set_device(0)", "pass")
        assert codes(near) == [(4, "NM601"), (7, "NM110")]

    def test_memory_snapshot_viewer_is_not_a_device_idiom(self):
        """Should not report `torch.cuda._memory_viz.trace_plot(snapshot)` (pure-Python rendering of a saved
        snapshot), but still `torch.cuda.memory._snapshot()`."""
        src = ("import torch\nimport torch.cuda._memory_viz as viz\n"
               "def dump(snap):\n    return viz.trace_plot(snap)\n"
               "def take():\n    return torch.cuda.memory._snapshot()\n")
        assert [line for line, _ in codes(src)] == [6]

    def test_count_a_loop_iterates_over_reaches_the_loop_body(self):
        """Should not change `torch.cuda.device_count()` that a loop or comprehension iterates over when the
        body asks CUDA per device (a capability query); a body that stays generic is still fixed."""
        src = ("import torch\n"
               "caps = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]\n"
               "for i in range(torch.cuda.device_count()):\n"
               "    print(torch.cuda.get_device_capability(i))\n"
               "sizes = [i * 2 for i in range(torch.cuda.device_count())]\n")
        assert (tier(src, 2, "NM103"), tier(src, 3, "NM103")) == ("report", "report")
        assert tier("import torch\n" + src.splitlines(True)[4], 2, "NM103") == "safe"

    def test_value_requested_as_gpus_from_a_scheduler_is_not_changed(self):
        """Should not widen `{"num_gpus": 0.2 if torch.cuda.is_available() else None}` nor change
        `Trainer(gpus=torch.cuda.device_count())`: a GPU request other accelerators cannot meet under that
        name (Ray would never schedule the actor); a display label `"GPU count"` does not limit."""
        src = ("import torch\n"
               "CFG = {'num_cpus': 1, 'num_gpus': 0.2 if torch.cuda.is_available() else None}\n"
               "def run(Trainer):\n"
               "    return Trainer(gpus=torch.cuda.device_count())\n"
               "INFO = {'GPU count': torch.cuda.device_count() if torch.cuda.is_available() else None}\n")
        assert (tier(src, 2, "NM101"), tier(src, 4, "NM103")) == ("report", "report")
        assert "request for GPUs" in found(src)[(2, "NM101")].message
        assert tier("import torch\n" + src.splitlines(True)[4], 2, "NM103") != "report"


# ============================================= device choices of one file are widened together
class TestDeviceChoicesTogether:
    def test_model_guard_and_input_device_are_widened_together(self):
        """Should not rewrite `device = "cuda" if torch.cuda.is_available() else "cpu"` under `--fix` while
        `if torch.cuda.is_available(): model.cuda()` waits for `--unsafe-fixes`: the model would stay on the
        CPU and its input go to the accelerator (a new user's most common idiom). Both are fixed together."""
        src = ("import torch\nmodel = torch.nn.Linear(3, 2)\n"
               "if torch.cuda.is_available():\n"
               "    model.cuda()\n"
               "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n")
        assert (tier(src, 3, "NM101"), tier(src, 5, "NM102")) == ("unsafe", "unsafe")
        assert "another availability check" in found(src)[(5, "NM102")].message
        assert "torch.cuda" not in fixed(src)

    def test_a_choice_that_stays_cuda_holds_the_others_back(self):
        """Should report the device choice when another one in the file stays CUDA-specific (its guard reaches
        a CUDA-only call, or it picks between CUDA and "meta"), but not hold back a guard that places nothing
        (`torch.cuda.synchronize()`)."""
        src = ("import torch\n"
               "d4 = 'cuda' if torch.cuda.is_available() else 'meta'\n"
               "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
               "if torch.cuda.is_available():\n"
               "    torch.cuda.synchronize()\n")
        got = found(src)
        assert (2, "NM102") not in got and got[(2, "NM101")].fix_applicability == "report"
        assert tier(src, 3, "NM102") == "report" and tier(src, 4, "NM101") == "safe"

    def test_empty_cache_in_a_lambda_keeps_working_on_a_cpu_only_host(self):
        """Should rewrite `lambda: torch.cuda.empty_cache()` to a call guarded by `is_available()` (safe), not
        to a bare `torch.accelerator.empty_cache()` that raises without an accelerator."""
        src = "import torch\nfree = lambda: torch.cuda.empty_cache()\n"
        assert tier(src, 2, "NM301") == "safe"
        assert "(torch.accelerator.empty_cache() if torch.accelerator.is_available() else None)" in fixed(src)
