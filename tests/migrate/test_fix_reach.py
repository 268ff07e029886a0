"""What a fix reaches (``migrate/reach.py``, ``migrate/rule_pass.py``): a guard or stored flag is widened only
when everything it reaches runs on any accelerator, early exits and defaults evaluated at import limit
a fix, and the file's device choices are widened together or not at all. Each case whose fix is
withheld (a fix never breaks code that ran) has a near miss that is still fixed."""

from tests.migrate.snippets import fixed, found, tier


class TestEarlyExitsAndImportTimeDefaults:
    def test_negated_early_exit_reaches_the_rest_of_its_block(self):
        """Should not widen `if not torch.cuda.is_available(): return rank` when the code after it reads
        `CUDA_VISIBLE_DEVICES`: widened, every accelerator would index CUDA's visible-device list."""
        src = (
            "import os\nimport torch\n"
            "def device_id(rank):\n"
            "    if not torch.cuda.is_available():\n"
            "        return rank\n"
            "    visible = os.environ.get('CUDA_VISIBLE_DEVICES', '0').split(',')\n"
            "    return int(visible[rank])\n"
        )
        v = found(src)[(4, "NM101")]
        assert v.fix_applicability == "report" and "CUDA_VISIBLE_DEVICES" in v.message
        assert "torch.cuda.is_available()" in fixed(src)

    def test_negated_early_exit_over_generic_code_is_still_fixed(self):
        """Near miss: the code after the exit is device-generic, so widening is safe."""
        src = (
            "import torch\n"
            "def sync(rank):\n"
            "    if not torch.cuda.is_available():\n"
            "        return rank\n"
            "    torch.cuda.synchronize()\n"
            "    return rank\n"
        )
        assert tier(src, 3, "NM101") == "safe"
        assert "torch.cuda" not in fixed(src)

    def test_exit_taken_when_cuda_is_there_reaches_nothing_after_it(self):
        """Near miss: `if torch.cuda.is_available(): return ...` makes the code after it unreached on
        the widened accelerators, not reached: it does not limit the fix."""
        src = (
            "import os\nimport torch\n"
            "def device_id(rank):\n"
            "    if torch.cuda.is_available():\n"
            "        return rank\n"
            "    return os.environ.get('CUDA_VISIBLE_DEVICES')\n"
        )
        assert tier(src, 4, "NM101") == "safe"

    def test_nccl_default_parameter_is_reported_with_the_import_reason(self):
        """Should not rewrite `def setup(self, backend="nccl")`: the default is evaluated at import, where
        `get_default_backend_for_device` raises for an accelerator without a registered backend."""
        src = (
            "import torch.distributed as dist\n"
            "class Strategy:\n"
            "    def setup(self, backend='nccl'):\n"
            "        dist.init_process_group(backend)\n"
        )
        v = found(src)[(3, "NM601")]
        assert v.fix_applicability == "report" and "at import" in v.message
        assert fixed(src) == src

    def test_module_level_backend_in_a_script_is_still_fixed(self):
        """Near miss: a script that creates its process group at module level evaluates the variable
        then anyway, so the rewrite fails no earlier than "nccl"."""
        src = (
            "import torch.distributed as dist\n"
            "BACKEND = 'nccl'\n"
            "if __name__ == '__main__':\n"
            "    dist.init_process_group(BACKEND)\n"
        )
        assert tier(src, 2, "NM601") == "unsafe"
        assert "get_default_backend_for_device" in fixed(src)


