"""Code without effect off CUDA: CUDA code that does nothing on another accelerator and has nothing to
migrate to.

Each shape is told by the code's structure; each has a quiet example and a near miss that is still
reported (``tests/migrate/test_exemption_no_effect.py``).

1. **CUDA seeding already done by ``torch.manual_seed``** (:func:`redundant_seed`):
   ``torch.cuda.manual_seed(s)`` / ``manual_seed_all(s)`` in a block nested below a statement
   ``torch.manual_seed(s)`` (same argument text, the name not reassigned in between, same function):
   ``if device.type == "cuda": torch.cuda.manual_seed(seed)``, or the ``else:`` of a per-vendor
   seeding chain. ``torch.manual_seed`` seeds every device's generator (torch 2.13
   ``torch/random.py`` ``manual_seed``: ``torch.cuda.manual_seed_all`` unless in a bad fork, then
   MPS, XPU, MTIA and the PrivateUse1 backend), so the call changes nothing and
   NM402's advice ("replace with ``torch.manual_seed``") is already followed. A call in the *same*
   block stays NM401 (its safe fix deletes it: there the call is redundant code to remove). The same
   call with no earlier ``torch.manual_seed``, with another seed, or after the seed was reassigned is
   still reported.
2. **CUDA-graph step markers** (:data:`MARKERS`): ``torch.compiler.cudagraph_mark_step_begin()`` only
   decrements a counter of the CUDA-graph trees (torch 2.13 ``torch/compiler/__init__.py`` calls
   ``torch._inductor.cudagraph_trees.mark_step_begin``: ``MarkStepBox.mark_step_counter -= 1``): no
   CUDA call, no effect without a CUDA-graph compiled function, nothing device-generic to use instead.
   The NM703 rule no longer reports it; the compile modes and options that turn CUDA graphs on
   (NM702, ``"triton.cudagraphs"``) still are.
3. **A guard of nothing** (:func:`guards_no_effect`): the test of an ``if`` without ``else`` whose
   body holds only markers and redundant seeds (``if torch.cuda.is_available() and compiled:
   torch._inductor.cudagraph_mark_step_begin()``): widening the test changes nothing. A body with
   any other statement keeps the test reported.
4. **Setting ``CUDA_LAUNCH_BLOCKING``** (:func:`sets_launch_blocking`): ``os.environ[...] = "1"``,
   ``os.environ.setdefault(...)``, ``putenv``/``setenv`` or an ``env`` dict key. The variable is read
   by the CUDA runtime only (CUDA C Programming Guide, "CUDA Environment Variables": it disables
   asynchronous kernel launches, a debugging switch); setting it is a no-op elsewhere and torch has no
   device-generic counterpart to migrate to. ``CUDA_VISIBLE_DEVICES`` (device selection: off CUDA the
   process sees every device) and reads of ``CUDA_LAUNCH_BLOCKING`` that decide something are still
   reported.
5. **A check that only raises on CUDA** (:func:`raises_only_on_cuda`): ``if device.type == "cuda":
   raise ValueError(...)``: the test adds a clearer error where CUDA was expected to work; on
   another accelerator the code goes on as it would without the test. A test that selects a
   behaviour (any body other than a single ``raise``), and ``!= "cuda"`` (a device whitelist that
   refuses the other accelerators), are still reported.

6. **A cuDNN flag beside its device-generic counterpart** (:func:`cudnn_flag_beside_generic`): setting
   ``torch.backends.cudnn.deterministic`` / ``benchmark`` after a statement
   ``torch.use_deterministic_algorithms(...)`` or ``torch.set_deterministic_debug_mode(...)``, or
   ``torch.backends.cudnn.allow_tf32`` after ``torch.set_float32_matmul_precision(...)``, in an enclosing
   block of the same function, when the two agree: literal values asking for the same thing
   (``use_deterministic_algorithms(True)`` with ``deterministic = True`` or ``benchmark = False``), or the
   flag set under an ``if`` that reads what the generic call was given (``if precision == "highest":``) or a
   determinism query (``torch.get_deterministic_debug_mode()``). The generic call already makes the choice
   for every device (NM801's advice is followed); the cuDNN flag adds cuDNN's own knob, which does nothing
   elsewhere. Still reported: the flag alone, read rather than set, set against the generic call
   (``use_deterministic_algorithms(False)`` with ``deterministic = True``), in another branch or function
   than the generic call, or a literal flag beside a generic call given a variable, and ``cudnn.enabled``.

Public API: :func:`redundant_seed`, :func:`guards_no_effect`, :func:`sets_launch_blocking`,
:func:`raises_only_on_cuda`, :func:`cudnn_flag_beside_generic`, :data:`MARKERS`; the registered exemptions
below.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_conformance.migrate.args import int_literal, string_value
from neuron_conformance.migrate.exemptions.cuda_tests import positive
from neuron_conformance.migrate.exemptions.names import path_pairs
from neuron_conformance.migrate.exemptions.registry import FINDING, STEP, exemption
from neuron_conformance.migrate.rules._common import string_use
from neuron_conformance.migrate.traversal import and_operands, walk_in_scope

#: CUDA-graph step markers (item 2).
MARKERS = frozenset({"torch.compiler.cudagraph_mark_step_begin", "torch._inductor.cudagraph_mark_step_begin"})
_GENERIC_SEED = frozenset({"torch.manual_seed", "torch.random.manual_seed"})
_CUDA_SEED = frozenset({"torch.cuda.manual_seed", "torch.cuda.manual_seed_all"})
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_ENV_SETTERS = frozenset({"setdefault", "putenv", "setenv"})
_DETERMINISM = frozenset({"torch.use_deterministic_algorithms", "torch.set_deterministic_debug_mode"})
#: cuDNN flag -> the device-generic calls that make the same choice for every device (item 6).
GENERIC_COUNTERPARTS = {
    "torch.backends.cudnn.deterministic": _DETERMINISM,
    "torch.backends.cudnn.benchmark": _DETERMINISM,
    "torch.backends.cudnn.allow_tf32": frozenset({"torch.set_float32_matmul_precision"}),
}


def _statement_call(stmt) -> Optional[cst.Call]:
    """The call of a statement that is one call expression (``f(x)``), else None."""
    if (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.Call)
    ):
        return stmt.body[0].value
    return None


def _assigns(stmt, name: str) -> bool:
    """``stmt`` (any statement) binds ``name`` somewhere (an assignment, ``for`` or ``with`` target)."""
    stack = [stmt]
    while stack:
        cur = stack.pop()
        if isinstance(cur, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.AsName, cst.NamedExpr)):
            target = cur.target if not isinstance(cur, cst.AsName) else cur.name
            if isinstance(target, cst.Name) and target.value == name:
                return True
        if not isinstance(cur, _SCOPES):
            stack.extend(cur.children)
    return False


def _blocks_before(path: list):
    """For each block enclosing the last node of ``path`` (module first) within its function, innermost
    first: ``(index of the block in path, the block's statement holding the node, the statements before it)``."""
    for i in range(len(path) - 2, -1, -1):
        block, stmt = path[i], path[i + 1]
        if isinstance(block, _SCOPES):
            return
        if not isinstance(block, (cst.IndentedBlock, cst.Module)):
            continue
        before = []
        for s in block.body:
            if s is stmt:
                break
            before.append(s)
        yield i, stmt, before


def redundant_seed(ctx, call: cst.Call, path: list) -> bool:
    """``call`` is ``torch.cuda.manual_seed(s)``/``manual_seed_all(s)`` below a statement
    ``torch.manual_seed(s)`` of an enclosing block in the same function (``path``: module first, the
    call's statement or the call last); item 1 of the module docstring."""
    if (
        not isinstance(call, cst.Call)
        or ctx.qname(call.func) not in _CUDA_SEED
        or len(call.args) != 1
        or call.args[0].star
        or call.args[0].keyword is not None
    ):
        return False
    seed = ctx.code(call.args[0].value)
    name = call.args[0].value.value if isinstance(call.args[0].value, cst.Name) else None
    for _, stmt, before in _blocks_before(path):
        if name is not None and _assigns(stmt, name):
            return False  # `for seed in seeds:` around the call
        for k in range(len(before) - 1, -1, -1):
            c = _statement_call(before[k])
            if (
                c is not None
                and ctx.qname(c.func) in _GENERIC_SEED
                and len(c.args) == 1
                and ctx.code(c.args[0].value) == seed
            ):
                return True
            if name is not None and _assigns(before[k], name):
                return False  # the seed changed after the last generic seeding
    return False


def _no_effect_statement(ctx, stmt, path: list) -> bool:
    call = _statement_call(stmt)
    if call is None:
        return False
    return ctx.qname(call.func) in MARKERS or redundant_seed(ctx, call, path + [stmt])


def guards_no_effect(ctx, node: cst.If, path: list) -> bool:
    """``node`` (an ``if`` without ``else``, ``path`` its ancestors, module first) has a body of
    markers and redundant seeds only (item 3)."""
    if node.orelse is not None or not isinstance(node.body, cst.IndentedBlock) or not node.body.body:
        return False
    inner = path + [node, node.body]
    return all(_no_effect_statement(ctx, s, inner) for s in node.body.body)


def sets_launch_blocking(ctx, node) -> bool:
    """``node`` is the string ``"CUDA_LAUNCH_BLOCKING"`` where the variable is set, not read (item 4)."""
    if not isinstance(node, cst.SimpleString) or string_value(node) != "CUDA_LAUNCH_BLOCKING":
        return False
    kind, where = string_use(ctx, node)
    if kind == "subscript":
        return isinstance(ctx.parent(where), (cst.AssignTarget, cst.Del))
    if kind == "key":
        return True  # an environment given to a process or a launcher: `env={"CUDA_LAUNCH_BLOCKING": "1"}`
    if kind == "arg":
        call = ctx.parent(where)
        return (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in _ENV_SETTERS
            and call.args
            and call.args[0] is where
        )
    return False


def raises_only_on_cuda(ctx, node: cst.If) -> bool:
    """``node`` tests only which device this is (``== "cuda"``, ``.is_cuda``, possibly ``and``-ed with
    other comparisons such as ``gen.device.type != device.type``) and its body is one ``raise``
    (item 5). A test that also asks something else (``and not peer_access()``) is not: off CUDA the
    same condition may hold and the code goes on unguarded."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    if (
        len(body) != 1
        or not isinstance(body[0], cst.SimpleStatementLine)
        or len(body[0].body) != 1
        or not isinstance(body[0].body[0], cst.Raise)
    ):
        return False
    ops = and_operands(node.test)
    if not all(
        isinstance(o, cst.Comparison) or isinstance(o, cst.Attribute) and o.attr.value == "is_cuda" for o in ops
    ):
        return False
    return positive(ctx, node.test)


_QUERIES = frozenset(
    {
        "torch.get_deterministic_debug_mode",
        "torch.are_deterministic_algorithms_enabled",
        "torch.get_float32_matmul_precision",
    }
)
_DEBUG_MODE_ON = {0: False, 1: True, 2: True, "default": False, "warn": True, "error": True}
_TF32_ON = {"highest": False, "high": True, "medium": True}


def _literal(node) -> object:
    """The value of a ``True``/``False``/integer/string literal, else None."""
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    number = int_literal(node)
    return number if number is not None else string_value(node)


def _generic_choice(ctx, call: cst.Call) -> Optional[bool]:
    """What a generic call turns on (determinism, or TF32 for the matmul precision), None when its argument
    is not a literal."""
    if not call.args:
        return None
    value = _literal(call.args[0].value)
    q = ctx.qname(call.func)
    if q == "torch.use_deterministic_algorithms":
        return value if isinstance(value, bool) else None
    table = _DEBUG_MODE_ON if q == "torch.set_deterministic_debug_mode" else _TF32_ON
    return table.get(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def _flag_choice(flag: str, value) -> Optional[bool]:
    """What setting ``flag`` to the literal ``value`` asks for, in the generic call's terms (``benchmark`` =
    autotuning = determinism off)."""
    if not isinstance(value, bool):
        return None
    return not value if flag.endswith(".benchmark") else value


def _decided_by(ctx, path: list, call: cst.Call, scope) -> bool:
    """The flag's statement is under an ``if`` whose test reads what the generic ``call`` was given (a name of
    its arguments), a determinism or precision query, or a name assigned from one in ``scope``."""
    names = {n.value for a in call.args for n in walk_in_scope(a.value) if isinstance(n, cst.Name)}
    for node in walk_in_scope(scope):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and ctx.qname(node.value.func) in _QUERIES:
            names |= {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
    for a, child in path_pairs(path):
        if isinstance(a, cst.If) and child is not a.test:
            test = list(walk_in_scope(a.test))
            if any(isinstance(n, cst.Name) and n.value in names for n in test) or any(
                isinstance(n, cst.Call) and ctx.qname(n.func) in _QUERIES for n in test
            ):
                return True
    return False


def cudnn_flag_beside_generic(ctx, node: cst.CSTNode, path: list) -> bool:
    """``node`` is a cuDNN flag of :data:`GENERIC_COUNTERPARTS` being set, after a statement calling one of its
    device-generic counterparts in an enclosing block of the same function (or module), and the two agree:
    both literal and asking for the same thing, or the flag's statement decided by what the generic call was
    given (:func:`_decided_by`); item 6. ``path``: module first, the node last."""
    flag = ctx.qname(node) or ""
    counterparts = GENERIC_COUNTERPARTS.get(flag)
    assign = path[-3] if len(path) >= 3 else None
    if not counterparts or not (isinstance(assign, cst.Assign) and isinstance(path[-2], cst.AssignTarget)):
        return False
    wanted = _flag_choice(flag, _literal(assign.value))
    for i, _, before in _blocks_before(path):
        scope = next((a for a in reversed(path[: i + 1]) if isinstance(a, (cst.FunctionDef, cst.Module))), None)
        for s in before:
            c = _statement_call(s)
            if c is None or ctx.qname(c.func) not in counterparts:
                continue
            chosen = _generic_choice(ctx, c)
            if chosen is not None and wanted is not None:
                return chosen == wanted
            return _decided_by(ctx, path, c, scope)
    return False


# ----------------------------------------------------------------------------- registered exemptions
@exemption(
    "CUDA seeding after torch.manual_seed",
    scope=FINDING,
    code="NM402",
    quiet=(
        "import torch\ndef reseed(s, device):\n    torch.manual_seed(s)\n"
        "    if device.type == 'cuda':\n        torch.cuda.manual_seed(s)\n"
    ),
    near_miss=(
        "import torch\ndef reseed(s, device):\n    if device.type == 'cuda':\n        torch.cuda.manual_seed(s)\n"
    ),
)
def _redundant_seed(view) -> bool:
    """``torch.cuda.manual_seed(s)`` below ``torch.manual_seed(s)`` (:func:`redundant_seed`): the generic
    call already seeded every device."""
    return view.code == "NM402" and redundant_seed(view.ctx, view.node, view.full)


@exemption(
    "setting CUDA_LAUNCH_BLOCKING",
    scope=FINDING,
    code="NM807",
    quiet="import os\nos.environ['CUDA_LAUNCH_BLOCKING'] = '1'\n",
    near_miss="import os\nSYNC = os.environ.get('CUDA_LAUNCH_BLOCKING') == '1'\n",
)
def _sets_launch_blocking(view) -> bool:
    """``"CUDA_LAUNCH_BLOCKING"`` where the variable is set (:func:`sets_launch_blocking`): read by the
    CUDA runtime only, a no-op elsewhere."""
    return view.code == "NM807" and sets_launch_blocking(view.ctx, view.node)


@exemption(
    "cuDNN flag beside its generic counterpart",
    scope=FINDING,
    code="NM801",
    quiet=(
        "import torch\ndef deterministic():\n    torch.use_deterministic_algorithms(True)\n"
        "    torch.backends.cudnn.benchmark = False\n"
    ),
    near_miss="import torch\ndef deterministic():\n    torch.backends.cudnn.benchmark = False\n",
)
def _cudnn_flag_beside_generic(view) -> bool:
    """A cuDNN flag set where its device-generic counterpart is called too (:func:`cudnn_flag_beside_generic`):
    the generic call already decides for every device."""
    return view.code == "NM801" and cudnn_flag_beside_generic(view.ctx, view.node, view.full)


@exemption(
    "check that only raises on CUDA",
    scope=STEP,
    group="no effect",
    code="NM111",
    quiet=(
        "import torch\ndef f(x):\n    if x.device.type == 'cuda':\n"
        "        raise ValueError('use the CPU path')\n    return x\n"
    ),
    near_miss=("import torch\ndef f(x):\n    if x.device.type == 'cuda':\n        x = x.half()\n    return x\n"),
)
def _raises_only_on_cuda(view, i: int) -> bool:
    """The test of ``if <device is CUDA>: raise ...`` (:func:`raises_only_on_cuda`): on another accelerator
    the code goes on as it would without the test."""
    a = view.full[i]
    return isinstance(a, cst.If) and view.full[i + 1] is a.test and raises_only_on_cuda(view.ctx, a)


@exemption(
    "guard of nothing",
    scope=STEP,
    group="no effect",
    code="NM101",
    quiet=(
        "import torch\ndef step(compiled):\n    if torch.cuda.is_available() and compiled:\n"
        "        torch._inductor.cudagraph_mark_step_begin()\n"
    ),
    near_miss=(
        "import torch\ndef step(compiled):\n    if torch.cuda.is_available() and compiled:\n"
        "        torch._inductor.cudagraph_mark_step_begin()\n        print('step')\n"
    ),
)
def _guards_no_effect(view, i: int) -> bool:
    """The test of an ``if`` whose body holds only CUDA-graph step markers and redundant seeds
    (:func:`guards_no_effect`): widening it changes nothing."""
    a = view.full[i]
    return isinstance(a, cst.If) and view.full[i + 1] is a.test and guards_no_effect(view.ctx, a, view.full[:i])
