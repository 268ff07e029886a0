"""``neuron-migrate prove``: comparison of two runs, bad input, and a proof run end to end on the emulated
device (``migrate/prove.py``, ``migrate/prove_compare.py``, ``migrate/prove_probe.py``)."""

import io
import re

import pytest
import torch

from neuron_conformance.migrate import cli
from neuron_conformance.migrate.prove import NOT_REACHED, SAME, Run, verdict
from neuron_conformance.migrate.prove_compare import compare_checkpoints, compare_lines, compare_output


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


class TestCompare:
    def test_numbers_within_tolerance_agree(self):
        assert compare_lines("loss 0.500000", "loss 0.500001", 1e-4, 1e-6)

    def test_numbers_beyond_tolerance_differ(self):
        assert not compare_lines("loss 0.5", "loss 0.6", 1e-4, 1e-6)

    def test_device_names_and_durations_are_not_compared(self):
        """Should take `cpu` and `neuron:0` as equal, and not compare durations."""
        assert compare_lines("running on cpu in 1.5s", "running on neuron:0 in 9.25s", 0, 0)
        assert compare_lines("x on device(type='cpu')", "x on device(type='neuron', index=0)", 0, 0)

    def test_first_difference_is_named(self):
        where = compare_output("a 1\nb 2\n", "a 1\nb 3\n", 0, 0)
        assert where.startswith("printed line 2") and "'b 2'" in where

    def test_missing_lines_differ(self):
        assert "2 lines != 1 lines" in compare_output("a\nb\n", "a\n", 0, 0)

    def test_ignore_and_mask(self):
        assert compare_output("t 1\nloss 1\n", "t 2\nloss 1\n", 0, 0, ignore=[re.compile("^t ")]) is None
        assert compare_output("mfu 1.0% loss 1", "mfu 3.0% loss 1", 0, 0, mask=[re.compile(r"mfu [\d.]+%")]) is None

    def test_checkpoints_compare_tensors(self, tmp_path):
        """Should compare the tensors of two checkpoints within tolerance and ignore saved strings."""
        a, b = tmp_path / "a", tmp_path / "b"
        a.mkdir(), b.mkdir()
        torch.save({"w": torch.ones(3), "config": {"device": "cpu"}}, a / "m.pt")
        torch.save({"w": torch.ones(3) + 1e-9, "config": {"device": "neuron"}}, b / "m.pt")
        assert compare_checkpoints(a, b, ["m.pt"], 1e-4, 1e-6) is None
        torch.save({"w": torch.zeros(3), "config": {}}, b / "m.pt")
        assert "checkpoint m.pt['w']: max abs difference 1" in compare_checkpoints(a, b, ["m.pt"], 1e-4, 1e-6)


class TestVerdict:
    def _run(self, code=0, out="loss 1\n", used=100):
        return Run(code, out, "", [], "neuron" if used else None, used)

    def test_same(self):
        assert verdict(self._run(used=0), self._run(), 1e-4, 1e-6) == SAME

    def test_not_reached(self):
        assert verdict(self._run(used=0), self._run(used=0), 1e-4, 1e-6) == NOT_REACHED

    def test_differs(self):
        assert verdict(self._run(used=0), self._run(out="loss 2\n"), 1e-4, 1e-6).startswith("differs at printed line 1")

    def test_a_failed_run_is_named(self):
        failed = Run(1, "", "Traceback ...\nValueError: bad\n  more text\n", [])
        assert (
            verdict(self._run(used=0), failed, 0, 0)
            == "the fixed script failed on the device (exit code 1: ValueError: bad)"
        )
        assert verdict(failed, self._run(), 0, 0).startswith("the original did not run on the CPU")


class TestBadInput:
    def test_missing_script(self, tmp_path):
        code, _, err = _cli("prove", str(tmp_path / "nope.py"))
        assert code == 2 and "no such file" in err

    def test_unparsable_script_is_refused_and_left_alone(self, tmp_path):
        bad = tmp_path / "bad.py"
        bad.write_text("def f(:\n")
        code, _, err = _cli("prove", str(bad))
        assert code == 2 and "cannot parse" in err
        assert bad.read_text() == "def f(:\n" and sorted(p.name for p in tmp_path.iterdir()) == ["bad.py"]

    def test_bad_pattern(self, tmp_path):
        code, _, _ = _cli("prove", "--ignore", "(", str(tmp_path / "x.py"))
        assert code == 2


SCRIPT = """import argparse
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true", help="disables CUDA training")
args = parser.parse_args()
use_cuda = not args.no_cuda and torch.cuda.is_available()
use_mps = torch.backends.mps.is_available()
if use_cuda:
    device = torch.device("cuda")
elif use_mps:
    device = torch.device("mps")
else:
    device = torch.device("cpu")
model = torch.nn.Linear(3, 1).to(device)
x = torch.randn(8, 3).to(device)
for step in range(2):
    loss = model(x).square().mean()
    loss.backward()
    print(f"step {step} loss {loss.item():.6f} on {device}")
torch.save(model.state_dict(), "model.pt")
"""


@pytest.mark.slow
class TestProofRun:
    def test_fixed_script_runs_on_the_emulated_device_and_agrees(self, tmp_path):
        """Should run the original on the CPU and the fixed copy on the emulated device, and say `same`; the
        user's folder is only read."""
        script = tmp_path / "train.py"
        script.write_text(SCRIPT)
        code, out, err = _cli("prove", str(script))
        assert code == 0, out + err
        assert "verdict: same" in out and "on neuron" in out
        assert script.read_text() == SCRIPT and sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]

    def test_switch_that_keeps_it_off_the_device_is_named(self, tmp_path):
        script = tmp_path / "train.py"
        script.write_text(SCRIPT)
        code, out, _ = _cli("prove", str(script), "--", "--no-cuda")
        assert code == 1 and f"verdict: {NOT_REACHED}" in out


def test_rates_written_after_their_unit_are_durations():
    """Should not compare `ms/batch 71.47` with `ms/batch 214.86` (a duration written after its unit)."""
    assert compare_lines("| ms/batch 71.47 | loss 4.10", "| ms/batch 214.86 | loss 4.10", 0, 0)
    assert not compare_lines("| ms/batch 71.47 | loss 4.10", "| ms/batch 71.47 | loss 4.11", 0, 0)
