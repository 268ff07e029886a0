"""A transformers device spec, so that transformers' own test suite runs on a device under test.

transformers' test helpers (``transformers/testing_utils.py``, 5.24) pick the device of every test from
``$TRANSFORMERS_TEST_DEVICE_SPEC``: the path of a Python file that defines ``DEVICE_NAME`` (the device type
the tests put their models and inputs on, ``torch_device``) and, optionally, ``MANUAL_SEED_FN``,
``EMPTY_CACHE_FN`` and ``DEVICE_COUNT_FN`` (the device's entries of the ``BACKEND_MANUAL_SEED``,
``BACKEND_EMPTY_CACHE`` and ``BACKEND_DEVICE_COUNT`` tables behind ``backend_manual_seed`` & co.). Two facts
of that loader shape this module:

* it imports the file by the text of the path with ``.py`` cut off, after adding the file's folder to
  ``sys.path``: only a bare file name in the current folder imports (``/abs/spec.py`` becomes the module
  name ``/abs/spec``). :func:`write_spec` therefore writes :data:`SPEC_FILE` into the folder the tests run
  from (transformers' checkout), and the variable names it bare;
* the file is imported at the end of ``testing_utils``, so importing it is the moment the device must come
  into being: the spec imports the backend module (or installs the emulated device) itself, and
  ``$TRANSFORMERS_TEST_BACKEND`` is not needed.

The functions the spec hands to transformers are device-generic (``torch.accelerator``, torch 2.13):
``torch.manual_seed`` seeds every device's default generator, a PrivateUse1 device's through its device
module's ``manual_seed_all`` (``torch/random.py``, ``_seed_custom_device``); ``torch.accelerator.empty_cache``
and ``torch.accelerator.device_count``.

Tests expected to differ on any device transformers does not know (it knows cpu, cuda, hpu, npu, xpu):
``test_eager_matches_sdpa_inference`` (``tests/test_modeling_common.py``, ``_test_eager_matches_sdpa_inference``)
takes ``atol=1e-7, rtol=1e-4`` for every other device type in every dtype, where cpu and cuda get
``atol=5e-3`` in float16 (bfloat16 is widened by the output magnitude on every device). Its float16
cases fail on a correct vendor backend; they are tolerance artefacts, not backend bugs (docs/model_zoo.md).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

from neuron_conformance.conformance.backend import emulated

SPEC_FILE = "conformance_device_spec.py"
"""File name :func:`write_spec` writes: a bare module name, the only form transformers' loader imports."""
ENV_SPEC = "TRANSFORMERS_TEST_DEVICE_SPEC"
"""The variable transformers' ``testing_utils`` reads the spec's path from."""
EMULATED_DEVICE = emulated.DEFAULT_DEVICE
"""Device type of the emulated device loaded when no backend module is named."""
HEADER = "# Written by neuron-conformance hf-spec: a transformers device spec"
"""First line of every spec :func:`write_spec` writes; a file without it is never overwritten."""


class SpecError(Exception):
    """The device spec cannot be made or loaded; the message names the input (module, device, path)."""


def _check_backend_named(device: str, backend_module: str | None) -> None:
    """Raise :class:`SpecError` for a device that is not an emulated device and has no backend module."""
    if backend_module is None and emulated.backend_module(device) is None:
        raise SpecError(
            f"device {device!r} needs --backend-module (the module that registers it); "
            f"without one the spec installs the emulated device {EMULATED_DEVICE!r}"
        )


def _load_backend(device: str, backend_module: str | None) -> None:
    """Bring ``device`` into being: import ``backend_module``, or install the emulated device when it is None.

    Raises:
        SpecError: no backend module for a device other than :data:`EMULATED_DEVICE`, a module that fails
            to import, or a device type that still does not exist afterwards.
    """
    import torch

    _check_backend_named(device, backend_module)
    if backend_module is None:
        backend_module = emulated.backend_module(device)  # checked by _check_backend_named
    if backend_module is not None:
        try:
            importlib.import_module(backend_module)
        except Exception as exc:
            raise SpecError(f"backend module {backend_module!r} failed to import: {type(exc).__name__}: {exc}") from exc
    try:
        torch.empty(0, device=device)
    except Exception as exc:
        raise SpecError(
            f"device {device!r} is not usable after loading "
            f"{backend_module or 'the emulated device'}: {type(exc).__name__}: {exc}"
        ) from exc


