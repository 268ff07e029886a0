"""CUDA code that is deliberately CUDA-specific, and so is not reported (issue 17, precision).

Two shapes, both read in real code (transformers, accelerate, diffusers):

* **the CUDA branch of an explicit per-vendor chain**: ``if torch.cuda.is_available(): ...
  elif torch.xpu.is_available(): ... elif is_torch_npu_available(): ...``. The author already
  handles each accelerator by name; rewriting the CUDA branch to ``torch.accelerator`` would make
  it catch every accelerator before the other branches are reached. The test and the body of the
  CUDA branch are skipped (the other branches are checked as usual).
* **a CUDA sanity check**: ``device == "cuda" and not torch.cuda.is_available()`` (usually
  followed by ``raise``). It asks whether CUDA itself was requested and is missing; on another
  accelerator the request is not "cuda" and the check is correctly false.

* **a test that names another accelerator too**: ``not torch.cuda.is_available() and not
  is_torch_xpu_available()``, ``x.device.type in ("cuda", "xpu")``: the author lists the
  accelerators a code path supports; widening the CUDA part would claim support for the others.
* **an ONNX Runtime device**: a test that also mentions an execution provider
  (``"cuda" if torch.cuda.is_available() and "CUDAExecutionProvider" in available else "cpu"``)
  picks the device for ONNX Runtime's CUDA provider, which has no torch.accelerator counterpart.

* **a CUDA requirement**: ``if not torch.cuda.is_available(): raise ...("... requires CUDA")``,
  where the message names CUDA or a GPU: the code after it needs CUDA itself (a CUDA-only
  kernel library or quantisation format); and the body of a predicate named for CUDA
  (``def is_torch_cuda_available():``, ``require_torch_cuda``).

* **per-vendor statements**: a statement naming CUDA next to statements naming other accelerators
  (:func:`vendor_siblings`); **an old-torch fallback**: the CUDA branch of a conditional whose other
  branch already uses a device-generic API (:func:`generic_alternative`); **ONNX Runtime modules**
  (:func:`onnx_runtime_module`); capability requirements that raise naming a GPU or compute
  capability (:func:`cuda_requirement`); predicates named for CUDA or GPUs (``require_torch_gpu``).

* session 11 (read on accelerate, lightning, peft): the body of a test for a CUDA-only runtime
  (NCCL, NVTX, XLA on GPUs: :func:`cuda_runtime_body`); TPU counts as another vendor; a ``"gpu"``
  request normalised to ``"cuda"`` in a vendor chain's default and a CUDA device completed with its
  index (:func:`normalised_request`); f-string messages of requirements; ``on_gpu`` predicates.

Public API: :func:`cuda_branch_of_vendor_chain`, :func:`cuda_requirement`, :func:`cuda_predicate`,
:func:`sanity_check_nodes`, :func:`listed_with_other_vendors`, :func:`onnx_runtime_nodes`,
:func:`vendor_siblings`, :func:`generic_alternative`, :func:`onnx_runtime_module`,
:func:`cuda_runtime_body`, :func:`names_other_vendor`. Used by :mod:`neuron_conformance.migrate.rule_pass`.
"""
from __future__ import annotations

import re
from typing import List, Optional

import libcst as cst

from neuron_conformance.migrate.args import string_value

#: Another vendor named in a test: a torch submodule, a helper such as is_torch_npu_available(),
#: or a device-type literal.
#: ROCm (``IS_ROCM_SYSTEM``, ``is_rocm_platform()``, ``torch.version.hip``) counts as another vendor: ROCm
#: presents itself as ``"cuda"``, so a test naming it distinguishes AMD from NVIDIA on purpose.
#: TPU (``os.environ["PJRT_DEVICE"] == "TPU"``, ``TPU_NAME``) is named as torch_xla's accelerator (session 11).
_OTHER_VENDOR = re.compile(r"(^|[._])(xpu|npu|ascend|mps|mlu|hpu|musa|neuron|xla|tpu|mtia|sdaa|gcu|rocm|hip)($|[._])",
                           re.I)
