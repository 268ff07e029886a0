"""CUDA arms of per-vendor code and CUDA-only components: not reported (issue 17, precision).

Read on the false positives a fresh judge found in ultralytics 8.4.190 and sentence-transformers 6.3.0
(``benchmarks/results/migrate_precision.md``, "Session 12: held-out ultralytics and
sentence-transformers"). Each class is told by the code's structure; each has a quiet example and a
near miss that is still reported in ``tests/migrate/test_migrate_ultralytics_classes.py``.

1. **The default of a per-vendor table** (:func:`vendor_table_default`): ``{"npu": "hccl", "xpu":
   "xccl"}.get(kind, "nccl" if dist.is_nccl_available() else "gloo")``: a dict literal keyed only
   by other vendors' device types; the default is the table's CUDA entry, as in a vendor chain. A
   table keyed by anything else is still reported.
2. **Code gated on NCCL** (:func:`nccl_gated`): the branch taken when ``dist.get_backend() ==
   "nccl"`` (directly, or through a name assigned such a test in the same block:
   ``use_ids = initialized and dist.get_backend() == "nccl"`` then ``barrier(device_ids=[
   torch.cuda.current_device()]) if use_ids else barrier()``). NCCL runs on CUDA only; the other
   backends take the other branch. A test ``!= "nccl"`` is still reported.
3. **A capability query under a CUDA flag** (:func:`capability_under_flag`): ``ok = device ==
   "cuda" and ...`` then ``if ok: ok = torch.cuda.is_bf16_supported()``: session 9's "capability
   query in the body of a CUDA test", with the test stored in a name first; the stored test too
   (:func:`stored_capability_guard`: read only by such ``if``s and ``if not ok: raise ...("... CUDA")``). The same query under a flag that is not a CUDA test is still reported.
4. **A CUDA requirement of several statements** (:func:`requirement_block`, :func:`stored_for_requirement`):
   ``if not (torch.cuda.is_available() and valid): <log, build a hint>; raise ValueError("Invalid CUDA
   ...")``: the test and the body only build the error (the body has no branch and ends in a
   ``raise`` whose text names CUDA), as :func:`neuron_conformance.migrate.deliberate.cuda_requirement`
   with one statement; also a value stored in a name that only such a requirement reads (``valid =
   all(int(x) < torch.cuda.device_count() ...)``). A body that does anything after the check, or a
   name read elsewhere too, is still reported.
5. **CUDA-only components** (:func:`component_branch`, :func:`component_value`, :func:`nvidia_tool_scope`,
   :func:`cuda_keyed_version`): the CUDA branch of a test (``if``, conditional expression) whose
   branch only names a CUDA-only component (a CUDA build of a package, ``"paddlepaddle-gpu>=3"``;
   text naming NVML, nvidia-smi, TensorRT); a value stored in a name read only by statements naming
   such a component (``cuda_major = torch.version.cuda.split(".")[0]`` for ``f"tensorrt-cu{cuda_major}"``);
   a function named for CUDA or GPUs that runs ``nvidia-smi`` (its CUDA calls serve NVIDIA's tool); ``torch.version.cuda``
   stored under a key naming CUDA (``{"CUDA": torch.version.cuda}``: CUDA's version under its own
   label). A branch that does anything else, a name read elsewhere, or the version under another key
   is still reported.

Session 13, read on a fresh judge's verdicts on kornia 0.9.0, torchtune 0.6.1 and mmengine 0.10.7 (the same
file, "Session 13"; tests in ``tests/migrate/test_migrate_session13_classes.py``):

6. **Per-vendor sibling functions** (:func:`vendor_sibling_function`): a function whose name has the word
   ``cuda`` (``get_cuda_device_if_available``, ``get_max_cuda_memory``) next to a function of the same
   scope whose name is the same with another vendor's word in its place (``get_mps_device_if_available``,
   ``get_max_musa_memory``). The author wrote one function per vendor; the CUDA one's contract is CUDA.
   A function named for CUDA with no such sibling (``def to_cuda(batch)``) is still reported.
7. **Per-vendor display elements** (:func:`vendor_display_element`): the CUDA element of a list, tuple or
   set display whose other elements name another vendor (``{ProfilerActivity.CPU, ProfilerActivity.CUDA,
   ProfilerActivity.XPU}``): the author lists each vendor. A display naming no other vendor is still
   reported.
8. **Per-vendor flags** (:func:`vendor_flag_branch`): the body of ``if cuda:`` (a name or attribute whose
   words include ``cuda``: ``use_cuda``, ``self.cuda``) next to ``if xpu:`` in the same block (three
   statements either way), the flag form of ``deliberate.vendor_siblings``. A flag with no sibling for
   another vendor is still reported.

9. **A CUDA type's branch** (:func:`cuda_type_branch`): the body of ``if isinstance(self, CUDAOpBuilder)
   ...:`` (an ``and`` operand testing an instance against a class whose name has the word ``cuda``): only
   an object of the CUDA implementation takes it (DeepSpeed 0.19.8's op builders, held out in session 13).
   An ``isinstance`` test against any other class is still reported.

Public API: :func:`quiet` and the class predicates above. Used by
:mod:`neuron_conformance.migrate.rule_pass`.
"""
from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.cuda_reach import CAPABILITY, name_words, positive
from neuron_conformance.migrate.deliberate import _NAMES_CUDA, _OTHER_VENDOR, _names_in, names_other_vendor
from neuron_conformance.migrate.traversal import and_operands, walk_in_scope

