"""What a widened availability guard makes reachable, and how far that code is fixed.

Rewriting ``torch.cuda.is_available()`` to ``torch.accelerator.is_available()`` makes the code it
guards run on every accelerator, not only on CUDA. Such a fix is allowed only when everything it
makes reachable is fixed in the same applicability tier or is already device-generic (a fix never breaks code that ran):
``if args.gpu is not None and torch.cuda.is_available(): x = x.cuda(args.gpu)`` may be widened
under ``--fix --unsafe-fixes`` (where the ``.cuda(args.gpu)`` call is rewritten too), not under
``--fix`` alone, and never while a CUDA-only call or a ``"cuda"`` literal no rule rewrites stays.

The *region* of a guard call is the smallest construct whose behaviour its value decides: the
``if``/``elif``/``while`` statement or the conditional expression whose test contains the call
(through ``and``/``or``/``not``, comparisons such as ``torch.cuda.device_count() > 1``, and
parentheses), else the outermost boolean operation around it
(``ok = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)``). A call
used on its own (``use_cuda = torch.cuda.is_available()``) has no region: the code that reads
the flag cannot be seen, and NM101 says so with its own (unsafe) applicability; a case of a test
parametrization reaches the body of the test it parametrizes. The region of a
negated early exit (``if not torch.cuda.is_available(): return x``) also holds the statements after it
in its block: they run exactly when the guard holds.

Values flow (as in ultralytics 8.4.190): a region stored in a
name (``cuda = torch.cuda.is_available()``, ``gpu = torch.cuda.get_device_name(0) if ... else "GPU"``)
also reaches the later statements of its block that read the name, and a region reads the values of
the names assigned before it in its function (``visible = cvd[:torch.cuda.device_count()]`` reads
``cvd = os.environ.get("CUDA_VISIBLE_DEVICES")``). A value fix (``device_count``, ``current_device``,
``get_device_name``) has its statement's expression as its region (:func:`value_region`): another
vendor's count must not be combined with CUDA's visible-device list or printed under a CUDA label.
Code that stays CUDA-specific besides the names and literals above: text naming CUDA or a CUDA-only
component (``"... while CUDA is available"``, ``"NVML init failed"``, ``f"{gpu} TensorRT"``), a
requirement on a CUDA build of a package (``"paddlepaddle-gpu>=3"``, ``"onnxruntime-gpu"``), a call
of a helper named for GPUs or CUDA outside torch (``get_gpu_info(0)``, ``config.enable_use_gpu()``),
and a bare index stored as a device (``args.device = "0"``: in such code a digit string is a CUDA
index).

Public API: :func:`guard_region`, :func:`value_region`, :func:`region_limit`, :func:`worst`. Used by
:mod:`neuron_conformance.migrate.rule_pass`, which collects the applicability of every finding in a read-only pass
before deciding any guard.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Set, Tuple

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.exemptions.names import name_words
from neuron_conformance.migrate.rule import REPORT, SAFE, UNSAFE
from neuron_conformance.migrate.traversal import walk_in_scope

_RANK = {SAFE: 0, UNSAFE: 1, REPORT: 2}

#: Qualified-name prefixes that are CUDA-specific whether or not a rule reports them.
_CUDA_NAMES = (
    "torch.cuda.",
    "torch.backends.cudnn",
    "torch.backends.cuda",
    "torch.version.cuda",
    "torch.utils.cpp_extension",
)
_CUDA_LITERAL = re.compile(r"cuda(:\d+)?|nccl")  # a device string, or the CUDA-only collective backend
#: Text naming CUDA or a CUDA-only component (a message that is false on another accelerator).
_CUDA_TEXT = re.compile(r"(?<![\w-])(cuda|nvidia|nvml|pynvml|nvidia-smi|tensorrt|cudnn|nccl)(?![\w-])", re.I)
#: A requirement on a CUDA build of a package (``paddlepaddle-gpu>=3``, ``cupy-cuda12x``, ``tensorrt-cu12``).
_CUDA_BUILD = re.compile(r"^[A-Za-z0-9_.]+-(gpu|cuda\w*|cu\d+\w*)(?![\w-])")
#: Words of a helper's name that make it CUDA-specific (``get_gpu_info``, ``enable_use_gpu``).
_GPU_WORDS = frozenset({"gpu", "gpus", "cuda", "nvml", "nvidia", "tensorrt", "trt"})
_BARE_INDEX = re.compile(r"\d+(,\d+)*")
#: A scheduler's GPU request: Ray's ``num_gpus``, an old Lightning's ``gpus=``, ``n_gpu``, ``gpus_per_node``.
_GPU_REQUEST = re.compile(r"(num_|n_)?gpus?(_per_\w+)?$", re.I)
_STATEMENT = (
    cst.BaseSmallStatement,
    cst.BaseCompoundStatement,
    cst.SimpleStatementLine,
    cst.IndentedBlock,
    cst.Module,
    cst.Lambda,
    cst.CompFor,
)


def worst(a: str, b: str) -> str:
    """The less applicable of two applicabilities (``safe`` < ``unsafe`` < ``report``)."""
    return a if _RANK[a] >= _RANK[b] else b


def guard_region(ctx, call: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The region (see the module docstring) of the availability call ``call``, or None.

    Args:
        ctx: the pass's :class:`neuron_conformance.migrate.context.Context` (for :meth:`~Context.parent`).
        call: the ``torch.cuda.is_available()`` call node.
    Returns:
        an ``If``, ``While``, ``IfExp`` or ``BooleanOperation`` node containing ``call``, or None.
    """
    child, cur = call, ctx.parent(call)
    outer_bool = None
    positive = True  # the test is true more often once widened: under no `not` and no comparison
    while isinstance(cur, (cst.BooleanOperation, cst.UnaryOperation, cst.Comparison, cst.ComparisonTarget)):
        if isinstance(cur, cst.BooleanOperation):
            outer_bool = cur
        else:
            positive = False
        child, cur = cur, ctx.parent(cur)
    if isinstance(cur, cst.If) and cur.test is child and positive and cur.orelse is not None:
        # widened, the test holds in more places, so its `else` runs in fewer: nothing there is newly reached
        ctx.rule_state("reach narrowed", set).add(id(cur.orelse))
    if isinstance(cur, (cst.If, cst.While, cst.IfExp)) and cur.test is child:
        return _remember(ctx, cur)
    return _remember(ctx, outer_bool) if outer_bool is not None else None


