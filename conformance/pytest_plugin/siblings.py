"""Where this distribution's packages lie: the folder that holds ``conformance`` and its sibling packages.

In a wheel that folder is ``site-packages/neuron_conformance/``; in a clone (or an editable install) it is the
repository root. Code that needs the suites' files (the console command, the activation rule) finds them
here, never through the current folder, so a user's ``./opsuites`` or ``./reports`` folder cannot stand in
for them. Imports cannot be shadowed either: every package is imported as ``neuron_conformance.<name>``
(``neuron_conformance/__init__.py``).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The folder holding this distribution's packages ``conformance``, ``opsuites``, ``model_zoo``, ``reports``,
``migrate`` (``site-packages/neuron_conformance`` or the repository root)."""

__all__ = ["ROOT"]
