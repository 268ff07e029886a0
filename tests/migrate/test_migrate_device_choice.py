"""A script's device choice becomes the accelerator's (NM117, NM118, ``migrate/choice.py``), what flows from it
follows, fixes that would be wrong are withheld, and ``check`` reports what ``--fix`` changes."""

from neuron_conformance.migrate.engine import Settings, check_source
from tests.migrate.snippets import ALL, codes, fixed, found

MNIST = (
    "import torch\n"
    "def main(args):\n"
    "    use_cuda = not args.no_cuda and torch.cuda.is_available()\n"
    "    use_mps = not args.no_mps and torch.backends.mps.is_available()\n"
    "    if use_cuda:\n"
    '        device = torch.device("cuda")\n'
    "    elif use_mps:\n"
    '        device = torch.device("mps")\n'
    "    else:\n"
    '        device = torch.device("cpu")\n'
    "    kwargs = {'batch_size': 8}\n"
    "    if use_cuda:\n"
    "        kwargs.update({'num_workers': 1, 'pin_memory': True})\n"
    "    return device, kwargs\n"
)


class TestDeviceChoice:
    def test_cuda_mps_cpu_chain_becomes_the_accelerator(self):
        """Should widen the CUDA flag, choose the accelerator in its branch, and drop the MPS branch and its
        flag, which nothing else reads (the widened test covers MPS)."""
        out = fixed(MNIST)
        assert "use_cuda = not args.no_cuda and torch.accelerator.is_available()" in out
        assert "device = torch.device(DEVICE_TYPE)" in out
        assert "mps" not in out and "torch.cuda" not in out
        assert "kwargs.update({'num_workers': 1, 'pin_memory': True})" in out  # the loader follows the flag

    def test_check_reports_what_fix_changes(self):
        """Should report as fixable exactly the findings `--fix --unsafe-fixes` then applies, in one pass."""
        check = check_source(MNIST, Settings(ALL))
        fixable = [v for v in check.violations if v.fix_applicability != "report"]
        result = check_source(MNIST, Settings(ALL, fix=True, unsafe_fixes=True))
        assert result.fixed == len(fixable) == 2
        assert {v.code for v in fixable} == {"NM101", "NM117"}

    def test_mps_flag_read_elsewhere_is_kept(self):
        """Should keep the MPS flag's assignment when code other than the chain reads it."""
        src = MNIST.replace("    return device, kwargs\n", "    print(use_mps)\n    return device, kwargs\n")
        out = fixed(src)
        assert "use_mps = not args.no_mps and torch.backends.mps.is_available()" in out
        assert "elif use_mps" not in out

    def test_a_switch_of_the_users_own_still_asks_for_an_accelerator(self):
        """Should or the `--mps` switch into the kept test when the CUDA test probes nothing itself."""
        src = (
            "import torch\ndef pick(args):\n    if args.cuda:\n        name = 'cuda:0'\n"
            "    elif args.mps:\n        name = 'mps'\n    else:\n        name = 'cpu'\n    return name\n"
        )
        out = fixed(src)
        assert "if args.cuda or args.mps:" in out and 'f"{DEVICE_TYPE}:0"' in out

    def test_per_vendor_dispatch_stays_quiet(self):
        """Near miss: a chain whose branches call each vendor's API is per-vendor dispatch, not a choice."""
        src = (
            "import torch\ndef sync():\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
            "    elif torch.backends.mps.is_available():\n        torch.mps.synchronize()\n"
        )
        assert codes(src) == []

    def test_chain_is_held_back_with_its_flag(self):
        """Should not fold the chain when its CUDA flag stays CUDA-specific (it reaches NVTX): the MPS branch
        would be lost while CUDA is still what the flag asks for."""
        src = MNIST.replace(
            "    kwargs = {'batch_size': 8}\n",
            "    kwargs = {'batch_size': 8}\n    if use_cuda:\n        torch.cuda.nvtx.mark('x')\n",
        )
        chain = found(src)[(5, "NM117")]
        assert chain.fix_applicability == "report"
        assert "elif use_mps" in fixed(src)

    def test_help_text_of_the_switch_does_not_hold_the_flag_back(self):
        """Should widen a flag read from a switch whose help text names CUDA (`help="disables CUDA"` documents,
        it decides nothing)."""
        src = (
            "import argparse, torch\np = argparse.ArgumentParser()\n"
            "p.add_argument('--no-cuda', action='store_true', help='disables CUDA training')\n"
            "args = p.parse_args()\nuse_cuda = not args.no_cuda and torch.cuda.is_available()\n"
            "device = torch.device('cuda' if use_cuda else 'cpu')\n"
        )
        assert "torch.cuda" not in fixed(src)

    def test_bf16_choice_asks_the_accelerator(self):
        """Should rewrite nanoGPT's dtype choice so another accelerator with bfloat16 does not fall to float16."""
        src = "import torch\ndtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'\n"
        assert [c for c, _ in sorted((k[1], 0) for k in found(src))] == ["NM118"]
        assert 'torch.bfloat16 in torch.accelerator.get_device_capability()["supported_dtypes"]' in fixed(src)

    def test_device_mesh_from_the_private_module_follows(self):
        """Should rewrite `init_device_mesh("cuda")` imported from `torch.distributed._tensor.device_mesh`."""
        src = (
            "from torch.distributed._tensor.device_mesh import init_device_mesh\n"
            'mesh = init_device_mesh(device_type="cuda", mesh_shape=(2,))\n'
        )
        assert '"cuda"' not in fixed(src)


