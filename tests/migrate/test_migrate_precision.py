"""Precision: text that merely mentions a CUDA idiom (docstrings, comments, messages, rule tables)
is never reported, while the same text used as a value still is."""

import pytest

from neuron_conformance.migrate import registry
from neuron_conformance.migrate.engine import Settings, check_source

ALL = registry.selection(None, None)

#: Every literal a string rule looks for, as it would appear in prose. (An assigned list holding
#: the OOM text is, by design, taken for a list of messages to match: hence the noqa.)
TRIGGERS = [
    '"cpu:gloo,cuda:nccl"',
    '"kernel.cu"',
    '"CUDA out of memory"',
    '"CUDA_VISIBLE_DEVICES"',  # noqa: NM307
    '"CUDA_LAUNCH_BLOCKING"',
    '"triton.cudagraphs"',
    '"cuda"',
    '"cuda:0"',
]


def codes(src):
    result = check_source(src, Settings(ALL))
    assert result.error is None, result.error
    return sorted(v.code for v in result.violations)


def test_docstrings_and_comments_are_never_reported():
    """Should report nothing for a module, class and function whose docstrings and comments
    quote every trigger literal, including implicit concatenations in a docstring."""
    prose = " ".join(TRIGGERS)
    src = (
        f'"""Module docstring: {prose}."""\nimport os\nimport torch\n\n\n'
        f'class A:\n    """Class docstring: {prose}."""\n    # comment: {prose}\n\n'
        f'    def f(self):\n        """Method docstring: {prose}."""\n'
        f'        ("continued " "{TRIGGERS[0][1:-1]}")\n        return 1\n'
    )
    assert codes(src) == []


@pytest.mark.parametrize(
    "src",
    [
        "def f(msg):\n    raise ValueError(\"use 'cpu:gloo,cuda:nccl' for async save \" + msg)\n",
        'rule("NM1", example=\'if "CUDA out of memory" in str(e):\', what="Finds CUDA out of memory")\n',
        'def g(v):\n    return v in ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING")\n',
        'def h(v):\n    return v == "triton.cudagraphs" or v == "cpu:gloo,cuda:nccl"\n',
        'MAP = {"cub/cub.cuh": "hipcub/hipcub.hpp"}\nSUFFIXES = (".cu", ".cuh")\n',
        'def k(rule_name, kind):\n    return rule_name == "cuda" or kind.startswith("cuda")\n',
    ],
)
def test_strings_that_are_not_values_of_the_api_are_quiet(src):
    """Should not report a trigger literal used as a message, documentation keyword, rule-table
    entry, header-mapping table, suffix list or comparison with an unrelated name."""
    assert codes(src) == []


@pytest.mark.parametrize(
    "src, code",
    [
        ('import torch.distributed as dist\ndist.init_process_group(backend="cpu:gloo,cuda:nccl")\n', "NM605"),
        ('import torch.distributed as dist\nb = "cpu:gloo,cuda:nccl"\ndist.new_group([0], backend=b)\n', "NM605"),
        ('from torch.utils.cpp_extension import load\nm = load("op", sources=["op.cu"])\n', "NM902"),
        ('def f(e):\n    return "CUDA out of memory" in str(e)\n', "NM307"),
        ('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n', "NM807"),
        ('def f(x):\n    return x.device.type == "cuda"\n', "NM111"),
    ],
)
def test_the_same_text_used_as_a_value_is_reported(src, code):
    """Should still report the literal where it reaches the API in question."""
    assert code in codes(src)


def test_per_device_table_entry_for_cuda_is_quiet():
    """Should not report `torch.cuda.*` stored under a "cuda" key of a per-device table, but
    should report the same reference stored under another key."""
    src = 'import torch\nSYNC = {"cuda": torch.cuda.synchronize, "cpu": None}\nSYNC["xla"] = torch.cuda.synchronize\n'
    result = check_source(src, Settings(ALL))
    assert [v.line for v in result.violations] == [3]
