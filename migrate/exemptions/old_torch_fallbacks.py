"""Old-torch fallbacks: CUDA code kept for a torch older than the device-generic API beside it.

The device-generic path is already there; the CUDA code serves a torch that lacks it.

* **a fallback beside a device-generic branch** (:func:`generic_alternative`): the CUDA branch of an
  ``if``/conditional expression that tests the torch version, whose other branch already uses a
  device-generic API (``torch.Stream() if _is_torch_greater_or_equal_than_2_7 else torch.cuda.Stream()``)
  or, for a conditional expression, needs no CUDA name at all.
* **a branch only a torch without ``torch.accelerator`` takes** (:func:`old_torch_branch`): the body of ``if
  <torch version> < "2.4":`` (or the ``else`` of ``>=``), or the side of a flag named for such a release
  (``WITH_PT24``, ``TORCH_2_4``) that older torches take, for any version up to 2.6, the first release with
  ``torch.accelerator``: the device-generic code cannot run on the releases that branch exists for.
* **a fallback in an exception handler** (:func:`api_fallback_handler`): ``try: <a torch call naming no
  CUDA> except (AttributeError, TypeError): <CUDA code>``, as in ``try: scaler =
  torch.amp.GradScaler(device=d) except (AttributeError, TypeError): scaler = torch.cuda.amp.GradScaler()``.
  Only those exceptions (and ``ImportError``/``NameError``) mean "this torch lacks the API or the
  argument". A handler for ``RuntimeError``/``Exception`` (a failure at run time, an out-of-memory retry),
  or a ``try`` body that names CUDA itself or calls no torch API, is still reported.
* **a fallback after an optional import** (:func:`optional_import_fallback`): a name imported from
  ``torch`` in a module-level ``try`` whose ``except ImportError`` sets it to ``None``; the code under ``if
  <name> is None:``, the ``else`` of ``if <name> is not None:``, and the rest of the block after ``if
  <name> is not None: return ...``. The same shape around a name imported from another library is still
  reported.
"""

from __future__ import annotations

import re
from typing import List, Optional

import libcst as cst

from neuron_conformance.migrate.exemptions.blocks import block_exits
from neuron_conformance.migrate.exemptions.names import names_cuda, names_in, path_pairs
from neuron_conformance.migrate.exemptions.registry import ANCESTOR, STEP, exemption
from neuron_conformance.migrate.traversal import walk_in_scope

_GENERIC = (
    "torch.accelerator.",
    "torch.Stream",
    "torch.Event",
    "torch.get_device_module",
    "torch.amp.",
    "torch.backends.fp32_precision",
)
_VERSION_TEST = re.compile(r"version|greater|_than_|torch_\d", re.I)
_API_ERRORS = frozenset({"AttributeError", "TypeError", "ImportError", "ModuleNotFoundError", "NameError"})


def _qnames_in(ctx, node: cst.CSTNode) -> List[str]:
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, (cst.Attribute, cst.Name)):
            q = ctx.qname(cur)
            if q is not None:
                out.append(q)
        stack.extend(cur.children)
    return out


def generic_alternative(ctx, node: cst.CSTNode, branch: cst.CSTNode) -> bool:
    """For an ``if``/conditional expression ``node`` that tests the torch version and one of its
    branches: True when the other branch already uses a device-generic API (``torch.Stream() if
    _is_torch_greater_or_equal_than_2_7 else torch.cuda.Stream()``): the CUDA branch is a fallback
    for an older torch, not code to migrate."""
    if not any(_VERSION_TEST.search(n) for n in names_in(node.test)):
        return False
    others = [b for b in (node.body, node.orelse) if b is not None and b is not branch]
    if any(q.startswith(_GENERIC) for b in others for q in _qnames_in(ctx, b)):
        return True
    # `self.stream if _torch_2_7 else torch.cuda.stream(self.stream)`: the newer torch's branch needs
    # no CUDA name at all (an expression that is not a constant)
    return isinstance(node, cst.IfExp) and any(not names_cuda(ctx, b) and not _constant(b) for b in others)


#: The first torch release with ``torch.accelerator``.
ACCELERATOR_RELEASE = (2, 6)
_RELEASE = re.compile(r"(\d+)\.(\d+)")


def _release(node) -> Optional[tuple]:
    """``(major, minor)`` of the version literal in ``node``: ``"2.4"``, ``version.parse("2.4.0")``, ``(2, 4)``."""
    if isinstance(node, cst.Tuple) and len(node.elements) >= 2:
        parts = [e.value for e in node.elements[:2]]
        if all(isinstance(p, cst.Integer) for p in parts):
            return int(parts[0].value), int(parts[1].value)
        return None
    for name in names_in(node):
        m = _RELEASE.match(name)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


#: A flag named for a torch release (``WITH_PT24``, ``TORCH_2_4``, ``is_torch_greater_or_equal_than_2_4``,
#: ``_TORCH_LESS_THAN_2_4``): the release, and whether the flag is true on the older torches.
_VERSION_FLAG = re.compile(r"(?:^|_)(?:pt|torch)(?:_?[a-z]+)*?_?(\d)_?(\d{1,2})$", re.I)
_OLDER_WORDS = re.compile(r"(?:^|_)(?:less|lt|older|before|below|pre)(?:_|$)", re.I)


