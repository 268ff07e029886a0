"""neuron_conformance.conformance.verdict.output_dtypes: the output dtypes (and shapes) PyTorch leaves to a device, and only those.

A backend that returns layer norm's statistics in float32 for a bfloat16 input (as CUDA's kernel and PyTorch's
own reference for every non-CPU device do) must pass; the same float32 on any other output or op, or a dtype
other than the accumulate dtype, is still a metadata failure, and the statistics' values are still judged.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.verdict.compare import compare_outputs
from neuron_conformance.conformance.verdict.failures import MetadataFailure, NumericFailure
from neuron_conformance.conformance.verdict.output_dtypes import base_name, device_dtype_allowed, device_shape_allowed
from neuron_conformance.conformance.verdict.tolerances import tolerance_for


def _layer_norm(dtype, stats_dtype):
    """native_layer_norm on the CPU in ``dtype``, with its mean/rstd cast to ``stats_dtype``."""
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0)).to(dtype)
    out, mean, rstd = torch.ops.aten.native_layer_norm(x, [8], None, None, 1e-5)
    x32 = x.float()
    mean32, rstd32 = x32.mean(-1, keepdim=True), torch.rsqrt(x32.var(-1, unbiased=False, keepdim=True) + 1e-5)
    return (out, mean32.to(stats_dtype), rstd32.to(stats_dtype)), (out, mean, rstd)


def test_float32_statistics_of_a_bfloat16_layer_norm_pass():
    device_like, cpu = _layer_norm(torch.bfloat16, torch.float32)
    assert cpu[1].dtype == torch.bfloat16 and device_like[1].dtype == torch.float32
    tol = tolerance_for(torch.bfloat16)
    verdicts = compare_outputs(device_like, cpu, device_type="cpu", tolerance=tol, op="native_layer_norm")
    assert len(verdicts) == 3 and all(v.passed for v in verdicts)
    compare_outputs(device_like, cpu, device_type="cpu", tolerance=tol, op="aten::native_layer_norm.default")


def test_without_the_op_or_for_another_op_the_dtype_still_fails():
    device_like, cpu = _layer_norm(torch.bfloat16, torch.float32)
    tol = tolerance_for(torch.bfloat16)
    for op in (None, "native_group_norm", "layer_norm_backward"):
        with pytest.raises(MetadataFailure, match="output 1: dtype torch.float32"):
            compare_outputs(device_like, cpu, device_type="cpu", tolerance=tol, op=op)


def test_the_normalized_output_must_keep_the_input_dtype():
    device_like, cpu = _layer_norm(torch.bfloat16, torch.float32)
    wrong = (device_like[0].float(),) + device_like[1:]
    with pytest.raises(MetadataFailure, match="output 0: dtype torch.float32"):
        compare_outputs(wrong, cpu, device_type="cpu", tolerance=tolerance_for(torch.bfloat16), op="native_layer_norm")


def test_only_the_accumulate_dtype_is_accepted():
    device_like, cpu = _layer_norm(torch.bfloat16, torch.float64)
    with pytest.raises(MetadataFailure, match="float64"):
        compare_outputs(
            device_like, cpu, device_type="cpu", tolerance=tolerance_for(torch.bfloat16), op="native_layer_norm"
        )
    assert not device_dtype_allowed("native_layer_norm", 1, torch.float32, torch.float32)
    assert not device_dtype_allowed("native_layer_norm", 1, torch.float16, torch.bfloat16)
    assert device_dtype_allowed("native_batch_norm", 2, torch.float32, torch.float16)


def test_accepted_statistics_are_still_judged_by_value():
    device_like, cpu = _layer_norm(torch.bfloat16, torch.float32)
    off = (device_like[0], device_like[1] + 0.25, device_like[2])
    with pytest.raises(NumericFailure, match="output 1"):
        compare_outputs(off, cpu, device_type="cpu", tolerance=tolerance_for(torch.bfloat16), op="native_layer_norm")


def test_base_name_normalizes_aten_and_opinfo_names():
    assert base_name("aten::native_layer_norm.default") == "native_layer_norm"
    assert base_name("aten.native_batch_norm.out") == "native_batch_norm"
    assert base_name("native_layer_norm") == "native_layer_norm"
    assert base_name(None) is None


def _eval_batch_norm():
    """Eval-mode native_batch_norm on the CPU (0-element statistics) and as a device following the meta kernel
    and CUDA returns it (one element per channel)."""
    g = torch.Generator().manual_seed(0)
    x, rm, rv = torch.randn(3, 4, 5, generator=g), torch.randn(4, generator=g), torch.rand(4, generator=g) + 0.1
    cpu = torch.ops.aten.native_batch_norm(x, None, None, rm, rv, False, 0.1, 1e-5)
    return (cpu[0], rm.clone(), torch.rsqrt(rv + 1e-5)), cpu


def test_per_channel_eval_batch_norm_statistics_pass_where_the_cpu_gives_none():
    device_like, cpu = _eval_batch_norm()
    assert tuple(cpu[1].shape) == (0,) and tuple(device_like[1].shape) == (4,)
    tol = tolerance_for(torch.float32)
    for op in ("native_batch_norm", "aten::_native_batch_norm_legit.default", "_batch_norm_no_update"):
        verdicts = compare_outputs(device_like, cpu, device_type="cpu", tolerance=tol, op=op)
        assert len(verdicts) == 1 and verdicts[0].passed  # the statistics have no CPU values to judge
    assert device_shape_allowed("native_batch_norm", 2, (4,), (0,))


def test_the_filled_statistics_rule_is_narrow():
    device_like, cpu = _eval_batch_norm()
    tol = tolerance_for(torch.float32)
    for op in (None, "native_layer_norm", "native_group_norm"):
        with pytest.raises(MetadataFailure, match=r"output 1: shape \(4,\)"):
            compare_outputs(device_like, cpu, device_type="cpu", tolerance=tol, op=op)
    wrong = (device_like[0][:, :2],) + device_like[1:]  # the normalized output must keep the CPU's shape
    with pytest.raises(MetadataFailure, match="output 0: shape"):
        compare_outputs(wrong, cpu, device_type="cpu", tolerance=tol, op="native_batch_norm")
    assert not device_shape_allowed("native_batch_norm", 1, (4, 1), (0,))  # 1-D only
    assert not device_shape_allowed("native_batch_norm", 1, (4,), (3,))  # only where the CPU gives none
