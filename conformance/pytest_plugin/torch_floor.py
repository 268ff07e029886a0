"""The torch each part of a run needs: parts the running torch is too old for are left out with one line.

The project runs on torch >= 2.9 (``pyproject.toml``; an older torch stops the run at start-up with one line,
:func:`below_floor`). Some parts need a newer release, and each is checked at
start-up by the APIs it calls, not by a list pinned to one release:

* an emulated device declares its own need (``CONFORMANCE_TORCH_REQUIREMENT`` of its package: None, or one
  line naming the torch it needs); when a run names no device and the default would be that emulated device,
  the run tests ``cpu`` instead (a self-check of the harness) and says why (:func:`emulated_unmet`);
* the parts in :data:`PARTS`: each a description, the torch release that has what it calls, and the APIs
  (dotted names) it calls; its tests are skipped, each naming that release (:func:`skip_reason`).

Op-level gaps are not parts: the suites build their cases from the running torch's registry and OpInfo
database (the shape contracts of an overload the running torch lacks are left out,
``opsuites/test_shape_contracts.py``; the random suite tests the random overloads the running torch
registers; an aten replay entry whose overload or OpInfo the running torch lacks is skipped naming the
release the index was built on, ``opsuites/test_aten_replay.py``).

:func:`summary_line` is the one line the controlling process prints at start-up (:func:`tell`, shown under
``-q`` too) naming what this torch leaves out; None when nothing is.
"""

from __future__ import annotations

import importlib
import re
import sys
from dataclasses import dataclass

import pytest
import torch

from neuron_conformance.conformance.backend import emulated

FLOOR = "2.9"
"""The oldest torch the harness runs on (``pyproject.toml``: ``torch>=2.9``); older stops the run at start-up."""


def _release(version: str) -> tuple[int, ...]:
    """``"2.14.1+cu130"`` -> ``(2, 14, 1)``."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def below_floor() -> str | None:
    """One line when the running torch is older than :data:`FLOOR`, else None."""
    if _release(torch.__version__) >= _release(FLOOR):
        return None
    return f"the harness needs torch >= {FLOOR}; this is torch {torch.__version__}"


@dataclass(frozen=True)
class Part:
    """A part of the project that needs more than the floor: ``name`` (what is left out), ``torch`` (the
    release that has what it calls), ``apis`` (dotted names: a module path, then attributes)."""

    name: str
    torch: str
    apis: tuple[str, ...]


DEFAULT_BACKEND = Part(
    "the model zoo's compile checks (torch.compiler.set_default_backend)",
    "2.13",
    ("torch.compiler.set_default_backend", "torch.compiler.get_default_backend"),
)
"""The zoo compiles its models the way users do (``model_zoo/compile_path.py``), and every zoo test checks the
compile default is left as found."""

PARTS: tuple[Part, ...] = (DEFAULT_BACKEND,)
"""The parts checked at start-up."""

_notes: list[str] = []
"""What this process left out besides :data:`PARTS` (the emulated device, op-level gaps), in order."""


def _exists(dotted: str) -> bool:
    """Whether ``dotted`` names an attribute path below the longest importable module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def missing(part: Part) -> list[str]:
    """The APIs of ``part`` the running torch lacks."""
    return [api for api in part.apis if not _exists(api)]


def skip_reason(part: Part) -> str | None:
    """None when the running torch has what ``part`` calls, else the one-line reason its tests are skipped."""
    lacks = missing(part)
    if not lacks:
        return None
    return f"needs torch >= {part.torch} (torch {torch.__version__} lacks {', '.join(lacks)})"


def emulated_unmet(device_type: str) -> str | None:
    """The requirement line of the emulated device ``device_type`` when the running torch cannot run it, else
    None (also when the device is not emulated or declares nothing). Read from the package of its backend
    module, whose import would install the device."""
    module = emulated.backend_module(device_type)
    if module is None:
        return None
    try:
        package = importlib.import_module(emulated.package_of(module))
    except Exception as exc:  # noqa: BLE001 - a package that cannot even be imported cannot run here
        return f"its package cannot be imported: {type(exc).__name__}: {exc}"
    declared = getattr(package, "CONFORMANCE_TORCH_REQUIREMENT", None)
    return declared() if callable(declared) else None


def note(text: str) -> None:
    """Add ``text`` (what this torch leaves out) to :func:`summary_line`, once."""
    if text not in _notes:
        _notes.append(text)


def summary_line() -> str | None:
    """One line naming every part the running torch is too old for, or None."""
    items = list(_notes)
    items += [f"{part.name}: {reason}" for part in PARTS if (reason := skip_reason(part))]
    if not items:
        return None
    return f"conformance: torch {torch.__version__} leaves out what needs a newer torch: " + "; ".join(items)


def tell(config: pytest.Config) -> None:
    """Write :func:`summary_line` once, at start-up, in the process that controls the run (shown under ``-q``
    too)."""
    line = summary_line()
    if line is None:
        return
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(line, yellow=True)
    else:
        print(line, file=sys.stderr)
