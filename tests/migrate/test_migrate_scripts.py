"""Public training scripts (``scripts/``, each naming its source and commit, trimmed to run on a CPU in
seconds; a ``# prove:`` line gives ``prove``'s options and the script's arguments): fixed with ``--fix --unsafe-fixes`` without a tool error, the output parses and is a fixed point,
``check`` reports what the fix changes, and (slow) ``neuron-migrate prove`` says ``same``: the fixed script
runs on the emulated device and prints and saves what the original does on the CPU."""

import ast
import io
import shlex
import shutil
from pathlib import Path

import pytest

from neuron_conformance.migrate import cli
from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection

SCRIPTS = sorted((Path(__file__).parent / "scripts").glob("*.py"))
ALL = selection(None, None)


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_script_is_fixed_once_and_for_all(path):
    source = path.read_text()
    assert source.splitlines()[0].startswith("# Source: https://github.com/")
    check = check_source(source, Settings(ALL), str(path))
    result = check_source(source, Settings(ALL, fix=True, unsafe_fixes=True), str(path))
    assert result.error is None and result.new_source is not None
    ast.parse(result.new_source)
    assert result.fixed == sum(v.fix_applicability != "report" for v in check.violations)
    again = check_source(result.new_source, Settings(ALL, fix=True, unsafe_fixes=True), str(path))
    assert again.new_source is None


@pytest.mark.slow
@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_script_is_proven_on_the_emulated_device(path, tmp_path):
    shutil.copy(path, tmp_path / path.name)
    out, err = io.StringIO(), io.StringIO()
    line = next((s for s in path.read_text().splitlines() if s.startswith("# prove:")), "# prove:")
    options = shlex.split(line[len("# prove:") :])
    split = options.index("--") if "--" in options else len(options)
    argv = ["prove", *options[:split], str(tmp_path / path.name), *options[split:]]
    code = cli.main(argv, stdout=out, stderr=err)
    assert code == 0 and "verdict: same" in out.getvalue(), out.getvalue() + err.getvalue()
