"""Units of the compile suite's machinery (``opsuites/compile/capture.py``, ``compile_selection.py``): graph and
break counts, the class each exception gets, the recompile check, the break rule, the opt-in and the
toolchain line. CPU tensors and small backends written here; no device."""

from __future__ import annotations

import types

import pytest
import torch

from neuron_conformance.conformance.verdict.failures import (
    CompiledRunFailure,
    CompileFailure,
    GraphBreakFailure,
    RecompileFailure,
    classify_exception,
)
from neuron_conformance.opsuites.compile import capture as cc
from neuron_conformance.opsuites.compile import selection as sel


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    import torch._dynamo

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compiled(fn, backend="eager", dynamic=False):
    return cc.CompiledSample(fn, backend, dynamic=dynamic, where="unit")


def test_sample_function_rebuilds_the_call_with_its_constants():
    triple = (torch.ones(2), ([torch.zeros(2), torch.full((2,), 3.0)],), {"alpha": 2})
    template, tensors = cc.split_sample(triple)
    assert len(tensors) == 3 and repr(template) == "(T0, ([T1, T2],), {'alpha': 2})"
    got = cc.sample_function(lambda x, ys, alpha: x + alpha * ys[1] - ys[0], template)(*tensors)
    assert torch.equal(got, torch.full((2,), 7.0))


def test_the_grown_variant_grows_every_long_dimension_and_keeps_values_valid():
    from types import SimpleNamespace

    from neuron_conformance.opsuites.compile.checks import grown_sample

    x = torch.arange(6.0).reshape(2, 3).requires_grad_()
    index = torch.tensor([[0, 2], [1, 1]])
    got = grown_sample(SimpleNamespace(input=x, args=(1, index), kwargs={"scalar": torch.tensor(3.0)}))
    assert got.input.shape == (3, 4) and got.input.requires_grad and got.input.is_leaf
    assert torch.equal(got.input[:2, :3], x.detach()) and torch.equal(got.input[2], got.input[1])
    assert got.args[0] == 1 and got.args[1].shape == (3, 3) and int(got.args[1].max()) == 2
    assert got.kwargs["scalar"].shape == () and torch.gather(got.input, 1, got.args[1][:, :2]).shape == (3, 2)


def test_one_graph_is_counted_as_one():
    result, counts = _compiled(lambda x: x.sin() + 1).call([torch.ones(3)])
    assert torch.allclose(result, torch.ones(3).sin() + 1)
    assert (counts.graphs, counts.breaks, counts.one_graph) == (1, 0, True) and counts.frames >= 1


def test_a_data_dependent_break_is_counted_with_its_reason():
    def fn(x):
        y = x * 2
        if y.sum() > 0:  # a branch on a tensor's value: Dynamo breaks the graph
            return y + 1
        return y - 1

    _, counts = _compiled(fn).call([torch.ones(3)])
    assert counts.breaks >= 1 and counts.graphs >= 2 and not counts.one_graph
    assert counts.reasons and all(isinstance(r, str) and r for r in counts.reasons)


def test_a_backend_compiler_error_is_a_compile_error():
    def refuses(gm, example_inputs):
        raise RuntimeError("no lowering")

    with pytest.raises(CompileFailure, match="raised while compiling.*no lowering") as info:
        _compiled(lambda x: x + 1, backend=refuses).call([torch.ones(2)])
    assert classify_exception(info.value) == "compile-error"


def test_an_exception_in_a_running_graph_is_a_run_error_not_a_compile_error():
    def breaks_at_run(gm, example_inputs):
        def run(*args):
            raise RuntimeError("kernel launch failed")

        return run

    with pytest.raises(CompiledRunFailure, match="a compiled graph raised while running") as info:
        _compiled(lambda x: x + 1, backend=breaks_at_run).call([torch.ones(2)])
    assert classify_exception(info.value) == "compiled-run-error"


def test_a_missing_kernel_at_run_time_is_unsupported():
    def missing(gm, example_inputs):
        def run(*args):
            raise NotImplementedError("Could not run 'aten::foo' with arguments from the 'PrivateUse1' backend")

        return run

    with pytest.raises(CompiledRunFailure) as info:
        _compiled(lambda x: x + 1, backend=missing).call([torch.ones(2)])
    assert classify_exception(info.value) == "unsupported"


def test_the_wrapped_backend_gets_the_graph_and_its_inputs():
    seen = []

    def backend(gm, example_inputs):
        seen.append(len(example_inputs))
        return gm.forward

    result, counts = _compiled(lambda x, y: x * 3 + y, backend=backend).call([torch.ones(2), torch.ones(2)])
    assert torch.equal(result, torch.full((2,), 4.0)) and seen == [2] and counts.one_graph


STATE = {"calls": 0}


def test_a_second_identical_call_that_compiles_again_is_a_recompile():
    def fn(x):
        STATE["calls"] += 1  # a guarded global that changes on every call: the guards never hold twice
        return x + STATE["calls"]

    compiled = _compiled(fn)
    compiled.call([torch.ones(2)])
    with pytest.raises(RecompileFailure, match="compiled again"):
        cc.check_recompile(compiled, [torch.ones(2)])