#: Text naming a CUDA-only component, or a requirement on a CUDA build of a package.
_COMPONENT = re.compile(r"\b(tensorrt|nvml|pynvml|nvidia-smi)|^[A-Za-z0-9_.]+-(gpu|cuda\w*|cu\d+\w*)(?![\w-])", re.I)
_CAPABILITY_Q = CAPABILITY | {"torch.cuda.is_bf16_supported"}


def _smalls(block) -> list:
    body = block.body if isinstance(block, (cst.IndentedBlock, cst.Module)) else []
    return body


def _assigned(stmt) -> Optional[tuple]:
    """``(name, value)`` of ``name = value`` (one simple statement), else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        a = stmt.body[0]
        if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
            return a.targets[0].target.value, a.value
    return None


def _reads_name(node, name: str) -> bool:
    for n in walk_in_scope(node, skip_scopes=False):
        if isinstance(n, cst.Name) and n.value == name:
            return True
    return False


def _value_in(ctx, block, test, name: str):
    """The value of the last ``name = value`` before the statement holding ``test`` in ``block``."""
    body = _smalls(block)
    for k, stmt in enumerate(body):
        if any(n is test for n in walk_in_scope(stmt, skip_scopes=False)):
            for earlier in reversed(body[:k]):
                hit = _assigned(earlier)
                if hit and hit[0] == name:
                    return hit[1]
            return None
    return None


def _later_reads(block, stmt, name: str) -> list:
    body = _smalls(block)
    i = next((k for k, s in enumerate(body) if s is stmt), None)
    if i is None:
        return []
    out = []
    for later in body[i + 1:]:
        hit = _assigned(later)
        if _reads_name(later, name):
            out.append(later)
        if hit and hit[0] == name:
            break
    return out


# ----------------------------------------------------------------------------- class 1
def vendor_table_default(ctx, call: cst.Call, child) -> bool:
    """``child`` is the default argument of ``{<other vendors>: ...}.get(key, default)``."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "get" and len(call.args) == 2
            and call.args[1] is child and isinstance(call.func.value, cst.Dict) and call.func.value.elements):
        return False
    keys = [string_value(e.key) for e in call.func.value.elements if isinstance(e, cst.DictElement)]
    return len(keys) == len(call.func.value.elements) and all(k and _OTHER_VENDOR.search(k) for k in keys)


# ----------------------------------------------------------------------------- class 2
def _nccl_test(node) -> bool:
    return any(isinstance(o, cst.Comparison) and len(o.comparisons) == 1
               and isinstance(o.comparisons[0].operator, cst.Equal)
               and "nccl" in (string_value(o.left), string_value(o.comparisons[0].comparator))
               for o in and_operands(node))


