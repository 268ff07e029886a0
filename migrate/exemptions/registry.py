"""The registry of exemptions: code neuron-migrate leaves alone although it names CUDA.

An exemption is a registered unit (:class:`Exemption`): a name, the finding code its examples are about, a
``quiet`` example that must produce no such finding and a ``near_miss`` that is still reported, the
docstring of its test (what it leaves alone and why), and a scope that says how the test is asked and how its
answer is kept:

* :data:`MODULE`: ``fact(ctx)`` is computed once per file, then ``test(view, fact)`` per finding;
* :data:`FINDING`: ``test(view)`` per finding;
* :data:`STEP`: ``test(view, i)`` per (ancestor, child) pair ``view.full[i], view.full[i + 1]`` of the
  finding's full path; the exemptions of one ``group`` answer together, and their answer is kept per pair
  (the first finding that reaches a pair decides it for the later ones);
* :data:`ANCESTOR`: ``test(view, i)`` per ancestor ``view.ancestors[i]`` (each test keeps its own answers
  with :meth:`View.memo`).

:func:`stages` turns the exemptions, in the fixed order of
:data:`neuron_conformance.migrate.exemptions.ORDER`, into the steps :func:`exempt` walks: consecutive
:data:`STEP` exemptions of one group make one walk of the path, consecutive :data:`ANCESTOR` exemptions one
walk of the ancestors. A finding is exempt as soon as one answers True.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Dict, List, Optional, Sequence

from neuron_conformance.migrate.traversal import full_path

MODULE, FINDING, STEP, ANCESTOR = "module", "finding", "step", "ancestor"
SCOPES = (MODULE, FINDING, STEP, ANCESTOR)


@dataclasses.dataclass(frozen=True)
class Exemption:
    """One registered exemption (see the module docstring)."""

    name: str
    scope: str
    test: Callable
    code: str
    quiet: str
    near_miss: str
    group: str = ""
    fact: Optional[Callable] = None

    @property
    def doc(self) -> str:
        """What the exemption leaves alone and why (its test's docstring)."""
        return inspect.getdoc(self.test) or ""

    @property
    def concept(self) -> str:
        """The module that defines it (``vendor_dispatch``, ``no_effect``, ...)."""
        return self.test.__module__.rsplit(".", 1)[-1]


#: Every exemption registered so far, by name (in import order; the evaluation order is
#: :data:`neuron_conformance.migrate.exemptions.ORDER`).
REGISTERED: Dict[str, Exemption] = {}


def exemption(
    name: str, *, scope: str, code: str, quiet: str, near_miss: str, group: str = "", fact: Optional[Callable] = None
):
    """Decorator registering its function as the test of the exemption ``name``."""
    if scope not in SCOPES:
        raise ValueError(f"exemption {name!r}: unknown scope {scope!r}")
    if (scope == STEP) != bool(group) or (scope == MODULE) != (fact is not None):
        raise ValueError(f"exemption {name!r}: a step needs a group, a module-scope exemption a fact, and only they")

    def register(test: Callable) -> Callable:
        if name in REGISTERED:
            raise ValueError(f"exemption {name!r} registered twice")
        REGISTERED[name] = Exemption(name, scope, test, code, quiet, near_miss, group, fact)
        return test

    return register


class View:
    """A finding as the exemptions see it: ``ctx``, ``finding``, its ``node`` and ``code``, the ``ancestors``
    of the node visited, ``path`` (the ancestors ending with the finding's node), ``full`` (``path`` with the
    nodes between the last ancestor and the finding's node filled in, :func:`full_path`) and ``cache`` (the
    answers kept for the file, shared by every finding of one pass)."""

    __slots__ = ("ctx", "finding", "node", "code", "ancestors", "path", "cache", "_full")

    def __init__(self, ctx, finding, ancestors: list, cache: dict):
        self.ctx, self.finding, self.node, self.code = ctx, finding, finding.node, finding.code
        self.ancestors, self.cache = ancestors, cache
        node = finding.node
        self.path = ancestors if ancestors and ancestors[-1] is node else ancestors + [node]
        self._full = None

    @property
    def full(self) -> list:
        if self._full is None:
            self._full = full_path(self.path)
        return self._full

    def child(self, i: int):
        """``ancestors[i + 1]``, or None for the last ancestor."""
        ancestors = self.ancestors
        return ancestors[i + 1] if i + 1 < len(ancestors) else None

    def memo(self, key, compute: Callable):
        """``compute()``, kept under ``key`` for the rest of the file."""
        cache = self.cache
        if key not in cache:
            cache[key] = compute()
        return cache[key]


def ordered(order: Sequence[str]) -> List[Exemption]:
    """The registered exemptions in ``order``; every registered one must be named exactly once."""
    missing = set(REGISTERED) - set(order)
    unknown = [n for n in order if n not in REGISTERED]
    if missing or unknown or len(set(order)) != len(order):
        raise ValueError(f"exemption order: missing {sorted(missing)}, unknown {unknown}, or a name twice")
    return [REGISTERED[n] for n in order]


def _module_stage(e: Exemption):
    key = ("module", e.name)

    def run(view: View) -> bool:
        cache = view.cache
        if key not in cache:
            cache[key] = e.fact(view.ctx)
        return bool(e.test(view, cache[key]))

    return run


def _finding_stage(e: Exemption):
    def run(view: View) -> bool:
        return bool(e.test(view))

    return run


def _step_stage(group: str, members: List[Exemption]):
    tests = [e.test for e in members]

    def run(view: View) -> bool:
        full, cache = view.full, view.cache
        for i in range(len(full) - 1):
            key = (group, id(full[i]), id(full[i + 1]))
            hit = cache.get(key)
            if hit is None:
                hit = cache[key] = any(t(view, i) for t in tests)
            if hit:
                return True
        return False

    return run


def _ancestor_stage(members: List[Exemption]):
    tests = [e.test for e in members]

    def run(view: View) -> bool:
        for i in range(len(view.ancestors)):
            for t in tests:
                if t(view, i):
                    return True
        return False

    return run


def stages(exemptions: Sequence[Exemption]) -> list:
    """The walk over ``exemptions`` (in order): one callable ``run(view) -> bool`` per stage."""
    out, k = [], 0
    while k < len(exemptions):
        e = exemptions[k]
        if e.scope in (STEP, ANCESTOR):
            j = k
            while j < len(exemptions) and exemptions[j].scope == e.scope and exemptions[j].group == e.group:
                j += 1
            members = list(exemptions[k:j])
            out.append(_step_stage(e.group, members) if e.scope == STEP else _ancestor_stage(members))
            k = j
            continue
        out.append(_module_stage(e) if e.scope == MODULE else _finding_stage(e))
        k += 1
    return out


def exempt(walk: list, view: View) -> bool:
    """Whether one stage of ``walk`` (:func:`stages`) exempts the finding of ``view``."""
    return any(run(view) for run in walk)
