"""The transformers device spec (model_zoo/hf_device_spec.py): written safely, loaded by transformers'
own ``testing_utils``, and a transformers-style test file runs on the emulated device with it while the
conformance plugin stays out of that session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_conformance.conformance.pytest_plugin.cli import main as cli_main
from neuron_conformance.model_zoo import hf_device_spec as spec

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]

TINY_TEST = """
import unittest

import torch
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.testing_utils import backend_device_count, backend_manual_seed, require_torch_accelerator, torch_device


class TinyGPT2Test(unittest.TestCase):
    @require_torch_accelerator
    def test_forward_matches_cpu(self):
        self.assertEqual(torch_device, "neuron")
        self.assertEqual(backend_device_count(torch_device), 1)
        backend_manual_seed(torch_device, 0)
        config = GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=64, n_positions=16)
        model = GPT2LMHeadModel(config).eval()
        ids = torch.randint(0, 64, (2, 8))
        with torch.no_grad():
            expected = model(ids).logits
            got = model.to(torch_device)(ids.to(torch_device)).logits
        self.assertEqual(got.device.type, "neuron")
        torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-4)

    def test_seed_reproduces_device_draws(self):
        backend_manual_seed(torch_device, 7)
        a = torch.randn(16, device=torch_device).cpu()
        backend_manual_seed(torch_device, 7)
        b = torch.randn(16, device=torch_device).cpu()
        self.assertTrue(torch.equal(a, b))
"""


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONFORMANCE_", "TRANSFORMERS_TEST_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def _run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=300
    )


def test_written_spec_names_the_device_and_is_regenerated_in_place(tmp_path):
    path = spec.write_spec(tmp_path)
    text = path.read_text()
    assert path.name == spec.SPEC_FILE and text.startswith(spec.HEADER)
    assert "DEVICE_NAME = 'neuron'" in text
    again = spec.write_spec(tmp_path, "neuron", "torch_neuronx")  # our own file: overwritten
    assert "'torch_neuronx'" in again.read_text()
    assert not [p for p in tmp_path.iterdir() if p.name != spec.SPEC_FILE]  # no temporary file left


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"device": "foo"}, "needs --backend-module"),
        ({"device": "neu ron", "backend_module": "m"}, "not a device type name"),
        ({"backend_module": "a-b"}, "not a module name"),
    ],
)
def test_bad_spec_input_is_refused_with_its_name(tmp_path, kwargs, words):
    with pytest.raises(spec.SpecError, match=words):
        spec.write_spec(tmp_path, **kwargs)
    assert not (tmp_path / spec.SPEC_FILE).exists()


def test_a_foreign_file_is_never_overwritten_without_force(tmp_path, capsys):
    user_file = tmp_path / spec.SPEC_FILE
    user_file.write_text("MY_SETTINGS = 1\n")
    assert cli_main(["hf-spec", f"--dir={tmp_path}"]) == 2
    assert "was not written by neuron-conformance" in capsys.readouterr().err
    assert user_file.read_text() == "MY_SETTINGS = 1\n"
    assert cli_main(["hf-spec", f"--dir={tmp_path}", "--force"]) == 0
    assert user_file.read_text().startswith(spec.HEADER)


def test_missing_folder_is_one_line_exit_2(tmp_path, capsys):
    assert cli_main(["hf-spec", f"--dir={tmp_path / 'absent'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "absent" in err[0] and "not a folder" in err[0]


def test_transformers_style_tests_run_on_the_emulated_device(tmp_path):
    spec.write_spec(tmp_path)
    (tmp_path / "test_tiny_gpt2.py").write_text(TINY_TEST)
    proc = _run(
        tmp_path,
        "-m",
        "pytest",
        "test_tiny_gpt2.py",
        "-p",
        "no:cacheprovider",
        "-q",
        TRANSFORMERS_TEST_DEVICE_SPEC=spec.SPEC_FILE,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 passed" in proc.stdout
    # the conformance plugin is installed but the session is not a conformance session: no report
    assert not (tmp_path / "reports").exists()


def test_a_vendor_module_is_imported_by_the_spec(tmp_path):
    (tmp_path / "vendor_backend.py").write_text(
        "from neuron_conformance.emulator import install\ninstall()\nLOADED = True\n"
    )
    spec.write_spec(tmp_path, "neuron", "vendor_backend")
    proc = _run(
        tmp_path,
        "-c",
        "import sys, transformers.testing_utils as t; print(t.torch_device, 'vendor_backend' in sys.modules)",
        TRANSFORMERS_TEST_DEVICE_SPEC=spec.SPEC_FILE,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["neuron", "True"]


def test_a_broken_vendor_module_fails_naming_it(tmp_path):
    (tmp_path / "vendor_backend.py").write_text("raise ImportError('driver not found')\n")
    spec.write_spec(tmp_path, "neuron", "vendor_backend")
    proc = _run(tmp_path, "-c", "import transformers.testing_utils", TRANSFORMERS_TEST_DEVICE_SPEC=spec.SPEC_FILE)
    assert proc.returncode != 0
    assert "backend module 'vendor_backend' failed to import: ImportError: driver not found" in proc.stderr


def test_a_wrong_device_kernel_fails_the_transformers_style_test(tmp_path):
    """The spec routes transformers' tests to the device under test: a ``native_layer_norm`` 1e-3 off on the
    PrivateUse1 key (tests/faults/fault_backend.py as the vendor module) fails the GPT-2 forward test."""
    spec.write_spec(tmp_path, "neuron", "fault_backend")
    (tmp_path / "test_tiny_gpt2.py").write_text(TINY_TEST)
    faults = ROOT / "tests" / "faults"
    proc = _run(
        tmp_path,
        "-m",
        "pytest",
        "test_tiny_gpt2.py",
        "-p",
        "no:cacheprovider",
        "-q",
        TRANSFORMERS_TEST_DEVICE_SPEC=spec.SPEC_FILE,
        CONFORMANCE_TEST_FAULT="layer-norm-1e-3",
        PYTHONPATH=os.pathsep.join([str(faults), str(ROOT)]),
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 failed, 1 passed" in proc.stdout
    assert "test_forward_matches_cpu" in proc.stdout
