"""``[tool.neuron-migrate]`` in ``pyproject.toml``.

Keys (all optional): ``select``, ``ignore``, ``exclude``, ``extend-exclude`` (lists of str),
``target-torch`` (str, ``"2.13"``), ``fix``, ``unsafe-fixes`` (bool), ``output-format`` (str).
Command-line flags override the file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KEYS = {
    "select": list,
    "ignore": list,
    "exclude": list,
    "extend-exclude": list,
    "target-torch": str,
    "fix": bool,
    "unsafe-fixes": bool,
    "output-format": str,
}


class ConfigError(ValueError):
    """Bad configuration: the message names the file and the key."""


def find_pyproject(start: Path) -> Optional[Path]:
    """The nearest ``pyproject.toml`` at or above ``start``."""
    start = start.resolve()
    if start.is_file():
        start = start.parent
    for d in [start, *start.parents]:
        p = d / "pyproject.toml"
        if p.is_file():
            return p
    return None


def load(path: Optional[Path]) -> dict:
    """Validated ``[tool.neuron-migrate]`` table of ``path`` (empty dict when absent).

    Raises:
        ConfigError: TOML syntax error, unknown key or wrong value type.
    """
    if path is None:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}")
    table = data.get("tool", {}).get("neuron-migrate", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.neuron-migrate] must be a table")
    for key, value in table.items():
        if key not in KEYS:
            raise ConfigError(f"{path}: unknown key {key!r} in [tool.neuron-migrate]; accepted: {sorted(KEYS)}")
        want = KEYS[key]
        if not isinstance(value, want) or (want is list and not all(isinstance(v, str) for v in value)):
            raise ConfigError(
                f"{path}: [tool.neuron-migrate] {key} = {value!r} must be "
                f"{'a list of strings' if want is list else want.__name__}"
            )
    return table
