"""Unit tests of the survival helpers: shard split, time-limit spec, crash files, progress counts, repro."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.pytest_plugin.progress import ProgressDisplay
from neuron_conformance.conformance.pytest_plugin.selection import identity_from_nodeid
from neuron_conformance.conformance.pytest_plugin.sharding import assign_shards, check_shard_options
from neuron_conformance.conformance.results.repro import save_sample_repro
from neuron_conformance.conformance.survival.crash_files import (
    CrashWatch,
    crash_record,
    read_crash_file,
    summarize_traceback,
)

NODEIDS = [
    f"opsuites/test_compare_cpu.py::test_compare_cpu[{op}-{dt}]"
    for op in ("add", "mul", "linalg.svd", "nn.functional.gelu", "sum")
    for dt in ("float32", "bfloat16")
]


def op_of(nodeid):
    return identity_from_nodeid(nodeid)["op"]


def test_shards_keep_an_op_together_and_cover_every_test_once():
    split = assign_shards(NODEIDS, op_of, 3)
    assert sorted(split) == sorted(NODEIDS) and set(split.values()) == {0, 1, 2}
    for op in ("add", "mul", "linalg.svd"):
        assert len({s for n, s in split.items() if op_of(n) == op}) == 1
    assert assign_shards(list(reversed(NODEIDS)), op_of, 3) == split  # order of collection does not matter


def test_shards_balance_by_previous_durations():
    durations = {n: (100.0 if "linalg.svd" in n else 1.0) for n in NODEIDS}
    split = assign_shards(NODEIDS, op_of, 2, durations)
    svd_shard = split[NODEIDS[4]]
    # the slow op is alone in its shard; everything else is in the other one
    assert {n for n, s in split.items() if s == svd_shard} == {NODEIDS[4], NODEIDS[5]}


def test_shard_options_are_checked():
    check_shard_options(None, None)
    check_shard_options(1, 2)
    with pytest.raises(opts.OptionError, match="out of range"):
        check_shard_options(2, 2)
    with pytest.raises(opts.OptionError, match="go together"):
        check_shard_options(0, None)


def test_timeout_spec_parser():
    assert opts._parse_timeouts("300,distributed=900") == {None: 300.0, "distributed": 900.0}
    assert opts._parse_timeouts("model_zoo=60") == {"model_zoo": 60.0}
    for bad in ("", "abc", "=5", "x=-1"):
        with pytest.raises(opts.OptionError):
            opts._parse_timeouts(bad)


def test_identity_from_nodeid():
    ident = identity_from_nodeid("opsuites/test_compare_cpu.py::test_compare_cpu[nn.functional.gelu-bfloat16]")
    assert ident == {"suite": "compare_cpu", "kind": "op", "op": "nn.functional.gelu", "dtype": "bfloat16"}
    assert identity_from_nodeid("tests/test_x.py::test_y")["op"] == "test_y"


def test_crash_file_round_trip(tmp_path):
    watch = CrashWatch(tmp_path, "gw7")
    watch.start_test({"nodeid": "t.py::test_a", "suite": "s", "op": "relu", "dtype": "float32", "timeout": 5.0})
    watch.start_test({"nodeid": "t.py::test_b", "suite": "s", "op": "exp", "dtype": "float32", "timeout": 5.0})
    watch.fh.write(
        "Fatal Python error: Segmentation fault\n\nThread 0x1 (most recent call first):\n"
        '  File "/x/execnet/gateway_base.py", line 1 in read\n\n'
        "Current thread 0x2 (most recent call first):\n"
        '  File "/x/faults.py", line 9 in kernel\n  File "/x/_pytest/python.py", line 1 in call\n'
    )
    watch.fh.flush()
    info = read_crash_file(tmp_path, "gw7")
    assert info.inflight["nodeid"] == "t.py::test_b" and info.signal == "SIGSEGV" and not info.timeout
    assert summarize_traceback(info.text).splitlines() == [
        "Fatal Python error: Segmentation fault",
        "Current thread 0x2 (most recent call first):",
        '  File "/x/faults.py", line 9 in kernel',
    ]
    rec = crash_record("t.py::test_b", info, worker="gw7", returncode=None)
    assert (rec["failure_class"], rec["signal"], rec["op"], rec["outcome"]) == ("crash", "SIGSEGV", "exp", "failed")
    assert "killed by SIGSEGV" in rec["message"]
    watch.fh.write("Timeout (0:00:07)!\n")
    watch.fh.flush()
    assert crash_record("t.py::test_b", read_crash_file(tmp_path, "gw7"), worker="gw7")["failure_class"] == "timeout"
    assert (
        crash_record("t.py::x", read_crash_file(tmp_path, "none"), worker="gw1", returncode=-6)["signal"] == "SIGABRT"
    )
    faulthandler_restore()


def faulthandler_restore():
    import faulthandler

    faulthandler.enable(file=sys.__stderr__)


def test_progress_counts_each_test_once_under_its_worst_outcome():
    from io import StringIO

    from rich.console import Console

    shown = ProgressDisplay(lambda n: n.split("::")[0], Console(file=StringIO(), force_terminal=True))
    shown.start(["a::1", "a::2", "b::1"])
    rep = lambda nid, when: SimpleNamespace(nodeid=nid, when=when)  # noqa: E731
    shown.report(rep("a::1", "call"), "passed")
    shown.report(rep("a::1", "teardown"), "error")
    shown.finish("a::1")
    shown.report(rep("a::2", "call"), "failed")
    shown.finish("a::2")
    shown.finish("a::2")
    shown.report(rep("b::1", "???"), "failed")  # a crash report: counted at once
    shown.stop()
    assert shown.counts == {"a": {"error": 1, "failed": 1}, "b": {"failed": 1}}
    assert ProgressDisplay.counts_text({"passed": 2, "failed": 1}) == "[green]✓ 2[/] [red]✗ 1[/]"


def test_repro_pair_replays_without_the_harness(tmp_path):
    sample = SimpleNamespace(input=torch.arange(6.0).reshape(2, 3).t(), args=(torch.ones(2),), kwargs={"alpha": 2})
    paths = save_sample_repro(
        tmp_path,
        "opsuites/test_compare_cpu.py::test_compare_cpu[add-float32]",
        "add",
        3,
        "float32",
        sample,
        device_type="cpu",
    )
    assert [os.path.basename(p).rsplit(".", 1)[1] for p in paths] == ["py", "pt"]
    saved = torch.load(tmp_path / paths[1], weights_only=False)
    assert saved["op"] == "add" and saved["sample_index"] == 3 and saved["input"].stride() == (1, 3)
    run = subprocess.run(
        [sys.executable, str(tmp_path / paths[0])], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    assert "max |cpu - device| = 0" in run.stdout and "add sample 3 (float32) on cpu" in run.stdout
    unpicklable = SimpleNamespace(input=torch.ones(1), args=(lambda x: x,), kwargs={})
    assert save_sample_repro(tmp_path, "t::x", "add", 0, "float32", unpicklable, device_type="cpu") == []
    assert json.dumps(paths)  # plain relative strings for the record's repro_files
