"""The aten audit: which overloads count, the exclusion rules, the dispositions, the gate, the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from neuron_conformance.conformance.results import aten_audit
from neuron_conformance.reports import audit as report_audit
from neuron_conformance.reports.errors import ReportInputError
from neuron_conformance.reports.to_markdown import cell, code_span

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]


def test_cpu_kernel_rule_follows_the_dispatcher():
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    names = set(aten_audit.cpu_kernel_overloads())
    assert all(any(has(n, k) for k in aten_audit.CPU_KERNEL_KEYS) for n in names)
    assert "aten::add.Tensor" in names and "aten::_euclidean_dist.out" in names
    # CompositeImplicitAutograd only: no kernel of its own, audited as what it decomposes into
    assert has("aten::linear", "CompositeImplicitAutograd") and "aten::linear" not in names


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("aten::_triton_scaled_dot_attention.out", "backend-specific"),
        ("aten::cudnn_convolution", "backend-specific"),
        ("aten::_to_sparse", "sparse"),
        ("aten::quantize_per_tensor", "quantized"),
        ("aten::sym_numel", "meta-only"),
    ],
)
def test_exclusion_rules_name_a_reason_and_source(name, fragment):
    reason, source = aten_audit.exclusion(name)
    assert fragment in reason and source


def test_ordinary_overloads_are_not_excluded_and_are_generated_targets():
    for name in ("aten::add.Tensor", "aten::_euclidean_dist.out", "aten::kaiser_window"):
        assert aten_audit.exclusion(name) is None
        assert name in aten_audit.generated_targets()
    assert not set(aten_audit.SCHEMA_UNSAFE) & set(aten_audit.generated_targets())


def test_random_overloads_are_random_ops_targets_not_generated_ones():
    """Random overloads count like others (no exclusion rule); random_ops judges them, the generated suite
    does not compare their values with the CPU kernel's."""
    random = set(aten_audit.random_targets())
    assert {
        "aten::rand",
        "aten::randn",
        "aten::randperm",
        "aten::native_dropout",
        "aten::uniform_",
        "aten::bernoulli_.float",
        "aten::multinomial",
    } <= random
    assert all(aten_audit.exclusion(n) is None and aten_audit.is_random(n) for n in random)
    assert not random & set(aten_audit.generated_targets())
    assert aten_audit.exclusion("aten::_cudnn_rnn.out") is not None  # random and backend-specific: excluded
    assert not aten_audit.is_random("aten::add.Tensor")


def test_no_reference_records_reach_nothing():
    records = [
        {"suite": "random_ops", "op": "aten::uniform_", "outcome": "passed"},
        {"suite": "random_ops", "op": "aten::_fused_dropout.out", "outcome": "no-reference"},
    ]
    assert aten_audit.generated_from_records(records) == {"aten::uniform_"}


def test_dispositions_from_coverage_and_generated_records():
    cov = {
        "suites": {
            "aten::add.Tensor": ["compare_cpu", "generated"],
            "aten::mul.out": ["layouts"],
            "aten::bernoulli": ["compare_cpu"],
            "aten::relu": ["generated"],
        }
    }
    records = [
        {"suite": "generated", "op": "aten::_euclidean_dist.out", "outcome": "failed"},
        {"suite": "generated", "op": "aten::sin", "outcome": "skipped"},
    ]
    data = aten_audit.audit(cov, aten_audit.generated_from_records(records))
    assert data["covered"]["aten::add.Tensor"] == ["compare_cpu"]
    assert data["covered"]["aten::mul.Tensor"] == ["layouts"]  # through its out= variant
    assert {"aten::relu", "aten::_euclidean_dist.out"} <= set(data["generated"])
    assert "aten::sin" in data["unknown"]  # a skipped generated test reaches nothing
    assert data["covered"]["aten::bernoulli"] == ["compare_cpu"]  # random overloads are no longer excluded
    c = data["counts"]
    assert sum(c.values()) == data["total"] == len(aten_audit.cpu_kernel_overloads())
    assert data["percent_reached"] == round(100.0 * (c["covered"] + c["generated"]) / data["total"], 2)
    assert data["core"]["total"] == 193 and "aten::add.Tensor" not in data["core"]["missing"]
    assert "aten::native_batch_norm" in data["unknown_reasons"]


def test_core_line_counts_core_overloads_a_suite_ran_despite_an_exclusion():
    """sym_* queries are excluded (meta-only) and have no CPU kernel: as core overloads they count as
    reached once a suite executed them on the device, and stay excluded; rand (no longer excluded: the
    random_ops suite judges it) is covered like any other overload."""
    records = [
        {"suite": "shape_contracts", "op": "aten::sym_size.int", "outcome": "passed"},
        {"suite": "shape_contracts", "op": "aten::sym_numel", "outcome": "skipped"},
    ]
    cov = {"suites": {"aten::rand": ["compare_cpu"]}}
    before = aten_audit.audit({}, set())
    data = aten_audit.audit(cov, aten_audit.generated_from_records(records))
    assert {"aten::sym_size.int", "aten::sym_numel", "aten::rand"} <= set(before["core"]["missing"])
    assert "aten::sym_size.int" not in data["core"]["missing"] and "aten::rand" not in data["core"]["missing"]
    assert "aten::sym_numel" in data["core"]["missing"]  # a skipped test executed nothing
    assert data["core"]["reached"] == before["core"]["reached"] + 2
    assert not any("aten::rand" in e["overloads"] for e in data["excluded"].values())
    assert data["covered"]["aten::rand"] == ["compare_cpu"]
    assert data["counts"]["excluded"] == before["counts"]["excluded"]  # sym_* stay excluded
    assert data["counts"]["covered"] == before["counts"]["covered"] + 1


