"""--conformance-shard-id/--conformance-num-shards in a real run: the shard is recorded and an op's tests stay together."""

import json

TESTS = """
import pytest

CASES = [pytest.param(op, dt, id=f"{op}-{dt}", marks=pytest.mark.conformance(op=op, dtype=dt, suite="demo"))
         for op in ("add", "mul", "sub") for dt in ("float32", "bfloat16")]

@pytest.mark.parametrize("op, dtype", CASES)
def test_op(op, dtype):
    pass
"""


def test_two_shards_split_the_run_by_op(pytester, monkeypatch):
    monkeypatch.delenv("CONFORMANCE_REPORT_DIR", raising=False)
    pytester.makepyfile(test_ops=TESTS)
    ops = {}
    for shard in (0, 1):
        result = pytester.runpytest_subprocess(
            "--conformance-device",
            "cpu",
            "--conformance-report-dir",
            f"s{shard}",
            "--conformance-shard-id",
            str(shard),
            "--conformance-num-shards",
            "2",
            "-p",
            "no:randomly",
            "--conformance-no-report",
        )
        assert result.ret == 0, result.stdout.str()
        run = json.loads((pytester.path / f"s{shard}" / "run.json").read_text())
        assert run["shard"] == {"id": shard, "count": 2} and run["complete"] is True
        recs = [
            json.loads(ln)
            for f in (pytester.path / f"s{shard}" / "records").glob("*.jsonl")
            for ln in f.read_text().splitlines()
        ]
        ops[shard] = {r["op"] for r in recs}
        assert len(recs) == 2 * len(ops[shard])  # both dtypes of each op in the same shard
    assert ops[0] | ops[1] == {"add", "mul", "sub"} and not ops[0] & ops[1]
    bad = pytester.runpytest_subprocess(
        "--conformance-device", "cpu", "--conformance-shard-id", "2", "--conformance-num-shards", "2"
    )
    assert bad.ret == 2 and "out of range" in bad.stderr.str()