#: :data:`_OTHER_VENDOR` without ROCm/HIP: for a CUDA implementation, which ROCm runs through.
_NON_ROCM_VENDOR = re.compile(_OTHER_VENDOR.pattern.replace("|rocm|hip", ""), re.I)
_CUDA_PROBES = {"torch.cuda.is_available", "torch.cuda.device_count"}


def _names_in(node: cst.CSTNode) -> List[str]:
    """Dotted names and string literals in ``node`` (iterative walk)."""
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Name):
            out.append(cur.value)
        elif isinstance(cur, cst.Attribute):
            out.append(cur.attr.value)
        elif isinstance(cur, cst.SimpleString):
            v = string_value(cur)
            if v is not None:
                out.append(v)
        elif isinstance(cur, cst.FormattedString):  # the text of an f-string message (its fields are walked)
            out.append("".join(p.value for p in cur.parts if isinstance(p, cst.FormattedStringText)))
        stack.extend(cur.children)
    return out


#: A library's own CUDA probe (``is_torch_cuda_available()`` in transformers, accelerate, diffusers).
_CUDA_PROBE_NAME = re.compile(r"^is_\w*cuda\w*_available$")


def _callee(call: cst.Call) -> str:
    """The last name of a call's function (``x.y.f(...)`` -> ``f``), else ``""``."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else ""


def _tests_cuda(ctx, test: cst.CSTNode) -> bool:
    stack = [test]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and (ctx.qname(cur.func) in _CUDA_PROBES or _CUDA_PROBE_NAME.match(_callee(cur))):
            return True
        if isinstance(cur, cst.SimpleString) and string_value(cur) == "cuda":
            return True
        if isinstance(cur, (cst.Name, cst.Attribute)) and _CUDA_NAME.search(_ident(cur)):
            return True  # `elif pt_cuda_available:`, `if x.is_cuda:`
        stack.extend(cur.children)
    return False


#: A name asking about CUDA (``pt_cuda_available``, ``IS_CUDA_SYSTEM``, ``is_cuda``), not ``no_cuda``;
#: in a chain that also tests another vendor, a GPU name means CUDA (``DistributedType.MULTI_GPU``
#: next to ``MULTI_XPU``).
_CUDA_NAME = re.compile(r"^(?!(no|not|non|without|disable)_)(\w+_)?(is_)?(cuda|gpu)(_\w+)?$", re.I)


def _ident(node) -> str:
    return node.value if isinstance(node, cst.Name) else node.attr.value


def names_other_vendor(test: cst.CSTNode, rocm: bool = True) -> bool:
    """``test`` names an accelerator other than CUDA (:data:`_OTHER_VENDOR`) in a name or string;
    with ``rocm=False`` a ROCm/HIP name does not count (:data:`_NON_ROCM_VENDOR`)."""
    pattern = _OTHER_VENDOR if rocm else _NON_ROCM_VENDOR
    return any(pattern.search(n) for n in _names_in(test))


def cuda_branch_of_vendor_chain(ctx, node: cst.If) -> bool:
    """True when ``node`` tests for CUDA and another ``if``/``elif`` of the same chain tests for
    another named accelerator (the chain is followed through ``orelse`` both ways)."""
    if not _tests_cuda(ctx, node.test):
        return False
    cur = node.orelse
    while isinstance(cur, cst.If):
        if names_other_vendor(cur.test):
            return True
        cur = cur.orelse
    child, parent = node, ctx.parent(node)
    while isinstance(parent, cst.If) and parent.orelse is child:
        if names_other_vendor(parent.test):
            return True
        child, parent = parent, ctx.parent(parent)
    return False


def _and_operands(node: cst.CSTNode) -> List[cst.CSTNode]:
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And) and not node.lpar:
        return _and_operands(node.left) + _and_operands(node.right)
    return [node]


def sanity_check_nodes(ctx, node: cst.BooleanOperation) -> List[cst.CSTNode]:
    """For ``<x> == "cuda" and not torch.cuda.is_available()`` (either order, within a longer
    ``and``): the comparison and the call, whose findings are not reported; else ``[]``."""
    if not isinstance(node.operator, cst.And):
        return []
    operands = _and_operands(node)
    comparisons = [o for o in operands if isinstance(o, cst.Comparison) and len(o.comparisons) == 1
                   and isinstance(o.comparisons[0].operator, cst.Equal)
                   and "cuda" in (string_value(o.left), string_value(o.comparisons[0].comparator))]
    probes = [o.expression for o in operands if isinstance(o, cst.UnaryOperation) and isinstance(o.operator, cst.Not)
              and isinstance(o.expression, cst.Call) and ctx.qname(o.expression.func) == "torch.cuda.is_available"]
    if comparisons and probes:
        return comparisons + probes
    return []


def _cuda_parts(ctx, node: cst.CSTNode) -> List[cst.CSTNode]:
    """The CUDA probes (``torch.cuda.is_available()`` calls) and ``"cuda"`` comparisons in ``node``."""
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and ctx.qname(cur.func) in _CUDA_PROBES:
            out.append(cur)
        elif isinstance(cur, cst.Comparison) and any(string_value(o) == "cuda" for o in
                                                     [cur.left] + [c.comparator for c in cur.comparisons]):
            out.append(cur)
        stack.extend(cur.children)
    return out


def listed_with_other_vendors(ctx, node: cst.BooleanOperation) -> List[cst.CSTNode]:
    """For a boolean test that probes CUDA and names another accelerator (an operand such as
    ``is_torch_xpu_available()`` or ``device == "xpu"``): its CUDA parts, which are not
    reported; else ``[]``."""
    operands = _and_operands(node) if isinstance(node.operator, cst.And) else [node.left, node.right]
    if not any(names_other_vendor(o) for o in operands if not _cuda_parts(ctx, o)):
        return []
    return _cuda_parts(ctx, node)


def vendor_list(node: cst.CSTNode) -> bool:
    """``("cuda", "xpu")``: a literal tuple/list/set of strings naming CUDA and another accelerator."""
    if not isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return False
    values = [string_value(e.value) for e in node.elements]
    return "cuda" in values and any(v is not None and v != "cuda" and _OTHER_VENDOR.search(v) for v in values)


def onnx_runtime_nodes(ctx, test: cst.CSTNode) -> List[cst.CSTNode]:
    """When ``test`` mentions an ONNX Runtime execution provider (``"CUDAExecutionProvider"``):
    its CUDA parts, which are not reported; else ``[]``."""
    if not any(n.endswith("ExecutionProvider") for n in _names_in(test)):
        return []
    return _cuda_parts(ctx, test)


_NAMES_CUDA = re.compile(r"\b(cuda|gpu|nvidia|compute capability)\b", re.I)
_PREDICATE = re.compile(r"^_?(is|has|on|require|requires|check)_\w*(cuda|gpu)", re.I)
_CAPABILITY = {"torch.cuda.get_device_capability", "torch.cuda.is_bf16_supported", "torch.cuda.get_arch_list"}


def _bool_operands(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The operands of a chain of ``and``/``or`` (not through parentheses)."""
    if isinstance(node, cst.BooleanOperation) and not node.lpar:
        return _bool_operands(node.left) + _bool_operands(node.right)
    return [node]


