"""Import the project's own top-level packages even where a folder of the same name shadows them.

The default report directory is ``reports/latest`` under the current folder, so after the first run a
project that uses the harness has a ``reports/`` folder without ``__init__.py``. With an editable install
(``pip install -e``, a meta-path finder that runs after the path-based one) and the current folder on
``sys.path`` (``python -m pytest``, pytest's rootdir insertion), ``import reports`` then finds that
folder as a namespace package instead of this project's ``reports`` package.
:func:`ensure_own_package` loads the project's package explicitly before anything imports it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The folder holding this project's top-level packages (``conformance``, ``reports``, ...)."""


def ensure_own_package(name: str):
    """Return this project's top-level package ``name``, loading it from :data:`ROOT` when ``import name``
    would give something else (a namespace package made of a same-named folder) or nothing yet.

    Raises:
        ImportError: the project has no package ``name``.
    """
    loaded = sys.modules.get(name)
    init = ROOT / name / "__init__.py"
    if loaded is not None and getattr(loaded, "__file__", None):
        return loaded
    if not init.is_file():
        raise ImportError(f"conformance: no package {name!r} next to {ROOT / 'conformance'}")
    if loaded is None:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and Path(spec.origin).resolve() == init.resolve():
            return importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


__all__ = ["ROOT", "ensure_own_package"]
