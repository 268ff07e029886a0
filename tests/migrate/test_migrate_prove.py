"""``neuron-migrate prove``: comparison of two runs, bad input, and a proof run end to end on the emulated
device (``migrate/prove.py``, ``migrate/prove_compare.py``, ``migrate/prove_probe.py``)."""

import argparse
import io
import re

import pytest
import torch

from neuron_conformance.migrate import cli
from neuron_conformance.migrate.prove import NOT_REACHED, SAME, ProveError, Run, split_options, verdict
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

    def test_trained_weights_agree_as_a_whole_when_one_element_drifts(self, tmp_path):
        """Should take a tensor whose elements agree but for rounding drift in a few (one element 2e-5 off in
        a 256x256 weight) as the same, and name the normwise difference of a tensor that learned something
        else."""
        a, b = tmp_path / "a", tmp_path / "b"
        a.mkdir(), b.mkdir()
        w = torch.randn(256, 256, generator=torch.Generator().manual_seed(0)) * 0.1
        original, drifted = w.clone(), w.clone()
        original[3, 4], drifted[3, 4] = 1e-3, 1e-3 + 2e-5
        torch.save({"w": original}, a / "m.pt")
        torch.save({"w": drifted}, b / "m.pt")
        assert compare_checkpoints(a, b, ["m.pt"], 1e-4, 1e-6) is None
        torch.save({"w": original * 1.01}, b / "m.pt")
        found = compare_checkpoints(a, b, ["m.pt"], 1e-4, 1e-6)
        assert found is not None and "normwise relative difference" in found
        drifted[0, 5] = float("nan")
        torch.save({"w": drifted}, b / "m.pt")
        assert "non-finite values differ" in compare_checkpoints(a, b, ["m.pt"], 1e-4, 1e-6)


class TestOptions:
    def test_options_before_the_separator_are_prove_s(self):
        """Should read prove's options between SCRIPT and `--`, and give the script what follows `--`."""
        opts = argparse.Namespace(atol=1e-5, rtol=1e-4, ignore=[re.compile("a")], cpu_args=None, keep=False)
        args = split_options(
            ["--atol", "1e-3", "--ignore", "^x", "--cpu-args=--device=cpu", "--", "--epochs", "1"], opts
        )
        assert args == ["--epochs", "1"]
        assert opts.atol == 1e-3 and opts.cpu_args == "--device=cpu" and len(opts.ignore) == 2

    def test_without_separator_every_argument_is_the_script_s(self):
        opts = argparse.Namespace(atol=1e-5)
        assert split_options(["--atol", "1"], opts) == ["--atol", "1"] and opts.atol == 1e-5

    def test_an_unknown_option_before_the_separator_is_bad_input(self):
        with pytest.raises(ProveError, match="unrecognized arguments: --epochs"):
            split_options(["--epochs", "1", "--"], argparse.Namespace())


class TestVerdict:
    def _run(self, code=0, out="loss 1\n", used=100):
        return Run(code, out, "", [], "neuron" if used else None, used)

    def test_same(self):
        assert verdict(self._run(used=0), self._run(), 1e-4, 1e-6) == SAME

    def test_not_reached(self):
        assert verdict(self._run(used=0), self._run(used=0), 1e-4, 1e-6) == NOT_REACHED

    def test_differs(self):
        assert verdict(self._run(used=0), self._run(out="loss 2\n"), 1e-4, 1e-6).startswith("differs at printed line 1")

    def test_an_original_that_did_nothing_on_the_cpu_is_not_compared(self):
        """Should say that the original printed and saved nothing on the CPU (a script looping over its CUDA
        devices does nothing there), not that the runs differ."""
        line = verdict(self._run(out="", used=0), self._run(out="epoch 0 loss 1\n"), 1e-4, 1e-6)
        assert line.startswith("the original printed and saved nothing on the CPU") and "nothing to compare" in line

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

    @pytest.mark.parametrize(
        "option", [["--rtol", "-1"], ["--atol", "nan"], ["--timeout", "0"], ["--cpu-args='unterminated"]]
    )
    def test_bad_tolerance_time_limit_or_cpu_arguments(self, tmp_path, option):
        """Should refuse a negative or NaN tolerance, a time limit that is not positive and CPU arguments a
        shell cannot split, with one line naming the option and exit code 2."""
        script = tmp_path / "s.py"
        script.write_text("print(1)\n")
        code, _, err = _cli("prove", str(script), *option, "--")
        assert code == 2 and option[0].split("=")[0] in err and "Traceback" not in err

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

    def test_random_draws_on_the_device_and_cuda_waits_on_the_cpu(self, tmp_path):
        """Should say `same` for a script whose dropout moved to the device (the emulated run shares the
        host's random stream) and whose original calls `torch.cuda.synchronize()` unconditionally (a counted
        no-op in the CPU run)."""
        script = tmp_path / "drop.py"
        script.write_text(
            "import torch\n"
            "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "torch.manual_seed(0)\n"
            "w = torch.randn(64)\n"
            "y = torch.nn.functional.dropout(w.to(device), 0.5)\n"
            "torch.cuda.synchronize()\n"
            "print(f'kept {int((y != 0).sum())} sum {float(y.sum()):.6f}')\n"
        )
        code, out, err = _cli("prove", str(script), "--keep", "--")
        assert code == 0, out + err
        assert "no-ops there (they change no value): torch.cuda.synchronize x1" in out and "verdict: same" in out

    def test_switch_that_keeps_it_off_the_device_is_named(self, tmp_path):
        script = tmp_path / "train.py"
        script.write_text(SCRIPT)
        code, out, _ = _cli("prove", str(script), "--", "--no-cuda")
        assert code == 1 and f"verdict: {NOT_REACHED}" in out


def test_rates_written_after_their_unit_are_durations():
    """Should not compare `ms/batch 71.47` with `ms/batch 214.86` (a duration written after its unit)."""
    assert compare_lines("| ms/batch 71.47 | loss 4.10", "| ms/batch 214.86 | loss 4.10", 0, 0)
    assert not compare_lines("| ms/batch 71.47 | loss 4.10", "| ms/batch 71.47 | loss 4.11", 0, 0)