def nccl_gated(ctx, a, child, path: list, i: int) -> bool:
    """``child`` is the branch of ``a`` (``if``/conditional expression) taken when the backend is NCCL."""
    if not isinstance(a, (cst.If, cst.IfExp)) or child is not a.body:
        return False
    if _nccl_test(a.test):
        return True
    names = [o.value for o in and_operands(a.test) if isinstance(o, cst.Name)]
    for name in names:
        for j in range(i - 1, -1, -1):
            if isinstance(path[j], (cst.IndentedBlock, cst.Module)):
                value = _value_in(ctx, path[j], a.test, name)
                if value is not None:
                    return _nccl_test(value)
    return False


# ----------------------------------------------------------------------------- class 3
def capability_under_flag(ctx, node, path: list) -> bool:
    """``node`` is a capability query in the body of ``if <name>:`` where ``name`` was assigned a CUDA test."""
    target = node.func if isinstance(node, cst.Call) else node
    if ctx.qname(target) not in _CAPABILITY_Q:
        return False
    for i, a in enumerate(path[:-1]):
        if isinstance(a, cst.If) and path[i + 1] is a.body and isinstance(a.test, cst.Name) and i > 0:
            value = _value_in(ctx, path[i - 1], a.test, a.test.value)
            if value is not None and positive(ctx, value):
                return True
    return False


def stored_capability_guard(ctx, block, stmt) -> bool:
    """``stmt`` is ``name = <CUDA test>`` and every later read of ``name`` is ``if name:`` whose body
    asks a capability query (the test guarding it, stored first)."""
    hit = _assigned(stmt)
    if hit is None or not positive(ctx, hit[1]):
        return False
    name = hit[0]

    def guards(r):
        return isinstance(r, cst.If) and isinstance(r.test, cst.Name) and r.test.value == name \
            and any(isinstance(n, cst.Call) and ctx.qname(n.func) in _CAPABILITY_Q for n in walk_in_scope(r.body))

    def requires(r):  # `if not ok: raise RuntimeError("... requires CUDA ...")`
        return isinstance(r, cst.If) and isinstance(r.test, cst.UnaryOperation) and isinstance(r.test.operator, cst.Not) \
            and isinstance(r.test.expression, cst.Name) and r.test.expression.value == name \
            and isinstance(r.body, cst.IndentedBlock) and len(r.body.body) == 1 \
            and isinstance(r.body.body[0], cst.SimpleStatementLine) and isinstance(r.body.body[0].body[0], cst.Raise) \
            and any(_NAMES_CUDA.search(n) for n in _names_in(r.body))
    reads = _later_reads(block, stmt, name)
    return bool(reads) and guards(reads[0]) and all(guards(r) or requires(r) for r in reads)


# ----------------------------------------------------------------------------- class 4
def _requires_cuda(ctx, test) -> bool:
    """``not torch.cuda.is_available()`` or ``not (torch.cuda.is_available() and ...)`` among the ``or`` operands."""
    ops = [test]
    while ops and isinstance(ops[-1], cst.BooleanOperation) and isinstance(ops[-1].operator, cst.Or):
        last = ops.pop()
        ops += [last.left, last.right]
    for o in ops:
        if isinstance(o, cst.UnaryOperation) and isinstance(o.operator, cst.Not):
            for inner in and_operands(o.expression):
                if isinstance(inner, cst.Call) and ctx.qname(inner.func) == "torch.cuda.is_available":
                    return True
    return False


def requirement_block(ctx, node: cst.If) -> bool:
    """``if not (torch.cuda.is_available() and ...): <simple statements>; raise X("... CUDA ...")``."""
    if node.orelse is not None or not isinstance(node.body, cst.IndentedBlock) or not _requires_cuda(ctx, node.test):
        return False
    body = node.body.body
    if not body or not all(isinstance(s, cst.SimpleStatementLine) for s in body):
        return False
    last = body[-1].body[-1]
    return isinstance(last, cst.Raise) and any(_NAMES_CUDA.search(n) for n in _names_in(last))