def _version_flag_branch(test, node, branch) -> bool:
    """``test`` is a torch-version flag (``not`` allowed) for a release no newer than 2.6 and ``branch``
    the side of ``node`` that runs where the flag says the torch is older."""
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        negated, test = not negated, test.expression
    name = test.attr.value if isinstance(test, cst.Attribute) else test.value if isinstance(test, cst.Name) else ""
    m = _VERSION_FLAG.search(name)
    if m is None or (int(m.group(1)), int(m.group(2))) > ACCELERATOR_RELEASE:
        return False
    older_when_true = (_OLDER_WORDS.search(name) is not None) != negated
    return branch is (node.body if older_when_true else node.orelse)


def old_torch_branch(ctx, node: cst.CSTNode, branch: cst.CSTNode) -> bool:
    """``branch`` of the ``if``/conditional expression ``node`` is taken only on a torch older than
    :data:`ACCELERATOR_RELEASE`: ``node`` tests the torch version (``torch.__version__``, ``TORCH_VERSION``,
    ``version.parse(torch.__version__)``) against a release no newer than 2.6, and ``branch`` is the body of
    ``<``/``<=`` or the ``else`` of ``>=``/``>``; or ``node`` tests a flag named for such a release
    (``'device' if WITH_PT24 else 'cuda'``, torch_geometric 2.8.1) and ``branch`` is the side for older torches."""
    test = node.test
    if _version_flag_branch(test, node, branch):
        return True
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    left = [n.lower() for n in names_in(test.left)]
    if not any("version" in n for n in left) or not any("torch" in n for n in left):
        return False
    release = _release(test.comparisons[0].comparator)
    if release is None or release > ACCELERATOR_RELEASE:
        return False
    op = test.comparisons[0].operator
    if isinstance(op, (cst.LessThan, cst.LessThanEqual)):
        return branch is node.body and (release < ACCELERATOR_RELEASE or isinstance(op, cst.LessThan))
    if isinstance(op, (cst.GreaterThanEqual, cst.GreaterThan)):
        return branch is node.orelse and (release < ACCELERATOR_RELEASE or isinstance(op, cst.GreaterThanEqual))
    return False


def _constant(node) -> bool:
    return (
        isinstance(node, (cst.SimpleString, cst.Integer, cst.Float))
        or isinstance(node, cst.Name)
        and node.value in ("None", "True", "False")
    )


def _qnames(ctx, node):
    return [q for n in walk_in_scope(node) if isinstance(n, (cst.Attribute, cst.Name)) for q in [ctx.qname(n)] if q]


def _handler_names(handler: cst.ExceptHandler) -> set:
    t = handler.type
    elements = [e.value for e in t.elements] if isinstance(t, cst.Tuple) else [t]
    return {e.value if isinstance(e, cst.Name) else "" for e in elements}


def api_fallback_handler(ctx, handler: cst.ExceptHandler, try_node: cst.Try) -> bool:
    """``handler`` catches only missing-API errors after a ``try`` body that calls a torch API and
    names no CUDA."""
    if handler.type is None or not _handler_names(handler) <= _API_ERRORS:
        return False
    if names_cuda(ctx, try_node.body) or any("cuda" in q.split(".") for q in _qnames(ctx, try_node.body)):
        return False
    return any(q.startswith("torch.") for q in _qnames(ctx, try_node.body))


def _smalls(block) -> list:
    """The small statements of the simple statement lines of ``block``."""
    return [small for s in block.body if isinstance(s, cst.SimpleStatementLine) for small in s.body]


def _optional_torch_names(ctx) -> set:
    """Names a module-level ``try: from torch... import N / except ImportError: N = None`` binds."""
    out = set()
    for stmt in ctx.module.body:
        if not isinstance(stmt, cst.Try):
            continue
        imported = set()
        for small in _smalls(stmt.body):
            if (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and not small.relative
                and ctx.code(small.module).split(".")[0] == "torch"
                and not isinstance(small.names, cst.ImportStar)
            ):
                imported.update((a.asname.name.value if a.asname else ctx.code(a.name)) for a in small.names)
        for h in stmt.handlers:
            for small in _smalls(h.body):
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) and small.value.value == "None":
                    out.update(
                        t.target.value
                        for t in small.targets
                        if isinstance(t.target, cst.Name) and t.target.value in imported
                    )
    return out


def _none_test(test, names: set) -> Optional[str]:
    """``"is"`` for ``<name> is None``, ``"is not"`` for ``<name> is not None`` (a name of ``names``)."""
    if (
        not isinstance(test, cst.Comparison)
        or len(test.comparisons) != 1
        or not isinstance(test.left, cst.Name)
        or test.left.value not in names
    ):
        return None
    c = test.comparisons[0]
    if not (isinstance(c.comparator, cst.Name) and c.comparator.value == "None"):
        return None
    return "is" if isinstance(c.operator, cst.Is) else "is not" if isinstance(c.operator, cst.IsNot) else None