def test_a_stable_function_passes_the_recompile_check():
    compiled = _compiled(lambda x: x.cos())
    compiled.call([torch.ones(2)])
    cc.check_recompile(compiled, [torch.ones(2)])  # raises on failure


def test_the_recompile_limit_raises_instead_of_running_eagerly():
    import torch._dynamo

    compiled = _compiled(lambda x: x + 1)
    with cc.dynamo_settings(backward=False), torch._dynamo.config.patch(recompile_limit=1):
        compiled.call([torch.ones(2)])
        with pytest.raises(RecompileFailure, match="recompile limit"):
            compiled.call([torch.ones(3)])  # a new static shape needs a second entry


def test_reference_counts_compile_on_the_cpu():
    template, tensors = cc.split_sample((torch.ones(3), (), {}))
    counts, exc = cc.reference_counts(torch.nonzero, template, tensors, dynamic=False, where="unit")
    assert exc is None and counts.breaks >= 1


@pytest.mark.parametrize(
    ("device", "cpu", "fails"),
    [
        ((1, 0), (1, 0), False),  # one graph on both
        ((2, 1), (2, 1), False),  # the CPU breaks the same way: the op's break
        ((0, 1), (0, 1), False),  # nothing compiles on either side
        ((2, 1), (1, 0), True),  # a break the CPU does not have
        ((1, 1), (1, 0), True),  # a break with the same graph count
        ((0, 0), (1, 0), True),  # ran eagerly where the CPU compiles: a silent fallback
    ],
)
def test_the_break_rule_charges_the_device_only_beyond_the_cpu(device, cpu, fails):
    dev_counts = cc.Counts(*device, reasons=["why"])
    cpu_counts = cc.Counts(*cpu)
    if fails:
        with pytest.raises(GraphBreakFailure, match="on the CPU") as info:
            cc.judge_graphs(dev_counts, cpu_counts, "unit")
        assert classify_exception(info.value) == "graph-break"
    else:
        cc.judge_graphs(dev_counts, cpu_counts, "unit")


def _config(tmp_path, args, flag=None):
    options = types.SimpleNamespace(conformance_compile_suite=flag)
    return types.SimpleNamespace(
        invocation_params=types.SimpleNamespace(args=tuple(args), dir=tmp_path),
        args=list(args),
        rootpath=tmp_path,
        option=options,
        getoption=lambda name, default=None: getattr(options, name, default),
        known_args_namespace=options,
        _conformance_pyproject={},
    )


def test_the_suite_runs_when_named_or_asked_for(tmp_path, monkeypatch):
    monkeypatch.delenv("CONFORMANCE_COMPILE_SUITE", raising=False)
    module = str(sel.MODULE)
    assert sel.suite_requested(_config(tmp_path, [module]))
    assert sel.suite_requested(_config(tmp_path, [f"{module}::test_compile[add-float32]", "-q"]))
    assert sel.suite_requested(_config(tmp_path, [sel.PYARGS_NAME]))
    assert not sel.suite_requested(_config(tmp_path, [str(sel.MODULE.parent), "-q"]))
    assert sel.suite_requested(_config(tmp_path, [str(sel.MODULE.parent)], flag=True))
    monkeypatch.setenv("CONFORMANCE_COMPILE_SUITE", "1")
    assert sel.suite_requested(_config(tmp_path, [str(sel.MODULE.parent)]))


def test_unrequested_compile_tests_are_deselected(tmp_path, monkeypatch):
    monkeypatch.delenv("CONFORMANCE_COMPILE_SUITE", raising=False)
    ours = types.SimpleNamespace(path=sel.MODULE)
    other = types.SimpleNamespace(path=sel.MODULE.parent / "test_compare_cpu.py")
    items, reported = [ours, other], []
    config = _config(tmp_path, [str(sel.MODULE.parent)])
    config.hook = types.SimpleNamespace(pytest_deselected=lambda items: reported.extend(items))
    assert sel.deselect_unrequested(config, items) == [ours]
    assert items == [other] and reported == [ours]


def test_a_missing_cxx_compiler_is_one_line(monkeypatch):
    monkeypatch.setattr(sel, "_cxx_problem", lambda: "InvalidCxxCompiler: No working C++ compiler found")
    cpu, neuron = torch.device("cpu"), types.SimpleNamespace(type="neuron")
    line = sel.toolchain_problem("inductor", cpu)
    assert line and "\n" not in line and "needs a C++ compiler" in line and "aot_eager" in line
    assert sel.toolchain_problem("aot_eager", cpu) is None  # no C++ needed
    assert sel.toolchain_problem("inductor", neuron) is None  # only inductor on the CPU compiles C++
    monkeypatch.setattr(sel, "_cxx_problem", lambda: None)
    assert sel.toolchain_problem("inductor", cpu) is None