def stored_for_requirement(ctx, block, stmt) -> bool:
    """``stmt`` is ``name = <value>`` and every later read of ``name`` is the test of a :func:`requirement_block`."""
    hit = _assigned(stmt)
    if hit is None:
        return False
    reads = _later_reads(block, stmt, hit[0])
    return bool(reads) and all(isinstance(r, cst.If) and requirement_block(ctx, r)
                               and not any(_reads_name(s, hit[0]) for s in r.body.body) for r in reads)


# ----------------------------------------------------------------------------- class 5
def _names_component(node) -> bool:
    return any(_COMPONENT.search(n) for n in _names_in(node))


def _only_component(node) -> bool:
    """``node`` (a branch) names a CUDA-only component and has no statement that does not: every
    statement of a block (or the expression) names one."""
    if isinstance(node, cst.IndentedBlock):
        return bool(node.body) and all(_names_component(s) for s in node.body)
    return _names_component(node)


def component_branch(ctx, a, child) -> bool:
    """``child`` is the CUDA branch of ``a`` and only names a CUDA-only component."""
    return isinstance(a, (cst.If, cst.IfExp)) and child is a.test and positive(ctx, a.test) \
        and _only_component(a.body)


def component_value(ctx, block, stmt) -> bool:
    """``stmt`` is ``name = <value>`` and every later read of ``name`` is in a statement naming a CUDA-only component."""
    hit = _assigned(stmt)
    if hit is None:
        return False
    reads = _later_reads(block, stmt, hit[0])
    return bool(reads) and all(_names_component(r.test if isinstance(r, cst.If) else r) for r in reads)


def nvidia_tool_scope(ctx, func: cst.FunctionDef) -> bool:
    """A function named for CUDA or GPUs (``cuda_device_count``) that runs NVIDIA's ``nvidia-smi`` (a
    string literal naming it) and names no other vendor. A function with another name that also runs
    it (an environment report) is still reported."""
    if "nvidia-smi" not in ctx.source or not {"cuda", "gpu", "gpus", "nvidia"} & set(func.name.value.lower().split("_")):
        return False
    return any(isinstance(n, cst.SimpleString) and (string_value(n) or "").startswith("nvidia-smi")
               for n in walk_in_scope(func)) and not names_other_vendor(func)