_STOP = (cst.If, cst.While, cst.For, cst.With, cst.FunctionDef, cst.ClassDef, cst.DictElement, cst.Element)


def _climb(path: list, i: int) -> int:
    """The index in ``path`` of the outermost expression around ``path[i]`` within its statement (not
    beyond a ``lambda``, a comprehension's ``for`` or an element of a list, tuple, set or dict display:
    an element is a value of its own, ``{"GPU": ..., "GPU count": <value>}``)."""
    while i > 0 and not isinstance(path[i - 1], _STATEMENT) and not isinstance(path[i - 1], _STOP):
        i -= 1
    return i


def _remember(ctx, region: cst.CSTNode) -> cst.CSTNode:
    """Keep the ancestors of ``region`` (from the pass's stack, while it is being visited) for :func:`_flow`,
    which runs after the walk: asking :meth:`~Context.parent` then would build a parent map of the file."""
    anc = ctx.ancestors
    for i in range(len(anc) - 1, -1, -1):
        if anc[i] is region:
            ctx.rule_state("reach paths", dict)[id(region)] = anc[: i + 1]
            break
    return region


def value_region(ctx, call: cst.CSTNode) -> cst.CSTNode:
    """The region of a value fix: the outermost expression around ``call`` within its statement
    (:func:`_climb`), asked while ``call`` is being visited."""
    anc = ctx.ancestors
    for i in range(len(anc) - 1, -1, -1):
        if anc[i] is call:
            return _remember(ctx, anc[_climb(anc, i)])
    return call


def _bare_index(ctx, node: cst.SimpleString, value: str, parent) -> bool:
    """``args.device = "0"``, ``f(device="0,1")``: a digit string stored or passed as a device."""
    if not _BARE_INDEX.fullmatch(value):
        return False
    if isinstance(parent, cst.Arg):
        return parent.keyword is not None and "device" in parent.keyword.value
    if isinstance(parent, cst.Assign) and parent.value is node:
        return any("device" in ctx.code(t.target).split(".")[-1] for t in parent.targets)
    return False


#: Keywords whose string is documentation of a command-line option or parser (argparse, click).
_DOC_KEYWORDS = frozenset({"help", "description", "epilog", "usage"})


