"""Each benchmark runs in a tiny configuration and writes its result line (no timing assertions).

Result lines go to a temporary directory (``BENCH_RESULTS_DIR``), never to ``benchmarks/results``.
The subprocess-based ones start a few Python processes each (imports of torch and the OpInfo database),
so they take tens of seconds each (marked ``slow``: ``-m 'not slow'`` keeps the in-process ones); they use
two cheap ops and one small model.
"""

from __future__ import annotations

import json

import pytest

from benchmarks import _common as c

TINY_OPS = "abs,neg"


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv(c.RESULTS_ENV, str(tmp_path))
    return tmp_path


def _lines(results, name):
    return [json.loads(ln) for ln in (results / f"{name}.jsonl").read_text().splitlines()]


def test_emulator_overhead(results, capsys):
    from benchmarks import emulator_overhead

    assert emulator_overhead.main(["--number", "20", "--repeat", "1"]) == 0
    (line,) = _lines(results, "emulator")
    assert [r["case"].split()[0] for r in line["cases"]] == ["add", "transpose", "matmul"]
    assert all(r["cpu_us"] > 0 and r["neuron_us"] > 0 for r in line["cases"])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("emulated device overhead:")


def test_async_modes_per_call(results, capsys):
    import neuron_conformance.emulator as emu
    from benchmarks import async_modes

    emu.install()
    before = emu.get_mode(), emu.is_async()
    assert async_modes.main(["--number", "5", "--repeat", "1", "--no-slice"]) == 0
    assert (emu.get_mode(), emu.is_async()) == before  # it measures in device mode and gives the mode back
    (line,) = _lines(results, "async_modes")
    assert [r["case"].split()[0] for r in line["cases"]] == ["add", "transpose", "matmul"]
    assert all(r["sync_us"] > 0 and r["async_us"] > 0 for r in line["cases"]) and "slice" not in line
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("matmul")


def test_breadcrumb_overhead(results, capsys):
    from benchmarks import breadcrumb

    assert breadcrumb.main(["--number", "20", "--repeat", "1"]) == 0
    (line,) = _lines(results, "breadcrumb")
    assert [(r["tracer"], r["case"].split()[0]) for r in line["cases"]] == [
        ("backend counter", "add"),
        ("backend counter", "neg"),
        ("dispatch mode", "add"),
        ("dispatch mode", "neg"),
    ]
    assert all(r["plain_ops_s"] > 0 and r["breadcrumb_ops_s"] > 0 for r in line["cases"]) and line["enter_ns"] > 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("one Breadcrumb.enter:")


def test_op_subset_spreads_and_validates():
    every = c.fp32_op_names()
    sub = c.op_subset(10)
    assert len(sub) == 10 and sub == sorted(sub) and set(sub) <= set(every)
    assert sub[0] == every[0] and sub[-1] in every[-len(every) // 10 - 1 :]
    assert c.op_subset(None) == every
    assert c.op_subset(5, "neg, abs") == ["neg", "abs"]
    with pytest.raises(ValueError, match="not_an_op"):
        c.op_subset(5, "abs,not_an_op")


def test_bare_loop_counts_samples(capsys):
    from benchmarks import bare_loop

    assert bare_loop.main(["--conformance-ops", TINY_OPS, "--inplace"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["ops"] == 2 and out["samples"] > 0 and out["mismatches"] == 0
    assert out["calls"] > 2 * out["samples"]  # in-place variants ran too


def test_bare_loop_fast_samples_run_the_same_work(capsys):
    from benchmarks import bare_loop

    assert bare_loop.main(["--conformance-ops", TINY_OPS, "--inplace"]) == 0
    plain = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert bare_loop.main(["--conformance-ops", TINY_OPS, "--inplace", "--fast-samples"]) == 0
    fast = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert fast["fast_samples"] and not plain["fast_samples"]
    assert (fast["samples"], fast["calls"], fast["mismatches"]) == (plain["samples"], plain["calls"], 0)


def test_runner_gives_scaling_a_workload_of_minutes():
    from benchmarks import __main__ as runner

    quick = runner._argv("scaling", False, 40)
    assert quick[:2] == ["-m", "benchmarks.scaling"] and "--full" in quick
    assert quick[quick.index("--paths") + 1] == "opsuites" and "--compare-dist" not in quick
    assert "--compare-dist" in runner._argv("scaling", True, 40)
    assert runner._argv("overhead", False, 40)[-2:] == ["--ops-count", "40"]


@pytest.mark.slow
def test_overhead(results):
    from benchmarks import overhead

    r = overhead.run(None, ops=TINY_OPS, inplace_too=False, timeout=900)
    assert r["ops"] == 2 and r["samples"] > 0 and r["ratio"] > 0 and r["peak_rss_mib"] > 0
    assert _lines(results, "overhead")[-1]["ratio"] == r["ratio"]


@pytest.mark.slow
def test_scaling(results):
    from benchmarks import scaling

    r = scaling.run(None, ops=TINY_OPS, timeout=900)
    assert [x["workers"] for x in r["runs"]][:2] == ["1", "2"]
    assert sum(r["runs"][0]["worker_tests"].values()) == sum(r["runs"][1]["worker_tests"].values()) > 0
    assert r["max_worker_peak_rss_mib"] > 0 and _lines(results, "scaling")


@pytest.mark.slow
def test_collect(results):
    from benchmarks import collect

    r = collect.run("float32", path="opsuites/test_compare_cpu.py", timeout=900)
    assert r["tests"] > 500 and r["same_ids"]


@pytest.mark.slow
def test_zoo(results):
    from benchmarks import zoo

    r = zoo.run(models="bert", dtypes="float32", timeout=900)
    assert r["tests"] > 0 and set(r["per_dtype_s"]) == {"float32"} and len(r["slowest"]) <= 10


def test_runner_rejects_unknown_names(capsys):
    from benchmarks.__main__ import main

    with pytest.raises(SystemExit):
        main(["--only", "nope"])
    assert "unknown benchmark" in capsys.readouterr().err


def test_runner_summary(results, capsys, monkeypatch):
    from benchmarks import __main__ as runner

    monkeypatch.setattr(
        runner, "_argv", lambda name, full, n: ["-m", "benchmarks.emulator_overhead", "--number", "10", "--repeat", "1"]
    )
    assert runner.main(["--only", "emulator"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("emulator") and "µs" in last


@pytest.mark.slow
def test_sample_coverage_counts_every_sample(results, capsys):
    from benchmarks import sample_coverage

    assert sample_coverage.main(["--conformance-ops", "sum", "-n", "1"]) == 0
    line = _lines(results, "sample_coverage")[-1]
    layouts = line["suites"]["layouts"]
    # sum's first three float32 samples are 0-dim: the old cap exercised no layout, now most samples do
    assert layouts["before"] == {"taken": 3, "usable": 0, "tests_with_none": 1}
    assert layouts["compared"] > 3
    for row in line["suites"].values():
        assert row["compared"] + sum(row["left_out"].values()) == row["samples_total"]
    assert "layouts" in capsys.readouterr().out
