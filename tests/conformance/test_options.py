"""Tests of neuron_conformance.conformance.pytest_plugin.options: parsers, and the README's options table."""

from pathlib import Path

import pytest

from neuron_conformance.conformance.pytest_plugin import options as opts


def test_dtype_parser():
    assert opts._parse_dtypes("float32, bfloat16") == ("float32", "bfloat16")
    assert "float64" in opts._parse_dtypes("all")
    with pytest.raises(opts.OptionError, match="unknown dtype 'f32'"):
        opts._parse_dtypes("f32")


def test_ops_parser(tmp_path):
    f = tmp_path / "ops.txt"
    f.write_text("# core ops\nadd\n\nmul  # comment\n")
    assert opts._parse_ops(f"@{f}") == {"add", "mul"}
    assert opts._parse_ops("add, nn.functional.gelu") == {"add", "nn.functional.gelu"}
    with pytest.raises(opts.OptionError, match="cannot read"):
        opts._parse_ops(f"@{tmp_path / 'missing.txt'}")


def test_every_option_has_a_documented_env_var_and_key():
    assert len({o.env for o in opts.OPTIONS}) == len(opts.OPTIONS)
    for o in opts.OPTIONS:
        assert o.env.startswith("CONFORMANCE_") and o.flag.startswith("--") and o.help[0].isupper()


def test_readme_table_is_generated_from_the_options():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("<!-- options:start -->")[1].split("<!-- options:end -->")[0].strip()
    assert block == opts.options_table(), (
        "regenerate with: python -m neuron_conformance.conformance.pytest_plugin.options"
    )