def _calls_capability(ctx, node: cst.CSTNode) -> bool:
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and ctx.qname(cur.func) in _CAPABILITY:
            return True
        stack.extend(cur.children)
    return False


def cuda_requirement(ctx, node: cst.If) -> bool:
    """``if not torch.cuda.is_available(): raise X("... CUDA ...")``, or a capability test
    (``... and torch.cuda.get_device_capability()[0] < 9: raise ValueError("... requires a GPU with
    compute capability >= 9.0")``), or a tensor test (``if key.device.type != "cuda": raise ValueError("the CUDA
    kernel requires CUDA tensors")``); the test may be ``and``/``or``-ed with other conditions, and
    the body is one ``raise`` (or ``return`` of an error-building call, ``return
    maybe_import_error("... requires CUDA")``) whose message names CUDA, a GPU or a compute capability."""
    operands = _bool_operands(node.test)
    if not any(isinstance(o, cst.UnaryOperation) and isinstance(o.operator, cst.Not) and isinstance(o.expression, cst.Call)
               and ctx.qname(o.expression.func) == "torch.cuda.is_available" for o in operands) \
            and not any(_calls_capability(ctx, o) or _off_cuda_test(o) for o in operands):
        return False
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) \
            or not isinstance(body[0].body[0], (cst.Raise, cst.Return)) \
            or isinstance(body[0].body[0], cst.Return) and not isinstance(body[0].body[0].value, cst.Call):
        return False
    return any(_NAMES_CUDA.search(n) for n in _names_in(body[0]))


