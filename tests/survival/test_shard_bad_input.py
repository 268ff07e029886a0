"""A shard out of range: one line naming the option and the accepted range, exit status 2, no test run.

The CI workflow's own check of ``inputs.shards`` is in tests/test_conformance_workflow.py; these are the
harness's checks of ``--conformance-shard-id`` / ``--conformance-num-shards`` (flags and environment variables).
"""

from __future__ import annotations

import pytest

from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.pytest_plugin.sharding import check_shard_options


@pytest.mark.parametrize(
    ("shard_id", "num_shards", "message"),
    [
        (-1, 3, "--conformance-shard-id -1 is out of range for --conformance-num-shards 3 (shard ids are 0..2)"),
        (3, 3, "--conformance-shard-id 3 is out of range for --conformance-num-shards 3 (shard ids are 0..2)"),
        (0, 0, "--conformance-num-shards 0 is out of range; accepted: an integer >= 1"),
        (None, 2, "--conformance-shard-id and --conformance-num-shards go together"),
    ],
)
def test_check_shard_options_names_the_accepted_range(shard_id, num_shards, message):
    with pytest.raises(opts.OptionError) as info:
        check_shard_options(shard_id, num_shards)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("parse", "value", "message"),
    [
        (opts._parse_shard_id, "-1", "-1 is negative; accepted: a shard id from 0 to --conformance-num-shards minus 1"),
        (
            opts._parse_shard_id,
            "one",
            "'one' is not an integer; accepted: a shard id from 0 to --conformance-num-shards minus 1",
        ),
        (opts._parse_num_shards, "0", "0 is not a positive integer; accepted: an integer >= 1"),
        (opts._parse_num_shards, "-2", "-2 is negative; accepted: an integer >= 1"),
    ],
)
def test_shard_option_parsers_name_the_accepted_range(parse, value, message):
    with pytest.raises(opts.OptionError) as info:
        parse(value)
    assert str(info.value) == message


def test_shard_option_parsers_accept_the_range():
    assert (opts._parse_shard_id("0"), opts._parse_shard_id("7"), opts._parse_num_shards("1")) == (0, 7, 1)


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (
            ["--conformance-shard-id=-1", "--conformance-num-shards=3"],
            {},
            "conformance: --conformance-shard-id: -1 is negative; accepted: a shard id from 0 to --conformance-num-shards minus 1",
        ),
        (
            ["--conformance-shard-id=0"],
            {"CONFORMANCE_NUM_SHARDS": "0"},
            "conformance: environment variable CONFORMANCE_NUM_SHARDS: 0 is not a positive integer; "
            "accepted: an integer >= 1",
        ),
        (
            ["--conformance-shard-id=3", "--conformance-num-shards=3"],
            {},
            "conformance: --conformance-shard-id 3 is out of range for --conformance-num-shards 3 (shard ids are 0..2)",
        ),
    ],
    ids=["negative-id", "zero-shards-from-env", "id-past-the-last"],
)
def test_a_run_with_a_shard_out_of_range_stops_with_one_line(pytester, monkeypatch, args, env, line):
    monkeypatch.delenv("CONFORMANCE_REPORT_DIR", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("--conformance-device", "cpu", "--conformance-report-dir=rep", *args)
    assert result.ret == 2
    err = [ln for ln in result.stderr.lines if ln.strip()]
    assert len(err) == 1 and err[0].endswith(line), result.stderr.str()
    assert not (pytester.path / "rep" / "records").exists() or not any((pytester.path / "rep" / "records").iterdir())