def optional_import_fallback(a, child, names: set) -> bool:
    """``child`` (a child of ``a``) is the old-torch side of a test of an optional torch name."""
    if isinstance(a, (cst.If, cst.IfExp)):
        kind = _none_test(a.test, names)
        return kind == "is" and child is a.body or kind == "is not" and child is a.orelse
    if isinstance(a, (cst.IndentedBlock, cst.Module)):
        for s in a.body:
            if s is child:
                return False
            if (
                isinstance(s, cst.If)
                and s.orelse is None
                and _none_test(s.test, names) == "is not"
                and block_exits(s.body)
            ):
                return True
    return False


def _branches(view, i: int) -> list:
    """``(ancestor, child)`` pairs on the way to the finding from ``view.ancestors[i]``: one pair, or, from the
    last ancestor (a statement), every pair of the expressions below it down to the finding's node (a literal
    that is a branch of a conditional expression, ``'device' if WITH_PT24 else 'cuda'``)."""
    a, child = view.ancestors[i], view.child(i)
    if child is not None:
        return [(a, child)]
    full = view.full
    k = next((j for j, n in enumerate(full) if n is a), len(full))
    return list(path_pairs(full[k:]))


# ----------------------------------------------------------------------------- registered exemptions
@exemption(
    "old-torch fallback in an exception handler",
    scope=STEP,
    group="paths",
    code="NM503",
    quiet=(
        "import torch\ndef scaler(d):\n    try:\n        return torch.amp.GradScaler(device=d)\n"
        "    except (AttributeError, TypeError):\n        return torch.cuda.amp.GradScaler()\n"
    ),
    near_miss=(
        "import torch\ndef scaler(d):\n    try:\n        return torch.amp.GradScaler(device=d)\n"
        "    except RuntimeError:\n        return torch.cuda.amp.GradScaler()\n"
    ),
)
def _api_fallback_handler(view, i: int) -> bool:
    """The body of a handler that catches only missing-API errors after a ``try`` body calling a torch
    API that names no CUDA (:func:`api_fallback_handler`)."""
    a, child = view.full[i], view.full[i + 1]
    if not (isinstance(a, cst.ExceptHandler) and child is a.body):
        return False
    parent = view.ctx.parent(a)
    return isinstance(parent, cst.Try) and api_fallback_handler(view.ctx, a, parent)


@exemption(
    "old-torch fallback after an optional import",
    scope=STEP,
    group="paths",
    code="NM503",
    quiet=(
        "import torch\ntry:\n    from torch.amp import GradScaler\nexcept ImportError:\n"
        "    GradScaler = None\ndef scaler():\n    if GradScaler is None:\n"
        "        return torch.cuda.amp.GradScaler()\n    return GradScaler('cuda')\n"
    ),
    near_miss=(
        "import torch\ntry:\n    from apex import GradScaler\nexcept ImportError:\n"
        "    GradScaler = None\ndef scaler():\n    if GradScaler is None:\n"
        "        return torch.cuda.amp.GradScaler()\n    return GradScaler()\n"
    ),
)
def _optional_import_fallback(view, i: int) -> bool:
    """The old-torch side of a test of a name imported from torch that may be None
    (:func:`optional_import_fallback`)."""
    optional = view.memo("optional torch names", lambda: _optional_torch_names(view.ctx))
    return bool(optional) and optional_import_fallback(view.full[i], view.full[i + 1], optional)


@exemption(
    "old-torch fallback beside a device-generic branch",
    scope=ANCESTOR,
    code="NM202",
    quiet="import torch\nTORCH_2_7 = True\ns = torch.Stream() if TORCH_2_7 else torch.cuda.Stream()\n",
    near_miss="import torch\ns = torch.Stream() if flag else torch.cuda.Stream()\n",
)
def _generic_alternative(view, i: int) -> bool:
    """A branch of a torch-version test whose other branch already uses a device-generic API
    (:func:`generic_alternative`)."""
    return any(
        view.memo(("generic", id(a), id(child)), lambda: generic_alternative(view.ctx, a, child))
        for a, child in _branches(view, i)
        if isinstance(a, (cst.If, cst.IfExp)) and child is not a.test
    )


@exemption(
    "branch for a torch without torch.accelerator",
    scope=ANCESTOR,
    code="NM103",
    quiet='import torch\nif torch.__version__ < "2.4":\n    n = torch.cuda.device_count()\n',
    near_miss='import torch\nif torch.__version__ < "2.8":\n    n = torch.cuda.device_count()\n',
)
def _old_torch_branch(view, i: int) -> bool:
    """The branch of a torch-version test taken only on a torch older than 2.6 (:func:`old_torch_branch`)."""
    return any(
        view.memo(("old torch", id(a), id(child)), lambda: old_torch_branch(view.ctx, a, child))
        for a, child in _branches(view, i)
        if isinstance(a, (cst.If, cst.IfExp)) and child is not a.test
    )