class TestGuardRegions:
    def test_stored_flag_reaching_a_gpu_helper_is_not_fixed(self):
        """Should not widen `cuda = torch.cuda.is_available()` when a later read of `cuda` reaches a
        helper named for GPUs (a CUDA-only `get_device_properties` behind it would raise elsewhere:
        ultralytics' `collect_system_info` -> `get_gpu_info`)."""
        src = (
            "import torch\n"
            "def report():\n"
            "    cuda = torch.cuda.is_available()\n"
            "    return {'GPU': describe_gpu(0) if cuda else None}\n"
        )
        assert tier(src, 3, "NM101") == "report"
        assert "torch.cuda.is_available()" in fixed(src)

    def test_stored_flag_whose_reads_are_fixed_is_still_fixed(self):
        """Should still fix a stored flag (unsafe) whose reads are all fixed or device-generic."""
        src = (
            "import torch\n"
            "def report():\n"
            "    cuda = torch.cuda.is_available()\n"
            "    return {'count': torch.cuda.device_count() if cuda else 0}\n"
        )
        assert tier(src, 3, "NM101") == "unsafe"
        assert "torch.accelerator.is_available()" in fixed(src)

    def test_guard_reaching_a_gpu_helper_is_not_fixed(self):
        """Should not widen a test whose body calls a helper named for GPUs (ultralytics' platform
        report: the GPU type would be silently lost)."""
        src = "import torch\ndef env(out):\n    if torch.cuda.is_available():\n        out['gpuType'] = gpu_name(0)\n"
        assert tier(src, 3, "NM101") == "report"
        near = src.replace("gpu_name(0)", "torch.cuda.device_count()")
        assert tier(near, 3, "NM101") == "safe"
        assert "torch.accelerator.is_available()" in fixed(near)

    def test_guard_reaching_text_naming_cuda_is_not_fixed(self):
        """Should not widen a test whose body prints text naming CUDA (false on other accelerators)."""
        src = (
            "import torch\n"
            "def pick(opts, log):\n"
            "    if opts.device is None and torch.cuda.is_available():\n"
            "        log('CUDA is available, exporting faster')\n"
            "        opts.fast = True\n"
        )
        assert tier(src, 3, "NM101") == "report"
        near = src.replace("CUDA is available", "an accelerator is available")
        assert "torch.accelerator.is_available()" in fixed(near)

    def test_guard_storing_a_bare_index_as_device_is_not_fixed(self):
        """Should not widen a test whose body stores a digit string as a device (`"0"` is a CUDA index
        where `select_device("0")` means `cuda:0`: ultralytics' IMX export)."""
        src = (
            "import torch\n"
            "def pick(opts):\n"
            "    if opts.device is None and torch.cuda.is_available():\n"
            "        opts.device = '0'\n"
        )
        assert tier(src, 3, "NM101") == "report"
        near = src.replace("'0'", "'auto'")
        assert "torch.accelerator.is_available()" in fixed(near)

    def test_stored_test_reaching_a_cuda_build_requirement_is_not_fixed(self):
        """Should not widen a stored test whose reads require a CUDA build of a package
        (`somepkg-gpu`: installed on an XPU host it would not run)."""
        src = (
            "import torch\n"
            "def load(dev, require):\n"
            "    use = dev.type != 'cpu' and torch.cuda.is_available()\n"
            "    if use:\n"
            "        require('somepkg-gpu>=1.0')\n"
            "    else:\n"
            "        require('somepkg>=1.0')\n"
        )
        assert tier(src, 3, "NM101") == "report"
        near = src.replace("somepkg-gpu>=1.0", "somepkg-extra>=1.0")
        assert "torch.accelerator.is_available()" in fixed(near)

    def test_count_combined_with_visible_devices_is_not_fixed(self):
        """Should not fix a CUDA device count combined with the `CUDA_VISIBLE_DEVICES` list (another
        vendor's count would truncate CUDA's list); a count on its own is still fixed."""
        src = (
            "import os\n"
            "import torch\n"
            "def visible_ids():\n"
            "    cvd = os.environ.get('CUDA_VISIBLE_DEVICES', '')\n"
            "    ids = [x for x in cvd.split(',') if x][:torch.cuda.device_count()]\n"
            "    return ids\n"
        )
        assert tier(src, 5, "NM103") == "report"
        near = "import torch\ndef count():\n    n = torch.cuda.device_count()\n    return n\n"
        assert tier(near, 3, "NM103") == "safe"

    def test_device_name_printed_under_a_cuda_label_is_not_fixed(self):
        """Should not fix `get_device_name` whose stored value is printed under a CUDA label."""
        src = (
            "import torch\n"
            "def banner(log):\n"
            "    name = torch.cuda.get_device_name(0)\n"
            "    log(f'CUDA device: {name}')\n"
        )
        assert tier(src, 3, "NM115") == "report"
        near = src.replace("CUDA device", "device")
        assert tier(near, 3, "NM115") == "unsafe"

    def test_widened_guard_reaches_the_body_of_a_helper_it_calls(self):
        """Should not widen a guard whose body calls a helper of this file that runs `nvidia-smi`, nor
        change a count passed to a helper that builds `"cuda:0"`; a generic helper does not limit."""
        src = (
            "import subprocess\nimport torch\n"
            "def driver():\n"
            "    return subprocess.run(['nvidia-smi'], capture_output=True).stdout\n"
            "def pick(n):\n"
            "    return 'cuda:0' if n > 0 else 'cpu'\n"
            "def count(n):\n"
            "    return n + 1\n"
            "if torch.cuda.is_available():\n"
            "    print(driver())\n"
            "dev = pick(torch.cuda.device_count())\n"
            "total = count(torch.cuda.device_count())\n"
        )
        assert tier(src, 9, "NM101") == "report" and tier(src, 11, "NM103") == "report"
        alone = "import torch\ndef count(n):\n    return n + 1\ntotal = count(torch.cuda.device_count())\n"
        assert tier(alone, 4, "NM103") == "safe"

    def test_guard_choosing_a_class_named_for_gpus_is_not_widened(self):
        """Should not widen `DeviceGPU() if torch.cuda.is_available() else DeviceCPU()` (a CamelCase name with
        the word GPU: a CUDA device class elsewhere would raise), but still widen over `Device()`."""
        src = (
            "import torch\nclass DeviceGPU: pass\nclass Device: pass\n"
            "a = DeviceGPU() if torch.cuda.is_available() else None\n"
            "b = Device() if torch.cuda.is_available() else None\n"
        )
        assert tier(src, 4, "NM101") == "report"
        assert tier(src.replace("a = DeviceGPU() if torch.cuda.is_available() else None\n", ""), 4, "NM101") == "safe"

    def test_count_a_loop_iterates_over_reaches_the_loop_body(self):
        """Should not change `torch.cuda.device_count()` that a loop or comprehension iterates over when the
        body asks CUDA per device (a capability query); a body that stays generic is still fixed."""
        src = (
            "import torch\n"
            "caps = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]\n"
            "for i in range(torch.cuda.device_count()):\n"
            "    print(torch.cuda.get_device_capability(i))\n"
            "sizes = [i * 2 for i in range(torch.cuda.device_count())]\n"
        )
        assert (tier(src, 2, "NM103"), tier(src, 3, "NM103")) == ("report", "report")
        assert tier("import torch\n" + src.splitlines(True)[4], 2, "NM103") == "safe"

    def test_parametrized_case_reaches_the_test_it_parametrizes(self):
        """Should not widen a case of `@pytest.mark.parametrize("ok", {False, torch.cuda.is_available()})`
        whose test patches `torch.cuda.is_available` with it: widened, a host of another accelerator gets a case
        claiming CUDA. The same case of a test that only places tensors is still fixed."""
        head = "import pytest, torch\nfrom unittest.mock import patch\n"
        src = head + (
            "@pytest.mark.parametrize('ok', {False, torch.cuda.is_available()})\n"
            "def test_load(ok):\n"
            "    with patch('torch.cuda.is_available', lambda: ok):\n"
            "        pass\n"
        )
        assert tier(src, 3, "NM101") == "report"
        assert "'torch.cuda.is_available'" in found(src)[(3, "NM101")].message
        near = head + (
            "@pytest.mark.parametrize('ok', {False, torch.cuda.is_available()})\n"
            "def test_sum(ok):\n"
            "    assert torch.ones(2).sum() == 2\n"
        )
        assert tier(near, 3, "NM101") == "unsafe"

    def test_value_requested_as_gpus_from_a_scheduler_is_not_changed(self):
        """Should not widen `{"num_gpus": 0.2 if torch.cuda.is_available() else None}` nor change
        `Trainer(gpus=torch.cuda.device_count())`: a GPU request other accelerators cannot meet under that
        name (Ray would never schedule the actor); a display label `"GPU count"` does not limit."""
        src = (
            "import torch\n"
            "CFG = {'num_cpus': 1, 'num_gpus': 0.2 if torch.cuda.is_available() else None}\n"
            "def run(Trainer):\n"
            "    return Trainer(gpus=torch.cuda.device_count())\n"
            "INFO = {'GPU count': torch.cuda.device_count() if torch.cuda.is_available() else None}\n"
        )
        assert (tier(src, 2, "NM101"), tier(src, 4, "NM103")) == ("report", "report")
        assert "request for GPUs" in found(src)[(2, "NM101")].message
        assert tier("import torch\n" + src.splitlines(True)[4], 2, "NM103") != "report"