class TestNoWrongFix:
    def test_stream_whose_cuda_stream_is_read_is_not_rewritten(self):
        """Should withhold `torch.cuda.Stream` -> `torch.Stream` when `.cuda_stream` is read: the generic
        stream has `native_handle` instead."""
        src = "import torch\ndef f(d, k):\n    s = torch.cuda.Stream(device=d)\n    k(s.cuda_stream)\n"
        v = found(src)[(3, "NM202")]
        assert v.fix_applicability == "report" and "native_handle" in v.message
        assert fixed(src) == src

    def test_current_stream_handle_is_not_rewritten(self):
        src = "import torch\ndef h():\n    return torch.cuda.current_stream().cuda_stream\n"
        assert fixed(src) == src

    def test_stream_without_cuda_attributes_is_still_fixed(self):
        """Near miss."""
        assert "torch.Stream(d)" in fixed(
            "import torch\ndef f(d):\n    s = torch.cuda.Stream(device=d)\n    return s\n"
        )

    def test_map_location_none_on_cuda_is_not_widened(self):
        """Should not widen `None if torch.cuda.is_available() else cpu` as a map_location: None keeps the
        saved CUDA location, which another accelerator's host cannot load."""
        src = (
            "import torch\ndef load(p):\n"
            '    map_location = None if torch.cuda.is_available() else torch.device("cpu")\n'
            "    return torch.load(p, map_location=map_location)\n"
        )
        assert found(src)[(3, "NM101")].fix_applicability == "report"
        assert fixed(src) == src

    def test_library_cuda_option_is_not_widened(self):
        """Should not widen a value passed as a third-party library's own `cuda=` option."""
        src = "import torch\nimport faisslike\nidx = faisslike.build(dim=4, cuda=torch.cuda.is_available())\n"
        assert "cuda=`" in found(src)[(3, "NM101")].message
        assert fixed(src) == src

    def test_torch_keyword_is_not_a_library_option(self):
        """Near miss: a torch function's keyword is not another library's CUDA option."""
        src = "import torch\nx = torch.zeros(2, pin_memory=torch.cuda.is_available())\n"
        assert "torch.cuda" not in fixed(src)

    def test_grad_scaler_with_unpacked_kwargs_follows_autocast(self):
        """Should rewrite `GradScaler('cuda', **kwargs)` with the autocast beside it, not leave a CUDA scaler
        that disables itself next to an accelerator autocast."""
        src = (
            "import torch\ndef step(model, x, **kwargs):\n    scaler = torch.amp.GradScaler('cuda', **kwargs)\n"
            "    with torch.autocast('cuda', dtype=torch.float16):\n        loss = model(x).sum()\n"
            "    scaler.scale(loss).backward()\n"
        )
        out = fixed(src)
        assert "GradScaler(DEVICE_TYPE, **kwargs)" in out and "'cuda'" not in out

    def test_branch_for_a_torch_without_accelerator_is_quiet(self):
        """Should leave `if torch.__version__ < "2.4":` branches alone: `torch.accelerator` cannot run there."""
        src = (
            "import torch\nfrom packaging import version\n"
            'if version.parse(torch.__version__) < version.parse("2.4"):\n    n = torch.cuda.device_count()\n'
            "else:\n    n = torch.accelerator.device_count()\n"
        )
        assert codes(src) == []

    def test_else_of_a_newer_torch_test_is_quiet(self):
        src = 'import torch\nif torch.__version__ >= "2.5":\n    n = 1\nelse:\n    n = torch.cuda.device_count()\n'
        assert codes(src) == []

    def test_version_gate_above_the_accelerator_release_is_still_fixed(self):
        """Near miss: torch 2.6 and later have `torch.accelerator`."""
        src = 'import torch\nif torch.__version__ < "2.9":\n    n = torch.cuda.device_count()\n'
        assert "torch.accelerator.device_count()" in fixed(src)


class TestStarImports:
    def test_star_import_of_a_module_binding_torch(self, tmp_path):
        """Should resolve `torch` bound through `from .imports import *`, so `check` and `--fix` agree."""
        (tmp_path / "imports.py").write_text("import os\nimport torch\n")
        src = "from .imports import *\n\ndef setup(rank):\n    torch.cuda.set_device(rank)\n    torch.cuda.synchronize()\n"
        path = str(tmp_path / "worker.py")
        check = check_source(src, Settings(ALL), path)
        fix = check_source(src, Settings(ALL, fix=True, unsafe_fixes=True), path)
        assert len(check.violations) == fix.fixed == 2 and not fix.violations
        assert "import torch" not in fix.new_source

    def test_star_import_with_all_binds_nothing_unknown(self, tmp_path):
        """Near miss: a module with `__all__` exports only what it lists."""
        (tmp_path / "imports.py").write_text("import torch\n__all__ = ['x']\nx = 1\n")
        src = "from .imports import *\n\ndef setup(rank):\n    torch.cuda.synchronize()\n"
        assert check_source(src, Settings(ALL), str(tmp_path / "worker.py")).violations == []


