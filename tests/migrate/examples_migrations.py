"""The twelve files of pytorch/examples whose migration to ``torch.accelerator`` was made by hand, measured.

For each (commit, file) of :data:`MIGRATIONS`, the file before the commit (``<commit>^``) is fixed with
``--fix --unsafe-fixes`` and its CUDA-specific lines (:func:`cuda_lines`) are counted, beside the same count on
the file before and after the maintainers' own commit. The files are not stored here; the command reads them
from a clone of https://github.com/pytorch/examples::

    python -m tests.migrate.examples_migrations PATH/TO/examples [-v]

A *CUDA-specific line* is a line of code (comments and docstrings left out) that uses ``torch.cuda``,
``torch.backends.cudnn`` or ``torch.backends.mps``, calls ``.cuda(``, reads ``.is_cuda``, names ``nccl``, or
holds a string that is exactly a CUDA, MPS or NCCL device or backend name (``"cuda"``, ``'cuda:0'``,
``"mps"``, ``"nccl"``). Help texts and messages that mention CUDA are not counted.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tokenize

from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection

#: (commit of the maintainers' migration, file) in pytorch/examples.
MIGRATIONS = (
    ("65722fe", "mnist/main.py"),
    ("65722fe", "mnist_forward_forward/main.py"),
    ("65722fe", "mnist_rnn/main.py"),
    ("54e132e", "vae/main.py"),
    ("cc8e404", "dcgan/main.py"),
    ("12dc18e", "siamese_network/main.py"),
    ("2c435c7", "gat/main.py"),
    ("d47f0f3", "gcn/main.py"),
    ("dcc2474", "imagenet/main.py"),
    ("65afde6", "fast_neural_style/neural_style/neural_style.py"),
    ("6bfe651", "distributed/tensor_parallelism/sequence_parallel_example.py"),
    ("6bfe651", "distributed/tensor_parallelism/tensor_parallel_example.py"),
)

_API = re.compile(r"torch\.cuda\b|torch\.backends\.(cudnn|mps)\b|\.cuda\(|\.is_cuda\b|\bnccl\b")
_NAME = re.compile(r"""^[bfru]*(['"])(cuda|mps|nccl)(:[^'"\s]*)?\1$""", re.I)


def cuda_lines(source: str) -> dict:
    """line number -> text of the CUDA-specific lines of ``source`` (see the module docstring)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    lines = source.splitlines()
    found, code = {}, {}
    for tok in tokens:
        if tok.type == tokenize.STRING and _NAME.match(tok.string):
            found[tok.start[0]] = lines[tok.start[0] - 1].strip()
        elif tok.type not in (tokenize.COMMENT, tokenize.STRING):
            code.setdefault(tok.start[0], []).append(tok.string)
    for line, parts in code.items():
        if _API.search("".join(parts)):
            found.setdefault(line, lines[line - 1].strip())
    return found


def _show(clone: str, rev: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", clone, "show", f"{rev}:{path}"], capture_output=True, text=True, check=True
    ).stdout


def measure(clone: str, verbose: bool = False) -> dict:
    """``{"before", "humans", "tool"}`` totals of CUDA-specific lines over :data:`MIGRATIONS`."""
    settings = Settings(selection(None, None), fix=True, unsafe_fixes=True)
    totals = {"before": 0, "humans": 0, "tool": 0}
    for commit, path in MIGRATIONS:
        before, after = _show(clone, f"{commit}^", path), _show(clone, commit, path)
        result = check_source(before, settings, path)
        fixed = result.new_source or before
        counts = {"before": cuda_lines(before), "humans": cuda_lines(after), "tool": cuda_lines(fixed)}
        for key, found in counts.items():
            totals[key] += len(found)
        print(f"{commit} {path}: " + ", ".join(f"{k} {len(v)}" for k, v in counts.items()))
        if verbose:
            for line, text in sorted(counts["tool"].items()):
                print(f"    {line}: {text}")
    print("total: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    return totals


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m tests.migrate.examples_migrations PATH/TO/pytorch-examples-clone [-v]")
    measure(sys.argv[1], "-v" in sys.argv[2:])