class TestCorrectedDefaults:
    def test_fallback_correcting_a_cuda_default_is_not_widened(self):
        """Should not widen `if not torch.cuda.is_available(): cfg["accel"] = "cpu"` when the value it
        corrects is a `"cuda"` no rule rewrites (a dict entry not named for a device, an argparse default
        restricted by `choices=`): widened, other accelerators would keep "cuda"."""
        src = (
            "import argparse\nimport torch\n"
            "cfg = {'accel': 'cuda'}\n"
            "if not torch.cuda.is_available():\n"
            "    cfg['accel'] = 'cpu'\n"
            "p = argparse.ArgumentParser()\n"
            "p.add_argument('--device', default='cuda', choices=['cuda', 'cpu'])\n"
            "args = p.parse_args([])\n"
            "if not torch.cuda.is_available():\n"
            "    args.device = 'cpu'\n"
        )
        assert tier(src, 4, "NM101") == "report" and tier(src, 9, "NM101") == "report"
        assert "choices" in found(src)[(7, "NM110")].message

    def test_fallback_is_widened_in_the_tier_of_the_default_it_corrects(self):
        """Near miss: a `"device"` dict entry (safe) and an argparse `--device` default without `choices=`
        (unsafe) are rewritten themselves, so the fallback is widened in their tier."""
        src = (
            "import argparse\nimport torch\n"
            "cfg = {'device': 'cuda'}\n"
            "if not torch.cuda.is_available():\n"
            "    cfg['device'] = 'cpu'\n"
            "p = argparse.ArgumentParser()\n"
            "p.add_argument('--device', default='cuda')\n"
            "args = p.parse_args([])\n"
            "if not torch.cuda.is_available():\n"
            "    args.device = 'cpu'\n"
        )
        # each alone: in one file the two checks are widened together, in the less fixable tier
        head, tail = src.split("p = argparse")
        assert tier(head, 4, "NM101") == "safe" and tier(src, 9, "NM101") == "unsafe"
        assert tier(src, 4, "NM101") == "unsafe"
        assert "'cuda'" not in fixed(src)

    def test_fallback_correcting_a_generic_default_is_still_fixed(self):
        """Near miss: the value corrected is already device-generic."""
        src = (
            "import torch\n"
            "device = torch.accelerator.current_accelerator()\n"
            "if not torch.cuda.is_available():\n"
            "    device = 'cpu'\n"
        )
        assert tier(src, 3, "NM101") == "safe"


