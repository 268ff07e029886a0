"""neuron-conformance's one top-level import package.

The distribution installs a single top-level name, ``neuron_conformance``, and its six packages under it:

==================================  =====================================================================
``neuron_conformance.conformance``  the harness: pytest plugin, verdict policy, backend contract,
                                    crash survival, records and manifests
``neuron_conformance.emulator``     the emulated ``neuron`` device, a PrivateUse1 backend like a vendor's
``neuron_conformance.opsuites``     the op suites
``neuron_conformance.model_zoo``    Hugging Face models and distributed scenarios
``neuron_conformance.reports``      the reports (``python -m neuron_conformance.reports``)
``neuron_conformance.migrate``      ``neuron-migrate``, the CUDA -> ``torch.accelerator`` codemod
==================================  =====================================================================

Why one name: a user project, or another distribution in the same environment, with its own top-level
``reports``, ``migrate``, ``opsuites``, ``model_zoo`` or ``conformance`` package (common names) would
otherwise overwrite this one's files at install time, or shadow them at import time (a ``reports/`` folder
in the current directory is found before site-packages); ``neuron_conformance.*`` cannot collide.

In the wheel the six packages are real subfolders of this one (``pyproject.toml``, ``package-dir``). The
repository keeps them as top-level folders next to this one, so in a source tree (this file's parent folder
holds this project's ``pyproject.toml`` and ``conformance/``) the parent folder is added to ``__path__``:
``neuron_conformance.reports`` is then ``<repo>/reports``, for a clone on ``sys.path`` and for an editable
install alike. Nothing else is added, and never in an installed copy (its parent is ``site-packages``).
"""

from __future__ import annotations

from pathlib import Path as _Path

_SOURCE_TREE = _Path(__file__).resolve().parent.parent
_SUBPACKAGES = ("conformance", "emulator", "opsuites", "model_zoo", "reports", "migrate")


def _in_source_tree() -> bool:
    """True when this file is the repository's copy: ``../pyproject.toml`` names this distribution and the
    five packages are folders next to this one (never true in site-packages)."""
    pyproject = _SOURCE_TREE / "pyproject.toml"
    if not pyproject.is_file() or any(not (_SOURCE_TREE / n / "__init__.py").is_file() for n in _SUBPACKAGES):
        return False
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return False
    return 'name = "neuron-conformance"' in text


if not (_Path(__file__).resolve().parent / "conformance").is_dir() and _in_source_tree():
    __path__.append(str(_SOURCE_TREE))  # noqa: F821 - the package's own __path__ (a list)

__all__: list[str] = []