def _off_cuda_test(node) -> bool:
    """``x.device.type != "cuda"`` or ``not x.is_cuda``: a tensor is not on CUDA."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return isinstance(node.expression, cst.Attribute) and node.expression.attr.value == "is_cuda"
    return isinstance(node, cst.Comparison) and len(node.comparisons) == 1 \
        and isinstance(node.comparisons[0].operator, cst.NotEqual) \
        and "cuda" in (string_value(node.left), string_value(node.comparisons[0].comparator))


def cuda_predicate(node: cst.FunctionDef) -> bool:
    """A function whose name asks about CUDA (``is_torch_cuda_available``, ``require_torch_cuda``,
    ``check_cuda_fp8_capability``, a property ``on_gpu``)."""
    return bool(_PREDICATE.match(node.name.value))


_GENERIC = ("torch.accelerator.", "torch.Stream", "torch.Event", "torch.get_device_module", "torch.amp.",
            "torch.backends.fp32_precision")


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


_VERSION_TEST = re.compile(r"version|greater|_than_|torch_\d", re.I)


def generic_alternative(ctx, node: cst.CSTNode, branch: cst.CSTNode) -> bool:
    """For an ``if``/conditional expression ``node`` that tests the torch version and one of its
    branches: True when the other branch already uses a device-generic API (``torch.Stream() if
    _is_torch_greater_or_equal_than_2_7 else torch.cuda.Stream()``): the CUDA branch is a fallback
    for an older torch, not code to migrate."""
    if not any(_VERSION_TEST.search(n) for n in _names_in(node.test)):
        return False
    others = [b for b in (node.body, node.orelse) if b is not None and b is not branch]
    if any(q.startswith(_GENERIC) for b in others for q in _qnames_in(ctx, b)):
        return True
    # `self.stream if _torch_2_7 else torch.cuda.stream(self.stream)`: the newer torch's branch needs
    # no CUDA name at all (an expression that is not a constant)
    return isinstance(node, cst.IfExp) and any(not _names_cuda(ctx, b) and not _constant(b) for b in others)


def _constant(node) -> bool:
    return isinstance(node, (cst.SimpleString, cst.Integer, cst.Float)) or \
        isinstance(node, cst.Name) and node.value in ("None", "True", "False")


def _names_cuda(ctx, node: cst.CSTNode) -> bool:
    """A ``torch.cuda``/``torch.version.cuda``/``torch.version.hip`` name, a library's CUDA probe
    (``is_cuda_available()``), a ``"cuda"`` device literal or a ``CUDA_...`` variable name in ``node``."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cst.Call) and _CUDA_PROBE_NAME.match(_callee(cur)):
            return True  # `if is_cuda_available():` among `if is_hpu_available():` ...
        if isinstance(cur, cst.Attribute):
            q = ctx.qname(cur)
            if q is not None and (q.startswith("torch.cuda.") or q in ("torch.version.cuda", "torch.version.hip")):
                return True
        elif isinstance(cur, cst.SimpleString):
            v = string_value(cur)
            if v is not None and (v == "cuda" or v.startswith(("cuda:", "CUDA_"))):
                return True
        stack.extend(cur.children)
    return False


