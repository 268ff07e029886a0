"""Bug-class inputs: a sample source beside OpInfo's, organised by where backends go wrong.

Each class is one module of this package exposing ``BUG_CLASS`` (its name in records and reports),
``DESCRIPTION`` (one line: the kernel branch or semantics it aims at) and ``cases() -> list[BugCase]``
(:class:`neuron_conformance.opsuites.bugclasses.case.BugCase`). :data:`CLASS_MODULES` lists the modules in report order;
:func:`all_cases` gathers their cases. The suite that runs them is :mod:`neuron_conformance.opsuites.test_bug_classes`.

The bar of each class is PyTorch's documented semantics and the CPU result, never what the emulated
device happens to do: every case names its source in ``semantics``.
"""

from __future__ import annotations

import functools
import importlib

CLASS_MODULES: tuple[str, ...] = (
    "duplicates",
    "masked_rows",
    "ties",
    "integer_edges",
    "nonblocking_copies",
    "aliasing_inplace",
    "strided_reductions",
    "tile_edges",
    "special_values",
)
"""Modules of this package, one bug class each, in the order reports list them."""


def class_modules() -> list:
    """The imported class modules of :data:`CLASS_MODULES`."""
    return [importlib.import_module(f"{__name__}.{m}") for m in CLASS_MODULES]


@functools.lru_cache(maxsize=1)
def all_cases() -> tuple:
    """Every case of every class, in class order.

    Raises:
        ValueError: two cases share a ``case_id`` and dtype, or a case names a class other than its module's.
    """
    out, seen = [], set()
    for module in class_modules():
        for case in module.cases():
            if case.bug_class != module.BUG_CLASS:
                raise ValueError(f"{module.__name__}: case {case.name!r} says class {case.bug_class!r}")
            key = (case.case_id, case.dtype)
            if key in seen:
                raise ValueError(f"{module.__name__}: duplicate case {case.case_id!r} for {case.dtype}")
            seen.add(key)
            out.append(case)
    return tuple(out)


@functools.lru_cache(maxsize=1)
def descriptions() -> dict[str, str]:
    """Class name -> its one-line description (for reports)."""
    return {m.BUG_CLASS: m.DESCRIPTION for m in class_modules()}
