"""index.html without a browser: self-contained, escaped, every section present."""

from __future__ import annotations

import json
import re

import pytest

import reports
from reports.to_html import json_for_script, page_data

EVIL = "<script>alert(1)</script>"


@pytest.fixture
def page(report, record, run_meta):
    recs = [
        record("add"), record("linalg.svd", "float32", "failed", message=EVIL, repro=f"pytest -k '{EVIL}'"),
        record("gpt2", "float32", "failed", suite="model_zoo", kind="model", variant="generate",
               nodeid="m::gpt2-generate", message=EVIL),
        record("gpt2", "float32", suite="model_zoo", kind="model", variant="forward", nodeid="m::gpt2-forward"),
        record("ddp_allreduce", "float32", "failed", suite="distributed", kind="scenario", variant="2ranks",
               nodeid="d::ddp", message=EVIL),
        record("synchronize", None, suite="device_api", kind="api", variant="call", nodeid="a::sync"),
    ]
    run = run_meta(complete=False, device={"type": "neuron", "backend": EVIL, "backend_version": "1",
                                           "emulated": False, "api_support": {"synchronize": "native", EVIL: "missing"}})
    cov = {"executed": {"aten::add.Tensor": 5, EVIL: 1}, "registered_total": 10, "core_total": 4,
           "core_executed": ["aten::add.Tensor"], "core_missing": ["aten::sub.Tensor", "aten::mul.Tensor", EVIL],
           "core_composite": ["aten::expand"], "counted_by": "backend (PrivateUse1 kernels)"}
    return reports.build(report({"gw0": recs}, run=run, coverage=cov)).index_html.read_text()


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
    for section in ("run-header", "incomplete-banner", "filters", "matrix", "failures", "models", "scenarios",
                    "api", "coverage", "suite-counts"):
        assert f'id="{section}"' in page, section
    assert "real device" in page
    assert "1 of 4 (25.0%)" in page  # core aten coverage
    assert "1 core aten ops are PyTorch composites above this backend" in page and "<code>aten::expand</code>" in page
    assert "Counted by: backend (PrivateUse1 kernels)." in page
    assert ">missing<" in page and ">native<" in page


def test_model_matrix_cells(page):
    models = page[page.index('id="models"'):page.index('id="scenarios-section"')]
    assert "<th class=\"check\">forward</th>" in models and "<th class=\"check\">generate</th>" in models
    assert 'class="cell o-passed"' in models and 'class="cell o-failed"' in models


def test_embedded_data_round_trips(report, record):
    summary = reports.build(report({"gw0": [record("add"), record("sub", "float16", "failed", message=EVIL)]})).summary
    data = page_data(summary)
    text = str(json_for_script(data))
    assert "<" not in text and ">" not in text and "&" not in text
    back = json.loads(text)
    assert back == data
    assert back["dtypes"] == ["float32", "float16"]
    row = back["rows"][1]
    assert back["details"][row[back["columns"].index("detail")]]["message"] == EVIL


def test_compact_embedding_for_20000_records(report, record):
    recs = [record(f"op{i % 700}", ("float32", "bfloat16", "float16")[i % 3], "failed" if i % 50 == 0 else "passed",
                   nodeid=f"t::{i}") for i in range(20000)]
    result = reports.build(report({"gw0": recs}))
    size = result.index_html.stat().st_size
    assert size < 4_000_000, size