def vendor_siblings(ctx, stmt: cst.CSTNode, block) -> bool:
    """``stmt`` (a simple statement line or an ``if``, an element of ``block``) names CUDA, and one
    of the statements next to it (three either way) names another accelerator and not CUDA (a
    statement naming both, such as a device-selection chain, is no evidence): a list of
    per-vendor statements (``pt_cuda = torch.cuda.is_available()`` / ``pt_xpu =
    is_torch_xpu_available()``; ``os.environ["CUDA_LAUNCH_BLOCKING"]`` next to
    ``os.environ["ASCEND_LAUNCH_BLOCKING"]``; ``if device == "cuda": return ...`` then ``if device ==
    "hpu": ...``), whose CUDA entry is deliberate."""
    head = stmt.test if isinstance(stmt, cst.If) else stmt
    if not _names_cuda(ctx, head):
        return False
    try:
        i = next(k for k, s in enumerate(block) if s is stmt)
    except StopIteration:
        return False
    for sib in block[max(0, i - 3):i + 4]:
        sib_head = sib.test if isinstance(sib, cst.If) else sib if isinstance(sib, cst.SimpleStatementLine) \
            else sib.iter if isinstance(sib, cst.For) else None  # `for backend in ("npu", "xpu"):`
        if sib is not stmt and sib_head is not None and names_other_vendor(sib_head) \
                and not _names_cuda(ctx, sib_head):
            return True
    return False


def onnx_runtime_module(ctx) -> bool:
    """A module that imports ``onnxruntime`` and names an execution provider: its torch CUDA calls
    (streams, devices) serve ONNX Runtime's CUDA provider, which has no torch.accelerator counterpart."""
    return "ExecutionProvider" in ctx.source and any(
        v.split(".")[0] == "onnxruntime" or v.rsplit(".", 1)[-1] == "onnxruntime"  # a lazy re-export (session 13)
        for v in ctx.aliases.values())


def _path_pairs(path: list):
    return zip(path, path[1:])


def accelerator_fallback(ctx, path: list) -> bool:
    """``path`` (module first, the finding's node last) ends inside the right operand of ``<an
    accelerator query> or <...>`` (``get_current_accelerator() or torch.device("cuda")``): the CUDA
    fallback is used only where no accelerator exists, so it never reaches another accelerator."""
    for a, child in _path_pairs(path):
        if isinstance(a, cst.BooleanOperation) and isinstance(a.operator, cst.Or) and child is a.right \
                and isinstance(a.left, cst.Call) and "accelerator" in _callee(a.left):
            return True
    return False


def _cuda_comparison_name(node, value: str = "cuda") -> str:
    """For ``<name> == "cuda"`` (or ``value``), possibly one operand of an ``and`` chain: the name's
    source key (``device_map``, ``self.dev``; ``device`` for ``device.type == "cuda"``), else ``""``."""
    for o in _and_operands(node):
        if not isinstance(o, cst.Comparison) or len(o.comparisons) != 1 \
                or not isinstance(o.comparisons[0].operator, cst.Equal):
            continue
        left, right = o.left, o.comparisons[0].comparator
        if string_value(left) == value:
            left, right = right, left
        if string_value(right) == value and isinstance(left, (cst.Name, cst.Attribute)):
            name = _dotted(left)
            return name[:-len(".type")] if name.endswith(".type") else name
    return ""


