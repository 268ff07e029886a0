"""Exemptions for code without effect off CUDA (``migrate/exemptions/no_effect.py``): CUDA-graph step markers,
CUDA seeding already done by ``torch.manual_seed``, setting ``CUDA_LAUNCH_BLOCKING``, checks that only raise
on CUDA. Each case has an example that is quiet and a near miss that is still reported (and still fixed where the
rule has a fix). The snippets are written for these tests."""

from tests.migrate.snippets import fixed, pairs


class TestCudagraphMarkers:
    def test_marker_and_its_guard_are_quiet(self):
        """Should not report a step marker, bare or under a CUDA test whose body is only markers."""
        src = (
            "import torch\n"
            "def loop(steps, fn, compiled):\n"
            "    for s in steps:\n"
            "        torch.compiler.cudagraph_mark_step_begin()\n"
            "        fn(s)\n"
            "        if torch.cuda.is_available() and compiled:\n"
            "            torch._inductor.cudagraph_mark_step_begin()\n"
        )
        assert pairs(src) == []

    def test_cuda_graph_modes_and_a_guard_with_more_are_still_reported(self):
        """Should still report `mode="reduce-overhead"`, the `triton.cudagraphs` option and a CUDA
        test whose body does more than mark a step (and still fix the synchronize)."""
        src = (
            "import torch\n"
            "def build(model, compiled):\n"
            "    fast = torch.compile(model, mode='reduce-overhead')\n"
            "    opts = torch.compile(model, options={'triton.cudagraphs': True})\n"
            "    if torch.cuda.is_available() and compiled:\n"
            "        torch.compiler.cudagraph_mark_step_begin()\n"
            "        torch.cuda.synchronize()\n"
            "    return fast, opts\n"
        )
        got = pairs(src)
        assert (3, "NM702") in got and (4, "NM703") in got and (5, "NM101") in got and (7, "NM201") in got
        assert "torch.accelerator.synchronize()" in fixed(src)


class TestRedundantSeeding:
    def test_cuda_seed_below_a_generic_seed_is_quiet(self):
        """Should not report CUDA seeding nested below `torch.manual_seed` with the same seed (in a
        CUDA test, or in the default branch of a seeding chain), nor the test guarding it."""
        src = (
            "import torch\n"
            "def reseed(gen, device, helpers):\n"
            "    s = gen.initial_seed()\n"
            "    torch.manual_seed(s)\n"
            "    if device.type == 'cuda':\n"
            "        torch.cuda.manual_seed(s)\n"
            "    if helpers.is_npu_ok():\n"
            "        torch.npu.manual_seed_all(s)\n"
            "    else:\n"
            "        torch.cuda.manual_seed_all(s)\n"
        )
        assert pairs(src) == []

    def test_lone_other_or_changed_seeds_are_still_reported(self):
        """Should still report (and fix) CUDA seeding with no generic seeding before it, with
        another seed, after the seed changed, or in another function; the same-block repeat stays
        NM401."""
        src = (
            "import torch\n"
            "def only_cuda(s):\n"
            "    torch.cuda.manual_seed(s)\n"
            "def other(a, b, ok):\n"
            "    torch.manual_seed(a)\n"
            "    if ok:\n"
            "        torch.cuda.manual_seed_all(b)\n"
            "def changed(s, ok):\n"
            "    torch.manual_seed(s)\n"
            "    s = s + 1\n"
            "    if ok:\n"
            "        torch.cuda.manual_seed_all(s)\n"
            "def looped(s, seeds):\n"
            "    torch.manual_seed(s)\n"
            "    for s in seeds:\n"
            "        torch.cuda.manual_seed(s)\n"
            "def same_block(s):\n"
            "    torch.manual_seed(s)\n"
            "    torch.cuda.manual_seed_all(s)\n"
        )
        assert pairs(src) == [(3, "NM402"), (7, "NM402"), (12, "NM402"), (16, "NM402"), (19, "NM401")]
        assert "torch.cuda.manual_seed(s)\ndef other" not in fixed(src)


class TestLaunchBlocking:
    def test_setting_launch_blocking_is_quiet(self):
        """Should not report setting the CUDA runtime's launch-blocking switch (a debugging and
        determinism setting with no device-generic counterpart)."""
        src = (
            "import os\n"
            "def determinism(on):\n"
            "    os.environ['CUDA_LAUNCH_BLOCKING'] = '1' if on else '0'\n"
            "    os.environ.setdefault('CUDA_LAUNCH_BLOCKING', '1')\n"
            "    return {'CUDA_LAUNCH_BLOCKING': '1'}\n"
        )
        assert pairs(src) == []

    def test_visible_devices_and_reads_are_still_reported(self):
        """Should still report device selection through `CUDA_VISIBLE_DEVICES` and a decision read
        from `CUDA_LAUNCH_BLOCKING`."""
        src = (
            "import os\n"
            "os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n"
            "SYNC = os.environ.get('CUDA_LAUNCH_BLOCKING') == '1'\n"
        )
        assert pairs(src) == [(2, "NM807"), (3, "NM807")]


