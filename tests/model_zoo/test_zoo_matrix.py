"""The text matrix of model-zoo records."""

from __future__ import annotations

import json

from neuron_conformance.model_zoo.matrix import cell, main, render


def _rec(op, dtype, variant, outcome, **kw):
    return dict(
        nodeid=f"model_zoo/test_models.py::test_model[{op}-{dtype}-{variant}]",
        suite="model_zoo",
        kind="model",
        op=op,
        dtype=dtype,
        variant=variant,
        outcome=outcome,
        **kw,
    )


def test_cell_letters():
    assert cell({}) == "......."
    assert (
        cell(
            {
                "forward": {"outcome": "passed"},
                "train": {"outcome": "failed"},
                "router": {"outcome": "skipped"},
                "compile": {"outcome": "xfailed"},
            }
        )
        == "F.x.se."
    )
    assert cell({"compile": {"outcome": "passed"}, "compile_train": {"outcome": "passed"}}) == ".....CK"


def test_render_counts_and_localized_failures():
    recs = [
        _rec(
            "llama",
            "float32",
            "forward",
            "failed",
            failure_class="numeric",
            divergent_module="model.layers.0.mlp.act_fn",
        ),
        _rec("llama", "float32", "backward", "passed"),
        _rec("bert", "bfloat16", "forward", "passed"),
        dict(suite="compare_cpu", kind="op", op="add", outcome="failed"),
    ]
    text = render(recs)
    lines = text.splitlines()
    assert lines[0].split() == ["model", "float32", "bfloat16", "float16"]
    assert any(line.startswith("llama") and "xB....." in line for line in lines)
    assert "3 model records, 2 models: failed 1, passed 2" in text
    assert "failure classes: numeric 1" in text
    assert "llama float32 forward: first divergent module model.layers.0.mlp.act_fn" in text


def test_main_reads_report_dir(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "gw0.jsonl").write_text(json.dumps(_rec("vit", "float16", "train", "passed")) + "\n")
    assert main([str(tmp_path)]) == 0
    assert "vit" in capsys.readouterr().out


def test_render_lists_attention_implementations():
    recs = [
        _rec("llama", "float32", "forward", "passed"),
        _rec("llama", "float32", "forward-sdpa", "passed"),
        _rec("llama", "float32", "backward-sdpa", "failed", failure_class="numeric"),
        _rec("llama", "float16", "forward-flex_attention", "skipped"),
        _rec("bert", "float32", "forward", "passed"),
    ]
    lines = render(recs).splitlines()
    head = lines.index("attention implementations (forward, backward): float32, bfloat16, float16")
    llama = [line for line in lines[head:] if line.startswith("llama")]
    assert len(llama) == 1 and not [line for line in lines[head:] if line.startswith("bert")]
    assert llama[0].split("|")[0].split()[1:] == ["sdpa:Fx", "flex_attention:.."]
    assert llama[0].split("|")[2].split() == ["sdpa:..", "flex_attention:s."]