class TestPlacementIsAChoice:
    def test_sibling_placements_per_vendor_follow_the_accelerator(self):
        """Should widen `if cuda: x = x.cuda()` next to `if mps: x = x.to("mps")`: both only place data, so
        the run of statements chooses a device (the MPS one stays, harmless on an accelerator host)."""
        src = (
            "import torch\ndef batch(images, gpu):\n    if gpu is not None and torch.cuda.is_available():\n"
            "        images = images.cuda(gpu, non_blocking=True)\n    if torch.backends.mps.is_available():\n"
            "        images = images.to('mps')\n    return images\n"
        )
        out = fixed(src)
        assert "torch.accelerator.is_available()" in out and ".cuda(" not in out

    def test_sibling_that_dispatches_keeps_the_cuda_statement(self):
        """Near miss: the CUDA statement synchronizes, which is per-vendor work."""
        src = (
            "import torch\ndef sync():\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
            "    if torch.backends.mps.is_available():\n        x = torch.zeros(1).to('mps')\n"
        )
        assert codes(src) == []

    def test_chain_after_a_no_accelerator_test_is_a_choice(self):
        """Should take `not torch.cuda.is_available() and not torch.backends.mps.is_available()` for "no
        accelerator", not for per-vendor dispatch, and place the model on the accelerator in the CUDA branch."""
        src = (
            "import torch\ndef place(model, gpu):\n"
            "    if not torch.cuda.is_available() and not torch.backends.mps.is_available():\n"
            "        print('using CPU')\n    elif gpu is not None and torch.cuda.is_available():\n"
            "        torch.cuda.set_device(gpu)\n        model = model.cuda(gpu)\n"
            "    elif torch.backends.mps.is_available():\n        model = model.to(torch.device('mps'))\n"
            "    else:\n        model = torch.nn.DataParallel(model)\n    return model\n"
        )
        out = fixed(src)
        assert "torch.accelerator.set_device_index(gpu)" in out and "model.cuda(" not in out

    def test_else_of_a_widened_test_is_not_reached(self):
        """Should not hold a widened `if` back for code in its `else`: widened, the test holds in more places,
        so the `else` runs in fewer."""
        src = (
            "import torch\ndef place(model, gpu):\n    if gpu is not None and torch.cuda.is_available():\n"
            "        model = model.cuda(gpu)\n    else:\n        model = torch.nn.DataParallel(model)\n"
        )
        assert "torch.accelerator.is_available()" in fixed(src)

    def test_else_of_a_negated_test_is_still_reached(self):
        """Near miss: under `not`, widening makes the `else` run in more places."""
        src = (
            "import torch\ndef f():\n    if not torch.cuda.is_available():\n        return 0\n    else:\n"
            "        torch.cuda.nvtx.mark('x')\n"
        )
        assert found(src)[(3, "NM101")].fix_applicability == "report"

    def test_nccl_warning_gated_on_the_backend_does_not_hold_the_guard(self):
        """Should widen a guard whose region only warns under `backend == "nccl"` (that code runs only where
        NCCL was chosen)."""
        src = (
            "import torch, warnings\ndef count(args):\n    if torch.cuda.is_available():\n"
            "        n = torch.cuda.device_count()\n        if n == 1 and args.dist_backend == 'nccl':\n"
            "            warnings.warn('nccl needs more than one GPU')\n    else:\n        n = 1\n    return n\n"
        )
        out = fixed(src)
        assert "torch.accelerator.device_count()" in out and "torch.cuda" not in out

    def test_cuda_name_built_by_format_is_a_device(self):
        """Should rewrite `loc = "cuda:{}".format(gpu)` whatever the name it is stored in."""
        src = "import torch\ndef load(p, gpu):\n    loc = 'cuda:{}'.format(gpu)\n    return torch.load(p, map_location=loc)\n"
        assert "'{}:{}'.format(DEVICE_TYPE, gpu)" in fixed(src)


def test_nested_cuda_branch_is_rewritten_whole_in_one_pass():
    """Should rewrite every CUDA leaf of a nested `if args.gpu: ... else: ...` CUDA branch in the same fix."""
    src = (
        "import torch\ndef pick(args):\n    if torch.cuda.is_available():\n        if args.gpu:\n"
        "            device = torch.device('cuda:{}'.format(args.gpu))\n        else:\n"
        "            device = torch.device('cuda')\n    elif torch.backends.mps.is_available():\n"
        "        device = torch.device('mps')\n    else:\n        device = torch.device('cpu')\n    return device\n"
    )
    result = check_source(src, Settings(ALL, fix=True, unsafe_fixes=True))
    assert "cuda" not in result.new_source and "mps" not in result.new_source
    assert "torch.device(DEVICE_TYPE, args.gpu)" in result.new_source and result.fixed == 1
