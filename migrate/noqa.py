"""``# noqa`` comments: which lines suppress which rule codes."""

from __future__ import annotations

import re
from typing import Dict, Optional

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)


def noqa_lines(source: str) -> Dict[int, Optional[frozenset]]:
    """Line number (1-based) -> None for a blanket ``# noqa`` or the frozenset of codes named
    (upper-cased) in ``# noqa: NM101, NM201``. Lines without such a comment are absent. Never raises."""
    out: Dict[int, Optional[frozenset]] = {}
    if "noqa" not in source and "NOQA" not in source:
        return out
    for i, line in enumerate(source.splitlines(), 1):
        if "#" not in line:
            continue
        m = _NOQA.search(line)
        if m:
            codes = m.group("codes")
            out[i] = None if codes is None else frozenset(c.upper() for c in re.split(r"[\s,]+", codes) if c)
    return out


def suppressed(noqa: Dict[int, Optional[frozenset]], code: str, start: int, end: int) -> bool:
    """True when a finding of ``code`` spanning lines ``start``..``end`` is suppressed by a
    ``# noqa`` on its first or last line (``noqa`` as returned by :func:`noqa_lines`)."""
    for line in (start, end):
        if line in noqa:
            codes = noqa[line]
            if codes is None or code in codes:
                return True
    return False