def _marker(ctx, node: cst.CSTNode, parent=None) -> bool:
    """True for code that is CUDA-specific even when no rule reports it: a ``torch.cuda.*`` or
    cuDNN/``torch.version.cuda``/extension name, a ``.cuda(...)`` method call, a ``"cuda"``,
    ``"cuda:N"`` or ``"nccl"`` literal; text naming CUDA or a CUDA-only component, a CUDA-build
    requirement, a helper named for GPUs outside torch, a bare index stored as a device (module docstring)."""
    if isinstance(node, cst.SimpleString):
        if isinstance(parent, cst.Arg) and parent.keyword is not None and parent.keyword.value in _DOC_KEYWORDS:
            return False  # an option's help text (`help="disables CUDA training"`) documents; it decides nothing
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)) and string_value(node) == "nccl":
            return False  # `backend == "nccl"` asks which backend was chosen; it starts no NCCL
        value = string_value(node)  # None for bytes and odd literals: not a device string
        return value is not None and (
            _CUDA_LITERAL.fullmatch(value) is not None
            or _CUDA_TEXT.search(value) is not None
            or _CUDA_BUILD.match(value) is not None
            or _bare_index(ctx, node, value, parent)
        )
    if isinstance(node, cst.FormattedStringText):
        return _CUDA_TEXT.search(node.value) is not None or _CUDA_BUILD.match(node.value) is not None
    if isinstance(node, cst.Call):
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name == "cuda" and isinstance(func, cst.Attribute):
            return ctx.qname(func) is None
        q = ctx.qname(func)
        return bool(name_words(name) & _GPU_WORDS) and not (q or "").startswith("torch.")
    if isinstance(node, cst.Attribute):
        q = ctx.qname(node)
        return q is not None and q.startswith(_CUDA_NAMES)
    return False


def _nccl_gate(test: cst.CSTNode) -> bool:
    """``test`` requires the NCCL backend (``args.dist_backend == "nccl"``, also ``and``-ed with other tests): its
    body runs only where NCCL was chosen, whichever accelerator a widened guard admits."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _nccl_gate(test.left) or _nccl_gate(test.right)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        return isinstance(target.operator, (cst.Equal, cst.In)) and "nccl" in (
            string_value(test.left),
            string_value(target.comparator),
        )
    return False


def region_limit(ctx, region: cst.CSTNode, applicability: Dict[int, str], guards: Set[int]) -> Tuple[str, str]:
    """The best applicability a guard over ``region`` may have, and why when it is not ``safe``.

    Args:
        ctx: the pass's context (qualified names, source text of nodes).
        region: a node returned by :func:`guard_region`.
        applicability: id(node) -> applicability of every finding of the read-only pass
            (``report`` for findings that are suppressed or have no fix).
        guards: ids of the guard calls themselves (neither counted nor treated as CUDA code).
    Returns:
        ``(applicability, reason)``: the worst applicability of the findings inside ``region``,
        ``report`` when CUDA-specific code no finding covers is there; ``reason`` names the first
        node that limits it ("" when ``safe``).
    """
    limit, culprit = SAFE, None
    narrowed = ctx.rule_state("reach narrowed", set)
    stack = [(n, False, p) for n, p in reversed(_flow(ctx, region))] + [(region, False, None)]
    while stack:
        node, covered, parent = stack.pop()
        if id(node) in applicability:
            appl = applicability[id(node)]
            if _RANK[appl] > _RANK[limit]:
                limit, culprit = appl, node
            covered = True
        elif id(node) in guards:
            covered = True
        elif not covered and _marker(ctx, node, parent) and limit != REPORT:
            limit, culprit = REPORT, node
        children = node.children
        if node is region and isinstance(node, cst.If) and id(node.orelse) in narrowed:
            children = [node.test, node.body]
        if isinstance(node, cst.If) and _nccl_gate(node.test):
            children = [node.test] + ([node.orelse] if node.orelse is not None else [])
        stack.extend((c, covered, node) for c in reversed(children))
    gpus = _requested_as_gpus(ctx, region)
    if gpus is not None and limit != REPORT:
        return REPORT, (
            f"not fixed: its value is passed as `{ctx.code(gpus)}`, a request for GPUs "
            "that other accelerators do not offer under that name"
        )
    if culprit is None:
        return SAFE, ""
    snippet = " ".join(ctx.code(culprit).split())
    if len(snippet) > 60:
        snippet = snippet[:57] + "..."
    if limit == UNSAFE:
        return limit, f"fixed only with --unsafe-fixes: {_what(ctx, region)} reaches `{snippet}`, whose fix is unsafe"
    return limit, f"not fixed: {_what(ctx, region)} reaches `{snippet}`, which stays CUDA-specific"


def places_values(region: cst.CSTNode) -> bool:
    """``region`` (a guard's) moves or creates values on a device: a ``.cuda(...)``/``.to(...)`` call, a
    ``device=``/``map_location=`` argument, ``torch.device(...)``, a ``"cuda"`` string or the ``DEVICE_TYPE``
    constant an earlier fix pass wrote, or a name or call assigned there (a device
    picked for later code). A guard over ``torch.cuda.synchronize()`` or an NVTX range places nothing, so it
    is not tied to the file's other device choices (``rule_pass.RulePass._floor``)."""
    for node in walk_in_scope(region):
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in ("cuda", "to", "device")
        ):
            return True  # `.cuda()`, `.to(...)`, `torch.device(...)`
        if isinstance(node, cst.Name) and node.value == "DEVICE_TYPE":
            return True  # a device string rewritten by an earlier fix pass
        if isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value in ("device", "map_location"):
            return True
        if isinstance(node, cst.SimpleString) and (string_value(node) or "").startswith("cuda"):
            return True
        if isinstance(node, (cst.Assign, cst.AugAssign)):
            return True
    return False


