"""Idioms real scripts use: each is fixed, and the fixed snippet runs on this
CPU-only interpreter with the result the original would have had, or it is reported with advice."""

import torch

from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection
from tests.migrate.cpu_only import exec_cpu_only

ALL = selection(None, None)
UNSAFE = Settings(ALL, fix=True, unsafe_fixes=True)


def fixed(src, settings=UNSAFE):
    result = check_source(src, settings)
    assert result.error is None
    return result.new_source or src, result


def execute(src):
    return exec_cpu_only(src)  # as on a host without an accelerator


BUILT = """import torch
class Args:
    cuda = True
gpu = 0
device = torch.device("cuda" if Args.cuda else "cpu")
a = torch.zeros(1).to('cuda:{}'.format(gpu))
b = torch.zeros(1).to('cuda:%d' % gpu)
c = torch.zeros(1).to("cuda:" + str(gpu))
d = torch.zeros(1).to(f"cuda:{gpu}")
"""


def test_built_device_strings_are_rewritten_and_run():
    out, _ = fixed(BUILT)
    assert "cuda" not in out.replace("Args.cuda", "").replace("cuda = True", "")
    ns = execute(out)
    assert ns["device"] == torch.device("cpu")  # no accelerator here: the fallback device type
    assert all(ns[k].device.type == "cpu" for k in "abcd")


def test_nccl_defaults_become_the_device_default_backend():
    src = (
        "import argparse\nimport torch.distributed as dist\n"
        'def main():\n    backend = "nccl"\n    p = argparse.ArgumentParser()\n'
        '    p.add_argument("--dist-backend", default="nccl")\n    return backend, p.parse_args([]).dist_backend\n'
    )
    out, _ = fixed(src)
    assert '"nccl"' not in out
    assert execute(out)["main"]() == ("gloo", "gloo")  # CPU-only host


def test_nccl_evaluated_at_import_is_reported_not_rewritten():
    """A parameter default and a module- or class-level variable are evaluated at import, where
    get_default_backend_for_device raises for an accelerator with no registered default backend (and
    torch.distributed may be unavailable): the rewrite would make the import fail (mmengine's
    `def _setup_distributed(self, backend='nccl')` in mmengine 0.10.7)."""
    src = (
        'import torch.distributed as dist\nBACKEND = "nccl"\n'
        'class Strategy:\n    backend = "nccl"\n'
        '    def setup(self, backend="nccl"):\n        dist.init_process_group(backend)\n'
        "def run():\n    dist.init_process_group(BACKEND)\n    dist.init_process_group(Strategy.backend)\n"
    )
    out, result = fixed(src)
    assert out.count('"nccl"') == 3
    found = sorted((v.line, v.fix_applicability) for v in result.violations if v.code == "NM601")
    assert found == [(2, "report"), (4, "report"), (5, "report")]
    assert all("at import" in v.message for v in result.violations if v.code == "NM601")
    near = check_source(
        'import torch.distributed as dist\ndef run():\n    backend = "nccl"\n    dist.init_process_group(backend)\n',
        Settings(ALL),
    )
    assert [(v.line, v.fix_applicability) for v in near.violations if v.code == "NM601"] == [(3, "unsafe")]


def test_function_references_get_their_accelerator_equivalent():
    src = "import torch\ncount = torch.cuda.device_count\nseed = torch.cuda.manual_seed_all\n"
    out, result = fixed(src)
    assert "count = torch.accelerator.device_count\n" in out
    assert execute(out)["count"]() == 0
    seed = next(v for v in result.violations if v.code == "NM005")
    assert "torch.manual_seed" in seed.message and seed.fix_applicability == "report"


def test_current_accelerator_used_without_a_none_check_is_reported_at_the_use():
    src = (
        "import torch\nacc = torch.accelerator.current_accelerator(check_available=True)\n"
        "name = acc.type\nok = torch.accelerator.current_accelerator()\nif ok is not None:\n"
        "    print(ok.type)\n"
    )
    found = [(v.line, v.code) for v in check_source(src, Settings(ALL)).violations if v.code == "NM004"]
    assert found == [(3, "NM004")]
    out, _ = fixed("import torch\nt = torch.accelerator.current_accelerator(check_available=True).type\n")
    assert execute(out)["t"] == "cpu"


def test_device_whitelist_and_cuda_gated_conditional_are_reported():
    src = (
        'import torch\ndef pick(req):\n    if req not in ("cpu", "cuda"):\n        raise ValueError(req)\n'
        'def timer(device_type):\n    sync = torch.cuda.synchronize if device_type == "cuda" else lambda: None\n'
    )
    messages = [v.message for v in check_source(src, Settings(ALL)).violations if v.code == "NM111"]
    assert any("whitelist" in m for m in messages)
    assert any("`lambda: None`" in m for m in messages)


def test_nccl_if_cuda_conditional_is_replaced_whole_never_half_widened():
    src = (
        "import torch\nimport torch.distributed as dist\ndef pick():\n"
        '    backend = "nccl" if torch.cuda.is_available() else "gloo"\n'
        '    mode = "nccl" if torch.cuda.is_available() else "mpi"\n    return backend, mode\n'
    )
    out, result = fixed(src)
    assert "    backend = torch.distributed.get_default_backend_for_device(DEVICE_TYPE)\n" in out
    assert execute(out)["pick"]()[0] == "gloo"  # what the original chose on this CPU-only host
    assert '    mode = "nccl" if torch.cuda.is_available() else "mpi"\n' in out  # widening would pick nccl off CUDA
    kept = [v for v in result.violations if v.code == "NM101"]
    assert len(kept) == 1 and kept[0].fix_applicability == "report" and '`"nccl"`' in kept[0].message