class TestDeviceChoicesTogether:
    def test_model_guard_and_input_device_are_widened_together(self):
        """Should not rewrite `device = "cuda" if torch.cuda.is_available() else "cpu"` under `--fix` while
        `if torch.cuda.is_available(): model.cuda()` waits for `--unsafe-fixes`: the model would stay on the
        CPU and its input go to the accelerator (the most common idiom of training scripts). Both are fixed together."""
        src = (
            "import torch\nmodel = torch.nn.Linear(3, 2)\n"
            "if torch.cuda.is_available():\n"
            "    model.cuda()\n"
            "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        )
        assert (tier(src, 3, "NM101"), tier(src, 5, "NM102")) == ("unsafe", "unsafe")
        assert "another availability check" in found(src)[(5, "NM102")].message
        assert "torch.cuda" not in fixed(src)

    def test_a_choice_that_stays_cuda_holds_the_others_back(self):
        """Should report the device choice when another one in the file stays CUDA-specific (its guard reaches
        a CUDA-only call, or it picks between CUDA and "meta"), but not hold back a guard that places nothing
        (`torch.cuda.synchronize()`)."""
        src = (
            "import torch\n"
            "d4 = 'cuda' if torch.cuda.is_available() else 'meta'\n"
            "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "if torch.cuda.is_available():\n"
            "    torch.cuda.synchronize()\n"
        )
        got = found(src)
        assert (2, "NM102") not in got and got[(2, "NM101")].fix_applicability == "report"
        assert tier(src, 3, "NM102") == "report" and tier(src, 4, "NM101") == "safe"

    def test_empty_cache_in_a_lambda_keeps_working_on_a_cpu_only_host(self):
        """Should rewrite `lambda: torch.cuda.empty_cache()` to a call guarded by `is_available()` (safe), not
        to a bare `torch.accelerator.empty_cache()` that raises without an accelerator."""
        src = "import torch\nfree = lambda: torch.cuda.empty_cache()\n"
        assert tier(src, 2, "NM301") == "safe"
        assert "(torch.accelerator.empty_cache() if torch.accelerator.is_available() else None)" in fixed(src)
