"""index.html in a real browser: headless Chromium runs the page script, we read the DOM.

Skipped when no Chromium is installed (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import neuron_conformance.reports

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell")
CHROMIUM = next((path for name in CANDIDATES if (path := shutil.which(name))), None)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium)")

INJECT = '<img id="pwned" src="x" onerror="document.title=\'pwned\'"><script>alert(1)</script>'


def dump_dom(page: Path, fragment: str, profile: Path) -> str:
    """The DOM of ``page#fragment`` serialized after its scripts ran (``--virtual-time-budget``)."""
    cmd = [
        CHROMIUM,
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        page.resolve().as_uri() + fragment,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'data-ready="1"' in proc.stdout, "page script did not finish"
    return proc.stdout


def op_rows(dom: str) -> dict[str, bool]:
    """op name -> visible, for every row of the op x dtype matrix."""
    rows = re.findall(r'<tr class="op-row" data-op="([^"]*)"( hidden="")?>', dom)
    return {op: not hidden for op, hidden in rows}


@pytest.fixture(scope="module")
def page(tmp_path_factory, record, write_report_fn) -> Path:
    make_record = record
    recs = [
        make_record("add", "float32"),
        make_record("add", "bfloat16"),
        make_record("linalg.svd", "float32", "failed"),
        make_record("linalg.svd", "bfloat16"),
        make_record("nn.functional.relu", "float32", "xfailed", failure_class="unsupported"),
        make_record("special.erf", "float16", "error", failure_class="crash", message=INJECT),
        make_record("fft.fft", "float32", "skipped", message="no complex support"),
        make_record("gpt2", "float32", suite="model_zoo", kind="model", variant="forward", nodeid="m::gpt2"),
    ]
    root = tmp_path_factory.mktemp("browser")
    return neuron_conformance.reports.build(
        write_report_fn(root / "report", {"gw0": recs[:4], "gw1": recs[4:]}), step_summary=False
    ).index_html


def test_matrix_is_drawn(page, tmp_path):
    dom = dump_dom(page, "", tmp_path / "profile")
    assert op_rows(dom) == {
        "add": True,
        "fft.fft": True,
        "linalg.svd": True,
        "nn.functional.relu": True,
        "special.erf": True,
    }
    header = re.search(r"<thead><tr><th>op \\ dtype</th>(.*?)</tr></thead>", dom).group(1)
    assert re.findall(r"<th>([^<]*)</th>", header) == ["float32", "float16", "bfloat16"]
    svd = re.search(r'data-op="linalg.svd">(.*?)</tr>', dom, re.S).group(1)
    cells = re.findall(r'<td data-dtype="([^"]*)" class="([^"]*)" title="([^"]*)"', svd)
    assert [(d, c) for d, c, _ in cells] == [
        ("float32", "cell o-failed"),
        ("float16", "cell empty"),
        ("bfloat16", "cell o-passed"),
    ]
    tip = cells[0][2]
    assert "1 failed" in tip and "failure class: numeric" in tip
    assert "max_abs 0.002 (atol 1.00e-5)" in tip and "headroom (tolerance / error) 0.005" in tip
    assert len(re.findall(r'<tr class="failure-row">', dom)) == 2  # failed + error


def test_outcome_filter_from_url_hash(page, tmp_path):
    dom = dump_dom(page, "#outcome=failed", tmp_path / "profile")
    assert op_rows(dom) == {
        "add": False,
        "fft.fft": False,
        "linalg.svd": True,
        "nn.functional.relu": False,
        "special.erf": False,
    }
    rows = re.findall(r'<tr class="failure-row"><td class="o-(\w+)">', dom)
    assert rows == ["failed"]
    assert "1 of 8 records match; 1 of 5 ops shown" in dom


def test_family_and_class_filters(page, tmp_path):
    dom = dump_dom(page, "#family=special&class=crash", tmp_path / "profile")
    assert [op for op, visible in op_rows(dom).items() if visible] == ["special.erf"]
    dom = dump_dom(page, "#outcome=skipped", tmp_path / "profile")
    assert [op for op, visible in op_rows(dom).items() if visible] == ["fft.fft"]
    assert re.findall(r'<tr class="failure-row"><td class="o-(\w+)">', dom) == ["skipped"]


def test_injected_markup_stays_text(page, tmp_path):
    dom = dump_dom(page, "", tmp_path / "profile")
    assert '<img id="pwned"' not in dom
    assert '&lt;img id="pwned"' in dom and "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert "<title>pwned</title>" not in dom