class TestRaiseOnlyChecks:
    def test_check_that_only_raises_on_cuda_is_quiet(self):
        """Should not report a `"cuda"` test whose body only raises a clearer error."""
        src = (
            "import torch\n"
            "def half_ok(device):\n"
            "    try:\n"
            "        torch.ones(1, dtype=torch.float16, device=device) * 2\n"
            "        return True\n"
            "    except Exception as e:\n"
            "        if device.type == 'cuda':\n"
            "            raise ValueError(f'fp16 should work on this device: {e}')\n"
            "        return False\n"
            "def check_gen(gen, device):\n"
            "    if gen.device.type == 'cpu':\n"
            "        return 'cpu'\n"
            "    elif gen.device.type != device.type and gen.device.type == 'cuda':\n"
            "        raise ValueError('generator and tensor devices differ')\n"
        )
        assert pairs(src) == []

    def test_checks_that_select_behaviour_or_refuse_other_devices_are_still_reported(self):
        """Should still report a `"cuda"` test that selects behaviour, a whitelist that refuses
        every other accelerator, and a raise on CUDA that also tests a condition other accelerators
        can meet (they go on unguarded)."""
        src = (
            "import torch\n"
            "def finish(device):\n"
            "    if device.type == 'cuda':\n"
            "        torch.cuda.synchronize()\n"
            "def only(device):\n"
            "    if device.type != 'cuda':\n"
            "        raise ValueError('unsupported device')\n"
            "def linked(device, links):\n"
            "    if device.type == 'cuda' and not links.ok():\n"
            "        raise RuntimeError('devices are not linked')\n"
        )
        got = pairs(src)
        assert (3, "NM111") in got and (4, "NM201") in got and (6, "NM111") in got and (9, "NM111") in got


class TestCudnnFlagBesideGeneric:
    def test_flags_agreeing_with_the_generic_call_are_quiet(self):
        """Should not report cuDNN flags set after the generic call that makes the same choice: literal
        values that agree, or flags decided by what the generic call was given or by a determinism query."""
        src = (
            "import torch\n"
            "def full_determinism(warn_only):\n"
            "    torch.use_deterministic_algorithms(True, warn_only=warn_only)\n"
            "    torch.backends.cudnn.deterministic = True\n"
            "    torch.backends.cudnn.benchmark = False\n"
            "def seed(debug_mode):\n"
            "    torch.set_deterministic_debug_mode(debug_mode)\n"
            "    mode = torch.get_deterministic_debug_mode()\n"
            "    if mode == 0:\n"
            "        torch.backends.cudnn.benchmark = True\n"
            "def precision(p):\n"
            "    torch.set_float32_matmul_precision(p)\n"
            "    if p == 'highest':\n"
            "        torch.backends.cudnn.allow_tf32 = False\n"
        )
        assert pairs(src) == []

    def test_flags_against_apart_from_or_read_beside_the_generic_call_are_reported(self):
        """Should still report a flag set against the generic call, the generic call in another branch, a
        flag read rather than set, a literal flag beside a generic call given a variable, and a matmul
        precision that contradicts `allow_tf32`."""
        src = (
            "import torch\n"
            "def against():\n"
            "    torch.use_deterministic_algorithms(False)\n"
            "    torch.backends.cudnn.deterministic = True\n"
            "def branches(cpu):\n"
            "    if cpu:\n"
            "        torch.use_deterministic_algorithms(True)\n"
            "    else:\n"
            "        torch.backends.cudnn.deterministic = True\n"
            "def read():\n"
            "    torch.use_deterministic_algorithms(True)\n"
            "    return torch.backends.cudnn.deterministic\n"
            "def variable(det):\n"
            "    torch.use_deterministic_algorithms(det)\n"
            "    torch.backends.cudnn.deterministic = True\n"
            "def contradiction():\n"
            "    torch.set_float32_matmul_precision('highest')\n"
            "    torch.backends.cudnn.allow_tf32 = True\n"
        )
        assert [line for line, code in pairs(src) if code == "NM801"] == [4, 9, 12, 15, 18]