def cuda_keyed_version(ctx, path: list) -> bool:
    """``torch.version.cuda`` in the value of a dict entry or subscript assignment whose key names CUDA."""
    if ctx.qname(path[-1]) != "torch.version.cuda":
        return False
    for a in reversed(path[:-1]):
        key = None
        if isinstance(a, cst.DictElement):
            key = a.key
        elif isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Subscript):
            sl = a.targets[0].target.slice
            key = sl[0].slice.value if sl and isinstance(sl[0].slice, cst.Index) else None
        if key is not None:
            text = string_value(key) or ""
            return bool(re.search(r"(^|[^a-z])cuda([^a-z]|$)", text, re.I))
        if isinstance(a, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return False
    return False


_VENDOR_WORDS = ("xpu", "npu", "mps", "mlu", "hpu", "musa", "neuron", "xla", "tpu", "mtia", "sdaa", "gcu", "dipu")


def _words(name: str) -> list:
    return [w for w in re.split(r"_+", name.lower()) if w]


def _vendor_variants(name: str) -> set:
    """``get_cuda_device`` -> {``get_xpu_device``, ``get_mps_device``, ...}: the name with its word ``cuda``
    replaced by each other vendor's word (empty when ``cuda`` is not one of its words)."""
    words = _words(name)
    if "cuda" not in words:
        return set()
    return {"_".join(v if w == "cuda" else w for w in words) for v in _VENDOR_WORDS}


def vendor_sibling_function(ctx, func: cst.FunctionDef, scope) -> bool:
    """Class 6: ``func`` (an element of ``scope``'s body) is named for CUDA and ``scope`` defines the same
    name for another vendor."""
    variants = _vendor_variants(func.name.value)
    if not variants or not isinstance(scope, (cst.IndentedBlock, cst.Module)):
        return False
    names = {"_".join(_words(st.name.value)) for st in scope.body if isinstance(st, cst.FunctionDef) and st is not func}
    return bool(variants & names)


def vendor_display_element(ctx, display, element) -> bool:
    """Class 7: ``element`` of the list/tuple/set ``display`` names CUDA, and another element names another
    vendor and not CUDA."""
    if not isinstance(display, (cst.List, cst.Tuple, cst.Set)) or not isinstance(element, cst.Element):
        return False
    def cuda(e):
        return any(w == "cuda" for n in _names_in(e) for w in _words(n.replace(".", "_")))
    return cuda(element) and any(e is not element and names_other_vendor(e) and not cuda(e)
                                 for e in display.elements)


def _flag_vendor(test) -> Optional[str]:
    """``cuda`` for ``if use_cuda:``/``if self.cuda:``, ``xpu`` for ``if xpu:``: the vendor word of a test
    that is a plain name or attribute, else None."""
    if isinstance(test, cst.Attribute):
        test = test.attr
    if not isinstance(test, cst.Name):
        return None
    words = _words(test.value)
    return "cuda" if "cuda" in words else next((w for w in words if w in _VENDOR_WORDS), None)


def vendor_flag_branch(ctx, block, stmt, child) -> bool:
    """Class 8: ``stmt`` (in ``block``) is ``if <cuda flag>:``, ``child`` is its body, and a statement next to
    it is ``if <another vendor's flag>:``."""
    if not isinstance(stmt, cst.If) or child is not stmt.body or _flag_vendor(stmt.test) != "cuda":
        return False
    body = list(_smalls(block))
    i = next((k for k, st in enumerate(body) if st is stmt), None)
    if i is None:
        return False
    return any(isinstance(sib, cst.If) and _flag_vendor(sib.test) not in (None, "cuda")
               for sib in body[max(0, i - 3):i + 4] if sib is not stmt)


def cuda_type_branch(ctx, node: cst.If, child) -> bool:
    """Class 9: ``child`` is the body of ``node``, whose test (or one of its ``and`` operands) is
    ``isinstance(x, <class named for CUDA>)``."""
    if not isinstance(node, cst.If) or child is not node.body:
        return False
    for op in and_operands(node.test):
        if isinstance(op, cst.Call) and isinstance(op.func, cst.Name) and op.func.value == "isinstance" \
                and len(op.args) == 2:
            cls = op.args[1].value
            name = cls.attr.value if isinstance(cls, cst.Attribute) else cls.value if isinstance(cls, cst.Name) else ""
            if "cuda" in name_words(name):
                return True
    return False


def quiet(ctx, path: list, cache: dict) -> bool:
    """The finding whose node ends ``path`` (module first) is on code of classes 1-9 (``cache`` keeps
    the answers per node)."""
    node = path[-1]
    if capability_under_flag(ctx, node, path) or cuda_keyed_version(ctx, path):
        return True
    for i in range(len(path) - 1):
        a, child = path[i], path[i + 1]
        key = ("arms", id(a), id(child))
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = _quiet_step(ctx, path, i)
        if hit:
            return True
    return False


def _quiet_step(ctx, path: list, i: int) -> bool:
    a, child = path[i], path[i + 1]
    if isinstance(a, cst.Call):
        return vendor_table_default(ctx, a, child)
    if isinstance(a, cst.FunctionDef):
        return nvidia_tool_scope(ctx, a)
    if isinstance(a, cst.If) and (child is a.test or child is a.body) and requirement_block(ctx, a):
        return True
    if cuda_type_branch(ctx, a, child):
        return True
    if nccl_gated(ctx, a, child, path, i) or component_branch(ctx, a, child):
        return True
    if isinstance(a, (cst.List, cst.Tuple, cst.Set)):
        return vendor_display_element(ctx, a, child)
    if isinstance(a, (cst.IndentedBlock, cst.Module)):
        if isinstance(child, cst.FunctionDef) and vendor_sibling_function(ctx, child, a):
            return True
        if i + 2 < len(path) and vendor_flag_branch(ctx, a, child, path[i + 2]):
            return True
        return stored_for_requirement(ctx, a, child) or component_value(ctx, a, child) \
            or stored_capability_guard(ctx, a, child)
    return False
