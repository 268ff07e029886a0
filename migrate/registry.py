"""Rule registry: the rule modules, loading them, and selecting rules by code or prefix.

Declaration, handler registration and dispatch live in :mod:`neuron_conformance.migrate.hooks` (imported by the
rule modules); this module re-exports them, so ``neuron_conformance.migrate.registry.RULES``, ``rule``,
``on_call``, ``dispatch_call``, ... keep working. :func:`load` imports the rule modules by name
(``importlib``): they import :mod:`neuron_conformance.migrate.hooks`, never this module, so there is no cycle.
"""

from __future__ import annotations

import importlib
from typing import Dict, Iterable, Optional

from neuron_conformance.migrate.hooks import (  # noqa: F401 - re-exported (public API)
    ANY_CALL,
    ATTR_NAMES,
    CALL_PREFIXES,
    CALLS,
    FALLBACK,
    METHODS,
    NODES,
    REFERENCE_PREFIXES,
    REFERENCES,
    RULES,
    STRINGS,
    dispatch_attr_name,
    dispatch_call,
    dispatch_node,
    dispatch_reference,
    dispatch_string,
    fallback,
    is_availability_test,
    on_any_call,
    on_attr_name,
    on_call,
    on_method,
    on_node,
    on_reference,
    on_string,
    rule,
)
from neuron_conformance.migrate.rule import Rule

RULE_MODULES = (
    "accelerator_api",
    "device",
    "device_choice",
    "placement",
    "placement_queries",
    "sync",
    "memory",
    "pin_memory",
    "rng",
    "amp",
    "distributed",
    "compile",
    "backends",
    "extensions",
)


def load() -> Dict[str, Rule]:
    """Import every rule module once; return the code -> Rule table."""
    for name in RULE_MODULES:
        importlib.import_module(f"neuron_conformance.migrate.rules.{name}")
    return RULES


def expand(patterns: Iterable[str]) -> set:
    """Expand codes and prefixes (``NM1``, ``NM10``, ``NM101``, ``ALL``) to rule codes.

    Raises:
        ValueError: a pattern that matches no rule.
    """
    load()
    out = set()
    for p in patterns:
        p = p.strip().upper()
        if not p:
            continue
        if p == "ALL":
            out |= set(RULES)
            continue
        matched = {c for c in RULES if c.startswith(p)}
        if not matched:
            raise ValueError(f"unknown rule code or prefix {p!r}; codes look like NM101 (see `neuron-migrate rules`)")
        out |= matched
    return out


def selection(select: Optional[Iterable[str]], ignore: Optional[Iterable[str]], target_torch=(2, 13)) -> frozenset:
    """The codes that run: ``select`` (default ALL) minus ``ignore``, minus rules whose
    replacement needs a torch newer than ``target_torch``."""
    load()
    chosen = expand(select) if select else set(RULES)
    if ignore:
        chosen -= expand(ignore)
    chosen = {c for c in chosen if tuple(RULES[c].min_torch) <= tuple(target_torch)}
    return frozenset(chosen)