def _requested_as_gpus(ctx, region: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The key or keyword under which ``region``'s value is passed when its words name GPUs (``{"num_gpus": 0.2
    if torch.cuda.is_available() else None}``, ``Trainer(gpus=torch.cuda.device_count())``): a request for
    GPU resources from a scheduler (Ray, an old Lightning), which other accelerators do not provide under that
    name, so a widened value would ask for resources the host lacks (torchrl 0.14.1's Ray
    collectors). None otherwise."""
    path = ctx.rule_state("reach paths", dict).get(id(region))
    if not path or len(path) < 2:
        return None
    parent = path[-2]
    if isinstance(parent, cst.DictElement) and parent.value is region:
        key = string_value(parent.key)
        return parent.key if key and _GPU_REQUEST.match(key) else None
    if isinstance(parent, cst.Arg) and parent.value is region and parent.keyword is not None:
        return parent.keyword if _GPU_REQUEST.match(parent.keyword.value) else None
    if isinstance(region, (cst.If, cst.While)):
        return None
    for node in walk_in_scope(region):  # a value fix's region is its statement's expression: `Trainer(gpus=...)`
        if isinstance(node, cst.Arg) and node.keyword is not None and _GPU_REQUEST.match(node.keyword.value):
            return node.keyword
        if isinstance(node, cst.DictElement) and _GPU_REQUEST.match(string_value(node.key) or ""):
            return node.key
    return None


def _what(ctx, region) -> str:
    """How the reason names the change: a widened test, or a value whose source changes."""
    return (
        "widening this check"
        if isinstance(region, (cst.If, cst.While, cst.IfExp, cst.BooleanOperation))
        else "the value this fix changes"
    )


def _target_name(assign) -> Optional[str]:
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
        return assign.targets[0].target.value
    return None


def _reads(node: cst.CSTNode) -> Set[str]:
    """Names read in ``node`` (not attribute names, keywords or assignment targets)."""
    out, stack = set(), [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Name):
            out.add(cur.value)
        elif isinstance(cur, cst.Attribute):
            stack.append(cur.value)
            continue
        elif isinstance(cur, cst.Arg):
            stack.append(cur.value)
            continue
        elif isinstance(cur, cst.AssignTarget):
            continue
        stack.extend(cur.children)
    return out


def _assigns(stmt, name: str) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return isinstance(stmt, cst.For) and isinstance(stmt.target, cst.Name) and stmt.target.value == name
    return any(
        isinstance(s, (cst.Assign, cst.AugAssign, cst.AnnAssign))
        and name
        in {t.target.value for t in getattr(s, "targets", ()) if isinstance(t.target, cst.Name)}
        | ({s.target.value} if isinstance(getattr(s, "target", None), cst.Name) else set())
        for s in stmt.body
    )


def _flow(ctx, region: cst.CSTNode) -> list:
    """What ``region`` reaches through names (module docstring), as ``(node, parent)`` pairs: the later
    statements of its block that read the name the region's value is stored in, and the values of the
    names it reads, assigned before it in the enclosing blocks of its function (three steps at most)."""
    path = ctx.rule_state("reach paths", dict).get(id(region))
    if not path:
        return []
    out = _after_early_exit(region, path)
    j = _climb(path, len(path) - 1)
    out.extend(_loop_body(path, j))
    out.extend(_parametrized_test(path))
    if (
        j >= 3
        and isinstance(path[j - 1], cst.Assign)
        and path[j - 1].value is path[j]
        and isinstance(path[j - 3], (cst.IndentedBlock, cst.Module))
    ):
        name, stmt, block = _target_name(path[j - 1]), path[j - 2], path[j - 3]
        if name is not None:
            body = list(block.body)
            i = next(k for k, s in enumerate(body) if s is stmt)
            for later in body[i + 1 :]:
                if name in _reads(later):
                    out.append((later, block))
                if _assigns(later, name):
                    break
    out.extend(_called_functions(ctx, region, path))
    seen, todo = set(), [(region, path, 0)]
    corrected = _corrected_names(region)
    while todo:
        node, npath, depth = todo.pop()
        if depth >= 3:
            continue
        for read in (_reads(node) | (corrected if node is region else set())) - seen:
            seen.add(read)
            hit = _earlier_value(npath, read)
            if hit is not None:
                out.append((hit[0], hit[1][-2]))
                out.extend(_configuring(hit[1], npath, read))
                todo.append((hit[0], hit[1], depth + 1))
    return out


def _loop_body(path: list, j: int) -> list:
    """When the expression ``path[j]`` is what a ``for`` loop or a comprehension iterates over
    (``for i in range(torch.cuda.device_count()):``, ``[f(i) for i in range(torch.cuda.device_count())]``):
    the loop's body, or the comprehension's element and conditions, which run once per item (bitsandbytes
    0.50.2: a capability query per counted device)."""
    if j < 1:
        return []
    loop, expr = path[j - 1], path[j]
    if isinstance(loop, cst.For) and loop.iter is expr:
        return [(loop.body, loop)]
    if isinstance(loop, cst.CompFor) and loop.iter is expr and j >= 2:
        comp = path[j - 2]
        parts = [getattr(comp, "elt", None), getattr(comp, "key", None), getattr(comp, "value", None)] + list(loop.ifs)
        return [(p, comp) for p in parts if isinstance(p, cst.CSTNode)]
    return []


def _parametrized_test(path: list) -> list:
    """When the value is a case of a test parametrization (``@pytest.mark.parametrize("cuda_ok",
    {False, torch.cuda.is_available()})``): the body of the test it parametrizes, which reads it as an argument
    (skorch 1.4.0 feeds such a case to a patched ``torch.cuda.is_available``: widened, a host of another
    accelerator gets a case that claims CUDA)."""
    for i in range(len(path) - 1, 0, -1):
        deco = path[i]
        if not isinstance(deco, cst.Decorator):
            continue
        call, func = deco.decorator, path[i - 1]
        if (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "parametrize"
            and isinstance(func, cst.FunctionDef)
        ):
            return [(func.body, func)]
        return []
    return []


def _called_functions(ctx, region: cst.CSTNode, path: list) -> list:
    """The module-level functions of this file that ``region`` calls by name (one level), as ``(FunctionDef,
    Module)`` pairs: a widened guard or a changed value runs their bodies too (a
    widened guard calling a helper that runs ``nvidia-smi``; ``pick(torch.cuda.device_count())``
    with ``pick`` returning ``"cuda:0"``)."""
    funcs = ctx.rule_state("reach module functions", dict)
    if "map" not in funcs:
        funcs["map"] = {st.name.value: st for st in ctx.module.body if isinstance(st, cst.FunctionDef)}
    table = funcs["map"]
    if not table:
        return []
    out, seen = [], set()
    for node in walk_in_scope(region):
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value in table
            and node.func.value not in seen
        ):
            seen.add(node.func.value)
            func = table[node.func.value]
            if not any(a is func for a in path):  # not a recursive call from inside it
                out.append((func.body, func))
    return out


def _base_name(target) -> Optional[str]:
    while isinstance(target, (cst.Attribute, cst.Subscript)):
        target = target.value
    return target.value if isinstance(target, cst.Name) else None


def _corrected_names(region: cst.CSTNode) -> Set[str]:
    """For a CUDA fallback, ``if not <guard>: <assignments>`` with no ``else`` and no exit (``if not
    torch.cuda.is_available(): cfg["device"] = "cpu"``): the names whose values the body corrects (``cfg``).
    Widening the guard skips the correction on every accelerator, which then uses the value set before:
    that value is reached (a script's ``{"device": "cuda"}`` and an argparse
    ``default="cuda"`` kept on other accelerators)."""
    if (
        not isinstance(region, cst.If)
        or region.orelse is not None
        or not (isinstance(region.test, cst.UnaryOperation) and isinstance(region.test.operator, cst.Not))
    ):
        return set()
    names = set()
    for stmt in region.body.body if isinstance(region.body, cst.IndentedBlock) else ():
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
                return set()  # an early exit: :func:`_after_early_exit`
            targets = (
                [t.target for t in small.targets]
                if isinstance(small, cst.Assign)
                else [small.target]
                if isinstance(small, (cst.AugAssign, cst.AnnAssign))
                else []
            )
            names.update(n for n in map(_base_name, targets) if n)
    return names


def _configuring(value_path: list, npath: list, name: str) -> list:
    """The statements between ``name = <value>`` (``value_path``) and the statement of ``npath`` in the same
    block that call a method of ``name`` (``parser.add_argument("--device", default="cuda")``): they set
    what the value holds."""
    if len(value_path) < 4 or not isinstance(value_path[-4], (cst.IndentedBlock, cst.Module)):
        return []
    block, start = value_path[-4], value_path[-3]
    body, out, on = list(block.body), [], False
    inside = {id(n) for n in npath}
    for stmt in body:
        if id(stmt) in inside:
            break
        if (
            on
            and isinstance(stmt, cst.SimpleStatementLine)
            and any(
                isinstance(sm, cst.Expr)
                and isinstance(sm.value, cst.Call)
                and isinstance(sm.value.func, cst.Attribute)
                and isinstance(sm.value.func.value, cst.Name)
                and sm.value.func.value.value == name
                for sm in stmt.body
            )
        ):
            out.append((stmt, block))
        on = on or stmt is start
    return out


def _after_early_exit(region: cst.CSTNode, path: list) -> list:
    """For ``if not <guard>: return ...`` (a negated test, no ``else``, a body that ends in ``return``,
    ``raise``, ``continue`` or ``break``): the statements after it in its block, as ``(node, parent)``
    pairs. Those run exactly when the guard holds, so widening the guard makes them run on every
    accelerator (``if not torch.cuda.is_available(): return local_rank`` followed by a read of
    ``CUDA_VISIBLE_DEVICES``, as in mmengine 0.10.7). An exit taken
    when the guard holds (``if torch.cuda.is_available(): return ...``) makes nothing reachable."""
    if (
        not isinstance(region, cst.If)
        or region.orelse is not None
        or len(path) < 2
        or not (isinstance(region.test, cst.UnaryOperation) and isinstance(region.test.operator, cst.Not))
    ):
        return []
    body = region.body.body if isinstance(region.body, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    smalls = last.body if isinstance(last, cst.SimpleStatementLine) else ()
    if not smalls or not isinstance(smalls[-1], (cst.Return, cst.Raise, cst.Continue, cst.Break)):
        return []
    block = path[-2]
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return []
    stmts = list(block.body)
    i = next((k for k, st in enumerate(stmts) if st is region), None)
    return [] if i is None else [(later, block) for later in stmts[i + 1 :]]


def _earlier_value(path: list, name: str):
    """``(value, its path)`` of the last ``name = <value>`` before ``path[-1]`` in the blocks enclosing
    it, within its function; None when there is none or another statement binds ``name`` later."""
    for k in range(len(path) - 2, -1, -1):
        block = path[k]
        if isinstance(block, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if not isinstance(block, (cst.IndentedBlock, cst.Module)):
            continue
        stmt = path[k + 1]
        body = list(block.body)
        i = next((n for n, s in enumerate(body) if s is stmt), None)
        if i is None:
            return None
        for earlier in reversed(body[:i]):
            if isinstance(earlier, cst.SimpleStatementLine):
                for small in earlier.body:
                    if _target_name(small) == name:
                        return small.value, path[: k + 1] + [earlier, small, small.value]
            if _assigns(earlier, name):
                return None
        if isinstance(block, cst.Module):
            return None
    return None