def device_functions(device: str, backend_module: str | None = None) -> tuple[Callable, Callable, Callable]:
    """Load the device and return ``(MANUAL_SEED_FN, EMPTY_CACHE_FN, DEVICE_COUNT_FN)`` for its spec.

    Args:
        device: the device type the tests use (``"neuron"``); must exist once ``backend_module`` is imported.
        backend_module: the module that registers the device (``torch_neuronx``); None installs the
            emulated device (mode from ``$CONFORMANCE_EMULATOR_MODE``).

    Returns:
        ``manual_seed(seed: int)`` (``torch.manual_seed``: every device's default generator),
        ``empty_cache()`` and ``device_count() -> int`` (``torch.accelerator``).

    Raises:
        SpecError: see :func:`_load_backend`.
    """
    import torch

    _load_backend(device, backend_module)

    def manual_seed(seed: int):
        return torch.manual_seed(seed)

    return manual_seed, torch.accelerator.empty_cache, torch.accelerator.device_count


def spec_source(device: str, backend_module: str | None) -> str:
    """The text of a spec file for ``device`` (see :func:`device_functions` for the arguments)."""
    regen = f"neuron-conformance hf-spec --device {device}" + (
        f" --backend-module {backend_module}" if backend_module else ""
    )
    return (
        f"{HEADER}\n"
        f"# ({ENV_SPEC}={SPEC_FILE}); regenerate with: {regen}\n"
        "from neuron_conformance.model_zoo.hf_device_spec import device_functions as _device_functions\n\n"
        f"DEVICE_NAME = {device!r}\n"
        "MANUAL_SEED_FN, EMPTY_CACHE_FN, DEVICE_COUNT_FN = _device_functions(DEVICE_NAME, "
        f"{backend_module!r})\n"
    )


def write_spec(
    folder: str | os.PathLike, device: str = EMULATED_DEVICE, backend_module: str | None = None, *, force: bool = False
) -> Path:
    """Write :data:`SPEC_FILE` into ``folder`` (atomically) and return its path.

    Raises:
        SpecError: ``folder`` is not a folder, ``device`` is not an identifier-like device type, a device
            other than :data:`EMULATED_DEVICE` has no ``backend_module``, or a file of that name exists that
            this function did not write (overwritten only with ``force``).
    """
    from neuron_conformance.conformance.results.atomic import write_text_atomic  # deferred: only when a file is written

    where = Path(folder)
    if not where.is_dir():
        raise SpecError(f"{where}: not a folder (give the folder transformers' tests run from)")
    if not device.isidentifier():
        raise SpecError(f"device {device!r} is not a device type name (e.g. neuron)")
    _check_backend_named(device, backend_module)
    if backend_module is not None and not all(p.isidentifier() for p in backend_module.split(".")):
        raise SpecError(f"backend module {backend_module!r} is not a module name")
    path = where / SPEC_FILE
    if path.exists() and not force:
        first = path.read_text(encoding="utf-8", errors="replace").partition("\n")[0]
        if first != HEADER:
            raise SpecError(f"{path} exists and was not written by neuron-conformance; move it or pass --force")
    write_text_atomic(path, spec_source(device, backend_module))
    return path


def main(argv: list[str] | None = None) -> int:
    """``neuron-conformance hf-spec``: write the spec, print how to run transformers' tests with it.

    Exit codes: 0 written; 2 bad input (one line on stderr naming it).
    """
    ap = argparse.ArgumentParser(
        prog="neuron-conformance hf-spec",
        description="Write a transformers device spec (TRANSFORMERS_TEST_DEVICE_SPEC) "
        "for a device under test into a folder.",
    )
    ap.add_argument("--dir", default=".", help="the folder transformers' tests run from (default: here)")
    ap.add_argument("--device", default=EMULATED_DEVICE, help=f"device type (default {EMULATED_DEVICE})")
    ap.add_argument(
        "--backend-module",
        default=None,
        help="module that registers the device (default: the built-in emulated device)",
    )
    ap.add_argument("--force", action="store_true", help="overwrite a file of that name not written here")
    args = ap.parse_args(argv)
    try:
        path = write_spec(args.dir, args.device, args.backend_module, force=args.force)
    except SpecError as exc:
        print(f"neuron-conformance hf-spec: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {path}\nrun transformers' tests from {path.parent}:\n"
        f"  {ENV_SPEC}={SPEC_FILE} python -m pytest tests/models/llama"
    )
    return 0


if __name__ == "__main__":  # python -m neuron_conformance.model_zoo.hf_device_spec
    sys.exit(main())
