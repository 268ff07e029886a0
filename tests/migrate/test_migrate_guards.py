"""A fix must never make crashing code out of working code: a widened
availability check is fixed only with everything it makes reachable (migrate/reach.py), and
the rewrites that are kept run on this CPU-only interpreter with the original's result."""

import textwrap

import pytest
import torch

from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection
from tests.migrate.cpu_only import cpu_only_host, exec_cpu_only

ALL = selection(None, None)
SAFE = Settings(ALL, fix=True)
UNSAFE = Settings(ALL, fix=True, unsafe_fixes=True)


def fixed(src, settings):
    result = check_source(textwrap.dedent(src), settings)
    assert result.error is None
    return result.new_source or textwrap.dedent(src), result


def run(src, name, *args):
    with cpu_only_host():  # the snippet's functions run as on a host without an accelerator
        return exec_cpu_only(src)[name](*args)


class Args:
    gpu = 0


GUARD_OVER_CUDA_CALL = """\
import torch
def f(args, x):
    if args.gpu is not None and torch.cuda.is_available():
        x = x.cuda(args.gpu)
    return x
"""


def test_guard_over_unsafe_body_is_not_widened_in_the_safe_tier():
    out, result = fixed(GUARD_OVER_CUDA_CALL, SAFE)
    assert "torch.cuda.is_available()" in out and "x.cuda(args.gpu)" in out
    nm101 = next(v for v in result.violations if v.code == "NM101")
    assert nm101.fix_applicability == "unsafe" and "x.cuda(args.gpu)" in nm101.message


def test_guard_and_body_are_fixed_together_with_unsafe_fixes():
    out, _ = fixed(GUARD_OVER_CUDA_CALL, UNSAFE)
    assert "torch.accelerator.is_available()" in out and ".cuda(" not in out
    x = torch.arange(3.0)
    assert torch.equal(run(out, "f", Args(), x), run(GUARD_OVER_CUDA_CALL, "f", Args(), x))


@pytest.mark.parametrize("settings", [SAFE, UNSAFE], ids=["safe", "unsafe"])
def test_device_conditional_is_rewritten_whole(settings):
    """The condition is widened only together with its "cuda:0" branch (never half-rewritten)."""
    src = 'import torch\nn = 1\ndevice = torch.device("cuda:0" if torch.cuda.is_available() and n > 0 else "cpu")\n'
    out, result = fixed(src, settings)
    assert "torch.cuda" not in out and '"cuda:0"' not in out and "torch.accelerator.is_available()" in out
    ns = exec_cpu_only(out)
    assert ns["device"] == torch.device("cpu")  # as on a host without an accelerator


def test_condition_over_an_unfixed_cuda_literal_is_not_widened():
    src = 'import torch\nlabel = "cuda:0" if torch.cuda.is_available() else "none"\n'
    out, result = fixed(src, UNSAFE)
    assert out == src
    assert any(v.code == "NM101" and '"cuda:0"' in v.message for v in result.violations)


def test_conditional_expression_is_fixed_whole_or_not_at_all():
    src = "import torch\ndef f(t):\n    return t.cuda() if torch.cuda.is_available() else t\n"
    assert fixed(src, SAFE)[0] == src
    out, _ = fixed(src, UNSAFE)
    assert "torch.cuda" not in out and ".cuda()" not in out
    t = torch.ones(2)
    assert torch.equal(run(out, "f", t), run(src, "f", t))


def test_device_context_of_a_tensor_device_passes_the_index():
    """torch.accelerator.device_index takes `int | None` (torch 2.13); a torch.device is a TypeError."""
    src = "import torch\ndef f(t):\n    with torch.cuda.device(t.device):\n        return t + 1\n"
    assert fixed(src, SAFE)[0] == src
    out, _ = fixed(src, UNSAFE)
    assert "torch.accelerator.device_index(t.device.index)" in out
    assert torch.equal(run(out, "f", torch.zeros(2)), torch.ones(2))
    other = "import torch\ndef f(target):\n    with torch.cuda.device(target):\n        pass\n"
    out, result = fixed(other, UNSAFE)
    assert out == other and any("takes an int or None" in v.message for v in result.violations)


@pytest.mark.parametrize(
    "src",
    [
        "import torch\nok = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)\n",
        "import torch\nif torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0):\n    x = 1\n",
    ],
    ids=["capability-flag", "capability-if"],
)
def test_checks_that_stay_cuda_specific_are_not_widened(src):
    """A CUDA probe guarding an NVIDIA capability query is never widened; the pair is deliberately
    CUDA-only and not reported either (migrate/exemptions/capability_probes.py). The same probe guarding an unsupported CUDA call is reported, not fixed."""
    out, result = fixed(src, UNSAFE)
    assert out == src and result.violations == []
    graph = src.replace("torch.cuda.get_device_capability() >= (8, 0)", "torch.cuda.graph_pool_handle()")
    out, result = fixed(graph, UNSAFE)
    assert out == graph
    nm101 = [v for v in result.violations if v.code == "NM101"]
    assert nm101 and all(v.fix_applicability == "report" and "not fixed" in v.message for v in nm101)


def test_guard_over_generic_body_is_still_fixed_and_runs():
    src = "import torch\ndef f():\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n    return 1\n"
    out, _ = fixed(src, SAFE)
    assert "torch.accelerator.is_available()" in out and "torch.accelerator.synchronize()" in out
    assert run(out, "f") == 1


def test_cuda_sanity_check_is_neither_fixed_nor_reported():
    """`device == "cuda" and not torch.cuda.is_available()` asks about CUDA itself: a
    rewrite would turn it into a different check (migrate/exemptions/sanity_checks.py)."""
    src = (
        "import torch\ndef check(torch_device):\n"
        '    if torch_device == "cuda" and not torch.cuda.is_available():\n        raise ValueError(torch_device)\n'
    )
    result = check_source(src, UNSAFE)
    assert result.new_source is None and result.violations == []


def test_device_count_test_widens_like_an_availability_check():
    src = "import torch\ndef f(x):\n    if torch.cuda.device_count() > 1:\n        x = x.cuda()\n    return x\n"
    out, result = fixed(src, SAFE)
    assert out == src
    assert any(v.code == "NM103" and "x.cuda()" in v.message for v in result.violations)
    out, _ = fixed(src, UNSAFE)
    assert "torch.accelerator.device_count()" in out and ".cuda()" not in out
    assert torch.equal(run(out, "f", torch.ones(1)), torch.ones(1))