def _dotted(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr.value}" if head else ""
    return ""


def _cuda_text(value) -> bool:
    """A plain or f-string starting with ``cuda``."""
    if isinstance(value, cst.FormattedString):
        first = value.parts[0] if value.parts else None
        return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda")
    v = string_value(value)
    return v is not None and v.startswith("cuda")


def _assigns_cuda_string(stmt, name: str) -> bool:
    """``stmt`` is ``<name> = "cuda..."`` (a plain or f-string starting with ``cuda``)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(stmt.body[0], cst.Assign):
        return False
    assign = stmt.body[0]
    return any(_dotted(t.target) == name for t in assign.targets) and _cuda_text(assign.value)


def _returns_indexed_cuda_device(stmt) -> bool:
    """``stmt`` is ``return torch.device(f"cuda:{i}")`` or ``return torch.device("cuda", i)``: a CUDA
    device with its index filled in."""
    if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(stmt.body[0], cst.Return):
        return False
    value = stmt.body[0].value
    if not isinstance(value, cst.Call) or _callee(value) != "device" or not value.args:
        return False
    first = value.args[0].value
    return len(value.args) == 2 and string_value(first) == "cuda" or \
        isinstance(first, cst.FormattedString) and _cuda_text(first) and len(first.parts) > 1


def _completes(stmt, name: str) -> bool:
    return _assigns_cuda_string(stmt, name) or _returns_indexed_cuda_device(stmt)


def _in_vendor_chain_default(path: list, a) -> bool:
    """``a`` lies in the ``else`` of an ``if`` whose test names another accelerator."""
    for b, child in _path_pairs(path):
        if b is a:
            return False
        if isinstance(b, cst.If) and child is b.orelse and names_other_vendor(b.test):
            return True
    return False


def normalised_request(ctx, path: list) -> bool:
    """``if device_map == "cuda": device_map = f"cuda:{local_rank}"``: a user's ``"cuda"`` request
    completed with an index. The test asks whether CUDA itself was requested (on another accelerator
    the request is not ``"cuda"``) and the body rewrites that same variable, or returns the CUDA
    device with its index (``if device.type == "cuda" and device.index is None: return
    torch.device(f"cuda:{torch.cuda.current_device()}")``); both are quiet (the body's other
    statements are not). ``if device == "gpu": device = "cuda"`` is the same request spelled "gpu", in
    the default branch of a chain that names the other accelerators (session 11): elsewhere "gpu" may
    mean any GPU and it is still reported."""
    for a, child in _path_pairs(path):
        if not isinstance(a, cst.If):
            continue
        name = _cuda_comparison_name(a.test)
        if not name and _in_vendor_chain_default(path, a):
            name = _cuda_comparison_name(a.test, "gpu")
        if not name or not any(_completes(s, name) for s in a.body.body):
            continue
        if child is a.test:
            return True
        if child is a.body:  # only the statement completing the request
            stmt = next((p for p in path if any(p is s for s in a.body.body)), None)
            return stmt is not None and _completes(stmt, name)
    return False


def _key_vendor(target) -> str:
    """For ``TABLE["xla"]``: the key's text when it names an accelerator (another vendor), else ``""``."""
    if not isinstance(target, cst.Subscript) or len(target.slice) != 1 \
            or not isinstance(target.slice[0].slice, cst.Index):
        return ""
    v = string_value(target.slice[0].slice.value)
    return v if v is not None and v != "cuda" and _OTHER_VENDOR.search(v) else ""


