"""index.html without a browser: self-contained, escaped, every section present."""

from __future__ import annotations

import json
import re

import pytest

import neuron_conformance.reports
from neuron_conformance.reports.to_html import json_for_script, page_data

EVIL = "<script>alert(1)</script>"


@pytest.fixture
def page(report, record, run_meta):
    recs = [
        record("add"),
        record("linalg.svd", "float32", "failed", message=EVIL, repro=f"pytest -k '{EVIL}'"),
        record(
            "gpt2",
            "float32",
            "failed",
            suite="model_zoo",
            kind="model",
            variant="generate",
            nodeid="m::gpt2-generate",
            message=EVIL,
        ),
        record("gpt2", "float32", suite="model_zoo", kind="model", variant="forward", nodeid="m::gpt2-forward"),
        record(
            "ddp_allreduce",
            "float32",
            "failed",
            suite="distributed",
            kind="scenario",
            variant="2ranks",
            nodeid="d::ddp",
            message=EVIL,
        ),
        record("synchronize", None, suite="device_api", kind="api", variant="call", nodeid="a::sync"),
    ]
    run = run_meta(
        complete=False,
        device={
            "type": "neuron",
            "backend": EVIL,
            "backend_version": "1",
            "emulated": False,
            "api_support": {"synchronize": "native", EVIL: "missing"},
        },
    )
    cov = {
        "executed": {"aten::add.Tensor": 5, EVIL: 1},
        "registered_total": 10,
        "core_total": 4,
        "core_executed": ["aten::add.Tensor"],
        "core_missing": ["aten::sub.Tensor", "aten::mul.Tensor", EVIL],
        "core_composite": ["aten::expand"],
        "counted_by": "backend (PrivateUse1 kernels)",
    }
    return neuron_conformance.reports.build(report({"gw0": recs}, run=run, coverage=cov)).index_html.read_text()


def test_script_in_test_strings_is_escaped(page):
    assert EVIL not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # server-rendered tables
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in page  # embedded JSON
    assert page.count("<script") == 2  # the data block and the page script, nothing injected


def test_page_is_self_contained(page):
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page
    assert "<style>" in page


def test_sections_present(page):
    for section in (
        "run-header",
        "incomplete-banner",
        "filters",
        "matrix",
        "failures",
        "models",
        "scenarios",
        "api",
        "coverage",
        "suite-counts",
    ):
        assert f'id="{section}"' in page, section
    assert "real device" in page
    assert "1 of 4 (25.0%)" in page  # core aten coverage
    assert "1 core aten ops are PyTorch composites above this backend" in page and "<code>aten::expand</code>" in page
    assert "Counted by: backend (PrivateUse1 kernels)." in page
    assert ">missing<" in page and ">native<" in page


def test_model_matrix_cells(page):
    models = page[page.index('id="models"') : page.index('id="scenarios-section"')]
    assert '<th class="check">forward</th>' in models and '<th class="check">generate</th>' in models
    assert 'class="cell o-passed"' in models and 'class="cell o-failed"' in models


def test_embedded_data_round_trips(report, record):
    summary = neuron_conformance.reports.build(
        report({"gw0": [record("add"), record("sub", "float16", "failed", message=EVIL)]})
    ).summary
    data = page_data(summary)
    text = str(json_for_script(data))
    assert "<" not in text and ">" not in text and "&" not in text
    back = json.loads(text)
    assert back == data
    assert back["dtypes"] == ["float32", "float16"]
    row = back["rows"][1]
    assert back["details"][row[back["columns"].index("detail")]]["message"] == EVIL


def test_compact_embedding_for_20000_records(report, record):
    recs = [
        record(
            f"op{i % 700}",
            ("float32", "bfloat16", "float16")[i % 3],
            "failed" if i % 50 == 0 else "passed",
            nodeid=f"t::{i}",
        )
        for i in range(20000)
    ]
    result = neuron_conformance.reports.build(report({"gw0": recs}))
    size = result.index_html.stat().st_size
    assert size < 4_000_000, size


DISPATCH = (
    "Could not run 'aten::{op}' with arguments from the 'PrivateUse1' backend. This could be because the "
    "operator doesn't exist for this backend. 'aten::{op}' is only available for these backends: "
    "[CPU, Meta, QuantizedCPU, BackendSelect, Python, Named, Conjugate, Negative, ZeroTensor].\n\n"
    "CPU: registered at /pytorch/build/aten/src/ATen/RegisterCPU.cpp:31357 [kernel]\n" + "Meta: x\n" * 40
)


def test_causes_section_groups_failures_before_the_table(report, record):
    """Should show one row per cause, largest first, before the failures table, the dump in a wide <pre>."""
    recs = [
        record(f"op{i}", d, "failed", failure_class="unsupported", message=DISPATCH.format(op="add.Tensor"))
        for i in range(12)
        for d in ("float32", "float16")
    ]
    recs += [record(f"op{i}", "bfloat16", "failed") for i in range(3)]
    recs += [record("op0", "float64", "xfailed", failure_class="unsupported", message=DISPATCH.format(op="mm"))]
    page = neuron_conformance.reports.build(report({"gw0": recs}), step_summary=False).index_html.read_text()
    causes = page[page.index('id="causes-section"') : page.index('id="matrix-section"')]
    assert page.index('id="causes-section"') < page.index('id="failures-section"')
    rows = re.findall(r'<tr class="cause-row".*?<td class="count">(\d+)</td>\s*<td>([\w-]+)</td>', causes, re.S)
    assert rows == [("24", "unsupported"), ("3", "numeric")]
    assert "no PrivateUse1 kernel for aten::add.Tensor" in causes
    assert '<pre class="wide">Could not run' in causes and "<details" in causes
    assert "&lt;op&gt; &lt;dtype&gt;: max_abs &lt;n&gt; &gt; atol &lt;n&gt;" in causes
    assert "1 cause(s) of expected failures (xfailed, 1 tests)" in causes
    assert 'id="most-failing"' in causes  # op0..op2 fail 3 times with 2 causes: not all tied
    assert re.search(r"<code>op0</code></td><td>op</td><td>3</td><td>2</td>", causes)


def test_most_failing_says_when_all_are_tied(report, record):
    recs = [record(f"op{i}", "float32", "failed") for i in range(50)]
    page = neuron_conformance.reports.build(report({"gw0": recs}), step_summary=False).index_html.read_text()
    assert "all 50 failing ops are tied: 1 failing test(s) and 1 cause(s) each" in page
    assert 'id="most-failing"' not in page
