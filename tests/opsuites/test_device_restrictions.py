"""OpInfos that PyTorch restricts to one device type (``onlyCUDA``, ``onlyCPU``) are skipped, naming it.

The jiterator OpInfos run a function compiled for CUDA: the CPU raises, so on CUDA the harness judged the
device's correct result a ``wrong-error`` (64 false alarms on an H200). PyTorch's own device-generic tests
run them on CUDA only.
"""

from __future__ import annotations

from torch.testing._internal.common_device_type import onlyCUDA
from torch.testing._internal.opinfo.core import DecorateInfo

from neuron_conformance.opsuites.samples import device_restriction, opinfo_by_name, opinfo_params, restriction_marks


class _Op:
    def __init__(self, decorators, op=None):
        self.decorators, self.op = decorators, op


def test_decorators_that_restrict_every_test_are_read():
    import torch.cuda

    cuda_fn = torch.cuda.is_available  # a function defined by torch.cuda
    assert device_restriction(_Op([onlyCUDA], cuda_fn)) == "cuda"
    assert device_restriction(_Op([DecorateInfo(onlyCUDA)], cuda_fn)) == "cuda"
    assert device_restriction(_Op([DecorateInfo(onlyCUDA, "TestCommon", "test_errors")], cuda_fn)) is None
    assert device_restriction(_Op([onlyCUDA], torch.add)) is None  # a CPU kernel exists: compared as usual
    assert device_restriction(_Op([])) is None


def test_the_op_db_restrictions_are_found():
    ops = opinfo_by_name()
    assert device_restriction(ops["jiterator_binary"]) == "cuda"
    assert device_restriction(ops["sparse.mm.reduce"]) == "cpu"
    assert device_restriction(ops["where"]) is None  # onlyCUDA for its error inputs only
    assert device_restriction(ops["torch._scaled_mm_v2"]) is None  # onlyCUDA, but the CPU has a kernel
    assert device_restriction(ops["add"]) is None


def test_restricted_opinfos_carry_a_skip_naming_the_restriction():
    (mark,) = restriction_marks("jiterator_binary")
    assert mark.name == "skip" and "restricted to cuda" in mark.kwargs["reason"]
    assert restriction_marks("add") == ()
    params = {p.id: p for p in opinfo_params(("float32",), "compare_cpu")}
    assert any(m.name == "skip" for m in params["jiterator_binary-float32"].marks)
    assert not any(m.name == "skip" for m in params["add-float32"].marks)