def vendor_guarded_entry(ctx, path: list) -> bool:
    """``if is_torch_xla_available(): BACKEND_EMPTY_CACHE["xla"] = torch.cuda.empty_cache``: the value
    stored under another accelerator's key of a per-device table, in the body of a test naming that
    same accelerator, was chosen for it (XLA on GPUs uses CUDA's functions). The same entry without
    that test is still reported."""
    assign = next((a for a in path if isinstance(a, cst.Assign)), None)
    if assign is None:
        return False
    vendors = {_key_vendor(t.target).lower() for t in assign.targets} - {""}
    if not vendors:
        return False
    for a, child in _path_pairs(path):
        if isinstance(a, cst.If) and child is a.body:
            named = {n.lower() for n in _names_in(a.test)}
            if any(v in w.split("_") or v == w for v in vendors for w in named):
                return True
    return False


_NVTX = re.compile(r"(^|_)nvtx($|_)", re.I)
_XLA = re.compile(r"(^|[._])xla($|[._])", re.I)


def cuda_runtime_body(ctx, node: cst.If) -> Optional[str]:
    """The body of ``node`` runs only with a CUDA-only runtime, by one operand of its (``and``) test
    (session 11; the same code without such a test is still reported):

    * ``<x> == "nccl"``: the process group uses NCCL, NVIDIA's collective library (RCCL on ROCm,
      which also presents itself as CUDA); the body configures NCCL, and the other accelerators'
      backends (``"xccl"``, ``"hccl"``) are tested by their own names;
    * a name with an ``nvtx`` word (``if self._emit_nvtx:``): NVTX is the NVIDIA Tools Extension
      (``torch.cuda.nvtx``: "support for NVIDIA Tools Extension (NVTX) used in profiling"), read by
      NVIDIA's profilers only;
    * a test for XLA that names no CUDA (``if is_torch_xla_available(): return torch.cuda.device_count()``):
      torch_xla runs on GPUs through CUDA (``PJRT_DEVICE=CUDA``), so CUDA's functions there are
      chosen for XLA on GPUs.

    A negated operand (``not is_torch_xla_available()``) is none of these. Returns the runtime
    (``"nccl"``, ``"nvtx"``, ``"xla"``) or None."""
    test = node.test  # `if (a and b):` — the outer parentheses group the whole test
    ops = _and_operands(test.left) + _and_operands(test.right) \
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And) else [test]
    for o in ops:
        if isinstance(o, cst.UnaryOperation):
            continue
        if isinstance(o, cst.Comparison):
            if len(o.comparisons) != 1 or not isinstance(o.comparisons[0].operator, cst.Equal):
                continue
            values = (string_value(o.left), string_value(o.comparisons[0].comparator))
            if "nccl" in values:
                return "nccl"
            if any(v is not None and _XLA.search(v) for v in values) and not _names_cuda(ctx, node.test):
                return "xla"
            continue
        idents = [n for n in _names_in(o) if n.isidentifier()]
        if any(_NVTX.search(n) for n in idents):
            return "nvtx"
        if isinstance(o, (cst.Call, cst.Name, cst.Attribute)) and any(_XLA.search(n) for n in idents) \
                and not _names_cuda(ctx, node.test):
            return "xla"
    return None


def stored_for_another_vendor(path: list, vendor: str) -> bool:
    """``path`` runs through an assignment to a per-device table entry keyed by an accelerator other
    than ``vendor`` (``SYNC["mps"] = ...`` under a test for XLA: chosen for MPS, not for XLA)."""
    assign = next((a for a in path if isinstance(a, cst.Assign)), None)
    return assign is not None and any(_key_vendor(t.target).lower() not in ("", vendor) for t in assign.targets)


def cuda_assert(ctx, node: cst.Assert) -> bool:
    """``assert torch.cuda.is_available(), "Megatron requires CUDA."``: a CUDA requirement written as
    an assertion whose message names CUDA or a GPU (as :func:`cuda_requirement`)."""
    if node.msg is None or not any(isinstance(o, cst.Call) and ctx.qname(o.func) == "torch.cuda.is_available"
                                   for o in _bool_operands(node.test)):
        return False
    return any(_NAMES_CUDA.search(n) for n in _names_in(node.msg))
