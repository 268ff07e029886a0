"""A sample that draws from the generator is judged in shape, dtype and device only, proven both ways.

``scaled_dot_product_attention`` with ``dropout_p > 0`` draws its dropout mask from the device's generator,
whose stream is not the CPU's on any accelerator (30 false alarms on an H200 across SDPA,
``multi_head_attention_forward`` and ``fractional_max_pool2d/3d``). A device whose dropout masks come from
another stream now passes ``compare_cpu`` (the other samples are compared as before); a wrong SDPA is still
caught on the samples without dropout.
"""

from __future__ import annotations

from tests.faults.test_suites_catch_faults import _run

pytest_plugins = ["pytester"]

SDPA = "nn.functional.scaled_dot_product_attention"


def _sdpa(records):
    return [r for r in records if r.get("op") == SDPA]


def test_dropout_from_another_stream_passes(pytester, monkeypatch):
    result, records = _run(
        pytester, monkeypatch, "dropout-other-stream", "test_compare_cpu.py", SDPA, "float32", "device"
    )
    got = _sdpa(records)
    assert got and all(r["outcome"] == "passed" for r in got), (
        [(r.get("outcome"), r.get("message")) for r in got],
        result.stdout.str()[-3000:],
    )


def test_a_wrong_attention_is_still_caught_on_the_samples_without_dropout(pytester, monkeypatch):
    result, records = _run(pytester, monkeypatch, "softmax-1e-2", "test_compare_cpu.py", SDPA, "float32", "device")
    got = _sdpa(records)
    assert got and got[0]["outcome"] == "failed", result.stdout.str()[-3000:]
    assert got[0]["failure_class"] == "numeric"