def test_gate_line_counts_and_names_the_first_unknown():
    line = aten_audit.gate_line({"unknown": [f"aten::op{i}" for i in range(12)]})
    assert "12 aten overload(s)" in line and "aten::op0, aten::op1" in line and "(2 more)" in line
    assert aten_audit.gate_line({"unknown": []}) is None


def test_merge_coverages_names_a_bad_file(tmp_path):
    bad = tmp_path / "coverage.json"
    bad.write_text("[1]")
    with pytest.raises(ValueError, match="coverage.json"):
        aten_audit.merge_coverages([bad])


def test_report_section_and_markdown(tmp_path):
    data = aten_audit.audit({"suites": {"aten::add.Tensor": ["compare_cpu"]}}, {"aten::relu"})
    path = tmp_path / "aten_audit.json"
    path.write_text(json.dumps(data))
    sec = report_audit.section(report_audit.read_audit(path))
    assert sec["covered_by_suite"] == {"compare_cpu": 1} and sec["counts"] == data["counts"]
    text = "\n".join(report_audit.markdown(sec, cell, code_span))
    assert "| generated | 1 |" in text and f"of {data['core']['total']}" in text
    assert "unknown overloads</summary>" in text and "| excluded because |" in text
    path.write_text(json.dumps({"counts": {"covered": "x"}}))
    with pytest.raises(ReportInputError, match="counts"):
        report_audit.read_audit(path)


def test_fail_on_unknown_fails_the_run_with_one_line(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    result = pytester.runpytest_subprocess(
        str(ROOT / "opsuites" / "test_generated.py"),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "--conformance-ops",
        "aten::add.Tensor",
        f"--conformance-report-dir={pytester.path / 'rep'}",
        "--conformance-fail-on-unknown",
        "-q",
        timeout=600,
    )
    assert result.ret == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["conformance: * aten overload(s) with a CPU kernel have no disposition*"])
    audit = json.loads((pytester.path / "rep" / "aten_audit.json").read_text())
    assert "aten::add.Tensor" in audit["generated"]
    summary = json.loads((pytester.path / "rep" / "summary.json").read_text())
    assert summary["aten_audit"]["counts"]["generated"] == len(audit["generated"])
    assert "aten audit" in (pytester.path / "rep" / "index.html").read_text()


def test_out_wrappers_of_cuda_only_functionals_are_excluded_with_their_reason():
    """batch_norm_stats.out has a CompositeExplicitAutograd kernel (so it has a "CPU kernel") that calls
    batch_norm_stats, which has a CUDA kernel only: excluded. add.out (functional add.Tensor has a CPU
    kernel) is not."""
    reason = aten_audit.exclusion("aten::batch_norm_stats.out")
    assert reason is not None and reason[0].startswith("no CPU kernel behind the wrapper")
    assert aten_audit.exclusion("aten::add.out") is None
    assert aten_audit.exclusion("aten::native_norm.out") is not None


def test_wrappers_of_meta_only_inplace_overloads_are_excluded():
    """_philox_normal and _resize_output (and their out=) are CompositeExplicitAutograd kernels calling an
    in-place overload. Where that overload has kernels for Meta and other backends only, there is no CPU
    reference and the wrapper is excluded; where the running torch gives it a CPU kernel (_philox_normal_ from
    torch 2.14), the wrapper is audited like any other. The expectation is read from the running registry.
    add (in-place add_ has a CPU kernel) and uniform_ itself (an in-place overload, with a CPU kernel) are not
    excluded by the rule."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    meta_only = 0
    for name in (
        "aten::_philox_normal",
        "aten::_philox_normal.out",
        "aten::_resize_output",
        "aten::_resize_output.out",
    ):
        inplace = f"aten::{aten_audit.base_name(name)}_"
        reason = aten_audit.exclusion(name)
        if has(inplace, "CPU"):
            assert reason is None or not reason[0].startswith("no CPU kernel behind the wrapper"), name
        else:
            meta_only += 1
            assert reason is not None and reason[0].startswith("no CPU kernel behind the wrapper"), name
    assert meta_only >= 2  # _resize_output_ has no CPU kernel in any supported torch
    assert aten_audit.exclusion("aten::add.Tensor") is None
    assert aten_audit.exclusion("aten::uniform_") is None


def test_session_six_exclusions_name_their_reason():
    """PyTorch's test ops, the *_overrideable entry points, forward-AD internals and sym_constrain_range get
    their own reasons; _fw_primal (reached by forward-mode OpInfo checks) and isin stay unexcluded."""
    expect = {
        "aten::_test_optional_intlist": "PyTorch's own test operators",
        "aten::convolution_overrideable": "raises on the CPU by design",
        "aten::_scaled_dot_product_fused_attention_overrideable": "raises on the CPU by design",
        "aten::_make_dual": "forward-mode AD internals",
        "aten::_fw_primal_copy.out": "forward-mode AD internals",
        "aten::_functional_sym_constrain_range": "meta-only or debugging",
        "aten::sspaddmm.out": "sparse layout",
    }
    for name, start in expect.items():
        reason = aten_audit.exclusion(name)
        assert reason is not None and reason[0].startswith(start), (name, reason)
    assert aten_audit.exclusion("aten::_fw_primal") is None
    assert aten_audit.exclusion("aten::isin.Tensor_Scalar_out") is None
